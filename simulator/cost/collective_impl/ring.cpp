// Ring: n-1 (gather/scatter) or 2(n-1) (all-reduce) steps around a ring; the bandwidth term
// is S x busbw_factor / busbw (nccl-tests definitions) and each step pays the latency of the
// link it crosses (REFERENCE.md §3.2, NCCL tuning model: nInter = 2(N_nodes-1) network steps).
// Broadcast is NCCL's pipelined chain: every rank forwards the whole buffer once (busbw =
// algbw, nccl-tests doc/PERFORMANCE.md), with n-1 latency steps to fill the chain.
//
// Protocols (the ratios in nccl_protocols.h): NCCL prices every (algorithm, protocol) pair and
// runs the cheapest (src/enqueue.cc:2035-2044, NVIDIA/nccl@5067397c). The profile's per-step
// latencies are the Simple protocol's; LL128 steps take 1.9/3.4 of them on NVLink and 4.0/14 across
// the network, with 14 - 8.4 us more base latency, at 0.92 of the bus bandwidth
// (src/graph/tuning.cc at that commit: hwLat NVLINK {LL 0.6, LL128 1.9, Simple 3.4}, NET {2.7, 4.0,
// 14}, ring baseLat {6.6, 14, 8.4}, LL128 bandwidth min(0.92 busBw, ...)). At scale a ring's n-1
// steps dominate a gather's time and LL128 halves them (512 ranks: NCCL predicts 1.1 ms against
// Simple's 2.4 ms for a 50 MB all-gather). LL, for small messages: per-step latency 0.6/3.4
// and 2.7/14 of Simple's, 1.8 us less base, min(0.5 busBw, llMaxBw): llMaxBw 39 GB/s on two nodes
// and 20.4 on more (the Intel-host row; AMD's is lower), inside a node 87.7 (Ampere's row; Hopper's
// 141, which LL reaches only at sizes where LL128 already wins).
#include <algorithm>

#include "core/registry.h"
#include "simulator/cost/collective_impl/nccl_protocols.h"
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
    const double intra_steps = steps - inter_steps;
    const bool inter = g.crosses_nodes();
    const double busbw = inter ? l.inter_busbw_gbps : l.intra_busbw_gbps;
    const double beta = bytes * busbw_factor(op, n) / (busbw * 1e9);
    const Bottleneck limit = inter ? l.inter_limit() : Bottleneck::kNvlink;
    const AlgorithmTime simple{intra_steps * l.alpha_intra_s + inter_steps * l.alpha_inter_s, beta,
                               limit};
    using namespace nccl;
    const AlgorithmTime ll128{kRingLl128.extra_base_s +
                                  intra_steps * l.alpha_intra_s * kRingLl128.nvlink_latency +
                                  inter_steps * l.alpha_inter_s * kRingLl128.net_latency,
                              beta / kLl128BandwidthFraction, limit};
    const double ll_bw = std::min(kLlBandwidthFraction * busbw, ll_max_gbps(inter ? g.nodes : 1));
    const AlgorithmTime ll{
        std::max(0.0, kRingLl.extra_base_s +
                          intra_steps * l.alpha_intra_s * kRingLl.nvlink_latency +
                          inter_steps * l.alpha_inter_s * kRingLl.net_latency),
        bytes * busbw_factor(op, n) / (ll_bw * 1e9), limit};
    const AlgorithmTime& best = ll128.time_s() < simple.time_s() ? ll128 : simple;
    return ll.time_s() < best.time_s() ? ll : best;
  }
};

}  // namespace
DTPLAN_REGISTER(
    ICollectiveAlgorithm, Ring, "ring",
    "ring all-reduce / all-gather / reduce-scatter, chain broadcast (bandwidth-optimal; NCCL's "
    "LL, LL128 or Simple protocol, whichever is fastest)")
}  // namespace dtplan
