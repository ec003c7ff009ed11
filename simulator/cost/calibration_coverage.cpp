#include "simulator/cost/calibration_coverage.h"

#include <fmt/format.h>

namespace dtplan {

namespace {
thread_local CalibrationCoverage* t_active = nullptr;
}

CalibrationCoverage* active_coverage() { return t_active; }

CoverageScope::CoverageScope(CalibrationCoverage& c) : previous_(t_active) { t_active = &c; }
CoverageScope::~CoverageScope() { t_active = previous_; }

void CalibrationCoverage::note_gemm(const HardwareProfile& hw, Precision p, int64_t m, int64_t n,
                                    int64_t k, bool table_hit) {
  if (table_hit) return;
  for (const auto& f : hw.calibration.gemm_fits) {
    if (f.precision != p) continue;
    const double gflop = 2.0 * static_cast<double>(m) * n * k / 1e9;
    if (gflop < f.min_gflop * 0.999 || gflop > f.max_gflop * 1.001)
      ++findings_[fmt::format(
          "GEMM {} x {} x {} ({}, {:.3g} GFLOP) is outside the calibrated range {:.3g}-{:.3g} "
          "GFLOP: the fitted efficiency model extrapolates",
          m, n, k, to_string(p), gflop, f.min_gflop, f.max_gflop)];
    return;
  }
  if (!hw.calibration.gemm_fits.empty())
    ++findings_[fmt::format(
        "GEMMs in {}: the calibration measured {} only; its fitted efficiency is applied to {} "
        "at the profile's {} peak",
        to_string(p), to_string(hw.calibration.gemm_fits.front().precision), to_string(p),
        to_string(p))];
}

void CalibrationCoverage::note_collective(const HardwareProfile& hw, CollectiveOp op, double bytes,
                                          const GroupPlacement& g, const CollectiveTable* table) {
  if (hw.calibration.collectives.empty() || g.size <= 1 || bytes <= 0) return;
  const char* scope = g.crosses_nodes() ? "inter_node" : "intra_node";
  if (!table) {
    ++findings_[fmt::format(
        "{} {} group of {}: no measured table near this group size; the "
        "alpha-beta model is used",
        to_string(op), scope, g.size)];
    return;
  }
  const double lo = table->points.front().first, hi = table->points.back().first;
  if (bytes < lo || bytes > hi)
    ++findings_[fmt::format(
        "{} {} group of {}: {:.4g} bytes is outside the measured sizes "
        "{:.4g}-{:.4g} (table of group size {})",
        to_string(op), scope, g.size, bytes, lo, hi, table->group_size)];
}

std::vector<std::string> CalibrationCoverage::warnings() const {
  std::vector<std::string> out;
  for (const auto& [what, count] : findings_)
    out.push_back(count > 1 ? fmt::format("{} ({} times)", what, count) : what);
  return out;
}

}  // namespace dtplan
