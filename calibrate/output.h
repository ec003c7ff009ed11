// What a calibration run writes: the calibrated hardware profile (the base profile with fitted
// efficiency parameters and a `calibration:` section of measured tables, fits and provenance;
// docs/file-formats.md) and a Markdown summary (measured vs datasheet peaks, fit quality).
#pragma once

#include <string>
#include <vector>

#include "calibrate/i_backend.h"
#include "calibrate/task.h"
#include "core/hardware.h"

namespace dtplan::calibrate {

struct CalibrationResult {
  std::string backend;
  std::string date;  // UTC, ISO 8601
  Environment env;
  std::vector<Measurement> measurements;
  std::vector<GemmFit> gemm_fits;  // the first is the one whose parameters the profile takes
  std::vector<CollectiveFit> collective_fits;
  int hosts = 1, ranks = 1;
};

// `base_path` is the base profile's YAML (its text is kept, fields replaced).
std::string calibrated_profile_yaml(const std::string& base_path, const HardwareProfile& base,
                                    const CalibrationResult& r);
// A GEMM fit too weak to trust for shapes it did not measure (R^2 < 0.9 or a residual > 25%).
bool weak_fit(const GemmFit& g);
std::string calibration_summary_markdown(const HardwareProfile& base, const CalibrationResult& r,
                                         const std::string& profile_path);

}  // namespace dtplan::calibrate
