// Hardware profiles: every shipped profile loads, cites a source for every section, and the
// datasheet peaks that REFERENCE.md §7 lists are the ones we carry.
#include <gtest/gtest.h>

#include "core/catalog.h"
#include "core/error.h"

namespace dtplan {
namespace {

TEST(Profiles, ContractStemsAreShipped) {
  const char* stems[] = {"dgx-a100-40g", "dgx-a100-80g",  "hgx-a100-80g-4nic", "hgx-a800",
                         "dgx-h100",     "h100-96g-500w", "hgx-h800",          "dgx-h200",
                         "dgx-b200",     "gb200-nvl72",   "gb300-nvl72"};
  auto names = list_profile_names();
  for (const char* s : stems) EXPECT_NE(std::find(names.begin(), names.end(), s), names.end()) << s;
}

TEST(Profiles, EveryProfileLoadsWithSources) {
  for (const auto& n : list_profile_names()) {
    HardwareProfile p = load_profile(n);
    EXPECT_EQ(p.name, n);
    EXPECT_FALSE(p.gpu.source.empty()) << n;
    EXPECT_FALSE(p.node.source.empty()) << n;
    EXPECT_FALSE(p.scale_out.source.empty()) << n;
    EXPECT_FALSE(p.efficiency.source.empty()) << n;
    EXPECT_GT(p.gpu.peak_flops(Precision::kBf16), 0) << n;
    EXPECT_GE(p.node.nvlink_domain_gpus, p.node.gpus_per_node) << n;
  }
}

// REFERENCE.md §7: A100 312 TFLOP/s bf16, 2.039 TB/s; H100 SXM 989 / 3.35 TB/s;
// B200 2,250 dense bf16; IB HDR 25 GB/s and NDR 50 GB/s per port.
TEST(Profiles, DatasheetConstants) {
  HardwareProfile a100 = load_profile("dgx-a100-80g");
  EXPECT_DOUBLE_EQ(a100.gpu.peak_tflops[0], 312);
  EXPECT_DOUBLE_EQ(a100.gpu.hbm_gbps, 2039);
  EXPECT_DOUBLE_EQ(a100.scale_out.nic_gbps, 25);
  EXPECT_EQ(a100.scale_out.nics_per_node, 8);
  EXPECT_EQ(load_profile("hgx-a100-80g-4nic").scale_out.nics_per_node, 4);
  HardwareProfile h100 = load_profile("dgx-h100");
  EXPECT_DOUBLE_EQ(h100.gpu.peak_tflops[0], 989);
  EXPECT_DOUBLE_EQ(h100.gpu.hbm_gbps, 3350);
  EXPECT_DOUBLE_EQ(h100.scale_out.nic_gbps, 50);
  EXPECT_DOUBLE_EQ(load_profile("dgx-b200").gpu.peak_tflops[0], 2250);
  EXPECT_EQ(load_profile("gb200-nvl72").node.nvlink_domain_gpus, 72);
  // Jobs fill 16 of the rack's 18 trays (NVIDIA's Slurm segment guidance, the profile's source);
  // a DGX's domain is its node.
  EXPECT_EQ(load_profile("gb200-nvl72").node.placement_domain_gpus(), 64);
  EXPECT_EQ(load_profile("gb300-nvl72").node.placement_domain_gpus(), 64);
  EXPECT_EQ(load_profile("dgx-h100").node.placement_domain_gpus(), 8);
}

TEST(Cluster, ProfileNeedsGpusAndClusterYamlGivesThem) {
  EXPECT_THROW(load_cluster("dgx-h100", 0), InputError);
  Cluster c = load_cluster("dgx-h100", 1024);
  EXPECT_EQ(c.num_gpus, 1024);
  EXPECT_EQ(c.nodes(), 128);
}

}  // namespace
}  // namespace dtplan
