#include "calibrate/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "core/error.h"
#include "simulator/cost/compute_cost.h"

namespace dtplan::calibrate {

namespace {

struct Quality {
  double r2 = 1, max_rel = 0, sse_rel = 0;
};

// R^2 on log time and residuals relative to the measurement.
Quality quality(const std::vector<double>& measured, const std::vector<double>& predicted) {
  Quality q;
  double mean = 0;
  for (double t : measured) mean += std::log(t);
  mean /= static_cast<double>(measured.size());
  double ss_res = 0, ss_tot = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const double r = (predicted[i] - measured[i]) / measured[i];
    q.sse_rel += r * r;
    q.max_rel = std::max(q.max_rel, std::abs(r));
    const double lr = std::log(measured[i]) - std::log(std::max(predicted[i], 1e-300));
    ss_res += lr * lr;
    const double d = std::log(measured[i]) - mean;
    ss_tot += d * d;
  }
  q.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res < 1e-18 ? 1.0 : 0.0);
  return q;
}

// Nelder-Mead on two variables; deterministic, enough for a smooth 2-parameter fit.
template <typename F>
std::array<double, 2> nelder_mead(F f, std::array<double, 2> x0, double step, int iters) {
  std::array<std::array<double, 2>, 3> s = {x0, x0, x0};
  s[1][0] += step;
  s[2][1] += step;
  std::array<double, 3> v = {f(s[0]), f(s[1]), f(s[2])};
  for (int it = 0; it < iters; ++it) {
    std::array<int, 3> o = {0, 1, 2};
    std::sort(o.begin(), o.end(), [&](int a, int b) { return v[a] < v[b]; });
    auto best = s[o[0]], mid = s[o[1]], worst = s[o[2]];
    double fb = v[o[0]], fm = v[o[1]], fw = v[o[2]];
    std::array<double, 2> c = {(best[0] + mid[0]) / 2, (best[1] + mid[1]) / 2};
    auto along = [&](double t) {
      return std::array<double, 2>{c[0] + t * (worst[0] - c[0]), c[1] + t * (worst[1] - c[1])};
    };
    auto r = along(-1);
    double fr = f(r);
    if (fr < fb) {
      auto e = along(-2);
      double fe = f(e);
      if (fe < fr) {
        worst = e, fw = fe;
      } else {
        worst = r, fw = fr;
      }
    } else if (fr < fm) {
      worst = r, fw = fr;
    } else {
      auto k = along(0.5);
      double fk = f(k);
      if (fk < fw) {
        worst = k, fw = fk;
      } else {
        mid = {(best[0] + mid[0]) / 2, (best[1] + mid[1]) / 2};
        worst = {(best[0] + worst[0]) / 2, (best[1] + worst[1]) / 2};
        fm = f(mid);
        fw = f(worst);
      }
    }
    s = {best, mid, worst};
    v = {fb, fm, fw};
    if (std::abs(fw - fb) < 1e-14 * (1 + std::abs(fb)) && it > 20) break;
  }
  int bi = 0;
  for (int i = 1; i < 3; ++i)
    if (v[i] < v[bi]) bi = i;
  return s[bi];
}

std::vector<const Measurement*> of_precision(const std::vector<Measurement>& ms, Precision p) {
  std::vector<const Measurement*> out;
  for (const auto& m : ms)
    if (m.task.kind == TaskKind::kGemm && m.task.precision == p) out.push_back(&m);
  return out;
}

std::vector<double> predict_gemm(const std::vector<const Measurement*>& ms, HardwareProfile hw,
                                 Precision p, double mf, double h) {
  hw.calibration = {};
  // Microbenchmarks time kernels in short runs: the profile's sustained-in-training derating
  // (EfficiencyParams::sustained_compute_fraction) stays out of the fitted kernel curve.
  hw.efficiency.sustained_compute_fraction = 1.0;
  hw.efficiency.gemm_max_fraction = mf;
  hw.efficiency.gemm_half_saturation_gflop = h;
  ComputeCostModel cm{&hw, p};
  std::vector<double> out;
  out.reserve(ms.size());
  for (const auto* m : ms) out.push_back(cm.gemm_s(m->task.m, m->task.n, m->task.k, 1));
  return out;
}

}  // namespace

GemmFit gemm_quality(const std::vector<Measurement>& measurements, const HardwareProfile& base,
                     Precision precision, double max_fraction, double half_saturation_gflop) {
  auto ms = of_precision(measurements, precision);
  GemmFit f;
  f.precision = precision;
  f.max_fraction = max_fraction;
  f.half_saturation_gflop = half_saturation_gflop;
  f.points = static_cast<int>(ms.size());
  if (ms.empty()) return f;
  std::vector<double> t;
  f.min_gflop = std::numeric_limits<double>::infinity();
  for (const auto* m : ms) {
    t.push_back(m->time_s);
    f.min_gflop = std::min(f.min_gflop, m->task.gemm_flops() / 1e9);
    f.max_gflop = std::max(f.max_gflop, m->task.gemm_flops() / 1e9);
  }
  Quality q = quality(t, predict_gemm(ms, base, precision, max_fraction, half_saturation_gflop));
  f.r2 = q.r2;
  f.max_rel_residual = q.max_rel;
  return f;
}

GemmFit fit_gemm(const std::vector<Measurement>& measurements, const HardwareProfile& base,
                 Precision precision) {
  auto ms = of_precision(measurements, precision);
  if (ms.empty())
    throw InputError(SourceLocation{}, "--ops",
                     fmt::format("no {} GEMM measurements to fit", to_string(precision)));
  const double peak = base.gpu.peak_flops(precision);
  if (peak <= 0)
    throw InputError(SourceLocation{base.file, 0, 0}, "gpu.peak_tflops",
                     fmt::format("the profile states no {} peak to fit GEMM efficiency against",
                                 to_string(precision)));
  double best_frac = 0;
  for (const auto* m : ms) best_frac = std::max(best_frac, m->task.gemm_flops() / m->time_s / peak);
  if (best_frac > 1.0)
    throw InputError(SourceLocation{base.file, 0, 0}, "gpu.peak_tflops",
                     fmt::format("measured {:.1f} TFLOP/s {} exceeds the profile's peak of {:.1f}: "
                                 "is this the right --profile for this device?",
                                 best_frac * peak / 1e12, to_string(precision), peak / 1e12));
  std::vector<double> t;
  t.reserve(ms.size());
  for (const auto* m : ms) t.push_back(m->time_s);
  // Variables: logit of the max fraction (keeps it in (0, 1)) and log of the half-saturation.
  auto frac = [](double u) { return 1.0 / (1.0 + std::exp(-u)); };
  auto objective = [&](const std::array<double, 2>& x) {
    return quality(t, predict_gemm(ms, base, precision, frac(x[0]), std::exp(x[1]))).sse_rel;
  };
  const double f0 = std::clamp(best_frac, 0.05, 0.99);
  std::array<double, 2> x = {std::log(f0 / (1 - f0)), 0.0};
  for (int restart = 0; restart < 3; ++restart) x = nelder_mead(objective, x, 0.5, 400);
  return gemm_quality(measurements, base, precision, frac(x[0]), std::exp(x[1]));
}

namespace {

struct Point {
  double x, t;
};

// Weighted least squares of t = a + b x with weights 1/t^2 (relative residuals), b >= 0.
// The first regime's a is a latency (>= 0); later regimes' a is the intercept of the affine fit
// over their range, which may be negative (time growing faster than size, e.g. once the buffers
// no longer fit in a cache).
AlphaBetaSegment fit_segment(const std::vector<Point>& p, size_t i, size_t j, double* sse) {
  const bool latency = i == 0;
  double suu = 0, suv = 0, svv = 0, su = 0, sv = 0;
  for (size_t q = i; q <= j; ++q) {
    const double u = 1 / p[q].t, v = p[q].x / p[q].t;
    suu += u * u, suv += u * v, svv += v * v, su += u, sv += v;
  }
  double a = 0, b = 0;
  const double det = suu * svv - suv * suv;
  if (j > i && det > 1e-30 * suu * svv) {
    a = (su * svv - sv * suv) / det;
    b = (sv * suu - su * suv) / det;
  }
  if (j == i || det <= 1e-30 * suu * svv || (latency && a < 0) || b < 0) {
    // Best with one of the two terms only.
    const double a_only = su / suu, b_only = sv / svv;
    double e_a = 0, e_b = 0;
    for (size_t q = i; q <= j; ++q) {
      e_a += std::pow((a_only - p[q].t) / p[q].t, 2);
      e_b += std::pow((b_only * p[q].x - p[q].t) / p[q].t, 2);
    }
    if (e_b <= e_a) {
      a = 0, b = b_only;
    } else {
      a = a_only, b = 0;
    }
  }
  double e = 0;
  for (size_t q = i; q <= j; ++q) e += std::pow((a + b * p[q].x - p[q].t) / p[q].t, 2);
  if (sse) *sse = e;
  AlphaBetaSegment s;
  s.min_bytes = p[i].x;
  s.max_bytes = p[j].x;
  s.alpha_us = a * 1e6;
  // A segment with no bandwidth term is pure latency: give it an effectively infinite bandwidth.
  s.bw_gbps = b > 0 ? 1.0 / b / 1e9 : 1e12;
  return s;
}

// Best split of points [0, n) into exactly k contiguous segments (dynamic programming).
std::vector<AlphaBetaSegment> segmented(const std::vector<Point>& p, int k) {
  const size_t n = p.size();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, inf));
  // A regime spans at least two sizes (when there are enough points): a single point is not a
  // regime. fit_collectives caps k at a third of the points, so regimes average three sizes.
  const size_t min_points = n >= 2 * static_cast<size_t>(k) ? 2 : 1;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + min_points - 1; j < n; ++j) fit_segment(p, i, j, &cost[i][j]);
  // best[s][j]: points [0, j] in s+1 segments; from[s][j]: start of the last one.
  std::vector<std::vector<double>> best(static_cast<size_t>(k), std::vector<double>(n, inf));
  std::vector<std::vector<size_t>> from(static_cast<size_t>(k), std::vector<size_t>(n, 0));
  for (size_t j = 0; j < n; ++j) best[0][j] = cost[0][j];
  for (size_t s = 1; s < static_cast<size_t>(k); ++s)
    for (size_t j = s; j < n; ++j)
      for (size_t i = s; i <= j; ++i) {
        const double c = best[s - 1][i - 1] + cost[i][j];
        if (c < best[s][j]) best[s][j] = c, from[s][j] = i;
      }
  std::vector<AlphaBetaSegment> out;
  size_t j = n - 1;
  for (size_t s = static_cast<size_t>(k); s-- > 0;) {
    const size_t i = s == 0 ? 0 : from[s][j];
    out.push_back(fit_segment(p, i, j, nullptr));
    if (s > 0) j = i - 1;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<CollectiveFit> fit_collectives(const std::vector<Measurement>& measurements,
                                           int max_segments, double target_rel_residual) {
  std::map<std::tuple<int, int, int>, std::vector<Point>> groups;
  for (const auto& m : measurements) {
    if (m.task.kind != TaskKind::kCollective) continue;
    groups[{static_cast<int>(m.task.op), static_cast<int>(m.task.scope), m.task.group_size}]
        .push_back({static_cast<double>(m.task.bytes), m.time_s});
  }
  std::vector<CollectiveFit> out;
  for (auto& [key, pts] : groups) {
    std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    CollectiveFit best;
    const int kmax = std::max(1, std::min<int>(max_segments, static_cast<int>(pts.size()) / 3));
    for (int k = 1; k <= kmax; ++k) {
      CollectiveFit f;
      f.op = static_cast<CollectiveOp>(std::get<0>(key));
      f.scope = static_cast<CommScope>(std::get<1>(key));
      f.group_size = std::get<2>(key);
      f.points = static_cast<int>(pts.size());
      f.segments = segmented(pts, k);
      std::vector<double> t, pred;
      for (const auto& p : pts) t.push_back(p.t), pred.push_back(f.predict_s(p.x));
      Quality q = quality(t, pred);
      f.r2 = q.r2;
      f.max_rel_residual = q.max_rel;
      if (k == 1 || f.max_rel_residual < best.max_rel_residual) best = f;
      if (best.max_rel_residual <= target_rel_residual) break;
    }
    out.push_back(std::move(best));
  }
  return out;
}

}  // namespace dtplan::calibrate
