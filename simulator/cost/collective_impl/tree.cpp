// Double binary tree all-reduce (NCCL's Tree): latency grows with log2(nodes) instead of n,
// bandwidth is half the bus bandwidth (algBw = 0.5 busBw, REFERENCE.md §3.2).
//
// Protocols, as the ring prices them (ring.cpp): NCCL runs the cheapest (algorithm, protocol)
// pair. The profile's per-step latencies are the Simple protocol's; a tree's LL steps take
// 0.6/4 of them on NVLink and 5.0/14 across the network, its LL128 steps 1.25/4 and 8.5/14, with
// 6.8 us (LL) and 14 us (LL128) more base latency than Simple's 0, LL at min(0.5 bandwidth,
// llMaxBw) and LL128 at 0.92 of it (src/graph/tuning.cc, NVIDIA/nccl@5067397c: hwLat NVLINK
// Tree {LL 0.6, LL128 1.25, Simple 4}, NET Tree {5.0, 8.5, 14}, baseLat Tree {6.8, 14, 0}).
// Until 2026-12-08 the tree was priced with Simple alone: a 1 KiB all-reduce on 8 H100 took
// 57.6 us by the tree against 16.6 us by the ring, and on 1024 H100 192 us where LL gives about
// a fifth of the per-step latency (found by a new-user trial).
#include <algorithm>
#include <cmath>

#include "core/registry.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {
namespace {

constexpr double kLlNvlinkLatencyRatio = 0.6 / 4.0;
constexpr double kLlNetLatencyRatio = 5.0 / 14.0;
constexpr double kLlBaseS = 6.8e-6;
constexpr double kLl128NvlinkLatencyRatio = 1.25 / 4.0;
constexpr double kLl128NetLatencyRatio = 8.5 / 14.0;
constexpr double kLl128BaseS = 14.0e-6;
constexpr double kLl128BandwidthFraction = 0.92;

// NCCL's llMaxBws (GB/s), as ring.cpp: one node (Ampere row), two nodes, more (Intel hosts).
double ll_max_gbps(int nodes) { return nodes <= 1 ? 87.7 : nodes == 2 ? 39.0 : 20.4; }

class Tree final : public ICollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override { return op == CollectiveOp::kAllReduce; }
  AlgorithmTime cost(CollectiveOp op, double bytes, const GroupPlacement& g,
                     const LinkRates& l) const override {
    if (!supports(op)) return kUnsupported;
    const double intra_steps = 2.0 * (g.ranks_per_node - 1);
    const double inter_steps = 2.0 * std::log2(std::max(1, g.nodes));
    const bool inter = g.crosses_nodes();
    const double busbw = inter ? l.inter_busbw_gbps : l.intra_busbw_gbps;
    const double tree_bw = 0.5 * busbw;
    const Bottleneck limit = inter ? l.inter_limit() : Bottleneck::kNvlink;
    const AlgorithmTime simple{intra_steps * l.alpha_intra_s + inter_steps * l.alpha_inter_s,
                               bytes / (tree_bw * 1e9), limit};
    const AlgorithmTime ll128{kLl128BaseS +
                                  intra_steps * l.alpha_intra_s * kLl128NvlinkLatencyRatio +
                                  inter_steps * l.alpha_inter_s * kLl128NetLatencyRatio,
                              bytes / (kLl128BandwidthFraction * tree_bw * 1e9), limit};
    const double ll_bw = std::min(0.5 * tree_bw, ll_max_gbps(inter ? g.nodes : 1));
    const AlgorithmTime ll{kLlBaseS + intra_steps * l.alpha_intra_s * kLlNvlinkLatencyRatio +
                               inter_steps * l.alpha_inter_s * kLlNetLatencyRatio,
                           bytes / (ll_bw * 1e9), limit};
    const AlgorithmTime& best = ll128.time_s() < simple.time_s() ? ll128 : simple;
    return ll.time_s() < best.time_s() ? ll : best;
  }
};

}  // namespace
DTPLAN_REGISTER(ICollectiveAlgorithm, Tree, "tree",
                "double binary tree all-reduce (latency-optimal; NCCL's LL, LL128 or Simple "
                "protocol, whichever is fastest)")
}  // namespace dtplan
