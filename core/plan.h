// Workload (what is trained) and Plan (how it is laid out on the GPUs), with validation that
// returns every violation and the flag it concerns.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hardware.h"
#include "core/model_spec.h"

namespace dtplan {

// FP8 scaling recipes (Megatron-LM --fp8-recipe, megatron/core/transformer/transformer_config.py
// fp8_recipe, NVIDIA/Megatron-LM d98e8a6; default "delayed").
enum class Fp8Recipe { kDelayed, kTensorwise, kMxfp8, kBlockwise };
const char* to_string(Fp8Recipe r);

struct Workload {
  int64_t seq_len = 2048;
  int64_t global_batch = 1536;  // sequences per optimizer step
  Precision precision = Precision::kBf16;
  // FP8 only: the recipe and, for delayed scaling, the amax history length (Megatron
  // --fp8-amax-history-len, default 1: transformer_config.py fp8_amax_history_len, d98e8a6;
  // Transformer Engine's own DelayedScaling default is 1024).
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  int fp8_amax_history_len = 1;
  std::string optimizer = "adam";
  double train_tokens = 0;  // 0 = not given
};

enum class Recompute { kNone, kSelective, kFull };

// How MoE tokens reach their experts' ranks: one all-to-all over the expert-parallel group
// (Megatron --moe-token-dispatcher-type alltoall), or the flex dispatcher's DeepEP / HybridEP
// kernels (--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep|hybridep),
// which send a token to each destination node once and fan it out over NVLink there.
enum class MoeDispatcher { kAllToAll, kDeepEP, kHybridEP };
const char* to_string(MoeDispatcher d);
std::optional<MoeDispatcher> parse_moe_dispatcher(const std::string& name);

// The most pipeline stages a plan may have (the estimator keeps per-stage arrays of this size);
// validate_plan refuses more.
inline constexpr int kMaxPipelineStages = 1024;

// A pipeline schedule's name (the registry's, simulator/schedule/), interned once per distinct
// text: copying and comparing two names is a pointer's work, so the estimator's hot path never
// compares text. Any text is held; validate_schedule refuses a name no registered schedule has,
// with the known ones.
class ScheduleName {
 public:
  ScheduleName() : ScheduleName("1f1b") {}
  ScheduleName(const char* name) : ScheduleName(std::string_view(name)) {}
  ScheduleName(const std::string& name) : ScheduleName(std::string_view(name)) {}
  explicit ScheduleName(std::string_view name);
  const std::string& str() const { return *name_; }
  operator const std::string&() const { return *name_; }
  operator std::string_view() const { return *name_; }
  const char* c_str() const { return name_->c_str(); }
  bool empty() const { return name_->empty(); }
  friend bool operator==(const ScheduleName& a, const ScheduleName& b) {
    return a.name_ == b.name_;
  }
  friend bool operator<(const ScheduleName& a, const ScheduleName& b) { return a.str() < b.str(); }
  friend bool operator==(const ScheduleName& a, std::string_view b) { return *a.name_ == b; }
  friend bool operator==(const ScheduleName& a, const char* b) { return *a.name_ == b; }
  friend bool operator==(const ScheduleName& a, const std::string& b) { return *a.name_ == b; }
  friend std::string operator+(const ScheduleName& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const std::string& a, const ScheduleName& b) { return a + b.str(); }
  friend std::string operator+(const char* a, const ScheduleName& b) { return a + b.str(); }
  friend std::string operator+(const ScheduleName& a, const char* b) { return a.str() + b; }

 private:
  const std::string* name_;  // interned: one per distinct text, never freed
};

// How ranks are numbered, innermost dimension first (Megatron-LM's --order names): data
// parallel outside pipeline parallel (the default), or pipeline parallel inside data parallel.
enum class RankOrder : uint8_t { kTpCpEpDpPp, kTpCpEpPpDp, kTpPpDp };
const char* to_string(RankOrder o);
// The known names, in enum order.
const std::vector<std::string>& rank_order_names();
// nullopt for an unknown name.
std::optional<RankOrder> parse_rank_order(const std::string& name);
// Whether pipeline stages are numbered inside data-parallel replicas ("...-pp-dp").
inline bool pp_inside_dp(RankOrder o) { return o != RankOrder::kTpCpEpDpPp; }
const char* to_string(Recompute r);

// The CUDA context with lazy module loading (CUDA >= 11.7, PyTorch's default since): about
// 300 MB (pytorch/pytorch#107667, REFERENCE.md §2.2).
inline constexpr double kCudaContextBytes = 300e6;

struct Plan {
  int tp = 1, pp = 1, dp = 1, cp = 1;
  int ep = 1;   // expert-parallel size, carved out of dp*cp
  int etp = 1;  // expert tensor-parallel size
  int vpp = 1;  // virtual pipeline stages per pipeline rank
  bool sp = false;
  int zero = 0;  // 0 none, 1 optimizer states (Megatron distributed optimizer), 2 +grads, 3 +params
  Recompute recompute = Recompute::kNone;
  int recompute_layers = 0;  // with full recompute: layers per stage recomputed (0 = all)
  // Activation offloading to host memory: the first N transformer layers of each pipeline chunk
  // copy their saved activations to the host after their forward and back before their
  // backward, on a stream of their own (Megatron-Core --cpu-offloading-num-layers). 0: none.
  int offload_layers = 0;
  int mbs = 1;
  int64_t gbs = 0;         // sequences; 0 = take the workload's global batch
  ScheduleName schedule;   // "1f1b" by default
  bool uneven_pp = false;  // allow layers % (pp*vpp) != 0 (first/last stages take the remainder)
  // Megatron's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split:
  // the embedding (loss) counts as one layer, so (layers + e + l) divides by pp*vpp and the
  // first (last) chunk holds one decoder layer fewer.
  bool account_for_embedding = false, account_for_loss = false;
  // A two-part split (--stage-split K:A, without interleaving): the first K stages hold A decoder
  // layers each, the other pp - K an equal share of the rest (Megatron-Core
  // --pipeline-model-parallel-layout); for device groups of different speeds. 0: none.
  int split_stages = 0, split_layers = 0;
  // The layer split in one number, for caches keyed on it.
  int split_key() const {
    return (uneven_pp ? 1 : 0) | (account_for_embedding ? 2 : 0) | (account_for_loss ? 4 : 0) |
           (split_stages << 3) | (split_layers << 14);
  }
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  // ZeRO-3 / FSDP: one all-gather (and reduce-scatter) per layer's parameters, as FSDP1's
  // FlatParameter per wrapped block, FSDP2's per-module foreach all-gather and Megatron-FSDP's
  // buckets do; or one per parameter tensor, as DeepSpeed stage 3 did in 2021 (a framework
  // profile's zero3.gather, frameworks/*.yaml).
  bool zero3_gather_per_tensor = false;
  // ZeRO-3: gathers prefetched behind the previous layer's compute (FSDP, Megatron-FSDP, later
  // DeepSpeed), or blocking, every gather and reduce-scatter on the critical path (DeepSpeed
  // stage 3 of 2021: comm_stream.synchronize() per fetch).
  bool zero3_prefetch = true;
  bool tp_comm_overlap = false;
  bool ep_comm_overlap = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  bool flash_attention = true;  // false: unfused attention (s x s scores, softmax, dropout)
  // Gradients kept in fp32 (Megatron-LM main_grad: 18 bytes/param with Adam) or in the 16-bit
  // training precision (ZeRO paper / DeepSpeed convention: 16 bytes/param).
  bool main_grads_fp32 = true;
  // Adam's state per parameter, sharded by the distributed optimizer / ZeRO >= 1: fp32 master
  // weights and both moments, 12 bytes (Megatron, DeepSpeed, the ZeRO paper's K = 12); 10 with
  // Apex DistributedFusedAdam's store_param_remainders (NeMo: the BF16 parameter plus a 16-bit
  // remainder stand for the fp32 master). The framework profile's optimizer.state_bytes_per_param.
  double optimizer_state_bytes_per_param = 12;
  // The CUDA context each process holds on its GPU (kCudaContextBytes by default; more where
  // every library kernel is loaded at start-up: the framework profile's
  // runtime.cuda_context_mib). Part of the memory model's runtime buffers.
  double cuda_context_bytes = kCudaContextBytes;
  RankOrder rank_order = RankOrder::kTpCpEpDpPp;

  int world() const { return tp * pp * cp * dp; }
  int num_microbatches() const {
    return gbs > 0 && mbs > 0 && dp > 0 ? static_cast<int>(gbs / (int64_t{mbs} * dp)) : 0;
  }
  // Expert data-parallel size: world / (etp * ep * pp).
  int edp() const { return world() / (etp * ep * pp); }
  std::string describe() const;  // "TP8 PP16 DP8 ..." one line
  // The memory-saving cell of a plan table: "none", "selective", "full", "full(8)" (8 layers
  // per chunk recomputed) or "offload(8)" (8 layers' activations offloaded to the host).
  std::string recompute_cell() const;
};

struct Violation {
  std::string flag;  // the plan flag it concerns, e.g. "--tp"
  std::string reason;
};

// Checks what the hardware must support: the training precision's tensor-core peak.
std::vector<Violation> validate_against_hardware(const HardwareProfile& hw, const Workload& w,
                                                 const Plan& p);

// A heterogeneous cluster's device group that holds pipeline stage `stage`'s ranks, or -1 when
// they span two groups (or the rank order does not keep the stages in contiguous rank blocks);
// 0 for a homogeneous cluster.
int stage_device_group(const Cluster& c, const Plan& p, int stage);
// The GPU memory of stage `stage`'s device group (the cluster's GPU without groups).
double stage_memory_capacity_bytes(const Cluster& c, const Plan& p, int stage);
// The hardware checks on every device group the plan uses, and, with several groups, that every
// pipeline stage lies inside one group (ranks fill the groups in order; pp outermost).
std::vector<Violation> validate_against_cluster(const Cluster& c, const Workload& w, const Plan& p);

// Checks the plan against the model, the GPU count and the workload. Empty = valid.
// Whether `layers` split into pp*vpp pipeline chunks with ceil(layers/chunks) in every middle
// chunk leaves the first and last chunks a share of the rest (the uneven split, uneven_pp): at
// least one layer each without interleaving (Megatron's --decoder-first/last-pipeline-num-layers
// must be > 0, transformer_config.py:2303 @d98e8a6); with virtual stages one layer in all, the
// last chunk then holding no decoder layer but the loss, as a --pipeline-model-parallel-layout
// allows (DeepSeek-V3's performance recipe: 'Et|(tt|)*30mL',
// src/megatron/bridge/perf_recipes/deepseek/h100/deepseek_v3.py:48 @067f987;
// pipeline_parallel_layer_layout.py validate_layer_layout requires no decoder layer per chunk).
bool uneven_split_exists(int layers, int pp, int vpp);
// The uneven split's first and last chunks' layers: the rest after the middle chunks, its larger
// half first (the last chunk holds the output layer and the loss).
struct UnevenEnds {
  int middle = 0, first = 0, last = 0;
};
UnevenEnds uneven_ends(int layers, int chunks);

std::vector<Violation> validate_plan(const ModelSpec& model, int num_gpus, const Workload& w,
                                     const Plan& p);

}  // namespace dtplan

template <>
struct fmt::formatter<dtplan::ScheduleName> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const dtplan::ScheduleName& s, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(s.str(), ctx);
  }
};
