// Pairwise exchange for all-to-all and point-to-point send/recv: each rank sends S(n-1)/n
// (all-to-all) or S (send/recv); the share that leaves the node goes over the NIC share, the
// rest over NVLink, concurrently.
#include <algorithm>

#include "core/registry.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {
namespace {

class Pairwise final : public ICollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override {
    return op == CollectiveOp::kAllToAll || op == CollectiveOp::kSendRecv;
  }
  AlgorithmTime cost(CollectiveOp op, double bytes, const GroupPlacement& g,
                     const LinkRates& l) const override {
    if (!supports(op)) return kUnsupported;
    if (op == CollectiveOp::kSendRecv) {
      const bool inter = g.crosses_nodes();
      return {inter ? l.alpha_inter_s : l.alpha_intra_s,
              bytes / ((inter ? l.inter_busbw_gbps : l.intra_busbw_gbps) * 1e9),
              inter ? l.inter_limit() : Bottleneck::kNvlink};
    }
    const double n = g.size;
    const double remote = (n - g.ranks_per_node) / n;  // share of peers on other nodes
    const double local = (g.ranks_per_node - 1.0) / n;
    // A node-deduplicating dispatcher sends remote_share of the remote traffic over the network
    // and forwards every remote pair over NVLink on the receiving node, concurrently.
    const double dedup = std::clamp(g.remote_share, 0.0, 1.0);
    // Each rank's remote bytes leave through its share of the node's NICs (the group's NIC
    // bandwidth on the node over its ranks there), at most its own NVLink rate. The cap applies
    // to the share, not to the node's total: capping the total at one GPU's NVLink first and
    // then dividing priced an H800's all-to-all at 150/8 GB/s per rank instead of its NIC's 45.
    const double rank_nic_gbps =
        std::min(l.node_network_gbps / std::max(1, g.ranks_per_node), l.intra_busbw_gbps);
    const double t_inter = remote > 0 ? bytes * remote * dedup / (rank_nic_gbps * 1e9) : 0;
    const double t_intra =
        bytes * (local + (dedup < 1.0 ? remote : 0.0)) / (l.intra_busbw_gbps * 1e9);
    // Peers are served concurrently: two latency steps (post and complete), not n-1.
    return {2.0 * (remote > 0 ? l.alpha_inter_s : l.alpha_intra_s), std::max(t_inter, t_intra),
            t_inter >= t_intra ? Bottleneck::kNetwork : Bottleneck::kNvlink};
  }
};

}  // namespace
DTPLAN_REGISTER(ICollectiveAlgorithm, Pairwise, "pairwise",
                "all-to-all and send/recv by pairwise exchange")
}  // namespace dtplan
