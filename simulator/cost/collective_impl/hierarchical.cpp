// Hierarchical all-reduce (HCCL "hierarchical communication", REFERENCE.md §3.2): reduce-scatter
// inside the node, all-reduce of S/g across nodes on every rail at once, all-gather inside the
// node. Only meaningful when a group has several ranks per node and spans several nodes.
#include <algorithm>

#include "core/registry.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {
namespace {

class Hierarchical final : public ICollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override { return op == CollectiveOp::kAllReduce; }
  AlgorithmTime cost(CollectiveOp op, double bytes, const GroupPlacement& g,
                     const LinkRates& l) const override {
    const int k = g.ranks_per_node, nodes = g.nodes;
    if (!supports(op) || k <= 1 || nodes <= 1) return kUnsupported;
    const double intra_beta = bytes * (k - 1.0) / k / (l.intra_busbw_gbps * 1e9);
    // Each of the k ranks all-reduces its S/k shard with its peers on the other nodes over its
    // own rail: 1/k of the group's share of the node's NICs (not capped by the NVLink rate, which
    // bounds one rank's whole traffic, not one rail's).
    const double rail_bw = std::min(l.node_network_gbps / k, l.intra_busbw_gbps);
    const double inter_beta = (bytes / k) * 2.0 * (nodes - 1.0) / nodes / (rail_bw * 1e9);
    const double alpha = 2.0 * (k - 1) * l.alpha_intra_s + 2.0 * (nodes - 1) * l.alpha_inter_s;
    return {alpha, 2.0 * intra_beta + inter_beta,
            inter_beta >= 2.0 * intra_beta ? Bottleneck::kNetwork : Bottleneck::kNvlink};
  }
};

}  // namespace
DTPLAN_REGISTER(ICollectiveAlgorithm, Hierarchical, "hierarchical",
                "intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather")
}  // namespace dtplan
