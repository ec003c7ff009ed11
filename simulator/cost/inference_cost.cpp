#include "simulator/cost/inference_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

#include "simulator/cost/collective_cost.h"

namespace dtplan {

namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }

// Phi^-1(q) by Newton's method from the logistic approximation (|error| < 1e-12 in 6-10 steps).
double normal_quantile(double q) {
  q = std::clamp(q, 1e-15, 1.0 - 1e-15);
  double x = std::log(q / (1.0 - q)) / 1.702;
  for (int i = 0; i < 40; ++i) {
    const double pdf = normal_pdf(x);
    if (pdf < 1e-300) break;
    const double step = (normal_cdf(x) - q) / pdf;
    x -= std::clamp(step, -2.0, 2.0);
    if (std::abs(step) < 1e-12) break;
  }
  return x;
}

// E[min(X, cap)] for X lognormal(mu, sigma).
double clipped_lognormal_mean(double mu, double sigma, double cap) {
  if (sigma <= 0) return std::min(std::exp(mu), cap);
  const double lc = std::log(cap);
  return std::exp(mu + 0.5 * sigma * sigma) * normal_cdf((lc - mu - sigma * sigma) / sigma) +
         cap * (1.0 - normal_cdf((lc - mu) / sigma));
}

double weight_bytes(Precision p) { return bytes_per_element(p); }

// Weight bytes of the whole model one decode step reads when `tokens` tokens are in flight: all
// dense parameters but the input embedding (its rows are gathered, not streamed), and for MoE
// layers the experts the tokens touch, E (1 - (1 - k/E)^tokens) of E per layer (each token picks
// k of E uniformly: the balanced router's expectation).
double weights_read_bytes(const ModelSpec& m, const ParamCounts& pc, Precision p, double tokens) {
  double params = static_cast<double>(pc.total());
  if (!m.tied_embeddings) params -= static_cast<double>(pc.embedding);
  if (m.moe && m.moe->experts > 0 && pc.routed_experts > 0) {
    const double e = m.moe->experts, k = std::min<double>(m.moe->topk, e);
    const double touched = e * (1.0 - std::pow(1.0 - k / e, std::max(tokens, 1.0)));
    params -= static_cast<double>(pc.routed_experts) * (1.0 - touched / e);
  }
  return params * weight_bytes(p);
}

}  // namespace

double sum_max_linear(double A, double a, double B, double b, double k) {
  if (k <= 0) return 0;
  auto arith = [](double c0, double slope, double j0, double j1) {  // sum over j in [j0, j1)
    const double n = j1 - j0;
    return n <= 0 ? 0.0 : n * c0 + slope * (j0 + j1 - 1) * n / 2;
  };
  const double d0 = A - B, dslope = a - b;
  // first line above the second where d0 + dslope * j >= 0
  if (dslope == 0) return d0 >= 0 ? arith(A, a, 0, k) : arith(B, b, 0, k);
  double jc = std::ceil(-d0 / dslope);  // first j at which the sign of (d0 + dslope j) flips
  jc = std::clamp(jc, 0.0, k);
  if (dslope > 0) return arith(B, b, 0, jc) + arith(A, a, jc, k);  // second, then first
  return arith(A, a, 0, jc) + arith(B, b, jc, k);                  // first, then second
}

void LengthDistribution::prepare() {
  if (kind != Kind::kLognormal) return;
  // mean of the clipped lognormal grows with mu: bisect on mu.
  double lo = std::log(std::max(min_tokens, 1.0)) - 10 * sigma - 10,
         hi = std::log(max_tokens) + 10 * sigma + 10;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (clipped_lognormal_mean(mid, sigma, max_tokens) < mean_tokens)
      lo = mid;
    else
      hi = mid;
  }
  mu = 0.5 * (lo + hi);
}

double LengthDistribution::quantile(double q) const {
  switch (kind) {
    case Kind::kFixed:
      return mean_tokens;
    case Kind::kLognormal:
      return std::clamp(std::exp(mu + sigma * normal_quantile(q)), min_tokens, max_tokens);
    case Kind::kEmpirical: {
      if (cdf.empty()) return mean_tokens;
      if (q <= cdf.front().second) return cdf.front().first;
      for (size_t i = 1; i < cdf.size(); ++i) {
        if (q <= cdf[i].second) {
          const auto& [t0, p0] = cdf[i - 1];
          const auto& [t1, p1] = cdf[i];
          return p1 > p0 ? t0 + (t1 - t0) * (q - p0) / (p1 - p0) : t1;
        }
      }
      return cdf.back().first;
    }
  }
  return mean_tokens;
}

double LengthDistribution::mean() const {
  switch (kind) {
    case Kind::kFixed:
      return mean_tokens;
    case Kind::kLognormal:
      return clipped_lognormal_mean(mu, sigma, max_tokens);
    case Kind::kEmpirical: {
      if (cdf.empty()) return mean_tokens;
      double s = cdf.front().first * cdf.front().second;  // mass at the first point
      for (size_t i = 1; i < cdf.size(); ++i)
        s += 0.5 * (cdf[i - 1].first + cdf[i].first) * (cdf[i].second - cdf[i - 1].second);
      return s;
    }
  }
  return mean_tokens;
}

std::vector<double> sample_lengths(const LengthDistribution& d, int64_t n) {
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = std::max(
        1.0, std::round(d.quantile((static_cast<double>(i) + 0.5) / static_cast<double>(n))));
  return out;
}

double kv_bytes_per_token(const ModelSpec& m, Precision kv) {
  const double b = bytes_per_element(kv);
  if (m.mla) return m.layers * double(m.mla->kv_lora_rank + m.mla->qk_rope_head_dim) * b;
  return 2.0 * m.layers * m.kv_heads * double(m.head_dim) * b;
}

double kv_bytes_per_token_per_gpu(const ModelSpec& m, const InferenceLayout& l) {
  const double b = bytes_per_element(l.kv);
  const double layers = double(m.layers) / std::max(l.pp, 1);  // a stage's share
  if (m.mla) return layers * double(m.mla->kv_lora_rank + m.mla->qk_rope_head_dim) * b;
  const int heads_per_gpu = std::max(1, (m.kv_heads + l.tp - 1) / l.tp);
  return 2.0 * layers * heads_per_gpu * double(m.head_dim) * b;
}

double inference_weight_bytes_per_gpu(const ModelSpec& m, const InferenceLayout& l) {
  return static_cast<double>(count_params(m).total()) * weight_bytes(l.weights) / l.gpus();
}

double kv_capacity_tokens(const ModelSpec& m, const HardwareProfile& hw, const InferenceLayout& l) {
  const double hbm = hw.gpu.memory_gib * double(1ull << 30);
  const double free_bytes = l.gpu_memory_utilization * hbm - inference_weight_bytes_per_gpu(m, l) -
                            l.workspace_bytes_per_gpu - l.resident_bytes_per_gpu;
  return free_bytes / kv_bytes_per_token_per_gpu(m, l);
}

namespace {

// The pieces of a decode step's time as lines in the context: memory = mem0 + mem1 * C,
// compute = cmp0 + cmp1 * C, plus a constant; for one batch size.
struct StepLines {
  double mem0 = 0, mem1 = 0, cmp0 = 0, cmp1 = 0, fixed = 0, comm = 0, overhead = 0;
};

StepLines step_lines(const ModelSpec& m, const ParamCounts& pc, const HardwareProfile& hw,
                     const InferenceParams& ip, const InferenceLayout& l, double batch) {
  StepLines s;
  const double bw = hw.gpu.hbm_gbps * 1e9 * ip.decode_bw_fraction;
  const double tokens = batch * l.spec_accept_tokens;
  // One step of the whole batch: pp micro-batches pass each stage, which reads its weights
  // (a pp-th) once per micro-batch and its layers' KV of the micro-batch's sequences.
  const double pp = std::max(l.pp, 1);
  s.mem0 = weights_read_bytes(m, pc, l.weights, tokens / pp) / l.tp / bw;
  s.mem1 = kv_bytes_per_token_per_gpu(m, l) / bw;
  const Precision p = l.weights == Precision::kFp8 ? Precision::kFp8 : Precision::kBf16;
  const double peak = hw.gpu.peak_flops(p) * ip.decode_compute_fraction;
  const double active = static_cast<double>(pc.active());
  s.cmp0 = 2.0 * active * tokens / l.gpus() / peak;
  // Attention: QK^T and PV, 2 FLOPs each per cached token, query width and layer.
  s.cmp1 = 4.0 * double(m.q_width()) * m.layers * l.spec_accept_tokens / l.gpus() / peak;
  if (l.tp > 1) {
    const int node = std::max(hw.node.gpus_per_node, 1);
    double one = ip.tp_allreduce_us * 1e-6;
    if (l.tp > node) {
      GroupPlacement g;
      g.size = l.tp;
      g.ranks_per_node = node;
      g.nodes = (l.tp + node - 1) / node;
      g.node_gpus_busy = node;
      one = collective_cost(hw, CollectiveOp::kAllReduce, tokens * double(m.hidden) * 2, g).time_s;
    }
    s.comm = 2.0 * m.layers * one;
  }
  if (l.pp > 1) {
    // A token's activations cross pp - 1 stage boundaries (inside a node over NVLink).
    const bool inside = l.gpus() <= std::max(hw.node.gpus_per_node, 1);
    s.comm += (l.pp - 1) * (inside ? hw.node.latency_us : hw.scale_out.latency_us) * 1e-6;
  }
  const double per_layer =
      ip.layer_overhead_us + (l.cuda_graphs ? 0.0 : ip.eager_layer_overhead_us);
  s.overhead = (ip.step_overhead_us + m.layers * per_layer) * 1e-6;
  const double draft = 1.0 + l.spec_draft_overhead;
  s.mem0 *= draft;
  s.mem1 *= draft;
  s.cmp0 *= draft;
  s.cmp1 *= draft;
  s.fixed = s.comm + s.overhead;
  return s;
}

}  // namespace

DecodeStep decode_step(const ModelSpec& m, const HardwareProfile& hw, const InferenceParams& ip,
                       const InferenceLayout& l, double batch, double context_tokens) {
  const StepLines s = step_lines(m, count_params(m), hw, ip, l, batch);
  DecodeStep d;
  d.memory_s = s.mem0 + s.mem1 * context_tokens;
  d.compute_s = s.cmp0 + s.cmp1 * context_tokens;
  d.comm_s = s.comm;
  d.overhead_s = s.overhead;
  d.time_s = std::max(d.memory_s, d.compute_s) + d.comm_s + d.overhead_s;
  return d;
}

double prefill_time_s(const ModelSpec& m, const HardwareProfile& hw, const InferenceParams& ip,
                      const InferenceLayout& l, double tokens, double seq_tokens) {
  const Precision p = l.weights == Precision::kFp8 ? Precision::kFp8 : Precision::kBf16;
  const double peak = hw.gpu.peak_flops(p) * ip.prefill_compute_fraction * l.gpus();
  const double active = static_cast<double>(count_params(m).active());
  // Causal attention: 2 x 2 x s^2/2 x query width per layer and sequence.
  const double attn = 2.0 * double(m.q_width()) * m.layers * seq_tokens * tokens;
  return (2.0 * active * tokens + attn) / peak;
}

namespace {

struct ReplicaRun {
  double time_s = 0, prefill_s = 0, decode_s = 0, tail_s = 0, peak_batch = 0;
  double memory_bound_s = 0;
  bool kv_limited = false;
  bool fits = true;
};

// One replica's continuous batching, event by event (a sequence ends or starts): between
// events the batch is constant and the context grows by the batch's tokens each step, so the
// steps' times are two lines whose maximum sums exactly (sum_max_linear).
ReplicaRun run_replica(const ModelSpec& m, const ParamCounts& pc, const HardwareProfile& hw,
                       const InferenceParams& ip, const InferenceLayout& l,
                       const std::vector<double>& lengths, double prompt_tokens,
                       double prefill_per_seq_s, double reserve_tokens, double capacity_tokens) {
  ReplicaRun r;
  if (lengths.empty()) return r;
  const double per_step = std::max(l.spec_accept_tokens, 1.0);
  // Active sequences by their end step; context = cached tokens of all active sequences.
  using End = std::pair<double, double>;  // (end step, final context)
  std::priority_queue<End, std::vector<End>, std::greater<End>> active;
  size_t next = 0;
  double step = 0, clock = 0, context = 0, reserved = 0;
  // Lines cached per batch size (the batch changes at most twice per sequence).
  double lines_batch = -1;
  StepLines lines;
  std::vector<std::pair<double, double>> spans;  // (batch, seconds), for the tail
  while (next < lengths.size() || !active.empty()) {
    // Admit while a slot and KV room are free.
    while (next < lengths.size() && active.size() < static_cast<size_t>(l.max_num_seqs)) {
      if (reserved + reserve_tokens > capacity_tokens && !active.empty()) {
        r.kv_limited = true;
        break;
      }
      const double len = lengths[next++];
      const double steps = std::ceil(len / per_step);
      active.emplace(step + steps, prompt_tokens + len);
      context += prompt_tokens;
      reserved += reserve_tokens;
      clock += prefill_per_seq_s;
      r.prefill_s += prefill_per_seq_s;
    }
    const double b = static_cast<double>(active.size());
    r.peak_batch = std::max(r.peak_batch, b);
    const double k = active.top().first - step;
    if (b != lines_batch) {
      lines = step_lines(m, pc, hw, ip, l, b);
      lines_batch = b;
    }
    const double growth = b * per_step;  // context tokens added per step
    const double mem = lines.mem0 + lines.mem1 * context, cmp = lines.cmp0 + lines.cmp1 * context;
    const double t =
        sum_max_linear(mem, lines.mem1 * growth, cmp, lines.cmp1 * growth, k) + k * lines.fixed;
    // Memory-bound share of the span, from its two ends (the lines cross at most once).
    const double mem_end = mem + lines.mem1 * growth * k, cmp_end = cmp + lines.cmp1 * growth * k;
    if (mem >= cmp && mem_end >= cmp_end)
      r.memory_bound_s += t;
    else if (mem >= cmp || mem_end >= cmp_end)
      r.memory_bound_s += t / 2;
    clock += t;
    r.decode_s += t;
    spans.emplace_back(b, t);
    step += k;
    context += growth * k;
    while (!active.empty() && active.top().first <= step) {
      context -= active.top().second;
      reserved -= reserve_tokens;
      active.pop();
    }
    context = std::max(context, 0.0);
  }
  for (const auto& [b, t] : spans)
    if (b < r.peak_batch / 2) r.tail_s += t;
  r.time_s = clock;
  return r;
}

// A fixed permutation of 0..n-1 that spreads the stratified (sorted) lengths over the
// admission order, so that no replica admits its longest responses last.
std::vector<size_t> spread_order(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = n; i > 1; --i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::swap(order[i - 1], order[x % i]);
  }
  return order;
}

}  // namespace

GenerationResult generate(const ModelSpec& m, const HardwareProfile& hw, const InferenceParams& ip,
                          const InferenceLayout& l, int replicas, int64_t responses,
                          int samples_per_prompt, double prompt_tokens,
                          const LengthDistribution& response, double streaming_inflight) {
  GenerationResult g;
  replicas = std::max(replicas, 1);
  const ParamCounts pc = count_params(m);
  g.kv_capacity_tokens = kv_capacity_tokens(m, hw, l);
  const double mean_len = response.mean();
  const double reserve = prompt_tokens + mean_len;
  const std::vector<double> lengths = sample_lengths(response, responses);
  g.longest_tokens = lengths.empty() ? 0 : lengths.back();
  // vLLM refuses to start when its KV cache cannot hold one sequence of the longest length.
  if (g.kv_capacity_tokens < prompt_tokens + g.longest_tokens) {
    g.fits = false;
    g.why = g.kv_capacity_tokens <= 0
                ? fmt::format("the weights ({:.1f} GiB per GPU) leave no KV-cache room",
                              inference_weight_bytes_per_gpu(m, l) / (1ull << 30))
                : fmt::format(
                      "the longest sequence ({:.0f} prompt + {:.0f} response tokens) "
                      "exceeds a replica's KV cache ({:.0f} tokens)",
                      prompt_tokens, g.longest_tokens, g.kv_capacity_tokens);
    return g;
  }
  const std::vector<size_t> order = spread_order(lengths.size());
  const int group = l.prefix_caching ? std::max(samples_per_prompt, 1) : 1;
  const double prefill_per_seq = prefill_time_s(m, hw, ip, l, prompt_tokens / group, prompt_tokens);
  // The samples of one prompt go to one replica (so that they share its prefill), prompts
  // round-robin over the replicas.
  std::vector<std::vector<double>> per(static_cast<size_t>(replicas));
  for (size_t i = 0; i < order.size(); ++i) {
    per[(i / static_cast<size_t>(group)) % per.size()].push_back(lengths[order[i]]);
    g.tokens += lengths[order[i]];
  }
  ReplicaRun worst;
  double worst_mb = 0;
  for (const auto& lens : per) {
    if (lens.empty()) continue;
    const ReplicaRun r = run_replica(m, pc, hw, ip, l, lens, prompt_tokens, prefill_per_seq,
                                     reserve, g.kv_capacity_tokens);
    g.kv_limited = g.kv_limited || r.kv_limited;
    if (r.time_s > worst.time_s) {
      worst = r;
      worst_mb = r.memory_bound_s;
    }
  }
  g.time_s = worst.time_s;
  g.prefill_s = worst.prefill_s;
  g.decode_s = worst.decode_s;
  g.tail_s = worst.tail_s;
  g.peak_batch = worst.peak_batch;
  g.memory_bound = worst_mb >= 0.5 * worst.decode_s;
  // Steady state of a replica kept busy: each running sequence holds the prompt plus
  // E[L^2] / (2 E[L]) response tokens on average (a sequence occupies its slot in proportion to
  // its length); the batch is what the slots, the KV room at that occupancy and the responses
  // in flight (spread over the replicas) allow.
  double e2 = 0;
  for (double x : lengths) e2 += x * x;
  e2 /= std::max<size_t>(lengths.size(), 1);
  const double occupancy_ctx = prompt_tokens + (mean_len > 0 ? e2 / (2 * mean_len) : 0);
  const double inflight = streaming_inflight > 0 ? streaming_inflight : double(responses);
  const double slots =
      std::max(1.0, std::min({double(l.max_num_seqs),
                              std::floor(g.kv_capacity_tokens / std::max(occupancy_ctx, 1.0)),
                              std::ceil(inflight / replicas)}));
  g.streaming_batch = slots;
  g.streaming_context_tokens = slots * occupancy_ctx;
  g.first_step = decode_step(m, hw, ip, l, slots, g.streaming_context_tokens);
  const double per_step = std::max(l.spec_accept_tokens, 1.0);
  const double s_per_token =
      g.first_step.time_s / (slots * per_step) + (mean_len > 0 ? prefill_per_seq / mean_len : 0);
  g.streaming_tokens_per_s_per_replica = 1.0 / s_per_token;
  g.streaming_latency_s = mean_len / per_step * g.first_step.time_s + prefill_per_seq;
  return g;
}

}  // namespace dtplan
