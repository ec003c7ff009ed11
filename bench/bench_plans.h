// Plans the benchmarks share.
#pragma once

#include "core/plan.h"

namespace dtplan {

// Llama 3.1 405B as Meta trained it on 16,384 H100 (Llama 3 paper, arXiv 2407.21783, §3.3:
// TP8 PP16, 1F1B, seq 8192, micro-batch 1, 126 layers split unevenly), on `gpus` GPUs
// (DP = gpus / 128) with a global batch of gpus / 8 sequences (2,048 on 16,384 GPUs).
inline Plan llama405b_plan(int gpus) {
  Plan p;
  p.tp = 8;
  p.pp = 16;
  p.dp = gpus / 128;
  p.sp = true;
  p.zero = 1;
  p.mbs = 1;
  p.gbs = gpus / 8;
  p.uneven_pp = true;
  p.schedule = "1f1b";
  return p;
}

}  // namespace dtplan
