// Fits the calibrator's measurements:
//  - GEMM: the performance model's two efficiency knobs (gemm_max_fraction,
//    gemm_half_saturation_gflop; simulator/cost/compute_cost.h) by least squares on relative
//    time residuals, predicting with the very ComputeCostModel the estimator uses;
//  - collectives: t = alpha + bytes / bw per (op, scope, group size), in up to six size
//    regimes (latency-bound, transitions such as cache or protocol changes, bandwidth-bound) found
//    by segmented least squares.
// Each fit reports R^2 (on log time) and its largest relative residual.
#pragma once

#include <vector>

#include "calibrate/task.h"
#include "core/hardware.h"

namespace dtplan::calibrate {

// Fits `precision`'s GEMM measurements against `base` (its peak, SM count, tiles and HBM).
// Throws InputError when there are no measurements or they exceed the profile's peak.
GemmFit fit_gemm(const std::vector<Measurement>& measurements, const HardwareProfile& base,
                 Precision precision);
// Quality of given efficiency parameters on `precision`'s measurements (r2, max residual).
GemmFit gemm_quality(const std::vector<Measurement>& measurements, const HardwareProfile& base,
                     Precision precision, double max_fraction, double half_saturation_gflop);

// One fit per (op, scope, group size) present in `measurements`, sorted.
std::vector<CollectiveFit> fit_collectives(const std::vector<Measurement>& measurements,
                                           int max_segments = 6, double target_rel_residual = 0.03);

}  // namespace dtplan::calibrate
