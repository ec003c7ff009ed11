// The calibration run: opens a backend session, builds the sweep, skips what the journal
// already has (--resume), measures the rest under a watchdog, fits, and writes the calibrated
// profile and its Markdown summary atomically (rank 0). Every rank runs it.
#pragma once

#include <string>

#include "calibrate/i_backend.h"
#include "calibrate/sweep.h"

namespace dtplan::calibrate {

class ProcessGroup;

struct CalibrateOptions {
  std::string backend = "cpu";
  BackendOptions backend_options;
  SweepOptions sweep;
  std::string profile;  // base profile: zoo name or path
  std::string out;      // calibrated profile YAML
  std::string summary;  // Markdown summary ("" = next to --out, .md)
  std::string journal;  // ("" = --out + ".journal")
  bool resume = false;
  double timeout_s = 300;  // watchdog: one task longer than this aborts the run
  bool progress = true;
};

// Returns the process exit code. Throws InputError for bad input (the same on every rank).
int run_calibration(const CalibrateOptions& options, const ProcessGroup& world);

}  // namespace dtplan::calibrate
