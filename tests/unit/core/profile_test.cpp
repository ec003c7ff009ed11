// Hardware profiles: every shipped profile loads, cites a source for every section, and the
// datasheet peaks that REFERENCE.md §7 lists are the ones we carry.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "core/catalog.h"
#include "core/error.h"
#include "core/hardware.h"

namespace dtplan {
namespace {

TEST(Profiles, ContractStemsAreShipped) {
  const char* stems[] = {"dgx-a100-40g", "dgx-a100-80g",  "hgx-a100-80g-4nic", "hgx-a800",
                         "dgx-h100",     "h100-96g-500w", "hgx-h800",          "dgx-h200",
                         "dgx-b200",     "gb200-nvl72",   "gb300-nvl72",       "dgx-b300"};
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

// Per-precision GEMM asymptotes and FP8 GEMM layouts (issue #15): Blackwell profiles take FP8
// operands in any layout (Transformer Engine's nvte_is_non_tn_fp8_gemm_supported, SM100+) and
// state an MXFP8 asymptote; Hopper takes only TN and has no MXFP8 (the FP8 values stand in).
// Out-of-range values are refused at their line.
TEST(Profiles, PrecisionAsymptotesAndFp8Layouts) {
  for (const char* bw : {"dgx-b200", "gb200-nvl72", "gb300-nvl72", "dgx-b300"}) {
    const HardwareProfile p = load_profile(bw);
    EXPECT_TRUE(p.gpu.fp8_non_tn_gemm) << bw;
    EXPECT_GT(p.efficiency.gemm_max_fraction_mxfp8, 0.3) << bw;
    EXPECT_LT(p.efficiency.gemm_max_fraction_mxfp8, 0.9) << bw;
  }
  const HardwareProfile h100 = load_profile("dgx-h100");
  EXPECT_FALSE(h100.gpu.fp8_non_tn_gemm);
  EXPECT_DOUBLE_EQ(h100.efficiency.gemm_max_fraction_mxfp8, h100.efficiency.gemm_max_fraction_fp8);
  EXPECT_DOUBLE_EQ(h100.efficiency.gemm_half_saturation_gflop_mxfp8,
                   h100.efficiency.gemm_half_saturation_gflop_fp8);
  std::ifstream in(resolve_profile_path("dgx-h100"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = ::testing::TempDir() + "mxfp8_profile.yaml";
  auto write_with = [&](const std::string& line) {
    std::string t = text;
    const size_t at = t.find("  gemm_tile_m:");
    t.insert(at, line + "\n");
    std::ofstream(path) << t;
  };
  write_with("  gemm_max_fraction_mxfp8: 1.5");
  try {
    load_profile_file(path);
    FAIL() << "accepted a fraction above 1";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_max_fraction_mxfp8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("must be in (0, 1]"), std::string::npos) << e.what();
  }
  write_with("  gemm_max_fraction_mxfp8: 0.5");
  EXPECT_DOUBLE_EQ(load_profile_file(path).efficiency.gemm_max_fraction_mxfp8, 0.5);
  std::string t = text;
  t.insert(t.find("  sm_count:"), "  fp8_non_tn_gemm: maybe\n");
  std::ofstream(path) << t;
  try {
    load_profile_file(path);
    FAIL() << "accepted a non-boolean";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fp8_non_tn_gemm"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(Cluster, ProfileNeedsGpusAndClusterYamlGivesThem) {
  EXPECT_THROW(load_cluster("dgx-h100", 0), InputError);
  Cluster c = load_cluster("dgx-h100", 1024);
  EXPECT_EQ(c.num_gpus, 1024);
  EXPECT_EQ(c.nodes(), 128);
}

}  // namespace
}  // namespace dtplan
