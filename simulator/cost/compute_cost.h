// Time of compute ops on one GPU: pure functions of the op and the hardware profile.
//
// GEMM model (documented in docs/performance-model.md):
//   t = max(flops / (peak * eff), bytes / (hbm * memory_bw_fraction))
//   eff = gemm_max_fraction * tile_quantization * wave_quantization * flops / (flops + half_sat)
// where tiles are gemm_tile_m x gemm_tile_n outputs spread over the SMs in waves. A measured
// table in the profile's calibration section replaces the model for shapes it covers.
#pragma once

#include "core/hardware.h"
#include "simulator/workload/op.h"

namespace dtplan {

struct ComputeCostModel {
  const HardwareProfile* hw = nullptr;
  Precision precision = Precision::kBf16;

  // GPU time of one op (no host dispatch cost).
  double gemm_s(int64_t m, int64_t n, int64_t k, int count) const;
  double gemm_efficiency(int64_t m, int64_t n, int64_t k, int count = 1) const;
  double attention_s(double flops, double bytes) const;
  double memory_s(double bytes) const;
  // GPU time of any compute op (0 for collectives).
  double op_s(const Op& op) const;
  // Host time the framework spends launching the op's kernels (eager PyTorch dispatch). A pass
  // takes max(GPU time, host time): the GPU cannot run ahead of the host that feeds it.
  double host_s(const Op& op) const;
};

}  // namespace dtplan
