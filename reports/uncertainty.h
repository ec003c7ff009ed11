// How sure a prediction is: its error band from dtplan's accuracy record
// (simulator/validation/error_bands.h) and the warnings that travel with its numbers, each with a
// stable code (docs/accuracy.md, "Error bands"; README lists the codes).
#pragma once

#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/validation/error_bands.h"

namespace dtplan {

struct NumberWarning {
  std::string code;     // profile-not-fitted, profile-partly-fitted, regime-sparse, no-error-band,
                        // outside-calibration, ...
  std::string message;  // one sentence
};

struct Uncertainty {
  ErrorBand band;  // found = false: no band (the warnings say why)
  std::vector<NumberWarning> warnings;
  // p10 and p90 of each figure (equal to the figure when there is no band). Throughput and
  // MFU take the band the other way round: a slower step is fewer tokens/s.
  double step_low_s = 0, step_high_s = 0;
  double mfu_low = 0, mfu_high = 0;
  double tokens_low = 0, tokens_high = 0;  // tokens/s of the job
  double days_low = 0, days_high = 0;      // time to train (0 when not asked)
};

// The band of the plan's regime in `table` (nullptr: the shipped one) and the warnings:
// a profile whose efficiency is not fitted, a regime with few cases, no band at all, and the
// calibration-coverage lines given (calibration_coverage.h).
// `framework`: the stack the plan runs on (megatron, deepspeed, torchtitan; framework_name()).
Uncertainty uncertainty_of(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                           const Estimate& e, const std::string& framework,
                           const std::vector<std::string>& calibration_flags = {},
                           const ErrorBandTable* table = nullptr);

// The highest share of the `precision` dense peak that any kernel of the profile reaches in
// benchmarks: the GEMM asymptote at that precision, or a fused attention kernel's (of the BF16
// peak, rescaled), whichever is higher; `what` names it and its profile field. No step can run
// its hardware FLOPs faster: the claim check and the bands' optimistic end stop there.
double kernel_ceiling(const HardwareProfile& hw, Precision precision, std::string* what = nullptr);

// "64.760 s (61.2–70.3)": the value with its p10–p90, or the value alone without a band.
std::string with_band(const std::string& value, double low, double high, const char* spec,
                      bool have_band);

}  // namespace dtplan
