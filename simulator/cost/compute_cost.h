// Time of compute ops on one GPU: pure functions of the op and the hardware profile.
//
// GEMM model (documented in docs/performance-model.md):
//   t = max(flops / (peak * eff), bytes / (hbm * memory_bw_fraction))
//   eff = gemm_max_fraction * tile_quantization * wave_quantization * flops / (flops + half_sat)
// where tiles are gemm_tile_m x gemm_tile_n outputs spread over the SMs in waves; FP8 GEMMs take
// the profile's FP8 asymptote and half-saturation size. A measured table in the profile's
// calibration section replaces the model for shapes it covers.
// Fused attention: eff = e_max(pass) x s / (s + s_half(pass)) x head_dim_factor, of the BF16
// peak, from published kernel throughput curves (the profile's efficiency source).
#pragma once

#include "core/hardware.h"
#include "core/plan.h"
#include "simulator/workload/op.h"

namespace dtplan {

struct ComputeCostModel {
  const HardwareProfile* hw = nullptr;
  Precision precision = Precision::kBf16;
  // With FP8: MXFP8 GEMMs take the profile's MXFP8 asymptote and half-saturation size.
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;

  // GPU time of one op (no host dispatch cost).
  // `count` copies in one launch: batched (one size saturation over all copies) or grouped
  // (MoE experts: each group saturates on its own size, as grouped GEMM kernels loop over
  // their groups' tiles).
  double gemm_s(int64_t m, int64_t n, int64_t k, int count, bool grouped = false) const;
  // The same GEMM in the 16-bit type where FP8 training keeps it there (Op::high_precision).
  double gemm_16bit_s(int64_t m, int64_t n, int64_t k, int count, bool grouped = false) const;
  double gemm_efficiency(int64_t m, int64_t n, int64_t k, int count = 1,
                         bool grouped = false) const;
  // Fused attention of `flops` and `bytes`, the kernel's query length `seq` (0: long) and q/k
  // head width `head_dim` (0: 128), forward or backward.
  double attention_s(double flops, double bytes, int64_t seq = 0, int head_dim = 0,
                     bool backward = false) const;
  double attention_efficiency(int64_t seq, int head_dim, bool backward) const;
  double memory_s(double bytes) const;
  // GPU time of any compute op (0 for collectives).
  double op_s(const Op& op) const;
  // Host time the framework spends launching the op's kernels (eager PyTorch dispatch). A pass
  // takes max(GPU time, host time): the GPU cannot run ahead of the host that feeds it.
  double host_s(const Op& op) const;
};

}  // namespace dtplan
