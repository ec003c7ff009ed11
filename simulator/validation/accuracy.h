// Predicted vs measured: reads the ground-truth case format (shared/groundtruth/README.md,
// schema v1 and v2), predicts every case with an evaluator, and summarizes the error (MAPE,
// median, max, per-group MAPE and Spearman rank correlation, coverage).
//
// Reading: every map of a case is read strictly (an unknown key, a wrong type or value is an
// InputError with file:line:col, as everywhere else). A v1 file has no `framework` block: its
// cases read as all-null framework facts.
//
// A plan field that is null in a case is unpublished: the runner evaluates every feasible
// value of it and keeps the fastest plan that fits in memory (the "best feasible value").
// Framework knobs the case format does not carry (attention kernel, gradient-reduce overlap)
// are runner options, applied to every case alike.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

// The v2 `framework` block: facts of the training software; nullopt where the source does not
// settle them (and for every field of a v1 file).
struct FrameworkFacts {
  std::optional<std::string> name, version;
  std::optional<std::string> attention;  // "flash" or "unfused"
  std::optional<bool> tp_comm_overlap, grad_reduce_overlap, param_gather_overlap;
  std::optional<std::string> fp8_recipe;  // delayed, current, mxfp8, blockwise
};

struct AccuracyCase {
  std::string id, group, source;
  ModelSpec model;
  std::string profile;
  int num_gpus = 0;
  Workload workload;
  std::optional<int> tp, pp, dp, cp, ep, etp, vpp, zero, mbs;
  std::optional<bool> sp;
  std::optional<std::string> recompute, schedule;
  double measured_step_time_s = 0;
  std::optional<double> measured_peak_memory_gib;
  FrameworkFacts framework;
  int line = 0;  // where the case starts in the file
};

struct LayerCase {
  std::string id, source, profile;
  ModelSpec model;
  int num_gpus = 0;
  Workload workload;
  int mbs = 1, tp = 1;
  bool sp = false;
  std::string recompute;
  double measured_layer_ms = 0;
  FrameworkFacts framework;
};

struct CaseFile {
  std::vector<AccuracyCase> cases;
  std::vector<LayerCase> layer_cases;
};

CaseFile load_case_file(const std::string& path);

struct AccuracyOptions {
  bool flash_attention = false;      // the dev set's frameworks used unfused attention
  bool overlap_grad_reduce = false;  // and reduced gradients after the backward
  // Re-evaluate the chosen layout with the discrete-event simulator (schedules it orders).
  bool des = false;
  // Profile lookup: name -> profile (lets callers substitute fitted parameters).
  std::function<const HardwareProfile*(const std::string&)> profile;
};

struct CaseResult {
  std::string id, group;
  double measured_s = 0;
  double predicted_s = 0;
  double error_pct = 0;  // (predicted - measured) / measured x 100
  std::string skipped;   // reason, empty when predicted
  std::string plan;      // the evaluated layout
  int num_gpus = 0;
  int64_t global_batch = 0;
  std::optional<double> measured_peak_memory_gib, predicted_peak_memory_gib;
};

struct GroupSummary {
  std::string group;
  int cases = 0;
  double mape_pct = 0;
  std::optional<double> spearman;  // needs >= 3 predicted cases with distinct values
  // Ranking quality (issue #4): among the cases of this group with the same GPU count and
  // global batch (the layouts a planner chooses between), in how many such sets with >= 3
  // layouts the measured-fastest one is among the 3 predicted-fastest.
  int layout_sets = 0;
  int best_in_top3 = 0;
};

struct AccuracySummary {
  double mape_pct = 0, median_abs_pct = 0, max_abs_pct = 0;
  int cases_total = 0, cases_predicted = 0;
  std::vector<GroupSummary> groups;
};

CaseResult predict_case(const AccuracyCase& c, const AccuracyOptions& opt);
CaseResult predict_layer_case(const LayerCase& c, const AccuracyOptions& opt);
AccuracySummary summarize(const std::vector<CaseResult>& results);

double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace dtplan
