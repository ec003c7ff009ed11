// Double binary tree all-reduce (NCCL's Tree): latency grows with log2(nodes) instead of n,
// bandwidth is half the bus bandwidth (algBw = 0.5 busBw, REFERENCE.md §3.2).
//
// Protocols, as the ring prices them: NCCL's LL, LL128 and Simple, whichever is fastest, with
// the tree's latency ratios and base latencies (nccl_protocols.h, from NCCL's tuning.cc).
// Until 2026-12-08 the tree was priced with Simple alone: a 1 KiB all-reduce on 8 H100 took
// 57.6 us by the tree against 16.6 us by the ring, and on 1024 H100 192 us where LL gives about
// a fifth of the per-step latency (found by a new-user trial).
#include <algorithm>
#include <cmath>

#include "core/registry.h"
#include "simulator/cost/collective_impl/nccl_protocols.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {
namespace {

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
    using namespace nccl;
    const AlgorithmTime ll128{kTreeLl128.extra_base_s +
                                  intra_steps * l.alpha_intra_s * kTreeLl128.nvlink_latency +
                                  inter_steps * l.alpha_inter_s * kTreeLl128.net_latency,
                              bytes / (kLl128BandwidthFraction * tree_bw * 1e9), limit};
    const double ll_bw = std::min(kLlBandwidthFraction * tree_bw, ll_max_gbps(inter ? g.nodes : 1));
    const AlgorithmTime ll{kTreeLl.extra_base_s +
                               intra_steps * l.alpha_intra_s * kTreeLl.nvlink_latency +
                               inter_steps * l.alpha_inter_s * kTreeLl.net_latency,
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
