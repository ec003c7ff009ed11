// Plans the simulator tests share: Megatron-style layouts (SP when TP > 1, selective
// recomputation) with their workload's global batch set to the plan's.
#pragma once

#include <cstdint>

#include "core/plan.h"

namespace dtplan::testing {

inline Plan megatron_plan(int tp, int pp, int dp, int64_t gbs, int zero = 1) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.sp = tp > 1;
  p.zero = zero;
  p.recompute = Recompute::kSelective;
  p.gbs = gbs;
  return p;
}

inline Workload workload_for(const Plan& p, int64_t seq_len = 2048) {
  Workload w;
  w.seq_len = seq_len;
  w.global_batch = p.gbs;
  return w;
}

}  // namespace dtplan::testing
