// Inference (rollout) cost model: one decode step and one prefill on a tensor-parallel inference
// group, the KV cache's size and capacity, and the generation of a batch of responses with
// continuous batching (docs/rl.md). The premise, after REFERENCE.md section 8: a decode step
// reads the group's share of the weights and of the live KV cache from HBM and is compute-bound
// only at large batches; the step waits for the longest response.
//
// Contract: pure functions of the model, the hardware profile and the settings; nothing here
// allocates except generate() (its per-replica length lists). Units in the names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hardware.h"
#include "core/model_spec.h"

namespace dtplan {

// A response- (or prompt-) length distribution in tokens: fixed, lognormal with a given mean
// (clipped at `max_tokens`: responses that would run longer are cut there, as a generation cap
// does; the location parameter is solved so that the clipped mean is `mean_tokens`), or an
// empirical CDF (points of length and cumulative probability, increasing, ending at 1).
struct LengthDistribution {
  enum class Kind { kFixed, kLognormal, kEmpirical };
  Kind kind = Kind::kFixed;
  double mean_tokens = 0;
  double sigma = 0;                            // lognormal shape (of the log of the length)
  double max_tokens = 0;                       // clip (lognormal, required) or the CDF's last point
  double min_tokens = 1;                       // the shortest response
  double mu = 0;                               // lognormal location, solved by prepare()
  std::vector<std::pair<double, double>> cdf;  // (tokens, cumulative probability)
  // Solves mu (lognormal); call once after setting the fields.
  void prepare();
  // The length at cumulative probability q in (0, 1).
  double quantile(double q) const;
  // The mean of the distribution as it is (clipped).
  double mean() const;
};

// The inference engine's settings for one rollout replica.
struct InferenceLayout {
  int tp = 1;  // tensor-parallel GPUs of a replica
  // Pipeline stages of a replica (its GPUs: tp x pp). The batch is split into pp micro-batches
  // in flight (vLLM's virtual engines), so a step per token reads each GPU's weights pp times:
  // no faster than TP alone, with pp times the KV room. Expert parallelism is priced as TP
  // (the same bytes per GPU; its all-to-all's latency taken as the all-reduce's).
  int pp = 1;
  int gpus() const { return tp * pp; }
  Precision weights = Precision::kBf16;
  Precision kv = Precision::kBf16;
  double gpu_memory_utilization = 0.9;  // share of HBM the engine may take (vLLM's flag)
  int max_num_seqs = 256;               // concurrency cap per replica (vLLM's flag)
  // Bytes per GPU already taken by something else (colocated training state).
  double resident_bytes_per_gpu = 0;
  // Workspace the engine keeps for activations and CUDA graphs, per GPU.
  double workspace_bytes_per_gpu = 2.0 * (1ull << 30);
  // Speculative decoding: tokens accepted per step (1 = off) and the draft's cost per step as a
  // fraction of a target step.
  double spec_accept_tokens = 1;
  double spec_draft_overhead = 0;
  bool prefix_caching = true;  // the samples of one prompt share its prefill
  bool cuda_graphs = true;     // false: eager decode steps (vLLM enforce_eager)
};

// sum_{j=0}^{k-1} max(A + a j, B + b j) for a whole k >= 0, exactly (two lines cross at most
// once): the time of k decode steps whose memory and compute terms grow linearly.
double sum_max_linear(double A, double a, double B, double b, double k);

// n lengths at the stratified quantiles (i + 0.5) / n, rounded, at least 1; sorted.
std::vector<double> sample_lengths(const LengthDistribution& d, int64_t n);

// KV-cache bytes per token of the whole model (all GPUs of a replica together):
// 2 * layers * kv_heads * head_dim * bytes (REFERENCE.md 8), or MLA's compressed latent,
// layers * (kv_lora_rank + qk_rope_head_dim) * bytes.
double kv_bytes_per_token(const ModelSpec& m, Precision kv);
// The same, held by one GPU of a tp-way replica: KV heads split across TP (at least one head per
// GPU: with fewer KV heads than GPUs they are replicated); MLA's latent is replicated.
double kv_bytes_per_token_per_gpu(const ModelSpec& m, const InferenceLayout& l);
// Weight bytes one GPU of the replica holds.
double inference_weight_bytes_per_gpu(const ModelSpec& m, const InferenceLayout& l);
// KV-cache tokens one replica can hold: (util * HBM - weights - workspace - resident) / KV bytes
// per token per GPU; <= 0 when the weights do not fit.
double kv_capacity_tokens(const ModelSpec& m, const HardwareProfile& hw, const InferenceLayout& l);

// One decode step of `batch` sequences holding `context_tokens` cached tokens in all.
struct DecodeStep {
  double memory_s = 0;   // weights + KV read at the decode bandwidth
  double compute_s = 0;  // 2 x active parameters x batch + attention FLOPs, at decode efficiency
  double comm_s = 0;     // 2 TP all-reduces per layer (custom in a node, NCCL across nodes)
  double overhead_s = 0;
  double time_s = 0;  // max(memory, compute) + comm + overhead
  bool memory_bound() const { return memory_s >= compute_s; }
};
DecodeStep decode_step(const ModelSpec& m, const HardwareProfile& hw, const InferenceParams& ip,
                       const InferenceLayout& l, double batch, double context_tokens);
// Prefill of `tokens` prompt tokens in sequences of `seq_tokens` (attention is causal within each).
double prefill_time_s(const ModelSpec& m, const HardwareProfile& hw, const InferenceParams& ip,
                      const InferenceLayout& l, double tokens, double seq_tokens);

// The generation of one batch: `responses` responses of `prompt` tokens each (their lengths
// drawn from `response` at stratified quantiles, spread round-robin over the replicas), on
// `replicas` replicas that start together; continuous batching admits a sequence when a slot
// (max_num_seqs) and KV room are free (each admitted sequence reserves its prompt plus the mean
// response, so that the cache does not overflow on average; vLLM preempts instead). With prefix
// caching, the `samples_per_prompt` samples of one prompt share its prefill (they go to one
// replica). `streaming_inflight`: the responses that may be in flight at once in the streaming
// steady state, all replicas together (0: `responses`).
struct GenerationResult {
  double time_s = 0;          // the slowest replica's
  double prefill_s = 0;       // of that replica
  double decode_s = 0;        // of that replica
  double tail_s = 0;          // of that replica: time with fewer than half its peak batch running
  double tokens = 0;          // response tokens, all replicas
  double longest_tokens = 0;  // the longest response
  double peak_batch = 0;      // the slowest replica's largest running batch
  double kv_capacity_tokens = 0;
  bool kv_limited = false;   // admissions waited for KV room
  bool memory_bound = true;  // the slowest replica's decode steps were mostly memory-bound
  // Steady state of one replica kept busy (fully asynchronous rollout): its batch, its rate in
  // response tokens/s, and a response's mean time from admission to its last token.
  double streaming_batch = 0;
  double streaming_tokens_per_s_per_replica = 0;
  double streaming_latency_s = 0;
  // One decode step of that steady state, streaming_batch sequences holding
  // streaming_context_tokens of KV cache together (for the report).
  DecodeStep first_step;
  double streaming_context_tokens = 0;
  bool fits = true;  // the longest sequence fits a replica's KV cache
  std::string why;   // when it does not
};
GenerationResult generate(const ModelSpec& m, const HardwareProfile& hw, const InferenceParams& ip,
                          const InferenceLayout& l, int replicas, int64_t responses,
                          int samples_per_prompt, double prompt_tokens,
                          const LengthDistribution& response, double streaming_inflight = 0);

}  // namespace dtplan
