// Claim checks: what a résumé, a paper or a design doc states about a training run (model,
// GPUs, layout, MFU, throughput, step time, tokens, days, GPU-hours, memory per GPU), checked
// for consistency with each other and with dtplan's model, with the arithmetic
// (docs/claims.md).
//
// Every statement that fixes the run's throughput is turned into tokens/s: an MFU on G GPUs
// (MFU x G x peak / FLOPs per token), model TFLOP/s per GPU, HFU or hardware TFLOP/s per GPU
// (with the recomputed FLOPs), tokens/s, a step time with its
// global batch, T tokens in D days, T tokens in H GPU-hours. Two such statements agree when
// their throughputs are within `tolerance` of each other; any throughput must need at most
// 100% of the GPUs' peak; and, where the model, the GPUs and their profile are known, it must
// not beat dtplan's prediction (the stated layout's, or the best layout's when none is stated)
// by more than published runs of that regime beat it (the error band's p10, with `tolerance`
// for rounding; `model_tolerance` where there is no band). Memory per GPU must fit the GPU, and not
// be below what dtplan's model says the stated layout needs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace dtplan {

// The layout a claim states; unset fields are not stated.
struct ClaimedPlan {
  std::optional<int> tp, pp, dp, cp, ep, vpp, zero, mbs;
  std::optional<bool> sp;
  std::optional<std::string> recompute, schedule;
};

struct Claim {
  std::string name;    // "" when not given: "claim N"
  std::string source;  // where the statements come from (free text)
  SourceLocation where;
  std::optional<std::string> model;     // zoo name or model YAML path
  std::optional<double> params;         // total parameters
  std::optional<double> active_params;  // MoE: parameters per token
  std::optional<std::string> profile;   // hardware profile name or path
  std::optional<int> gpus;
  std::optional<std::string> framework;  // megatron, deepspeed, torchtitan
  std::string precision = "bf16";
  std::optional<int64_t> seq_len;
  std::optional<int64_t> global_batch;  // sequences per step
  std::optional<ClaimedPlan> plan;
  std::optional<double> mfu;             // a fraction
  std::optional<double> tflops_per_gpu;  // model FLOPs
  // Hardware FLOPs utilisation and TFLOP/s (recomputed work counted, as Narayanan et al. 2021
  // report): need the recomputation the run used (plan.recompute).
  std::optional<double> hfu, hardware_tflops_per_gpu;
  std::optional<double> tokens_per_s;          // whole job
  std::optional<double> tokens_per_s_per_gpu;  // per GPU
  std::optional<double> step_time_s;
  std::optional<double> train_tokens;
  std::optional<double> days;
  std::optional<double> gpu_hours;
  std::optional<double> memory_gib_per_gpu;
};

// Reads one claim (a mapping) or several (`claims:` a list of mappings). InputError with
// file:line:col for bad YAML, unknown keys, bad values.
std::vector<Claim> load_claims(const std::string& path);

struct ClaimCheckOptions {
  double tolerance = 0.15;  // between statements (published figures are rounded)
  // Beyond dtplan's prediction, where the plan's regime has no error band; with one, a claim may
  // beat the prediction by the band's p10 (measured / predicted) and `tolerance` (docs/claims.md).
  double model_tolerance = 0.25;
  int threads = 0;  // for the search when no layout is stated
};

// One finding: which statements it concerns and the arithmetic, in a sentence.
struct ClaimFinding {
  std::string code;  // "throughput", "peak", "model", "layout", "memory", "params", "derived"
  std::string statements;
  std::string message;
};

struct ClaimResult {
  std::string name;
  std::vector<ClaimFinding> consistent, refuted, derived;
  std::vector<std::string> missing;  // what would let a further check run
  std::vector<std::string> notes;    // conventions used (FLOPs per token, peak, defaults)
  int checks() const { return static_cast<int>(consistent.size() + refuted.size()); }
};

// Loads what the claim names (model, profile); InputError for an unknown name.
ClaimResult check_claim(const Claim& c, const ClaimCheckOptions& opt = {});

}  // namespace dtplan
