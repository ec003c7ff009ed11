// The data a capacity report or a what-if study shows, assembled once from search results and
// estimates (report_builder.h, whatif.h) and read by every renderer (renderers.h). Plain data:
// a new output format is one renderer file that reads these structs, nothing else.
//
// Units as everywhere in dtplan: _s seconds, _bytes bytes, _gib 2^30 bytes. Strings are the
// user's own text (model and scenario names come from input files): renderers escape them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/plan.h"

namespace dtplan::reports {

// One ranked plan with its estimate and the memory of every pipeline stage.
struct PlanRow {
  Plan plan;
  Estimate estimate;
  std::vector<StageMemory> stages;  // all_stage_memory(): one entry per pipeline rank
  std::string layout;               // Plan::describe()
  // p10-p90 from dtplan's accuracy record (reports/uncertainty.h); band = false without one.
  bool band = false;
  double step_low_s = 0, step_high_s = 0, mfu_low = 0, mfu_high = 0, days_low = 0, days_high = 0;
};

struct RejectionRow {
  std::string reason;
  long count = 0;
  std::string example;
};

// One cell of the TP x PP heatmap: the best step time with that tp and pp (searched with both
// pinned); feasible = false when the pinned search found no plan.
struct HeatCell {
  int tp = 0, pp = 0;
  bool feasible = false;
  double step_time_s = 0;
  std::string layout;
};

struct TimelineTask {
  int stage = 0;
  char kind = 'F';  // F forward, B input-gradient backward (with recompute), W weight gradients
  double start_s = 0, end_s = 0;
};

struct Timeline {
  bool available = false;
  std::string note;  // why it is missing, or what it shows
  int stages = 0;
  double makespan_s = 0;        // simulated pipeline
  double simulated_step_s = 0;  // simulated step (pipeline + DP + optimizer)
  double analytic_step_s = 0;   // the closed form for the same plan
  long events = 0;
  std::vector<TimelineTask> tasks;
};

// One headline number of the recommended plan: the formula, the values that went in, and the
// value. `value` is computed from the formula's inputs; `estimator_value` is what the estimator
// reported for the same quantity (tests check they agree).
struct Derivation {
  std::string quantity;     // "optimizer state per GPU (stage 0)"
  std::string formula;      // "12 B x params on the stage / (DP x CP)"
  std::string substituted;  // "12 B x 2.76 B / 8"
  std::string result;       // "4.14 GB"
  double value = 0;
  double estimator_value = 0;
};

// The best plan that differs from the recommended one in one dimension, found by searching again
// with that dimension pinned.
struct Alternative {
  std::string dimension;  // "tp", "pp", "zero", ...
  std::string what;       // "TP across nodes (TP16)"
  bool found = false;
  PlanRow row;
  double delta_step_s = 0;  // row.step_time - recommended.step_time
  double delta_peak_gib = 0;
  std::string reason;  // one line: "TP16 crosses nodes: exposed TP comm +4.1 s"
};

// A warning on the recommended plan under the framework's rules (planner/frameworks.h).
struct WarningRow {
  std::string code;  // "megatron-fsdp", "zero3-with-pp", ...
  std::string message;
};

struct ProvenanceRow {
  std::string field;  // "gpu.peak_tflops"
  std::string value;
  std::string source;
};

struct SearchStats {
  long enumerated = 0, evaluated = 0, feasible = 0;
  double elapsed_s = 0;
};

struct ReportData {
  std::string title;
  // What was searched.
  std::string model_name, model_display, model_source;
  double params = 0;  // total parameters
  int layers = 0;
  int64_t hidden = 0;
  std::string profile_name, gpu_name, profile_description;
  int gpus = 0, nodes = 0, gpus_per_node = 0;
  double hbm_gib = 0;
  double memory_budget_gib = 0;  // HBM less the search's margin
  int64_t seq_len = 0, global_batch = 0;
  double train_tokens = 0;  // 0: not given (no time to train)
  std::string precision, objective, framework;
  SearchStats stats;

  std::vector<PlanRow> top;                    // best first; top[0] is the recommended plan
  std::vector<WarningRow> framework_warnings;  // top[0] under `framework`'s rules
  // How sure the recommended plan's numbers are: the warnings (shown at the top) and the band's
  // provenance in words ("" without a band).
  std::vector<WarningRow> number_warnings;
  std::string band_note;
  std::vector<RejectionRow> rejections;
  std::vector<PlanRow> pareto;  // step time vs peak memory
  std::vector<int> heat_tp, heat_pp;
  std::vector<HeatCell> heat;  // heat_pp.size() rows x heat_tp.size() columns, row-major
  Timeline timeline;
  std::vector<Derivation> derivations;
  std::vector<Derivation> failures;  // checkpoints, failures and the data loader (derive_failures)
  std::vector<Derivation>
      precision_notes;  // what the training precision changes (derive_precision)
  std::vector<Alternative> alternatives;
  std::vector<std::string> assumptions;
  std::vector<ProvenanceRow> provenance;
  std::string source_json;  // the search JSON the report was drawn from (dtplan search --json)
  double generation_s = 0;  // filled by the builder
};

// One column of a what-if study: a scenario and the best plan under it.
struct ScenarioColumn {
  std::string name;
  std::string description;  // the scenario's settings in one line
  std::string model_display, gpu_name, profile_name;
  int gpus = 0;
  int64_t seq_len = 0, global_batch = 0;
  std::string precision;
  bool found = false;
  PlanRow best;
  // The best plan's MFU against the BF16 dense peak (best.estimate.mfu is against its own
  // precision's: FP8's is twice BF16's on Hopper and Blackwell, so the two do not compare).
  double mfu_bf16 = 0;
  long feasible = 0;
  std::string top_rejection;  // the commonest rejection when nothing fits
  // Failures and checkpoints (when the scenario or its profile gives an MTBF and a checkpoint
  // write bandwidth): simulator/cost/reliability.h with Young's interval.
  bool has_reliability = false;
  double job_mtbf_s = 0, checkpoint_s = 0, restart_s = 0, checkpoint_interval_s = 0;
  double lost_fraction = 0;         // checkpoint writes + lost work + restarts, share of time
  double goodput_tokens_per_s = 0;  // tokens_per_s x (1 - lost_fraction)
  // Time to train, when the scenario gives train_tokens (0 otherwise); with failures and
  // checkpoints when the scenario has the reliability figures (at the goodput).
  double train_tokens = 0, time_to_train_days = 0, time_to_train_with_failures_days = 0;
  // The best plan's p10-p90 (reports/uncertainty.h; band = false without one) and the codes of
  // the warnings its numbers carry.
  bool band = false;
  double step_low_s = 0, step_high_s = 0, days_low = 0, days_high = 0;
  std::vector<std::string> warning_codes;
};

struct WhatifData {
  std::string title;
  std::string file;                     // the scenarios YAML
  std::vector<ScenarioColumn> columns;  // columns[0] is the base
  std::string source_json;
  double generation_s = 0;
};

}  // namespace dtplan::reports
