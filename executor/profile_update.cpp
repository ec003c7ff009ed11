// --update-profile: a run's measured GEMM and collective times folded into a calibrated
// profile through the calibrator's own fits and writer (calibrate/fit.h, calibrate/output.h),
// so a validated plan improves the next prediction as a calibration run would.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "calibrate/fit.h"
#include "calibrate/output.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "executor/runner.h"

namespace dtplan::exec {

void write_updated_profile(const ExecResult& r, const std::string& base_path,
                           const HardwareProfile& base, const std::string& out) {
  calibrate::CalibrationResult cr;
  cr.backend = r.backend;
  {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    cr.date = buf;
  }
  cr.env.device = r.device;
  cr.env.software = r.software;
  cr.env.tool = "dtplan execute --backend " + r.backend + " --update-profile";
  cr.ranks = r.ranks;
  // One measurement per GEMM shape and precision: the mean time of one copy (a call runs
  // `count` copies); one per collective (operation, group, size): the mean time of a call.
  for (const auto& g : r.gemm_shapes) {
    if (g.calls <= 0 || g.measured_s <= 0) continue;
    calibrate::Measurement m;
    m.task.kind = calibrate::TaskKind::kGemm;
    m.task.precision = g.precision;
    m.task.m = g.m, m.task.n = g.n, m.task.k = g.k;
    m.time_s = g.measured_s / g.calls / std::max(1, g.count);
    m.algorithm = r.backend;
    if (std::find(cr.env.precisions.begin(), cr.env.precisions.end(), g.precision) ==
        cr.env.precisions.end())
      cr.env.precisions.push_back(g.precision);
    cr.measurements.push_back(m);
  }
  for (const auto& c : r.collective_shapes) {
    if (c.calls <= 0 || c.measured_s <= 0 || c.group_size < 2) continue;
    calibrate::Measurement m;
    m.task.kind = calibrate::TaskKind::kCollective;
    m.task.op = c.op;
    m.task.scope = c.crosses_nodes ? CommScope::kInterNode : CommScope::kIntraNode;
    m.task.group_size = c.group_size;
    m.task.bytes = static_cast<int64_t>(c.bytes);
    m.time_s = c.measured_s / c.calls;
    m.algorithm = r.backend;
    cr.measurements.push_back(m);
  }
  if (cr.env.precisions.empty())
    throw InputError({}, "--update-profile", "the run timed no GEMM: nothing to fold in");
  // The profile's parameters come from the precision it is predicted in if measured, else the
  // first (the cpu backend runs every GEMM in fp32).
  std::vector<Precision> precs = cr.env.precisions;
  for (Precision p : precs) cr.gemm_fits.push_back(calibrate::fit_gemm(cr.measurements, base, p));
  cr.collective_fits = calibrate::fit_collectives(cr.measurements);
  const std::string text = calibrate::calibrated_profile_yaml(base_path, base, cr);
  // It must load as any profile before it is written (as calibrate does).
  const std::string probe = (std::filesystem::temp_directory_path() /
                             fmt::format("dtplan-updated-check-{}.yaml", ::getpid()))
                                .string();
  write_file_atomic(probe, text);
  try {
    load_profile_file(probe);
  } catch (const InputError& e) {
    std::remove(probe.c_str());
    throw InputError({}, "--update-profile",
                     fmt::format("the measurements fit to a profile that does not load, so "
                                 "nothing was written: {}",
                                 e.reason()));
  }
  std::remove(probe.c_str());
  write_file_atomic(out, text);
}

}  // namespace dtplan::exec
