// RL post-training (PPO, GRPO, DAPO): one RL step as phases — generation (rollout), reward,
// log-prob forwards, critic, policy update, weight sync — composed for four architectures
// (colocated hybrid engine, disaggregated synchronous, one-step-off-policy, fully asynchronous),
// with the rollout priced by simulator/cost/inference_cost.h and the training phases by the
// closed-form estimator through the layout search (docs/rl.md, REFERENCE.md section 8).
//
// Contract: load_rl_file() reads the strict YAML (file:line:col on every error, InputError);
// evaluate_rl() and search_rl() are deterministic and throw InputError (naming the config
// key) only for a configuration no layout can run (the policy does not fit any rollout or
// training layout).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "planner/frameworks.h"
#include "planner/search.h"
#include "simulator/cost/inference_cost.h"

namespace dtplan::rl {

enum class Architecture { kColocated, kDisaggregated, kOneStepOff, kFullyAsync };
inline constexpr int kNumArchitectures = 4;
const char* to_string(Architecture a);
const std::vector<std::string>& architecture_names();  // indexed by Architecture

enum class Algorithm { kGrpo, kPpo, kDapo };
const char* to_string(Algorithm a);

// How weights reach a separate rollout pool: one NCCL broadcast from a trainer rank (OpenRLHF,
// verl's one-step-off-policy recipe) or every trainer GPU sending its shard over RDMA in buckets
// to the rollout replicas, which pass it on among themselves (checkpoint-engine style).
enum class SyncMethod { kNcclBroadcast, kBucketedRdma };
const char* to_string(SyncMethod s);

struct RlConfig {
  std::string file;  // where it was read from
  std::string title;
  ModelSpec policy;
  std::optional<ModelSpec> critic;        // PPO: its value model (default: the policy's shape)
  std::optional<ModelSpec> reward_model;  // reward by a model's forward; none: rule-based
  bool reference = true;                  // a reference policy's log-prob forward (KL term)
  bool old_logprob = true;                // the old policy's log-prob forward (recomputed)
  Algorithm algorithm = Algorithm::kGrpo;
  int64_t prompts_per_step = 512;
  int samples_per_prompt = 8;
  double prompt_tokens = 512;  // mean prompt length
  LengthDistribution response;
  double reward_s_per_sample = 0;  // rule-based reward: CPU seconds per sample
  int reward_workers = 64;         // processes scoring samples in parallel

  Cluster cluster;
  std::optional<Architecture> architecture;  // nullopt: "search" (every one)
  bool architecture_was_set = false;         // the file names one (not "search")
  bool architecture_search = false;          // the file says `architecture: search`
  int rollout_gpus = 0;                      // separate pool's GPUs; 0: searched
  SourceLocation rollout_gpus_at, architecture_at, gpus_at;
  SourceLocation at;  // the configuration's first key (errors about the whole plan)

  // Rollout engine (vLLM/SGLang-like); tp 0: searched (the smallest that fits).
  InferenceLayout rollout;
  int rollout_tp = 0;
  double colocated_gpu_memory_utilization = 0.5;  // a colocated engine shares the GPUs

  // Policy update: mini-batches of `mini_batch_samples` (0: the whole batch in one optimizer
  // step), `epochs` passes over the batch; the layout searched in `space` (singletons fix it).
  int64_t mini_batch_samples = 0;
  int epochs = 1;
  Precision precision = Precision::kBf16;
  Framework framework = Framework::kMegatron;
  SearchSpace space;
  // Colocated: the trainer's gradients and optimizer states go to host memory during
  // generation and come back (verl/OpenRLHF offload), so that what stays (its weights) fits
  // beside the engine's share of HBM.
  bool offload = false;

  SyncMethod sync_method = SyncMethod::kNcclBroadcast;
  int sync_interval_steps = 1;  // fully asynchronous only: push weights every k steps
  double sync_bucket_bytes = 512.0 * (1 << 20);
  // Fully asynchronous: training steps the rollout runs ahead (the queue of finished samples).
  int queue_steps = 1;
};

// A named variation: the base file's keys with `keys` overridden (the what-if set).
struct RlVariant {
  std::string name;
  RlConfig config;
  std::vector<std::string> keys;  // the top-level keys it overrides
};

struct RlFile {
  RlConfig base;
  std::vector<RlVariant> whatif;
};

RlFile load_rl_file(const std::string& path);

// One phase's span on a pool, for the timeline (two steps in steady state) and the table.
struct PhaseSpan {
  std::string phase;
  std::string pool;  // "rollout", "training" or "all" (colocated)
  double start_s = 0, end_s = 0;
};

// A number of the report with how it was computed.
struct Derivation {
  std::string name, formula, value;
};

struct RlResult {
  Architecture architecture = Architecture::kColocated;
  double step_time_s = 0;
  // Phase -> seconds of one step (their spans; in the asynchronous architectures they overlap):
  // generation, reward, logprob, critic, training, weight_sync, offload.
  std::vector<std::pair<std::string, double>> phases_s;
  std::vector<std::pair<std::string, double>> gpu_seconds;  // phase -> GPU-seconds per step
  double idle_share_rollout = 0, idle_share_training = 0;
  double sync_bytes = 0, sync_time_s = 0, sync_exposed_s = 0;
  int sync_interval_steps = 1;
  std::string sync_how;  // "reshard over NVLink", "NCCL broadcast", ...
  double staleness_steps = 0;
  double generation_tokens_per_s = 0;       // response tokens / step time
  double training_tokens_per_s = 0;         // prompt + response tokens / step time
  int rollout_gpus = 0, training_gpus = 0;  // colocated: both are the whole cluster
  int rollout_tp = 1, rollout_pp = 1, rollout_replicas = 1;
  double trainer_resident_bytes = 0;  // colocated: per GPU, beside the engine's share
  GenerationResult generation;
  Plan training_plan;
  Estimate training_estimate;  // one optimizer step
  int optimizer_steps = 1;     // per RL step
  double training_seq_tokens = 0;
  std::vector<PhaseSpan> timeline;
  std::vector<Derivation> derivations;
  std::vector<std::string> notes;
};

// "TP8" or "TP4 PP2": one rollout replica's layout.
std::string rollout_layout(const RlResult& r);

struct RlAlternative {
  Architecture architecture;
  int rollout_gpus = 0, rollout_tp = 1, rollout_pp = 1;
  double step_time_s = 0;
  bool feasible = false;
  std::string why;  // when infeasible
};

struct RlSearchResult {
  RlResult best;
  std::vector<RlResult> best_per_architecture;  // architectures that have a feasible plan
  std::vector<RlAlternative> considered;
  double elapsed_s = 0;
};

// The weight transfer of one step: the colocated reshard (HybridFlow's volume) or the push to a
// separate pool (NCCL broadcast from one trainer rank, or bucketed RDMA), pipelined with the
// replicas' intake (the profile's inference.weight_load_gbps).
struct WeightSync {
  double bytes = 0, time_s = 0;
  double rollout_side_s = 0, training_side_s = 0;  // what each pool spends in it
  std::string how;
  std::vector<Derivation> derivations;
};
// Bytes each GPU gathers when the colocated engine takes the weights at TP t_g from a training
// layout (t = tp x cp, x dp under ZeRO-3; pp stages): M / t_g - M / (pp x max(t, t_g)), which is
// HybridFlow Table 2's (t p - t_g p_g) / (t_g p_g t p) M with p_g = 1 where t_g <= t.
// With p_g generation stages: M / (t_g p_g) - M / (max(pp, p_g) x max(t, t_g)), HybridFlow's
// (t p - t_g p_g) / (t_g p_g t p) M wherever t_g <= t and p_g <= pp.
double reshard_volume_bytes(double model_bytes, const Plan& training, int rollout_tp,
                            int rollout_pp = 1);
WeightSync weight_sync(const RlConfig& c, bool separate_pools, const Plan& training,
                       int training_gpus, const InferenceLayout& rollout);

// The configured architecture with its rollout pool and TP as given (searched where 0).
RlResult evaluate_rl(const RlConfig& c, int threads = 0);
// Every architecture (or the configured one), every rollout-pool size (multiples of the node)
// and rollout TP, each with its best training layout.
RlSearchResult search_rl(const RlConfig& c, int threads = 0);

// A published RL system measurement with the configuration that reproduces it
// (examples/rl/published.yaml, docs/rl.md "Validation").
enum class CaseQuantity { kStepTime, kGeneration, kGenerationShare, kSpeedup, kSyncTime };
const char* to_string(CaseQuantity q);

struct RlCase {
  std::string id, source, quote, assumed;
  CaseQuantity quantity = CaseQuantity::kStepTime;
  double measured = 0;
  RlConfig config;
  std::optional<RlConfig> baseline;  // speedup: measured = baseline's step / config's step
  SourceLocation at;
};
std::vector<RlCase> load_rl_cases(const std::string& path);

struct RlCaseResult {
  bool predicted = false;
  double value = 0;
  std::string why;     // when not predicted
  std::string detail;  // the figures it came from
};
// The quantity as dtplan predicts it: the configuration's architecture and pools as given,
// training layouts searched; sync time from the transfer model alone (no training search).
RlCaseResult evaluate_case(const RlCase& c, int threads = 0);

}  // namespace dtplan::rl
