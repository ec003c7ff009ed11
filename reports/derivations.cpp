#include "reports/derivations.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "simulator/analytic/estimator.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/dp_cost.h"
#include "simulator/cost/i_collective_algorithm.h"
#include "simulator/cost/memory_model.h"
#include "simulator/cost/reliability.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/step/step_terms.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan::reports {

std::string human_bytes(double b) {
  const double a = std::fabs(b);
  if (a >= 1e12) return fmt::format("{:.2f} TB", b / 1e12);
  if (a >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

namespace {

std::string params_text(double n) {
  if (n >= 1e9) return fmt::format("{:.3f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

std::string secs(double s) { return fmt::format("{:.4g} s", s); }

// One model-state term (weights, gradients or optimizer) of stage `rank`: bytes per parameter,
// sharded over the data-parallel group from ZeRO stage `min_stage` on, times the schedule's
// parameter copies; the same arithmetic as memory_model.cpp's stage_memory.
Derivation state_term(const char* what, double bytes_per_param, int min_stage, const ModelSpec& m,
                      const Plan& p, int rank, double estimator_value) {
  const ParamsOnRank prm = params_on_rank(m, p, rank);
  const IPipelineSchedule* s = plan_schedule(p);
  const int copies = s ? s->parameter_copies() : 1;
  const int d = std::max(1, p.dp * p.cp), de = std::max(1, p.edp());
  Derivation out;
  out.quantity = fmt::format("{} per GPU (pipeline stage {})", what, rank);
  const bool sharded = p.zero >= min_stage;
  const std::string copies_text = copies > 1 ? fmt::format("{} copies x ", copies) : "";
  if (!sharded) {
    out.value = copies * bytes_per_param * prm.total();
    out.formula = fmt::format("{}{:g} B x params on the stage", copies > 1 ? "copies x " : "",
                              bytes_per_param);
    out.substituted =
        fmt::format("{}{:g} B x {} params", copies_text, bytes_per_param, params_text(prm.total()));
  } else if (prm.expert > 0) {
    out.value = copies * (prm.dense * bytes_per_param / d + prm.expert * bytes_per_param / de);
    out.formula =
        fmt::format("{}{:g} B x (dense params / (DP x CP) + expert params / expert-DP)  [ZeRO-{}]",
                    copies > 1 ? "copies x " : "", bytes_per_param, p.zero);
    out.substituted = fmt::format("{}{:g} B x ({} / {} + {} / {})", copies_text, bytes_per_param,
                                  params_text(prm.dense), d, params_text(prm.expert), de);
  } else {
    out.value = copies * prm.dense * bytes_per_param / d;
    out.formula = fmt::format("{}{:g} B x params on the stage / (DP x CP)  [ZeRO-{} shards it]",
                              copies > 1 ? "copies x " : "", bytes_per_param, p.zero);
    out.substituted = fmt::format("{}{:g} B x {} params / {}", copies_text, bytes_per_param,
                                  params_text(prm.dense), d);
  }
  out.result = human_bytes(out.value);
  out.estimator_value = estimator_value;
  return out;
}

}  // namespace

std::vector<Derivation> derive(const ModelSpec& m, const Cluster& c, const Workload& w,
                               const Plan& p, const Estimate& e) {
  std::vector<Derivation> out;
  const HardwareProfile& hw = c.profile;

  // Step time: the breakdown's parts.
  {
    Derivation d;
    d.quantity = "step time";
    // The sum of the breakdown's terms (simulator/step/step_terms.h), in their order.
    d.value = 0;
    for (const StepTermValue& t : step_terms(e)) {
      d.formula += fmt::format("{}{}", d.formula.empty() ? "" : " + ", t.label);
      d.substituted += fmt::format("{}{:.3f}", d.substituted.empty() ? "" : " + ", t.seconds);
      d.value += t.seconds;
    }
    d.substituted += " s";
    d.result = secs(d.value);
    d.estimator_value = e.step_time_s;
    out.push_back(d);
  }
  // Throughput.
  {
    Derivation d;
    d.quantity = "tokens per second";
    d.formula = "global batch x sequence length / step time";
    d.value = static_cast<double>(w.global_batch) * static_cast<double>(w.seq_len) / e.step_time_s;
    d.substituted = fmt::format("{} x {} / {:.4f} s", w.global_batch, w.seq_len, e.step_time_s);
    d.result = fmt::format("{:.0f} tokens/s ({:.0f} per GPU)", d.value, d.value / c.num_gpus);
    d.estimator_value = e.tokens_per_s;
    out.push_back(d);
  }
  {
    Derivation d;
    const double peak = hw.gpu.peak_flops(w.precision);
    d.quantity = "MFU";
    d.formula = "model FLOPs per step / (step time x GPUs x peak FLOP/s)";
    d.value = e.model_flops / (e.step_time_s * c.num_gpus * peak);
    d.substituted = fmt::format("{:.4g} FLOP / ({:.4f} s x {} x {:.0f} TFLOP/s {})", e.model_flops,
                                e.step_time_s, c.num_gpus, peak / 1e12, to_string(w.precision));
    d.result = fmt::format("{:.1f}%", 100 * d.value);
    d.estimator_value = e.mfu;
    out.push_back(d);
  }
  // Memory of the most loaded stage.
  const int rank = e.peak_stage;
  out.push_back(state_term("weights (16-bit)", 2.0, 3, m, p, rank, e.memory_peak.weights_bytes));
  out.push_back(state_term(p.main_grads_fp32 ? "gradients (fp32 main grads)" : "gradients (16-bit)",
                           p.main_grads_fp32 ? 4.0 : 2.0, 2, m, p, rank,
                           e.memory_peak.grads_bytes));
  out.push_back(state_term(
      p.optimizer_state_bytes_per_param == 12 ? "optimizer state (fp32 master, Adam m and v)"
                                              : "optimizer state (Adam, as the framework keeps it)",
      p.optimizer_state_bytes_per_param, 1, m, p, rank, e.memory_peak.optimizer_bytes));
  // Activations of that stage (not for partial full recomputation, whose layer mix is long to
  // spell out): memory_model.cpp's terms from its public pieces.
  if (!(p.recompute == Recompute::kFull && p.recompute_layers > 0)) {
    const IPipelineSchedule* sched = plan_schedule(p);
    const RankLayers l = layers_on_rank(m, p, rank);
    const double inflight =
        sched ? sched->inflight_microbatches(rank, p.pp, p.vpp, p.num_microbatches()) : 1;
    const double tokens = static_cast<double>(p.mbs) * w.seq_len / p.cp;
    const double sp_div = p.sp ? p.tp : 1;
    const double h = static_cast<double>(m.hidden);
    const bool full = p.recompute == Recompute::kFull;
    Plan none = p;
    none.recompute = Recompute::kNone;
    const double dense = full ? tokens * 2.0 * h / sp_div : layer_activation_bytes(m, w, p, false);
    const double moe = m.moe && !full ? layer_activation_bytes(m, w, p, true) : dense;
    // Activation offloading: the offloaded layers keep nothing on the GPU but the one whose
    // copy is in flight (memory_model.cpp, offloaded_layers()).
    const RankLayers off = p.offload_layers > 0 && !full ? offloaded_layers(p, l) : RankLayers{};
    const double in_flight_copy = off.total() > 0 ? (off.moe > 0 ? moe : dense) : 0.0;
    const int kept_dense = l.dense - off.dense, kept_moe = l.moe - off.moe;
    const double per_mb = kept_dense * dense + kept_moe * moe + in_flight_copy;
    double extra = 0;
    std::string extra_text;
    if (full) {
      const double one = std::max(layer_activation_bytes(m, w, none, false),
                                  m.moe ? layer_activation_bytes(m, w, none, true) : 0.0);
      extra += one;
      extra_text += fmt::format(" + one layer recomputed in full {}", human_bytes(one));
    }
    if (rank == 0 && m.hidden_dropout > 0) {
      const double mask = inflight * tokens * h / sp_div;
      extra += mask;
      extra_text += fmt::format(" + embedding dropout masks {}", human_bytes(mask));
    }
    if (rank == p.pp - 1) {
      const double logits =
          tokens * static_cast<double>(m.vocab) / p.tp * (2 + 4) + tokens * 2.0 * h / sp_div;
      // Micro-batches whose logits are alive at once: all of them under GPipe, one otherwise.
      const double alive =
          sched ? sched->loss_inflight_microbatches(p.pp, p.vpp, p.num_microbatches()) : 1.0;
      extra += alive * logits;
      extra_text += alive == 1 ? fmt::format(" + logits and loss scratch {}", human_bytes(logits))
                               : fmt::format(" + logits and loss scratch {:g} x {}", alive,
                                             human_bytes(logits));
    }
    Derivation d;
    d.quantity = fmt::format("activations per GPU (pipeline stage {})", rank);
    d.formula = full ? "in-flight micro-batches x layers x layer input (2 B x tokens x h / SP) + "
                       "one layer's full activations + stage extras"
                     : "in-flight micro-batches (schedule) x layers x bytes per layer and "
                       "micro-batch (Korthikanti et al. 2022 terms) + stage extras";
    d.value = inflight * per_mb + extra;
    const std::string offload_text =
        off.total() > 0 ? fmt::format(" + 1 offloaded layer in flight {} ({} of {} offloaded)",
                                      human_bytes(in_flight_copy), off.total(), l.total())
                        : std::string();
    d.substituted =
        l.moe > 0 && !full
            ? fmt::format("{:g} x ({} dense x {} + {} MoE x {}{}){}", inflight, kept_dense,
                          human_bytes(dense), kept_moe, human_bytes(moe), offload_text, extra_text)
            : fmt::format("{:g} x ({} x {}{}){}", inflight, kept_dense + kept_moe,
                          human_bytes(dense), offload_text, extra_text);
    d.result = human_bytes(d.value);
    d.estimator_value = e.memory_peak.activations_bytes;
    out.push_back(d);
  }
  {
    const StageMemory& sm = e.memory_peak;
    Derivation d;
    d.quantity = fmt::format("memory per GPU (pipeline stage {}, the most loaded)", rank);
    d.formula =
        "weights + gradients + optimizer state + activations (in-flight micro-batches, schedule) "
        "+ buffers (CUDA context, NCCL, gathered ZeRO-3 layers)";
    d.value = sm.weights_bytes + sm.grads_bytes + sm.optimizer_bytes + sm.activations_bytes +
              sm.buffers_bytes;
    d.substituted = fmt::format("{} + {} + {} + {} + {}, of {:.0f} GiB HBM",
                                human_bytes(sm.weights_bytes), human_bytes(sm.grads_bytes),
                                human_bytes(sm.optimizer_bytes), human_bytes(sm.activations_bytes),
                                human_bytes(sm.buffers_bytes), hw.gpu.memory_gib);
    d.result = fmt::format("{} ({:.1f} GiB)", human_bytes(d.value), d.value / units::kGiB);
    d.estimator_value = sm.total_bytes();
    out.push_back(d);
  }

  // Data-parallel communication of the busiest stage, per GPU per step.
  const Placements groups = place_groups(p, hw, c.num_gpus);
  const double grad_bytes = grad_bytes_per_param(p, w.precision);
  const ParamsOnRank busy = params_on_rank(m, p, e.dp_stage);
  // The embedding gradient all-reduced between the first and the loss stage: a tied embedding's,
  // or the copy multi-token prediction keeps on the last stage (as the estimator charges it).
  const bool tied_allreduce =
      p.pp > 1 && (m.tied_embeddings || m.mtp_layers > 0) && loss_rank(p) != 0;
  const double tied_bytes =
      tied_allreduce ? static_cast<double>(m.vocab) * m.hidden / p.tp * grad_bytes : 0;
  const std::string tied_text =
      tied_allreduce ? fmt::format(" + {}-embedding all-reduce {}",
                                   m.tied_embeddings ? "tied" : "MTP", human_bytes(tied_bytes))
                     : "";
  const int n = groups.dp.size;
  if (p.zero < 3 && n > 1) {
    const double nn = n;
    Derivation d;
    d.quantity = fmt::format("data-parallel traffic per GPU per step (stage {})", e.dp_stage);
    const int mb = std::max(1, p.num_microbatches());
    const double ring = (nn - 1) / nn;
    const double dense = busy.dense * grad_bytes;
    double value;
    if (p.zero == 0) {
      d.formula = "all-reduce of the gradients: 2(n-1)/n x params x bytes per gradient";
      value = 2 * ring * dense;
      d.substituted = fmt::format("2 x {}/{} x {} x {:g} B = 2({}-1)/{} x {}", n - 1, n,
                                  params_text(busy.dense), grad_bytes, n, n, human_bytes(dense));
    } else if (p.zero == 1) {
      d.formula =
          "reduce-scatter of the gradients + all-gather of the 16-bit weights: (n-1)/n x params "
          "x (bytes per gradient + 2 B)";
      value = ring * dense + ring * busy.dense * 2.0;
      d.substituted =
          fmt::format("{}/{} x {} x ({:g} B + 2 B)", n - 1, n, params_text(busy.dense), grad_bytes);
    } else {
      d.formula =
          "a reduce-scatter of the gradients per micro-batch (ZeRO-2 keeps only a gradient "
          "shard) + all-gather of the 16-bit weights: (n-1)/n x params x (micro-batches x bytes "
          "per gradient + 2 B)";
      value = mb * ring * dense + ring * busy.dense * 2.0;
      d.substituted = fmt::format("{}/{} x {} x ({} x {:g} B + 2 B)", n - 1, n,
                                  params_text(busy.dense), mb, grad_bytes);
    }
    if (busy.expert > 0 && groups.edp.size > 1) {
      const double ne = groups.edp.size, re = (ne - 1) / ne;
      const double ex = busy.expert * grad_bytes;
      const double reductions = p.zero == 2 ? mb : 1;
      value += p.zero == 0 ? 2 * re * ex : reductions * re * ex + re * busy.expert * 2.0;
      d.substituted += fmt::format(" + experts over expert-DP {}: {} params", groups.edp.size,
                                   params_text(busy.expert));
    }
    d.value = value + tied_bytes;
    d.substituted += tied_text;
    d.result = human_bytes(d.value);
    d.estimator_value = e.comm_volume_bytes[static_cast<int>(CommDim::kDP)];
    out.push_back(d);

    // The time of the main gradient collective as the cost model prices it (which algorithm).
    const CollectiveOp op = p.zero == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
    const CollectiveCost cc = collective_cost(hw, op, dense, groups.dp);
    Derivation t;
    t.quantity = fmt::format("{} of the stage's gradients", to_string(op));
    t.formula = std::string("algorithm '") + cc.algorithm +
                "' (fastest registered, or the profile's pin): latency + S x busbw factor / bus "
                "bandwidth + launch overhead";
    const LinkRates links = link_rates(hw, groups.dp);
    t.substituted = fmt::format(
        "S = {}, n = {} over {} node(s), busbw factor {:.3f}, bus bandwidth {:.1f} GB/s",
        human_bytes(dense), n, groups.dp.nodes, busbw_factor(op, n),
        groups.dp.crosses_nodes() ? links.inter_busbw_gbps : links.intra_busbw_gbps);
    t.value = cc.time_s;
    t.result = secs(cc.time_s);
    t.estimator_value = cc.time_s;  // priced by the same call the estimator makes
    out.push_back(t);
  } else if (p.zero == 3 && (n > 1 || (busy.expert > 0 && groups.edp.size > 1))) {
    const double gathers = zero3_forward_gathers(p);  // a second for recomputation (per tensor)
    const int mb = std::max(1, p.num_microbatches());
    // Dense parameters are sharded over the data-parallel group (n), experts over the
    // expert-data-parallel group (n_e).
    const int ne = busy.expert > 0 ? groups.edp.size : 1;
    auto ring = [](int k) { return k > 1 ? (k - 1.0) / k : 0.0; };
    Derivation d;
    d.quantity = fmt::format("ZeRO-3 traffic per GPU per step (stage {})", e.dp_stage);
    d.formula =
        "micro-batches x ((forward gathers + 1 backward gather) x 2 B + bytes per gradient) x "
        "(dense params x (n-1)/n + expert params x (n_e-1)/n_e)";
    d.value =
        mb * ((gathers + 1) * 2.0 + grad_bytes) * (busy.dense * ring(n) + busy.expert * ring(ne)) +
        tied_bytes;
    d.substituted = fmt::format("{} x (({:g} + 1) x 2 B + {:g} B) x ({} x {}/{} + {} x {}/{}){}",
                                mb, gathers, grad_bytes, params_text(busy.dense), n - 1, n,
                                params_text(busy.expert), ne - 1, ne, tied_text);
    d.result = human_bytes(d.value);
    d.estimator_value = e.comm_volume_bytes[static_cast<int>(CommDim::kDP)];
    out.push_back(d);
  }

  // Pipeline bubble from the estimator's own per-stage times.
  if (p.pp > 1) {
    EstimatorCache cache;
    StepCosts det;
    estimate(m, c, w, p, EstimatorOptions{}, &cache, &det);
    double t_max = 0, t_sum = 0;
    for (size_t i = 0; i < det.f.size(); ++i) {
      const double hops =
          2.0 * pipeline_exchanges_per_pass(static_cast<int>(i), p.pp, p.vpp) * det.p2p_s;
      const double t = det.f[i] + det.b[i] + det.w[i] + hops;
      t_max = std::max(t_max, t);
      t_sum += t;
    }
    const int mb = std::max(1, p.num_microbatches());
    Derivation d;
    d.quantity = fmt::format("pipeline bubble ({})", p.schedule);
    // The schedule plug-in's own formula and pipeline time.
    const IPipelineSchedule* sched = find_schedule(p.schedule);
    d.formula = std::string(sched ? sched->bubble_formula() : "pipeline time - m x t_max") +
                "; t_i = one micro-batch's F+B+W on rank i with its exchanges";
    d.value = std::max(0.0, det.pipeline_s - mb * t_max);
    d.substituted = fmt::format(
        "pipeline time {:.4f} s - {} x t_max {:.4f} s (sum of t_i {:.4f} s); bubble / (m t_max) "
        "= {:.4f}",
        det.pipeline_s, mb, t_max, t_sum, d.value / (mb * t_max));
    d.result = secs(d.value);
    d.estimator_value = e.bubble_s;
    out.push_back(d);
  }
  return out;
}

std::vector<Derivation> derive_failures(const ModelSpec& m, const Cluster& c, const Workload& w,
                                        const Plan& p, const Estimate& e, const FailureOptions& o) {
  std::vector<Derivation> out;
  const FailureCosts f = failure_costs(m, c, p, e.step_time_s, o);
  const CheckpointCosts& k = f.checkpoint;
  const ClusterServices sv = services_of(c);
  const double params = static_cast<double>(count_params(m).total());
  auto add = [&](std::string q, std::string formula, std::string subst, double value,
                 double model_value, std::string result) {
    out.push_back({std::move(q), std::move(formula), std::move(subst), std::move(result), value,
                   model_value});
  };
  const bool no_weights = k.weights_bytes <= 0;  // DeepSpeed ZeRO-3: partitioned out
  const double bytes_per_param = no_weights ? 12.0 : 14.0;
  const double size = bytes_per_param * params;
  add("checkpoint size",
      no_weights ? "(4 B fp32 master + 8 B Adam moments) x parameters (DeepSpeed ZeRO-3: the "
                   "16-bit weights are partitioned out of the state dict)"
                 : "(2 B weights + 4 B fp32 master + 8 B Adam moments) x parameters",
      fmt::format("{:g} B x {}", bytes_per_param, params_text(params)), size, k.size_bytes,
      human_bytes(size));
  double shard = size / k.writers;
  if (k.first_replica_bytes <= 0) {
    add("shard per rank", "checkpoint / writing ranks (fully parallel save)",
        fmt::format("{} / {}", human_bytes(size), k.writers), shard, k.per_rank_bytes,
        human_bytes(shard));
  } else if (k.first_replica_bytes >= size) {
    shard = size / k.first_replica_writers;
    add("shard per rank",
        "checkpoint / the first data-parallel replica's ranks (tp x cp x pp; the others write "
        "none)",
        fmt::format("{} / {}", human_bytes(size), k.first_replica_writers), shard, k.per_rank_bytes,
        human_bytes(shard));
  } else {
    const double rest = size - k.first_replica_bytes;
    shard = k.first_replica_bytes / k.first_replica_writers + rest / k.writers;
    add("shard per rank (a first-replica rank)",
        "16-bit weights / the first replica's ranks (tp x cp x pp) + (fp32 master + moments) / "
        "every rank (DeepSpeed: mp_rank model states by data-parallel rank 0, zero_pp_rank "
        "optimizer shards by all)",
        fmt::format("{} / {} + {} / {}", human_bytes(k.first_replica_bytes),
                    k.first_replica_writers, human_bytes(rest), k.writers),
        shard, k.per_rank_bytes, human_bytes(shard));
  }
  const HostSpec& host = c.profile.host;
  // The writers of a node behind one PCIe uplink to the CPU share it.
  const int sharing = host.sharing_when(k.writers_per_node);
  const double pcie = host.pcie_gbps_per_gpu > 0 ? host.pcie_gbps_per_gpu / sharing : 16;
  const double d2h = shard / (pcie * 1e9);
  add("copy to host",
      sharing > 1 ? "shard / (PCIe per GPU / writing GPUs sharing its uplink to the CPU)"
                  : "shard / PCIe per GPU",
      sharing > 1 ? fmt::format("{} / ({:g} / {} GB/s)", human_bytes(shard), host.pcie_gbps_per_gpu,
                                sharing)
                  : fmt::format("{} / {:g} GB/s", human_bytes(shard), pcie),
      d2h, k.d2h_s, secs(d2h));
  const double node_s = k.per_node_bytes / (sv.storage.write_gbps_per_node * 1e9);
  const double fs_s =
      sv.storage.aggregate_write_gbps > 0 ? size / (sv.storage.aggregate_write_gbps * 1e9) : 0;
  const double write = std::max(node_s, fs_s);
  add("storage write", "max(node's shards / node write rate, checkpoint / file-system rate)",
      fmt::format(
          "max({} / {:g} GB/s, {})", human_bytes(k.per_node_bytes), sv.storage.write_gbps_per_node,
          sv.storage.aggregate_write_gbps > 0
              ? fmt::format("{} / {:g} GB/s", human_bytes(size), sv.storage.aggregate_write_gbps)
              : std::string("no file-system limit")),
      write, k.storage_write_s, secs(write));
  const double delta = o.async_save ? d2h : d2h + write;
  add(o.async_save ? "checkpoint blocks training (asynchronous)"
                   : "checkpoint blocks training (synchronous)",
      "copy + write; --async-save: the copy alone",
      o.async_save ? fmt::format("{:.3f} s (the write, {:.3f} s, runs behind)", d2h, write)
                   : fmt::format("{:.3f} + {:.3f} s", d2h, write),
      delta, f.checkpoint_blocking_s,
      o.async_save ? secs(delta) : fmt::format("{} (async: {})", secs(delta), secs(d2h)));
  const double mtbf = sv.reliability.mtbf_per_gpu_hours * 3600.0 / c.num_gpus;
  add("job MTBF", "MTBF per GPU / GPUs",
      fmt::format("{:.0f} h / {}", sv.reliability.mtbf_per_gpu_hours, c.num_gpus), mtbf,
      f.job_mtbf_s, fmt::format("{:.2f} h", mtbf / 3600));
  double tau = o.interval_s.value_or(std::sqrt(2.0 * delta * mtbf));
  const bool raised = o.async_save && tau < write;
  if (raised) tau = write;
  // A checkpoint is taken between steps: at least one step apart.
  const bool to_step = e.step_time_s > 0 && tau < e.step_time_s;
  if (to_step) tau = e.step_time_s;
  add(o.interval_s ? "checkpoint interval (given)" : "checkpoint interval (Young)",
      o.interval_s ? "--checkpoint-interval-s" : "sqrt(2 x delta x MTBF)",
      o.interval_s ? fmt::format("{:.0f} s", *o.interval_s)
                   : fmt::format("sqrt(2 x {:.3f} s x {:.0f} s)", delta, mtbf),
      tau, f.interval_s,
      fmt::format("{} = {:.0f} steps (Daly: {}){}", secs(tau), tau / e.step_time_s,
                  secs(f.daly_interval_s),
                  to_step  ? "; raised to one step (a checkpoint is taken between steps)"
                  : raised ? "; raised to the write time (an asynchronous save finishes first)"
                           : ""));
  const RestartCosts& r = f.restart;
  const double restart =
      o.restart_s.value_or(r.detection_s + r.requeue_s + r.init_s + r.load_s + r.fast_forward_s);
  add("restart",
      o.restart_s ? "--restart-s"
                  : "detection + requeue + start-up (+ per 1,000 ranks) + checkpoint load + "
                    "fast-forward",
      o.restart_s ? fmt::format("{:.0f} s", *o.restart_s)
                  : fmt::format("{:.0f} + {:.0f} + {:.1f} + {:.2f} + {:.0f} s", r.detection_s,
                                r.requeue_s, r.init_s, r.load_s, r.fast_forward_s),
      restart, f.restart_s, secs(restart));
  const double skipped = std::clamp(o.skipped_step_fraction, 0.0, 1.0);
  // Lost work: back to the last complete checkpoint, tau/2 on average; an asynchronous one is
  // complete only once written, so a failure during the write falls back one more interval:
  // tau/2 + write (reliability.cpp).
  const double behind = o.async_save ? write : 0.0;
  const double lost =
      std::min(1.0, delta / tau + (tau / 2.0 + behind) / mtbf + restart / mtbf + skipped);
  const std::string rework_formula = o.async_save ? "(tau / 2 + write) / MTBF" : "tau / (2 MTBF)";
  const std::string rework_text = o.async_save
                                      ? fmt::format("({:.0f}/2 + {:.1f})/{:.0f}", tau, write, mtbf)
                                      : fmt::format("{:.0f}/(2 x {:.0f})", tau, mtbf);
  add("time lost",
      fmt::format("delta / tau + {} + restart / MTBF{}", rework_formula,
                  skipped > 0 ? " + skipped steps" : ""),
      fmt::format("{:.3f}/{:.0f} + {} + {:.0f}/{:.0f}{}", delta, tau, rework_text, restart, mtbf,
                  skipped > 0 ? fmt::format(" + {:.4f}", skipped) : ""),
      lost, f.lost_fraction, fmt::format("{:.2f}%", 100 * lost));
  add("goodput", "tokens/s x (1 - time lost)",
      fmt::format("{:.0f} x (1 - {:.4f})", e.tokens_per_s, lost), e.tokens_per_s * (1 - lost),
      e.tokens_per_s * f.goodput, fmt::format("{:.0f} tokens/s", e.tokens_per_s * (1 - lost)));
  // The data loader against what the step consumes (the data-stall step term).
  const double gbs = static_cast<double>(p.gbs > 0 ? p.gbs : w.global_batch);
  const double loading_nodes = data_loading_nodes(c, p.pp);
  const double need = gbs * static_cast<double>(w.seq_len) / loading_nodes / e.step_time_s;
  const double rate = loader_tokens_per_s_per_node(c, p.tp);
  add("data loader", "tokens per loading node per step / step vs the loader's tokens/s per node",
      fmt::format("{:.0f} x {} / {:.0f} nodes / {:.3f} s vs {:.3g}", gbs, w.seq_len, loading_nodes,
                  e.step_time_s, rate),
      need, need,
      fmt::format("needs {:.3g} tokens/s per node: {}", need,
                  rate >= need ? "the step does not wait for data"
                               : "the step waits for data (a data stall)"));
  return out;
}

std::vector<Derivation> derive_precision(const ModelSpec& m, const Cluster& c, const Workload& w,
                                         const Plan& p, const Estimate& e) {
  std::vector<Derivation> out;
  const int stage = e.peak_stage;
  const RankLayers l = layers_on_rank(m, p, stage);
  const ParamCounts counts = count_params(m);
  const HardwareProfile& hw = c.profile;
  if (w.precision == Precision::kFp8) {
    const double linear = linear_params_on_rank(m, counts, p, l);
    out.push_back({"GEMMs in FP8",
                   "the transformer layers' linear layers (Transformer Engine), at the FP8 peak",
                   fmt::format("{} layers on stage {}; FP8 peak {:.0f} TFLOP/s vs BF16 {:.0f}",
                               l.total(), stage, hw.gpu.peak_tflops[2], hw.gpu.peak_tflops[0]),
                   m.moe ? "QKV, projection, fc1, fc2, experts" : "QKV, projection, fc1, fc2",
                   linear, linear});
    out.push_back({"kept in 16 bits",
                   "output layer (fp8_output_proj off), router (moe_router_dtype), attention "
                   "core (no FP8 backward), embeddings and norms (not GEMMs)",
                   "Megatron-LM transformer_config.py, NVIDIA/Megatron-LM d98e8a6",
                   "logits and router GEMMs at the BF16 peak", 0, 0});
    const double per = fp8_weight_copy_bytes_per_param(w.fp8_recipe);
    const double copies = p.zero < 3 ? per * linear : 0;
    out.push_back({"FP8 weight copies", "copy + transpose (+ block scales) x linear parameters",
                   fmt::format("{:.4g} B x {} ({} recipe){}", per, params_text(linear),
                               to_string(w.fp8_recipe),
                               p.zero >= 3 ? "; ZeRO-3: only the gathered layer's" : ""),
                   human_bytes(copies), copies, copies});
    const double gemms = fp8_gemms_on_rank(m, p, l);
    const double meta = gemms * fp8_meta_bytes_per_gemm(w);
    out.push_back(
        {"FP8 scaling state", "FP8 GEMMs x 5 tensors x (scale + scale_inv + 4 B x amax history)",
         fmt::format("{:.0f} x {:.0f} B ({}, history {})", gemms, fp8_meta_bytes_per_gemm(w),
                     to_string(w.fp8_recipe), w.fp8_amax_history_len),
         human_bytes(meta), meta, meta});
  } else if (w.precision == Precision::kFp16) {
    out.push_back({"loss scaling",
                   "dynamic: start at 2^32, halve on overflow after 2 overflowing steps "
                   "(hysteresis), double after 1000 clean ones; an overflowing step is skipped",
                   "Megatron-LM arguments.py --initial-loss-scale, --loss-scale-window, "
                   "--hysteresis (d98e8a6); DeepSpeed: initial_scale_power 16, window 1000, "
                   "hysteresis 2 (runtime/constants.py)",
                   "skipped steps are a goodput term: --skipped-steps", 0, 0});
    out.push_back({"gradients",
                   "fp32 main gradients (Megatron main_grad) or 16-bit (DeepSpeed convention)",
                   fmt::format("{:g} B per parameter", grad_bytes_per_param(p, w.precision)),
                   human_bytes(e.memory_peak.grads_bytes), e.memory_peak.grads_bytes,
                   e.memory_peak.grads_bytes});
  } else {
    out.push_back({"precision", "BF16: the range of fp32, no loss scaling",
                   fmt::format("BF16 peak {:.0f} TFLOP/s", hw.gpu.peak_tflops[0]), "-", 0, 0});
  }
  return out;
}

}  // namespace dtplan::reports
