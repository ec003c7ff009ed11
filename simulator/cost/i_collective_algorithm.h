// Plug-in point: a collective algorithm (ring, tree, hierarchical, pairwise...). One file per
// implementation in collective_impl/, registered with DTPLAN_REGISTER. The cost model asks
// every registered algorithm that supports an operation and keeps the fastest, as NCCL's
// tuner does.
//
// Contract: cost() is pure; `bytes` is the nccl-tests size S (the full buffer: for all-gather
// and reduce-scatter, count_per_rank x dtype x n). It splits the time into its latency part
// (alpha: per-step latencies) and its bandwidth part (beta: bytes over the slowest link) and
// names that link; an unsupported call returns alpha = +inf.
#pragma once

#include "core/hardware.h"
#include "simulator/workload/op.h"

namespace dtplan {

// The link whose bandwidth sets a collective's beta part.
enum class Bottleneck { kNone, kNvlink, kNetwork, kServer };
const char* to_string(Bottleneck b);

// Effective link rates for one group, derived from the profile (GB/s = 1e9 B/s, seconds).
struct LinkRates {
  double intra_busbw_gbps = 0;   // NVLink bus bandwidth one rank reaches
  double inter_busbw_gbps = 0;   // scale-out bandwidth one rank of this group reaches (NIC share),
                                 // at most its NVLink rate (its traffic crosses NVLink to the NIC)
  double node_network_gbps = 0;  // the group's share of one node's NICs, not capped by NVLink
  // The link that sets inter_busbw_gbps: the network, or NVLink where it is the slower.
  Bottleneck inter_limit() const {
    return inter_busbw_gbps < intra_busbw_gbps ? Bottleneck::kNetwork : Bottleneck::kNvlink;
  }
  double alpha_intra_s = 0;  // per-step latency inside a node
  double alpha_inter_s = 0;  // per-step latency across nodes
  // Parameter servers (the `ps` algorithm): how many, and each one's network bandwidth. By
  // default one server per node of the group on a host with one node's NIC bandwidth.
  int servers = 0;
  double server_gbps = 0;
};

struct AlgorithmTime {
  double alpha_s = 0;  // latency part
  double beta_s = 0;   // bandwidth part
  Bottleneck bottleneck = Bottleneck::kNone;
  double time_s() const { return alpha_s + beta_s; }
  bool supported() const { return alpha_s < 1e299; }
};
inline constexpr AlgorithmTime kUnsupported{1e300, 0, Bottleneck::kNone};

LinkRates link_rates(const HardwareProfile& hw, const GroupPlacement& g);

class ICollectiveAlgorithm {
 public:
  virtual ~ICollectiveAlgorithm() = default;
  virtual bool supports(CollectiveOp op) const = 0;
  // Whether the cost model may pick it on its own (NCCL's algorithms); one that NCCL does not
  // run (a parameter server) is priced only where a profile or what-if pins it.
  virtual bool auto_selected() const { return true; }
  virtual AlgorithmTime cost(CollectiveOp op, double bytes, const GroupPlacement& g,
                             const LinkRates& links) const = 0;
  double time_s(CollectiveOp op, double bytes, const GroupPlacement& g,
                const LinkRates& links) const {
    return cost(op, bytes, g, links).time_s();
  }
};

// nccl-tests bus-bandwidth factor: busbw = algbw * factor (CONVENTIONS.md §4, REFERENCE §3.1).
double busbw_factor(CollectiveOp op, int n);

}  // namespace dtplan
