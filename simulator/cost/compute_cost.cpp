#include "simulator/cost/compute_cost.h"

#include <algorithm>
#include <cmath>

#include "simulator/cost/calibration_coverage.h"

namespace dtplan {

static double ceil_div(double a, double b) { return std::ceil(a / b); }

double ComputeCostModel::gemm_efficiency(int64_t m, int64_t n, int64_t k, int count,
                                         bool grouped) const {
  const EfficiencyParams& e = hw->efficiency;
  const double tm = e.gemm_tile_m, tn = e.gemm_tile_n;
  const double tiles_m = ceil_div(static_cast<double>(m), tm);
  const double tiles_n = ceil_div(static_cast<double>(n), tn);
  // Tile quantization: padded outputs do wasted work.
  const double tile_q =
      static_cast<double>(m) * static_cast<double>(n) / (tiles_m * tm * tiles_n * tn);
  // Wave quantization: the last wave of tiles leaves SMs idle.
  const double tiles = tiles_m * tiles_n * std::max(1, count);  // a batched GEMM is one launch
  const double sms = std::max(1, hw->gpu.sm_count);
  const double waves = ceil_div(tiles, sms);
  const double wave_q = tiles / (waves * sms);
  // Saturation in size: small GEMMs do not reach the asymptote (launch, prologue, epilogue).
  // A grouped GEMM (MoE experts) saturates per group: DeepGEMM's m-grouped kernels on H100 run
  // 192-token groups at 0.44-0.51 of peak and 1024-token ones at 0.69-0.75, as this form gives
  // for one group (waynehacking8/blackwell-tensorcore-kernels@fd74d2a
  // results/reference/deepgemm.txt).
  const double gflop =
      2.0 * static_cast<double>(m) * n * k * (grouped ? 1 : std::max(1, count)) / 1e9;
  const bool fp8 = precision == Precision::kFp8;
  const bool mx = fp8 && fp8_recipe == Fp8Recipe::kMxfp8;
  const double half = mx    ? e.gemm_half_saturation_gflop_mxfp8
                      : fp8 ? e.gemm_half_saturation_gflop_fp8
                            : e.gemm_half_saturation_gflop;
  const double sat = gflop / (gflop + half);
  const double top = mx    ? e.gemm_max_fraction_mxfp8
                     : fp8 ? e.gemm_max_fraction_fp8
                           : e.gemm_max_fraction;
  return std::max(1e-3, top * e.sustained_compute_fraction * tile_q * wave_q * sat);
}

double ComputeCostModel::gemm_s(int64_t m, int64_t n, int64_t k, int count, bool grouped) const {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  const double flops = 2.0 * static_cast<double>(m) * n * k;
  double peak = hw->gpu.peak_flops(precision);
  if (peak <= 0) peak = hw->gpu.peak_flops(Precision::kBf16);
  // Calibrated table: nearest measured shape of this precision within 10% in every dimension.
  for (const auto& g : hw->calibration.gemm) {
    if (g.precision != precision) continue;
    auto close = [](int64_t a, int64_t b) { return std::abs(a - b) <= std::max(a, b) / 10; };
    if (close(g.m, m) && close(g.n, n) && close(g.k, k)) {
      if (auto* cov = active_coverage()) cov->note_gemm(*hw, precision, m, n, k, true);
      // A measured kernel rate, derated as the curve is for sustained training.
      return count * flops / (g.tflops * 1e12 * hw->efficiency.sustained_compute_fraction);
    }
  }
  if (auto* cov = active_coverage()) cov->note_gemm(*hw, precision, m, n, k, false);
  const double eff = gemm_efficiency(m, n, k, count, grouped);
  const double elem = bytes_per_element(precision);
  const double bytes =
      elem * (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n);
  const double t = std::max(flops / (peak * eff), memory_s(bytes));
  return count * t;
}

double ComputeCostModel::gemm_16bit_s(int64_t m, int64_t n, int64_t k, int count,
                                      bool grouped) const {
  if (precision != Precision::kFp8) return gemm_s(m, n, k, count, grouped);
  ComputeCostModel bf16 = *this;
  bf16.precision = Precision::kBf16;
  return bf16.gemm_s(m, n, k, count, grouped);
}

double ComputeCostModel::memory_s(double bytes) const {
  return bytes / (hw->gpu.hbm_gbps * 1e9 * hw->efficiency.memory_bw_fraction);
}

double ComputeCostModel::attention_efficiency(int64_t seq, int head_dim, bool backward) const {
  const EfficiencyParams& e = hw->efficiency;
  const double top = backward ? e.attention_bwd_max_fraction : e.attention_fwd_max_fraction;
  const double half = backward ? e.attention_bwd_half_seq : e.attention_fwd_half_seq;
  const double s = seq > 0 ? static_cast<double>(seq) : 1e12;
  // Head width: FlashAttention-3 (Shah et al. 2024, Fig. 5/6, H100 forward) runs head dim 64 at
  // 0.77x and 256 at 1.17x its head-dim-128 throughput; log-linear between, flat outside.
  const double d = head_dim > 0 ? std::clamp(static_cast<double>(head_dim), 64.0, 256.0) : 128.0;
  const double x = std::log2(d / 128.0);
  // A profile without a kernel curve (s_half 0) keeps the GEMM asymptote at every width.
  const bool curve = e.attention_fwd_half_seq > 0 || e.attention_bwd_half_seq > 0;
  const double width = !curve ? 1.0 : x < 0 ? 1.0 + 0.23 * x : 1.0 + 0.17 * x;
  return std::clamp(top * e.sustained_compute_fraction * s / (s + half) * width, 1e-3, 0.98);
}

double ComputeCostModel::attention_s(double flops, double bytes, int64_t seq, int head_dim,
                                     bool backward) const {
  // Fused attention's matmuls run on tensor cores at the BF16 peak (FP8 training keeps
  // attention in BF16: Transformer Engine's default; FlashAttention-3 has no FP8 backward).
  const double peak =
      hw->gpu.peak_flops(precision == Precision::kFp8 ? Precision::kBf16 : precision);
  return std::max(flops / (peak * attention_efficiency(seq, head_dim, backward)), memory_s(bytes));
}

double ComputeCostModel::host_s(const Op& op) const {
  return op.kernels * hw->efficiency.host_dispatch_us * 1e-6;
}

double ComputeCostModel::op_s(const Op& op) const {
  switch (op.kind) {
    case OpKind::kGemm:
      return op.high_precision ? gemm_16bit_s(op.m, op.n, op.k, op.count, op.grouped)
                               : gemm_s(op.m, op.n, op.k, op.count, op.grouped);
    case OpKind::kAttention:
      return attention_s(op.flops, op.bytes, op.attn_seq, op.attn_head_dim,
                         op.pass != Pass::kForward);
    case OpKind::kElementwise:
      return memory_s(op.bytes);
    case OpKind::kCollective:
      return 0;
  }
  return 0;
}

}  // namespace dtplan
