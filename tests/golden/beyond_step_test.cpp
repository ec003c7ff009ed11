// Hand-worked goldens for what lies beyond one clean step (issue #18): collectives on their
// own. Expected values are computed here from the profile's datasheet figures and the
// formulas of REFERENCE.md §3 (ring, tree) and the parameter-server argument (Li et al.,
// OSDI 2014; BytePS, OSDI 2020), not read back from dtplan.
#include <gtest/gtest.h>

#include <cmath>

#include "core/catalog.h"
#include "simulator/cost/collective_study.h"

namespace dtplan {
namespace {

// dgx-a100-80g: NVLink 300 GB/s per direction x nvlink_bw_fraction 0.6208; 8 NICs x 25 GB/s x
// network_bw_fraction 0.8064; latency 3.4 us (NVLink), 9.6 us (network); 97.6 us per call.
constexpr double kNvlink = 300 * 0.6208, kNode = 8 * 25 * 0.8064;
constexpr double kAlphaIntra = 3.4e-6, kAlphaInter = 9.6e-6, kOverhead = 97.6e-6;
constexpr double kGrad = 350e9;  // GPT-3 175B gradient in 16 bits: 2 bytes x 175e9

const AlgorithmCost& find(const std::vector<AlgorithmCost>& v, const std::string& name) {
  for (const auto& a : v)
    if (a.algorithm == name) return a;
  ADD_FAILURE() << name << " missing";
  return v.front();
}

TEST(CollectiveGolden, RingTreeAndParameterServerOnOneNode) {
  const HardwareProfile hw = load_profile("dgx-a100-80g");
  const GroupPlacement g = collective_placement(hw, 8, 0, 1);
  EXPECT_EQ(g.ranks_per_node, 8);
  EXPECT_EQ(g.nodes, 1);
  const auto v = collective_cost_by_algorithm(hw, CollectiveOp::kAllReduce, kGrad, g);
  // Ring: 2(n-1)/n S over NVLink, 2(n-1) NVLink steps.
  const auto& ring = find(v, "ring");
  EXPECT_NEAR(ring.time.beta_s, kGrad * 2 * 7 / 8 / (kNvlink * 1e9), 1e-9);
  EXPECT_NEAR(ring.time.alpha_s, 14 * kAlphaIntra + kOverhead, 1e-12);
  EXPECT_EQ(ring.time.bottleneck, Bottleneck::kNvlink);
  // Tree: S over half the bus bandwidth.
  EXPECT_NEAR(find(v, "tree").time.beta_s, kGrad / (0.5 * kNvlink * 1e9), 1e-9);
  // One server (one node) with the node's NICs: it takes 8 S in and sends 8 S out.
  const auto& ps = find(v, "ps");
  EXPECT_NEAR(ps.time.beta_s, 2 * 8 * kGrad / (kNode * 1e9), 1e-6);
  EXPECT_EQ(ps.time.bottleneck, Bottleneck::kServer);
  EXPECT_FALSE(ps.auto_selected);
  // ~10.6x slower than the ring: what the ring all-reduce was adopted for.
  EXPECT_GT(ps.time.time_s() / ring.time.time_s(), 10);
  // The cost model charges the ring (NCCL's pick here), never the parameter server unpinned.
  EXPECT_STREQ(collective_cost(hw, CollectiveOp::kAllReduce, kGrad, g).algorithm, "ring");
}

TEST(CollectiveGolden, RingTreeAndParameterServerOn1024Gpus) {
  HardwareProfile hw = load_profile("dgx-a100-80g");
  // A data-parallel group of a TP8 layout: one rank per node, 8 such groups sharing the NICs.
  const GroupPlacement g = collective_placement(hw, 1024, 1, 8);
  EXPECT_EQ(g.nodes, 1024);
  const double rank_bw = kNode / 8;  // one rail
  auto v = collective_cost_by_algorithm(hw, CollectiveOp::kAllReduce, kGrad, g);
  const auto& ring = find(v, "ring");
  EXPECT_NEAR(ring.time.beta_s, kGrad * 2 * 1023 / 1024 / (rank_bw * 1e9), 1e-6);
  EXPECT_NEAR(ring.time.alpha_s, 2 * 1023 * kAlphaInter + kOverhead, 1e-12);
  EXPECT_EQ(ring.time.bottleneck, Bottleneck::kNetwork);
  // Tree: 2 log2(1024) network steps, S / (0.5 busbw).
  const auto& tree = find(v, "tree");
  EXPECT_NEAR(tree.time.alpha_s, 2 * 10 * kAlphaInter + kOverhead, 1e-12);
  EXPECT_NEAR(tree.time.beta_s, kGrad / (0.5 * rank_bw * 1e9), 1e-6);
  // 1024 servers (one per node), each with a node's NICs: the workers' rail is the limit and
  // the parameter server matches the ring's bandwidth bound 2 S / B.
  EXPECT_NEAR(find(v, "ps").time.beta_s, 2 * kGrad / (rank_bw * 1e9), 1e-6);
  // 8 servers: each takes 1024/8 = 128 gradients in and out: 2 x 128 S / B_server.
  hw.parameter_servers = 8;
  v = collective_cost_by_algorithm(hw, CollectiveOp::kAllReduce, kGrad, g);
  const auto& ps8 = find(v, "ps");
  EXPECT_NEAR(ps8.time.beta_s, 2 * 128 * kGrad / (kNode * 1e9), 1e-4);
  EXPECT_EQ(ps8.time.bottleneck, Bottleneck::kServer);
  EXPECT_NEAR(ps8.time.time_s() / find(v, "ring").time.time_s(), 16.0, 0.05);
  // Pinned, the cost model charges it (what-if `collective_algorithm: ps`).
  hw.collective_algorithm = "ps";
  EXPECT_STREQ(collective_cost(hw, CollectiveOp::kAllReduce, kGrad, g).algorithm, "ps");
  // ...but only where it implements the call: all-gathers stay rings.
  EXPECT_STREQ(collective_cost(hw, CollectiveOp::kAllGather, kGrad, g).algorithm, "ring");
}

TEST(CollectiveGolden, SweepFindsTheLatencyBandwidthCrossover) {
  const HardwareProfile hw = load_profile("dgx-a100-80g");
  const GroupPlacement g = collective_placement(hw, 1024, 8, 1);  // 128 nodes of 8
  const CollectiveSweep s = collective_sweep(hw, CollectiveOp::kAllReduce, 1024.0,
                                             16.0 * (1ull << 30), g);
  ASSERT_EQ(s.points.size(), 25u);  // 2^10 .. 2^34
  EXPECT_EQ(s.points.back().bytes, 16.0 * (1ull << 30));
  // Between adjacent sizes the fastest of ring and tree is consistent with the formulas: tree
  // wins where its alpha saving (2(n-1) - 2(log2 nodes + k - 1) steps) exceeds its beta loss.
  for (const auto& p : s.points) {
    const auto& ring = find(p.algorithms, "ring");
    const auto& tree = find(p.algorithms, "tree");
    const double alpha_saving = ring.time.alpha_s - tree.time.alpha_s;
    const double beta_loss = tree.time.beta_s - ring.time.beta_s;
    EXPECT_EQ(tree.time.time_s() < ring.time.time_s(), alpha_saving > beta_loss) << p.bytes;
  }
  // Every crossover is where the fastest algorithm really changes.
  for (const auto& c : s.crossovers) EXPECT_NE(c.from, c.to);
  // Broadcast exists and is a chain: busbw = algbw.
  const CollectivePoint b = collective_point(hw, CollectiveOp::kBroadcast, 1e9, g);
  EXPECT_NEAR(b.busbw_gbps, b.algbw_gbps, 1e-12);
  EXPECT_STREQ(b.selected.algorithm, "ring");
}

}  // namespace
}  // namespace dtplan
