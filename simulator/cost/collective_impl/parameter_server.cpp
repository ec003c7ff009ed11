// Parameter server all-reduce (Li et al., OSDI 2014; BytePS, Jiang et al., OSDI 2020): every
// worker pushes its whole gradient S, split evenly over s servers, which sum it and send it
// back (pull). Each phase is set by the slower side: a worker moving S over its NIC share, or
// a server moving n·S/s over its own link. With s servers of bandwidth B_s against n workers of
// bandwidth B_w the bandwidth part is 2·max(S/B_w, n·S/(s·B_s)): with few servers it grows
// linearly in n, where a ring's stays 2(n-1)/n·S/B_w — the classic argument for rings; with
// s·B_s >= n·B_w (BytePS's spare CPU servers) it is 2·S/B_w, the ring's bound. Two network
// latencies (push, pull). NCCL does not run it, so it is priced only where pinned.
#include <algorithm>

#include "core/registry.h"
#include "simulator/cost/i_collective_algorithm.h"

namespace dtplan {
namespace {

class ParameterServer final : public ICollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override { return op == CollectiveOp::kAllReduce; }
  bool auto_selected() const override { return false; }
  AlgorithmTime cost(CollectiveOp op, double bytes, const GroupPlacement& g,
                     const LinkRates& l) const override {
    if (!supports(op) || l.servers <= 0 || l.server_gbps <= 0) return kUnsupported;
    const double worker_s = bytes / (l.inter_busbw_gbps * 1e9);
    const double server_s = g.size * bytes / l.servers / (l.server_gbps * 1e9);
    return {2.0 * l.alpha_inter_s, 2.0 * std::max(worker_s, server_s),
            server_s > worker_s * (1 + 1e-9) ? Bottleneck::kServer : Bottleneck::kNetwork};
  }
};

}  // namespace
DTPLAN_REGISTER(ICollectiveAlgorithm, ParameterServer, "ps",
                "parameter server all-reduce: push to and pull from S servers (pinned only)")
}  // namespace dtplan
