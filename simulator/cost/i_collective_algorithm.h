// Plug-in point: a collective algorithm (ring, tree, hierarchical, pairwise...). One file per
// implementation in collective_impl/, registered with DTPLAN_REGISTER. The cost model asks
// every registered algorithm that supports an operation and keeps the fastest, as NCCL's
// tuner does.
//
// Contract: time_s is pure; `bytes` is the nccl-tests size S (the full buffer: for all-gather
// and reduce-scatter, count_per_rank x dtype x n); returns +inf when unsupported.
#pragma once

#include "core/hardware.h"
#include "simulator/workload/op.h"

namespace dtplan {

// Effective link rates for one group, derived from the profile (GB/s = 1e9 B/s, seconds).
struct LinkRates {
  double intra_busbw_gbps = 0;  // NVLink bus bandwidth one rank reaches
  double inter_busbw_gbps = 0;  // scale-out bandwidth one rank of this group reaches (NIC share)
  double alpha_intra_s = 0;     // per-step latency inside a node
  double alpha_inter_s = 0;     // per-step latency across nodes
};

LinkRates link_rates(const HardwareProfile& hw, const GroupPlacement& g);

class ICollectiveAlgorithm {
 public:
  virtual ~ICollectiveAlgorithm() = default;
  virtual bool supports(CollectiveOp op) const = 0;
  virtual double time_s(CollectiveOp op, double bytes, const GroupPlacement& g,
                        const LinkRates& links) const = 0;
};

// nccl-tests bus-bandwidth factor: busbw = algbw * factor (CONVENTIONS.md §4, REFERENCE §3.1).
double busbw_factor(CollectiveOp op, int n);

}  // namespace dtplan
