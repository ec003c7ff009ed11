// Predicted vs measured: reads the ground-truth case format (shared/groundtruth/README.md,
// schema v1 and v2), predicts every case with an evaluator, and summarizes the error (MAPE,
// median, max, per-group MAPE and Spearman rank correlation, coverage).
//
// Reading: every map of a case is read strictly (an unknown key, a wrong type or value is an
// InputError with file:line:col, as everywhere else). A v1 file has no `framework` block: its
// cases read as all-null framework facts.
//
// Framework facts (v2 `framework` block), per case: `attention` sets Plan::flash_attention,
// `grad_reduce_overlap` Plan::overlap_grad_reduce, `param_gather_overlap`
// Plan::overlap_param_gather and `tp_comm_overlap` Plan::tp_comm_overlap. An override in
// AccuracyOptions (the CLI's --attention, --[no-]overlap-grad-reduce, --[no-]tp-comm-overlap)
// wins for every case. A null fact takes one default for every case alike: unfused attention
// and no overlap (what Megatron-LM and DeepSpeed do unless told otherwise: FlashAttention,
// --overlap-grad-reduce, --overlap-param-gather, --tp-comm-overlap and DeepSpeed's overlap_comm
// are all opt-in). `name` and `version` select the framework profile (AccuracyOptions::framework)
// whose defaults fill the facts the case leaves null; `fp8_recipe` sets the recipe; `notes` is
// read and carried, not modelled.
//
// Unpublished plan fields (null): the runner evaluates the candidates below and keeps the
// fastest plan that fits in memory (the README's "best feasible value"):
//   tp: the divisors of the GPU count that tile a node; pp: every divisor of the GPU count;
//   dp: the GPU count / (tp*pp*cp); cp: 1; micro_batch: the powers of two that divide the batch
//   per replica (global_batch / dp); vpp (pp > 1): 1, 2, 3, 4, 6, 8; schedule (pp > 1): 1F1B
//   when vpp = 1, interleaved when vpp > 1; sp (tp > 1): off and on; zero (dp*cp > 1): 0 and 1;
//   recompute: none, selective and full; MoE ep: the divisors of the expert count, etp: the
//   divisors of the GPUs per node (dense models: ep = etp = 1).
// Published and searched values alike: when layers do not divide by pp*vpp, the split is
// uneven (Plan::uneven_pp: the first and last chunks take fewer layers) where one exists.
// When exactly one candidate satisfies the published fields, it is the layout that ran and is
// taken even where the memory model says it does not fit. A case with no prediction is skipped
// with the cause found across all candidates (CaseResult::skipped): the memory shortfall of the
// smallest candidate when some satisfy the published fields but none fits, else the violation
// every candidate shares, else the most frequent one. No rule names a source, group or case.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/framework_profile.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/validation/error_bands.h"

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
  // Overrides for every case; nullopt: each case's framework fact, its default where null.
  std::optional<bool> flash_attention, overlap_grad_reduce, tp_comm_overlap;
  // The MoE token dispatcher of every MoE case (the case schema does not record it): alltoall
  // unless set (a what-if: docs/accuracy.md).
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // Re-evaluate the chosen layout with the discrete-event simulator (schedules it orders).
  bool des = false;
  // Profile lookup: name -> profile (lets callers substitute fitted parameters).
  std::function<const HardwareProfile*(const std::string&)> profile;
  // Framework profile lookup by a case's framework.name and version ("" when null; null where
  // no profile is shipped): its kernels, efficiency and defaults where the case is null. A
  // version the profile lists selects its overrides; another takes the profile's base values.
  std::function<const FrameworkProfile*(const std::string& name, const std::string& version)>
      framework;
  // The model zoo (models/*.yaml, each file with its source), or null. The case format has no
  // norm, bias, position or dropout fields; a case model whose dimensions are a zoo model's
  // (zoo_match) takes those from it, every case alike; the others keep case_model's rule.
  const std::vector<ModelSpec>* zoo = nullptr;
};

// The zoo model a case model is, or null: the one with the same layers, hidden size, heads,
// KV heads, head dim, FFN width and activation, vocabulary, embedding tying and MoE/MLA shape.
// Where several match and disagree on what the case format leaves out, none is taken.
const ModelSpec* zoo_match(const ModelSpec& m, const std::vector<ModelSpec>& zoo);

struct CaseResult {
  std::string id, group;
  double measured_s = 0;
  double predicted_s = 0;
  double error_pct = 0;  // (predicted - measured) / measured x 100
  std::string skipped;   // reason, empty when predicted
  std::string plan;      // the evaluated layout
  int candidates = 0;    // layouts tried (published fields fixed, unpublished ones searched)
  // The framework settings the case ran with (its facts, the defaults, or the overrides).
  bool flash_attention = false, overlap_grad_reduce = false, tp_comm_overlap = false;
  std::string attention_kernel;  // the framework profile's kernel ("" : the hardware default)
  int num_gpus = 0;
  int64_t global_batch = 0;
  int64_t seq_len = 0;
  std::optional<double> measured_peak_memory_gib, predicted_peak_memory_gib;
  // Whether the evaluated layout fits in memory by the model (false only for a case whose one
  // valid candidate is taken as it ran).
  bool fits = true;
  Regime regime;  // of the evaluated layout (error_bands.h)
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
  // Peak memory, over the predicted cases whose source prints it (measured_peak_memory_gib):
  // mean |error|, mean signed error (predicted - measured) / measured, and how many are within
  // 10% of the printed figure.
  int memory_cases = 0, memory_cases_within_10pct = 0;
  double memory_mape_pct = 0, memory_mean_signed_pct = 0;
  std::vector<GroupSummary> groups;
};

// The framework settings of a case: the override where set, else the fact, else the default.
struct FrameworkSettings {
  bool flash_attention = false, overlap_grad_reduce = false, overlap_param_gather = false,
       tp_comm_overlap = false;
};
FrameworkSettings framework_settings(const FrameworkFacts& f, const AccuracyOptions& opt,
                                     const FrameworkProfile* profile = nullptr);

CaseResult predict_case(const AccuracyCase& c, const AccuracyOptions& opt);
CaseResult predict_layer_case(const LayerCase& c, const AccuracyOptions& opt);
AccuracySummary summarize(const std::vector<CaseResult>& results);

double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace dtplan
