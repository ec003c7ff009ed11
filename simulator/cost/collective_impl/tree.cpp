// Double binary tree all-reduce (NCCL's Tree): latency grows with log2(nodes) instead of n,
// bandwidth is half the bus bandwidth (algBw = 0.5 busBw, REFERENCE.md §3.2).
#include <algorithm>
#include <cmath>

#include "core/registry.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {
namespace {

class Tree final : public ICollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override { return op == CollectiveOp::kAllReduce; }
  AlgorithmTime cost(CollectiveOp op, double bytes, const GroupPlacement& g,
                     const LinkRates& l) const override {
    if (!supports(op)) return kUnsupported;
    const double latency = 2.0 * ((g.ranks_per_node - 1) * l.alpha_intra_s +
                                  std::log2(std::max(1, g.nodes)) * l.alpha_inter_s);
    const bool inter = g.crosses_nodes();
    const double busbw = inter ? l.inter_busbw_gbps : l.intra_busbw_gbps;
    return {latency, bytes / (0.5 * busbw * 1e9), inter ? l.inter_limit() : Bottleneck::kNvlink};
  }
};

}  // namespace
DTPLAN_REGISTER(ICollectiveAlgorithm, Tree, "tree",
                "double binary tree all-reduce (latency-optimal)")
}  // namespace dtplan
