// Multi-node NVLink domains (issue #15): an NVL72 rack is one NVLink domain of 18 four-GPU trays,
// of which a job fills 16 (64 GPUs, nvlink_domain_job_gpus; NVIDIA's Slurm segment guidance, the
// profile's source). Groups inside those 64 GPUs stay on NVLink; traffic that leaves the domain
// gets the NICs of every tray in it, one 400 Gb/s NIC per GPU (4 per tray), not one tray's four.
#include <gtest/gtest.h>

#include "core/catalog.h"
#include "simulator/cost/i_collective_algorithm.h"
#include "simulator/workload/op_program.h"

namespace dtplan {
namespace {

Plan layout(int tp, int pp, int dp) {
  Plan p;
  p.tp = tp, p.pp = pp, p.dp = dp;
  return p;
}

TEST(Nvl72, ASixtyFourGpuDataParallelGroupStaysOnNvlink) {
  const HardwareProfile hw = load_profile("gb200-nvl72");
  const Placements g = place_groups(layout(1, 4, 64), hw, 256);
  EXPECT_EQ(g.dp.size, 64);
  EXPECT_EQ(g.dp.nodes, 1);  // inside one rack's 64-GPU job domain
  EXPECT_FALSE(g.dp.crosses_nodes());
  // 16- and 32-GPU groups too (they divide the domain; 72 they did not).
  EXPECT_FALSE(place_groups(layout(1, 16, 16), hw, 256).dp.crosses_nodes());
  EXPECT_FALSE(place_groups(layout(2, 8, 16), hw, 256).dp.crosses_nodes());
  // On a DGX B200 the same 64-GPU group spans 8 nodes.
  EXPECT_EQ(place_groups(layout(1, 4, 64), load_profile("dgx-b200"), 256).dp.nodes, 8);
}

TEST(Nvl72, APipelineSendBetweenRacksGetsANicsBandwidth) {
  const HardwareProfile hw = load_profile("gb200-nvl72");
  // TP4 x DP4 inside a rack, 16 stages over 4 racks: stage boundaries cross racks.
  const Placements g = place_groups(layout(4, 16, 4), hw, 256);
  ASSERT_TRUE(g.pp.crosses_nodes());
  // One NIC per GPU: nics_per_node x nic_gbps / gpus_per_node = 4 x 50 / 4 GB/s, at the
  // profile's network efficiency.
  const double per_gpu_nic_gbps =
      hw.scale_out.nics_per_node * hw.scale_out.nic_gbps / hw.node.gpus_per_node;
  EXPECT_DOUBLE_EQ(per_gpu_nic_gbps, 50.0);
  EXPECT_NEAR(link_rates(hw, g.pp).inter_busbw_gbps,
              per_gpu_nic_gbps * hw.efficiency.network_bw_fraction, 1e-9);
  // A DGX B200 (8 NICs for 8 GPUs) gives each GPU the same NIC.
  const HardwareProfile b200 = load_profile("dgx-b200");
  const Placements gb = place_groups(layout(4, 16, 4), b200, 256);
  EXPECT_NEAR(link_rates(b200, gb.pp).inter_busbw_gbps,
              b200.scale_out.nic_gbps * b200.efficiency.network_bw_fraction, 1e-9);
}

}  // namespace
}  // namespace dtplan
