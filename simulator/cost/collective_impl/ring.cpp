// Ring: n-1 (gather/scatter) or 2(n-1) (all-reduce) steps around a ring; the bandwidth term
// is S x busbw_factor / busbw (nccl-tests definitions) and each step pays the latency of the
// link it crosses (REFERENCE.md §3.2, NCCL tuning model: nInter = 2(N_nodes-1) network steps).
// Broadcast is NCCL's pipelined chain: every rank forwards the whole buffer once (busbw =
// algbw, nccl-tests doc/PERFORMANCE.md), with n-1 latency steps to fill the chain.
#include "core/registry.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {
namespace {

class Ring final : public ICollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override {
    return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllGather ||
           op == CollectiveOp::kReduceScatter || op == CollectiveOp::kBroadcast;
  }
  AlgorithmTime cost(CollectiveOp op, double bytes, const GroupPlacement& g,
                     const LinkRates& l) const override {
    if (!supports(op)) return kUnsupported;
    const int n = g.size;
    const double passes = op == CollectiveOp::kAllReduce ? 2.0 : 1.0;
    const double steps = passes * (n - 1);
    const double inter_steps = g.crosses_nodes() ? passes * (g.nodes - 1) : 0.0;
    const double latency = (steps - inter_steps) * l.alpha_intra_s + inter_steps * l.alpha_inter_s;
    const bool inter = g.crosses_nodes();
    const double busbw = inter ? l.inter_busbw_gbps : l.intra_busbw_gbps;
    return {latency, bytes * busbw_factor(op, n) / (busbw * 1e9),
            inter ? l.inter_limit() : Bottleneck::kNvlink};
  }
};

}  // namespace
DTPLAN_REGISTER(
    ICollectiveAlgorithm, Ring, "ring",
    "ring all-reduce / all-gather / reduce-scatter, chain broadcast (bandwidth-optimal)")
}  // namespace dtplan
