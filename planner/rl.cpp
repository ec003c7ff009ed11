#include "planner/rl.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "planner/i_evaluator.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/flops.h"

namespace dtplan::rl {

const std::vector<std::string>& architecture_names() {
  static const std::vector<std::string> names = {"colocated", "disaggregated", "one-step-off",
                                                 "fully-async"};
  return names;
}
const char* to_string(Architecture a) {
  return architecture_names()[static_cast<size_t>(a)].c_str();
}
const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kGrpo:
      return "grpo";
    case Algorithm::kPpo:
      return "ppo";
    case Algorithm::kDapo:
      return "dapo";
  }
  return "grpo";
}
std::string rollout_layout(const RlResult& r) {
  return r.rollout_pp > 1 ? fmt::format("TP{} PP{}", r.rollout_tp, r.rollout_pp)
                          : fmt::format("TP{}", r.rollout_tp);
}

const char* to_string(SyncMethod s) {
  return s == SyncMethod::kNcclBroadcast ? "nccl-broadcast" : "bucketed-rdma";
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

bool separate_pools(Architecture a) { return a != Architecture::kColocated; }

// The best training layout for `gpus` GPUs of one model, on sequences of `seq` tokens and
// mini-batches of `samples`, from the layout search (one per GPU count and model).
struct TrainingFit {
  bool found = false;
  Plan plan;
  Estimate estimate;
  std::string why;
};

class TrainingSearches {
 public:
  TrainingSearches(const RlConfig& c, int threads) : c_(c), threads_(threads) {}
  // The rollout of one configuration, once per replica count, TP and memory share (pools of
  // every architecture meet the same ones).
  const GenerationResult& generation(const InferenceLayout& il, int replicas) {
    const auto key = std::make_tuple(replicas, il.tp, il.pp, il.gpu_memory_utilization);
    auto it = generations_.find(key);
    if (it != generations_.end()) return it->second;
    const int64_t n = c_.prompts_per_step * c_.samples_per_prompt;
    // Streaming: the responses of the step being trained on and of the queue_steps ahead.
    const double inflight = double(c_.queue_steps + 1) * double(n);
    return generations_
        .emplace(key,
                 generate(c_.policy, c_.cluster.profile, c_.cluster.profile.inference, il, replicas,
                          n, c_.samples_per_prompt, c_.prompt_tokens, c_.response, inflight))
        .first->second;
  }
  // The fastest layout at the mean sample whose memory also holds the longest sample alone in
  // a micro-batch (a packed micro-batch holds at least it): the search ranks at the mean, the
  // plans are then checked at `seq_long` in rank order. Colocated, `resident_cap` (bytes, 0:
  // none) bounds what the trainer keeps on the GPU while the rollout runs: its weights, and its
  // gradients and optimizer states unless they are offloaded.
  const TrainingFit& get(const ModelSpec& m, int gpus, int64_t seq, int64_t samples,
                         double longest_tokens, double resident_cap = 0) {
    const auto key = std::make_tuple(m.name, gpus, seq, samples, resident_cap);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    TrainingFit f;
    Cluster cl = c_.cluster;
    cl.num_gpus = gpus;
    Workload w;
    w.seq_len = seq;
    w.global_batch = samples;
    w.precision = c_.precision;
    SearchOptions opt;
    opt.top_k = 256;
    opt.framework = c_.framework;
    opt.threads = threads_;
    const SearchResult r = search(m, cl, w, c_.space, opt, AnalyticEvaluator());
    const double cap = cl.profile.gpu.memory_gib * kGiB * (1 - opt.memory_margin);
    double smallest_long = 0, smallest_resident = 0;
    std::string smallest_plan, smallest_resident_plan;
    for (const Candidate& cand : r.top) {
      if (resident_cap > 0) {
        const StageMemory& mem = cand.estimate.memory_peak;
        const double resident =
            mem.weights_bytes + (c_.offload ? 0.0 : mem.grads_bytes + mem.optimizer_bytes);
        if (resident > resident_cap) {
          if (smallest_resident == 0 || resident < smallest_resident) {
            smallest_resident = resident;
            smallest_resident_plan = cand.plan.describe();
          }
          continue;
        }
      }
      const int64_t unit = 128 * int64_t{cand.plan.cp};
      const int64_t seq_long =
          static_cast<int64_t>(std::ceil(longest_tokens / double(unit))) * unit;
      if (seq_long > int64_t{cand.plan.mbs} * seq) {
        Workload wl = w;
        wl.seq_len = seq_long;
        Plan p1 = cand.plan;
        p1.mbs = 1;
        const double peak = peak_memory_bytes(m, cl, wl, p1);
        if (peak > cap) {
          if (smallest_long == 0 || peak < smallest_long) {
            smallest_long = peak;
            smallest_plan = cand.plan.describe();
          }
          continue;
        }
      }
      f.found = true;
      f.plan = cand.plan;
      f.estimate = cand.estimate;
      break;
    }
    if (!f.found && !r.top.empty() && smallest_long == 0 && smallest_resident > 0) {
      f.why = fmt::format(
          "the trainer's resident state fits beside the rollout's share of HBM ({:.1f} GiB left) "
          "in none of the {} fastest layouts (the least: {:.1f} GiB per GPU with {}); {}lower "
          "rollout.colocated_gpu_memory_utilization",
          resident_cap / kGiB, r.top.size(), smallest_resident / kGiB, smallest_resident_plan,
          c_.offload ? "" : "offload gradients and optimizer states (training.offload: true) or ");
    } else if (!f.found && !r.top.empty()) {
      f.why = fmt::format(
          "the longest sample ({:.0f} tokens) fits none of the {} fastest layouts at one sample "
          "per micro-batch (the least memory: {:.1f} GiB of {:.1f} with {})",
          longest_tokens, r.top.size(), smallest_long / kGiB, cap / kGiB, smallest_plan);
    } else if (!f.found) {
      long most = -1;
      for (int i = 0; i < kNumRejections; ++i)
        if (r.rejected[static_cast<size_t>(i)] > most &&
            !r.example[static_cast<size_t>(i)].empty()) {
          most = r.rejected[static_cast<size_t>(i)];
          f.why = r.example[static_cast<size_t>(i)];
        }
      if (f.why.empty()) f.why = "no layout of the search space";
    }
    return cache_.emplace(key, std::move(f)).first->second;
  }

 private:
  const RlConfig& c_;
  int threads_;
  std::map<std::tuple<std::string, int, int64_t, int64_t, double>, TrainingFit> cache_;
  std::map<std::tuple<int, int, int, double>, GenerationResult> generations_;
};

// A forward-only pass over one mini-batch on the trainer's layout: a third of the step's
// compute and exposed per-layer communication and bubble (forward FLOPs are a third of forward
// plus backward), without recomputation, gradient reduction or the optimizer.
double forward_only_s(const Estimate& e) {
  double t = e.compute_s + e.bubble_s;
  for (int d = 0; d < 4; ++d) t += e.exposed_comm_s[static_cast<size_t>(d)];  // tp, cp, ep, pp
  return t / 3.0;
}

double nic_gbps_per_gpu(const HardwareProfile& hw) {
  return hw.scale_out.node_gbps() / std::max(hw.node.gpus_per_node, 1) *
         hw.efficiency.network_bw_fraction;
}

std::string fmt_s(double s) { return fmt::format("{:.3g} s", s); }

struct Inputs {
  Architecture arch;
  int rollout_gpus = 0;  // colocated: all
  int rollout_tp = 1;
  int rollout_pp = 1;
};

}  // namespace

double reshard_volume_bytes(double model_bytes, const Plan& training, int rollout_tp,
                            int rollout_pp) {
  // Context parallelism replicates the weights; ZeRO-3 shards them over the data-parallel and
  // context-parallel ranks too.
  const int t_train = training.tp * (training.zero >= 3 ? training.dp * training.cp : 1);
  const double M = model_bytes;
  // Needed: a p_g-th of the layers at a t_g-th each; held (aligned shards): a pp-th at a t-th.
  const double needed = M / (double(rollout_tp) * rollout_pp);
  const double held =
      M / (double(std::max(training.pp, rollout_pp)) * std::max(t_train, rollout_tp));
  return std::max(0.0, needed - held);
}

WeightSync weight_sync(const RlConfig& c, bool separate, const Plan& tp, int training_gpus,
                       const InferenceLayout& il) {
  WeightSync w;
  const HardwareProfile& hw = c.cluster.profile;
  const double M =
      static_cast<double>(count_params(c.policy).total()) * bytes_per_element(il.weights);
  w.bytes = M;
  const double buckets = std::ceil(M / c.sync_bucket_bytes);
  const double alpha_s = (hw.scale_out.latency_us + hw.efficiency.collective_overhead_us) * 1e-6;
  // The replica's intake of new weights, pipelined bucket by bucket with their transport.
  const double load_s = M / (hw.inference.weight_load_gbps * 1e9);
  const double nvlink = hw.node.nvlink_gbps_per_direction * 1e9 * hw.efficiency.nvlink_bw_fraction;
  const double nic = nic_gbps_per_gpu(hw) * 1e9;
  if (!separate) {
    // HybridFlow Table 2 (p_g = 1): each GPU needs M / t_g and holds M / mp of the training
    // copy, volume M / t_g - M / mp when generation is the less sharded. Where generation
    // shards more finely than training's tensor-parallel part (t_g > t), a GPU keeps only the
    // t_g-th of its own stage's layers: M / t_g - M / (pp x t_g).
    const int t_train = tp.tp * (tp.zero >= 3 ? tp.dp * tp.cp : 1);
    const int mp = t_train * tp.pp;
    const double volume = reshard_volume_bytes(M, tp, il.tp, il.pp);
    const int span = tp.pp > 1 ? training_gpus : tp.tp * tp.cp * (tp.zero >= 3 ? tp.dp : 1);
    const bool inside_node = span <= hw.node.placement_domain_gpus();
    const double bw = inside_node ? nvlink : nic;
    w.time_s = std::max(volume / bw, load_s) + buckets * alpha_s;
    w.how = fmt::format("reshard: {:.1f} GiB per GPU gathered over {} (training mp {} -> TP{})",
                        volume / kGiB, inside_node ? "NVLink" : "the scale-out network", mp, il.tp);
    w.derivations.push_back(
        {"reshard volume per GPU",
         "M/t_g - M/(pp x max(t, t_g)) (HybridFlow Table 2 with p_g = 1: M/t_g - M/mp)",
         fmt::format("{:.2f} GiB/{} - {:.2f} GiB/({} x {}) = {:.2f} GiB (training mp {})", M / kGiB,
                     il.tp, M / kGiB, tp.pp, std::max(t_train, il.tp), volume / kGiB, mp)});
    w.derivations.push_back(
        {"reshard time", "max(volume / link, M / engine load rate) + buckets x alpha",
         fmt::format("max({}, {}) + {:.0f} x {:.0f} us = {}", fmt_s(volume / bw), fmt_s(load_s),
                     buckets, alpha_s * 1e6, fmt_s(w.time_s))});
    w.rollout_side_s = w.training_side_s = w.time_s;
  } else if (c.sync_method == SyncMethod::kNcclBroadcast) {
    // One trainer rank sends every byte through its NIC; the gather to it is pipelined with it.
    const double gather = M * (1.0 - 1.0 / std::max(tp.tp * tp.pp, 1)) / nvlink;
    w.time_s = std::max({M / nic, gather, load_s}) + buckets * alpha_s;
    w.how = fmt::format(
        "NCCL broadcast from one trainer rank: {:.1f} GiB through one NIC ({:.0f} GB/s "
        "effective)",
        M / kGiB, nic / 1e9);
    w.derivations.push_back(
        {"weight sync",
         "max(M / NIC, gather to the sender, M / engine load rate) + buckets x alpha",
         fmt::format("max({}, {}, {}) + {:.0f} x {:.0f} us = {}", fmt_s(M / nic), fmt_s(gather),
                     fmt_s(load_s), buckets, alpha_s * 1e6, fmt_s(w.time_s))});
    w.rollout_side_s = w.training_side_s = w.time_s;
  } else {
    // Every trainer GPU sends its shard; every rollout GPU receives its TP shard.
    const double egress = M / (training_gpus * nic);
    const double ingress = (M / il.gpus()) / nic;
    w.time_s = std::max({egress, ingress, load_s}) + buckets * alpha_s;
    w.how = fmt::format(
        "bucketed RDMA: egress {} over {} trainer NICs, ingress {} per rollout GPU, engine "
        "load {}",
        fmt_s(egress), training_gpus, fmt_s(ingress), fmt_s(load_s));
    w.derivations.push_back(
        {"weight sync",
         "max(M / (trainer GPUs x NIC), (M / t_g) / NIC, M / engine load rate) + buckets x alpha",
         fmt::format("max({}, {}, {}) + {:.0f} x {:.0f} us = {}", fmt_s(egress), fmt_s(ingress),
                     fmt_s(load_s), buckets, alpha_s * 1e6, fmt_s(w.time_s))});
    w.training_side_s = egress;
    w.rollout_side_s = w.time_s;
  }
  return w;
}

namespace {

// On failure sets *why, and *no_training_layout when it is a training model that has no layout
// on the training GPUs.
RlResult evaluate_one(const RlConfig& c, const Inputs& in, TrainingSearches& searches,
                      std::string* why, bool* no_training_layout) {
  RlResult r;
  r.architecture = in.arch;
  const HardwareProfile& hw = c.cluster.profile;
  const int G = c.cluster.num_gpus;
  const bool separate = separate_pools(in.arch);
  r.rollout_gpus = separate ? in.rollout_gpus : G;
  r.training_gpus = separate ? G - in.rollout_gpus : G;
  r.rollout_tp = in.rollout_tp;
  r.rollout_pp = in.rollout_pp;
  r.rollout_replicas = r.rollout_gpus / (in.rollout_tp * in.rollout_pp);
  if (r.training_gpus <= 0 || r.rollout_replicas <= 0) {
    *why = "no GPUs left for one of the pools";
    return r;
  }
  const int64_t N = c.prompts_per_step * c.samples_per_prompt;
  const double mean_len = c.response.mean();
  const double seq_tokens = c.prompt_tokens + mean_len;
  // The trainer's sequences: prompt + mean response, rounded up to 128 tokens (the layout's
  // divisibility); its times are scaled back by the ratio. The mean comes out of floating-point
  // arithmetic (a lognormal's exp(mu + sigma^2/2)): a whole multiple of 128 may arrive as
  // 9216.000000000015, which must not round up to the next 128 (a trial found 9344).
  const int64_t seq =
      std::max<int64_t>(128, static_cast<int64_t>(std::ceil(seq_tokens / 128.0 - 1e-9)) * 128);
  const double seq_scale = seq_tokens / static_cast<double>(seq);
  const int64_t mini = c.mini_batch_samples > 0 ? c.mini_batch_samples : N;
  const int n_mini = static_cast<int>((N + mini - 1) / mini);
  r.optimizer_steps = n_mini * c.epochs;
  r.training_seq_tokens = seq_tokens;

  // Training first (colocated: its resident state takes HBM from the rollout's KV cache).
  const double longest = c.prompt_tokens + std::round(c.response.quantile(1.0 - 0.5 / double(N)));
  // Colocated, the trainer keeps its state beside the rollout's share of HBM: the fastest layout
  // whose resident state fits there.
  const double colocated_room =
      separate ? 0.0 : (1.0 - c.colocated_gpu_memory_utilization) * hw.gpu.memory_gib * kGiB;
  const TrainingFit& tf =
      searches.get(c.policy, r.training_gpus, seq, mini, longest, colocated_room);
  if (!tf.found) {
    *why = fmt::format("policy training on {} GPUs: {}", r.training_gpus, tf.why);
    *no_training_layout = true;
    return r;
  }
  r.training_plan = tf.plan;
  r.training_estimate = tf.estimate;
  const Estimate& te = tf.estimate;
  const double t_update = r.optimizer_steps * te.step_time_s * seq_scale;
  const double t_fwd = forward_only_s(te) * seq_scale * n_mini;
  const int logprob_passes = (c.reference ? 1 : 0) + (c.old_logprob ? 1 : 0);
  const double t_logprob = logprob_passes * t_fwd;

  double t_critic = 0, t_reward = 0;
  if (c.algorithm == Algorithm::kPpo) {
    const ModelSpec& cm = c.critic ? *c.critic : c.policy;
    const TrainingFit& cf = searches.get(cm, r.training_gpus, seq, mini, longest);
    if (!cf.found) {
      *why = fmt::format("critic training on {} GPUs: {}", r.training_gpus, cf.why);
      *no_training_layout = true;
      return r;
    }
    t_critic =
        (forward_only_s(cf.estimate) * n_mini + cf.estimate.step_time_s * r.optimizer_steps) *
        seq_scale;
  }
  if (c.reward_model) {
    const TrainingFit& rf = searches.get(*c.reward_model, r.training_gpus, seq, mini, longest);
    if (!rf.found) {
      *why = fmt::format("reward model on {} GPUs: {}", r.training_gpus, rf.why);
      *no_training_layout = true;
      return r;
    }
    t_reward = forward_only_s(rf.estimate) * n_mini * seq_scale;
  } else {
    t_reward = double(N) * c.reward_s_per_sample / std::max(c.reward_workers, 1);
  }

  // Rollout.
  InferenceLayout il = c.rollout;
  il.tp = in.rollout_tp;
  il.pp = in.rollout_pp;
  double offload_s = 0;
  if (!separate) {
    // The engine takes its share of HBM (vLLM's gpu_memory_utilization is of the whole GPU);
    // the trainer's state stays in the rest during generation, or its gradients and optimizer
    // states go to host memory and back (offload).
    il.gpu_memory_utilization = c.colocated_gpu_memory_utilization;
    const StageMemory& mem = te.memory_peak;
    double resident = mem.weights_bytes;
    if (c.offload)
      offload_s =
          2.0 * (mem.grads_bytes + mem.optimizer_bytes) / (hw.host.concurrent_gbps_per_gpu() * 1e9);
    else
      resident += mem.grads_bytes + mem.optimizer_bytes;
    const double room = (1.0 - il.gpu_memory_utilization) * hw.gpu.memory_gib * kGiB;
    if (resident > room) {
      *why = fmt::format(
          "the trainer's resident state ({:.1f} GiB per GPU with {}) does not fit beside the "
          "rollout's {:.0f}% of HBM ({:.1f} GiB left); {}lower "
          "rollout.colocated_gpu_memory_utilization",
          resident / kGiB, tf.plan.describe(), 100 * il.gpu_memory_utilization, room / kGiB,
          c.offload ? "" : "offload gradients and optimizer states (training.offload: true) or ");
      return r;
    }
    r.trainer_resident_bytes = resident;
  }
  r.generation = searches.generation(il, r.rollout_replicas);
  if (!r.generation.fits) {
    *why = fmt::format("rollout at {}: {}", rollout_layout(r), r.generation.why);
    return r;
  }
  const double t_gen_batch = r.generation.time_s;
  const double t_gen_stream =
      r.generation.tokens / (r.rollout_replicas * r.generation.streaming_tokens_per_s_per_replica);

  // Weight sync.
  const WeightSync ws = weight_sync(c, separate, tf.plan, r.training_gpus, il);
  r.sync_bytes = ws.bytes;
  r.sync_time_s = ws.time_s;
  r.sync_how = ws.how;
  r.derivations.insert(r.derivations.end(), ws.derivations.begin(), ws.derivations.end());
  const double sync_rollout_side = ws.rollout_side_s, sync_training_side = ws.training_side_s;

  // Compose the step. A rule-based reward runs on CPU beside the rollout; a reward model's
  // forward runs on the trainer's GPUs before the log-prob passes.
  const double reward_rollout = c.reward_model ? 0.0 : t_reward;
  const double reward_trainer = c.reward_model ? t_reward : 0.0;
  const double train_side = reward_trainer + t_logprob + t_critic + t_update;
  const double k = in.arch == Architecture::kFullyAsync ? c.sync_interval_steps : 1;
  r.sync_interval_steps = static_cast<int>(k);
  double gen_phase = t_gen_batch;
  switch (in.arch) {
    case Architecture::kColocated:
      r.step_time_s = t_gen_batch + reward_rollout + train_side + r.sync_time_s + offload_s;
      r.sync_exposed_s = r.sync_time_s;
      r.staleness_steps = 0;
      break;
    case Architecture::kDisaggregated:
      r.step_time_s = t_gen_batch + reward_rollout + r.sync_time_s + train_side;
      r.sync_exposed_s = r.sync_time_s;
      r.staleness_steps = 0;
      break;
    case Architecture::kOneStepOff:
      // Generation of step k+1 runs during training of step k; the sync blocks both pools.
      r.step_time_s = std::max(t_gen_batch + reward_rollout, train_side) + r.sync_time_s;
      r.sync_exposed_s = r.sync_time_s;
      r.staleness_steps = 1;
      break;
    case Architecture::kFullyAsync: {
      // Streaming: the rollout keeps its slots busy (no long-tail wait); a sync every k steps
      // pauses the rollout for its ingress and load (with RDMA the trainer's egress overlaps
      // training; an NCCL broadcast blocks both sides).
      gen_phase = t_gen_stream;
      const double both = c.sync_method == SyncMethod::kNcclBroadcast ? r.sync_time_s / k : 0;
      const double rollout_side =
          t_gen_stream + reward_rollout + (both > 0 ? 0 : sync_rollout_side / k);
      const double trainer_side = train_side + (both > 0 ? 0 : sync_training_side / k);
      r.step_time_s = std::max(rollout_side, trainer_side) + both;
      r.sync_exposed_s = r.step_time_s - std::max(t_gen_stream + reward_rollout, train_side);
      // A sample is trained on after the queue's steps, generated over its latency with the
      // weights of its start, which lag (k - 1) / 2 syncs on average.
      r.staleness_steps =
          c.queue_steps + r.generation.streaming_latency_s / r.step_time_s + (k - 1) / 2.0;
      break;
    }
  }
  r.phases_s = {{"generation", gen_phase}, {"reward", t_reward},
                {"logprob", t_logprob},    {"critic", t_critic},
                {"training", t_update},    {"weight_sync", r.sync_time_s / k},
                {"offload", offload_s}};
  const double Rg = r.rollout_gpus, Tg = r.training_gpus;
  if (separate) {
    r.gpu_seconds = {{"generation", gen_phase * Rg},
                     // A rule-based reward runs on CPUs beside the rollout pool, which holds its
                     // GPUs meanwhile (as the colocated count does); a reward model on the trainer.
                     {"reward", reward_trainer * Tg + reward_rollout * Rg},
                     {"logprob", t_logprob * Tg},
                     {"critic", t_critic * Tg},
                     {"training", t_update * Tg},
                     {"weight_sync", r.sync_time_s / k * (Rg + Tg)},
                     {"offload", 0}};
    const double rollout_busy = gen_phase + sync_rollout_side / k;
    const double train_busy = train_side + sync_training_side / k;
    r.idle_share_rollout = std::clamp(1.0 - rollout_busy / r.step_time_s, 0.0, 1.0);
    r.idle_share_training = std::clamp(1.0 - train_busy / r.step_time_s, 0.0, 1.0);
  } else {
    for (const auto& [name, s] : r.phases_s) r.gpu_seconds.emplace_back(name, s * G);
    r.idle_share_rollout = r.idle_share_training = 0;
  }
  r.generation_tokens_per_s = r.generation.tokens / r.step_time_s;
  r.training_tokens_per_s = double(N) * seq_tokens / r.step_time_s;

  // The timeline of two steps in steady state.
  auto add = [&](const char* phase, const char* pool, double s, double e) {
    if (e > s) r.timeline.push_back({phase, pool, s, e});
  };
  for (int step = 0; step < 2; ++step) {
    const double t0 = step * r.step_time_s;
    if (!separate) {
      double t = t0;
      for (const auto& [name, s] : r.phases_s) {
        add(name.c_str(), "all", t, t + s);
        t += s;
      }
    } else if (in.arch == Architecture::kDisaggregated) {
      // Generation, then the trainer on its samples, then the new weights to the rollout.
      add("generation", "rollout", t0, t0 + t_gen_batch);
      add("reward", "rollout", t0 + t_gen_batch, t0 + t_gen_batch + reward_rollout);
      double t = t0 + t_gen_batch + reward_rollout;
      add("reward", "training", t, t + reward_trainer);
      t += reward_trainer;
      add("logprob", "training", t, t + t_logprob);
      t += t_logprob;
      add("critic", "training", t, t + t_critic);
      t += t_critic;
      add("training", "training", t, t + t_update);
      t += t_update;
      add("weight_sync", "rollout", t, t + r.sync_time_s);
      add("weight_sync", "training", t, t + r.sync_time_s);
    } else {
      add("generation", "rollout", t0, t0 + gen_phase);
      add("reward", "rollout", t0 + gen_phase, t0 + gen_phase + reward_rollout);
      double t = t0;
      add("reward", "training", t, t + reward_trainer);
      t += reward_trainer;
      add("logprob", "training", t, t + t_logprob);
      t += t_logprob;
      add("critic", "training", t, t + t_critic);
      t += t_critic;
      add("training", "training", t, t + t_update);
      const double sync_s = in.arch == Architecture::kOneStepOff ? r.sync_time_s : r.sync_exposed_s;
      add("weight_sync", "rollout", t0 + r.step_time_s - sync_s, t0 + r.step_time_s);
      if (in.arch == Architecture::kOneStepOff ||
          (in.arch == Architecture::kFullyAsync && c.sync_method == SyncMethod::kNcclBroadcast))
        add("weight_sync", "training", t0 + r.step_time_s - sync_s, t0 + r.step_time_s);
    }
  }

  // Derivations.
  const GenerationResult& g = r.generation;
  r.derivations.insert(
      r.derivations.begin(),
      {{"responses per step", "prompts x samples",
        fmt::format("{} x {} = {}", c.prompts_per_step, c.samples_per_prompt, N)},
       {"KV cache per token",
        c.policy.mla ? "L x (kv_lora_rank + qk_rope_head_dim) x bytes"
                     : "2 x L x n_kv x d_h x bytes",
        fmt::format("{:.0f} KiB (whole replica), {:.0f} KiB per GPU at {}",
                    kv_bytes_per_token(c.policy, il.kv) / 1024,
                    kv_bytes_per_token_per_gpu(c.policy, il) / 1024, rollout_layout(r))},
       {"KV capacity per replica", "(util x HBM - weights / GPUs - workspace) / KV per GPU",
        fmt::format("{:.0f}k tokens (util {:.2f}, weights {:.1f} GiB per GPU){}",
                    g.kv_capacity_tokens / 1e3, il.gpu_memory_utilization,
                    inference_weight_bytes_per_gpu(c.policy, il) / kGiB,
                    separate ? std::string()
                             : fmt::format("; the trainer keeps {:.1f} GiB per GPU in the rest",
                                           r.trainer_resident_bytes / kGiB))},
       {"decode step, steady state",
        "max(weights/t_g + KV, 2 N_active b / t_g / peak) + comm + overhead, at b sequences "
        "holding C tokens of context (a replica kept busy)",
        fmt::format("b = {:.0f}, C = {:.0f}k: max({:.2f} ms memory, {:.2f} ms compute) + {:.2f} ms "
                    "+ {:.2f} ms = {:.2f} ms ({})",
                    g.streaming_batch, g.streaming_context_tokens / 1e3,
                    g.first_step.memory_s * 1e3, g.first_step.compute_s * 1e3,
                    g.first_step.comm_s * 1e3, g.first_step.overhead_s * 1e3,
                    g.first_step.time_s * 1e3,
                    g.first_step.memory_bound() ? "memory-bound" : "compute-bound")},
       {"generation (synchronous batch)",
        "slowest replica: prefill + sum over decode steps (continuous batching); the longest "
        "response sets it",
        fmt::format(
            "{} ({} prefill, {} decode, {} with under half its peak batch of {:.0f}); longest "
            "response {:.0f} tokens, mean {:.0f}",
            fmt_s(t_gen_batch), fmt_s(g.prefill_s), fmt_s(g.decode_s), fmt_s(g.tail_s),
            g.peak_batch, g.longest_tokens, mean_len)},
       {"generation (streaming)", "response tokens / (replicas x steady-state rate)",
        fmt::format("{:.3g}M / ({} x {:.0f} tok/s) = {}", g.tokens / 1e6, r.rollout_replicas,
                    g.streaming_tokens_per_s_per_replica, fmt_s(t_gen_stream))},
       {"policy update", "optimizer steps x estimated step x (seq tokens / padded seq)",
        fmt::format("{} x {} x {:.3f} = {} ({})", r.optimizer_steps, fmt_s(te.step_time_s),
                    seq_scale, fmt_s(t_update), tf.plan.describe())},
       {"log-prob forwards", "passes x mini-batches x (compute + exposed comm + bubble) / 3",
        fmt::format("{} x {} x {} = {}", logprob_passes, n_mini,
                    fmt_s(forward_only_s(te) * seq_scale), fmt_s(t_logprob))}});
  if (c.algorithm == Algorithm::kDapo)
    r.notes.push_back(
        "DAPO is priced as GRPO: dynamic sampling's extra generation batches "
        "(groups filtered out and regenerated) are not modelled");
  // How sure: what validation against published runs showed (docs/rl.md, "Validation").
  if (c.policy.is_moe())
    r.notes.push_back(
        "MoE rollout: on published verl runs (Qwen3-30B-A3B, DeepSeek-V3 on H20) "
        "dtplan's generation was 1.5-3x faster than measured; expert GEMMs at "
        "decode batch sizes are priced as weight streaming only (docs/rl.md)");
  // The figures are `rl --validate examples/rl/published.yaml`'s (docs/rl.md); tests/e2e/rl.sh
  // fails when that validation and this note disagree.
  r.notes.push_back(
      "validation against published RL runs (docs/rl.md): 4 of 13 figures within 20%: "
      "host-fed weight updates (-6%, -15%) and a colocated dense 7B step on 128 GPUs (+13%, its "
      "generation share -14%); the same recipe on 32 GPUs +72% (its responses shorter than "
      "dtplan assumes); asynchronous speedups, MoE rollouts and trainer-fed weight syncs off by "
      "28-80% (the rollout optimistic, the asynchronous gain pessimistic)");
  if (g.kv_limited)
    r.notes.push_back(
        "admissions waited for KV-cache room: concurrency is set by KV memory, not "
        "max_num_seqs");
  // What the framework's rules say of the training layout chosen (as `dtplan estimate` says
  // them): a layout that stock Megatron-LM cannot run, say, is planned with its warning.
  for (const FrameworkWarning& fw : framework_warnings(c.framework, tf.plan, c.policy))
    r.notes.push_back(fmt::format("training layout {}: warning [{}]: {}", tf.plan.describe(),
                                  fw.code, fw.message));
  if (tf.plan.offload_layers > 0 && tf.plan.recompute != Recompute::kFull)
    r.notes.push_back(fmt::format(
        "training layout {}: activation offload ({} layers) is priced from the profile's host "
        "link; few published runs offload (the estimate's offload-unvalidated warning)",
        tf.plan.describe(), tf.plan.offload_layers));
  if (!separate && offload_s > 0)
    r.notes.push_back(
        fmt::format("offloading gradients and optimizer states to host and back "
                    "costs {} per step",
                    fmt_s(offload_s)));
  (void)t_gen_stream;
  return r;
}

// Rollout replica layouts (tp, pp) for a pool: the configured one, else TP 1, 2, 4, ... up to
// a node where the heads divide, and where the weights leave under half the engine's memory
// share to the KV cache at every one of those, TP across 2 and 4 nodes and PP 2 and 4 over a
// node's TP too (DeepSeek-V3-sized policies).
std::vector<std::pair<int, int>> rollout_layouts(const RlConfig& c, int pool_gpus, bool colocated) {
  std::vector<std::pair<int, int>> out;
  const int node = std::max(c.cluster.profile.node.gpus_per_node, 1);
  auto add = [&](int t, int p) {
    if (t * p <= pool_gpus && pool_gpus % (t * p) == 0 && c.policy.heads % t == 0 &&
        p <= c.policy.layers)
      out.emplace_back(t, p);
  };
  if (c.rollout_tp > 0) {
    add(c.rollout_tp, c.rollout.pp);
    return out;
  }
  bool roomy = false;
  const double share =
      (colocated ? c.colocated_gpu_memory_utilization : c.rollout.gpu_memory_utilization) *
      c.cluster.profile.gpu.memory_gib * kGiB;
  for (int t = 1; t <= node; t *= 2) {
    add(t, c.rollout.pp);
    InferenceLayout il = c.rollout;
    il.tp = t;
    roomy = roomy || inference_weight_bytes_per_gpu(c.policy, il) < share / 2;
  }
  if (!roomy && c.rollout.pp == 1) {
    for (int k : {2, 4}) add(node * k, 1);
    for (int p : {2, 4}) add(node, p);
  }
  return out;
}

// Separate rollout pools: every multiple of the node's GPUs that leaves some to training (of
// a single node or two, every GPU count).
std::vector<int> rollout_pool_choices(const RlConfig& c) {
  std::vector<int> out;
  const int G = c.cluster.num_gpus, node = c.cluster.profile.node.gpus_per_node;
  if (c.rollout_gpus > 0) {
    out.push_back(c.rollout_gpus);
    return out;
  }
  const int step = G >= 4 * node ? node : 1;
  for (int r = step; r < G; r += step) out.push_back(r);
  return out;
}

}  // namespace

RlSearchResult search_rl(const RlConfig& c, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  RlSearchResult out;
  TrainingSearches searches(c, threads);
  std::vector<Architecture> archs;
  if (c.architecture)
    archs.push_back(*c.architecture);
  else
    for (int a = 0; a < kNumArchitectures; ++a) archs.push_back(static_cast<Architecture>(a));
  bool any = false;
  std::map<std::string, int> whys;  // why the candidates failed, with how many did
  bool training_only = true;        // every failure: no training layout on the training GPUs
  for (Architecture a : archs) {
    std::optional<RlResult> best;
    const std::vector<int> pools =
        separate_pools(a) ? rollout_pool_choices(c) : std::vector<int>{c.cluster.num_gpus};
    for (int pool : pools) {
      for (const auto& [tpg, ppg] : rollout_layouts(c, pool, !separate_pools(a))) {
        std::string why;
        bool no_training_layout = false;
        RlResult r =
            evaluate_one(c, Inputs{a, pool, tpg, ppg}, searches, &why, &no_training_layout);
        const bool ok = why.empty();
        out.considered.push_back({a, pool, tpg, ppg, ok ? r.step_time_s : 0, ok, why});
        if (!ok) {
          ++whys[why];
          training_only = training_only && no_training_layout;
          continue;
        }
        if (!best || r.step_time_s < best->step_time_s) best = std::move(r);
      }
    }
    if (best) {
      any = true;
      out.best_per_architecture.push_back(*best);
      if (out.best_per_architecture.size() == 1 || best->step_time_s < out.best.step_time_s)
        out.best = *best;
    }
  }
  if (!any) {
    // The most frequent reasons, most frequent first.
    std::vector<std::pair<int, std::string>> by;
    for (const auto& [w, n] : whys) by.emplace_back(-n, w);
    std::sort(by.begin(), by.end());
    std::string reasons;
    for (size_t i = 0; i < by.size() && i < 3; ++i)
      reasons += fmt::format("{}{} ({} of {} candidates)", i ? "; " : "", by[i].second,
                             -by[i].first, out.considered.size());
    // Where every candidate failed for want of a training layout on its GPUs, the GPU count is
    // what to change: the error points there; otherwise at the architecture, when given.
    const bool at_gpus = !whys.empty() && training_only && c.gpus_at.line > 0;
    const SourceLocation at = at_gpus                      ? c.gpus_at
                              : c.architecture_at.line > 0 ? c.architecture_at
                                                           : c.at;
    throw InputError(
        at,
        at_gpus                      ? "gpus"
        : c.architecture_at.line > 0 ? "architecture"
                                     : "",
        fmt::format("no feasible RL plan on {} GPU{}{}: {}", c.cluster.num_gpus,
                    c.cluster.num_gpus == 1 ? "" : "s",
                    c.architecture ? fmt::format(" ({})", to_string(*c.architecture)) : "",
                    reasons.empty() ? "no pool split or rollout layout to try "
                                      "(GPUs, rollout_gpus and rollout tp x pp)"
                                    : reasons));
  }
  out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

RlResult evaluate_rl(const RlConfig& c, int threads) {
  // The configured architecture; the pool split and rollout TP as given, else searched.
  RlConfig one = c;
  if (!one.architecture) one.architecture = Architecture::kColocated;
  return search_rl(one, threads).best;
}

namespace {

// A case's configuration exactly as given: its architecture, its pools, its rollout TP (the
// smallest that fits where it gives none).
RlResult evaluate_fixed(const RlConfig& c, int threads) { return search_rl(c, threads).best; }

}  // namespace

RlCaseResult evaluate_case(const RlCase& k, int threads) {
  RlCaseResult out;
  try {
    switch (k.quantity) {
      case CaseQuantity::kSyncTime: {
        const RlConfig& c = k.config;
        const bool separate = *c.architecture != Architecture::kColocated;
        Plan p;
        p.tp = c.space.tp.empty() ? 1 : c.space.tp.front();
        p.pp = c.space.pp.empty() ? 1 : c.space.pp.front();
        p.zero = c.space.zero.empty() ? 0 : c.space.zero.front();
        const int training = separate ? c.cluster.num_gpus - c.rollout_gpus : c.cluster.num_gpus;
        p.dp = std::max(1, training / (p.tp * p.pp));
        InferenceLayout il = c.rollout;
        il.tp = c.rollout_tp > 0 ? c.rollout_tp : 1;
        const WeightSync w = weight_sync(c, separate, p, training, il);
        out.value = w.time_s;
        out.detail = w.how;
        break;
      }
      case CaseQuantity::kSpeedup: {
        const RlResult a = evaluate_fixed(k.config, threads);
        const RlResult b = evaluate_fixed(*k.baseline, threads);
        out.value = b.step_time_s / a.step_time_s;
        out.detail = fmt::format("baseline {} {:.1f} s / {} {:.1f} s", to_string(b.architecture),
                                 b.step_time_s, to_string(a.architecture), a.step_time_s);
        break;
      }
      case CaseQuantity::kGeneration: {
        // The rollout alone: its pool (colocated: every GPU at the colocated memory share,
        // the trainer's state offloaded), no training layout needed.
        const RlConfig& c = k.config;
        const bool separate = *c.architecture != Architecture::kColocated;
        InferenceLayout il = c.rollout;
        il.tp = c.rollout_tp > 0 ? c.rollout_tp : 1;
        if (!separate) il.gpu_memory_utilization = c.colocated_gpu_memory_utilization;
        const int pool = separate ? c.rollout_gpus : c.cluster.num_gpus;
        const GenerationResult g =
            generate(c.policy, c.cluster.profile, c.cluster.profile.inference, il, pool / il.gpus(),
                     c.prompts_per_step * c.samples_per_prompt, c.samples_per_prompt,
                     c.prompt_tokens, c.response);
        if (!g.fits) throw InputError(k.at, "config", "the policy does not fit the rollout");
        out.value = g.time_s;
        out.detail = fmt::format(
            "rollout TP{} x {}: prefill {:.1f} s, decode {:.1f} s ({:.1f} s with under half the "
            "peak batch of {:.0f}), longest {:.0f} tokens",
            il.tp, pool / il.gpus(), g.prefill_s, g.decode_s, g.tail_s, g.peak_batch,
            g.longest_tokens);
        break;
      }
      default: {
        const RlResult r = evaluate_fixed(k.config, threads);
        double gen = 0;
        for (const auto& [n, s] : r.phases_s)
          if (n == "generation") gen = s;
        out.value = k.quantity == CaseQuantity::kStepTime ? r.step_time_s : gen / r.step_time_s;
        out.detail = fmt::format(
            "{} step {:.1f} s, generation {:.1f} s, rollout TP{} x {}, "
            "training {}",
            to_string(r.architecture), r.step_time_s, gen, r.rollout_tp, r.rollout_replicas,
            r.training_plan.describe());
      }
    }
    out.predicted = true;
  } catch (const InputError& e) {
    out.why = e.reason();
  }
  return out;
}

}  // namespace dtplan::rl
