#include "cli/estimate_json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <iterator>
#include <optional>

#include "reports/uncertainty.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/layer_cost.h"
#include "simulator/cost/memory_model.h"
#include "simulator/cost/reliability.h"
#include "simulator/step/step_terms.h"

namespace dtplan::cli {

static nlohmann::json memory_json(const StageMemory& s, int stage, double capacity) {
  const double g = units::kGiB;
  return {{"stage", stage},
          {"layers", s.layers},
          {"weights_gib", s.weights_bytes / g},
          {"grads_gib", s.grads_bytes / g},
          {"optimizer_gib", s.optimizer_bytes / g},
          {"activations_gib", s.activations_bytes / g},
          {"buffers_gib", s.buffers_bytes / g},
          {"total_gib", s.total_bytes() / g},
          {"fits", s.total_bytes() <= capacity}};
}

// With device groups: each group's hardware, ranks and the pipeline stages it runs.
struct GroupStages {
  int group, first_stage, last_stage;  // last < first: runs no stage
};
static std::vector<GroupStages> group_stages(const Cluster& c, const Plan& p) {
  std::vector<GroupStages> out;
  for (int g = 0; g < c.groups_used(); ++g) {
    GroupStages gs{g, -1, -2};
    for (int s = 0; s < p.pp; ++s)
      if (stage_device_group(c, p, s) == g) {
        if (gs.first_stage < 0) gs.first_stage = s;
        gs.last_stage = s;
      }
    out.push_back(gs);
  }
  return out;
}

nlohmann::json device_groups_json(const Cluster& c, const Plan& p) {
  nlohmann::json a = nlohmann::json::array();
  for (const GroupStages& gs : group_stages(c, p)) {
    const DeviceGroup& d = c.groups[static_cast<size_t>(gs.group)];
    a.push_back(
        {{"profile", d.profile.name},
         {"gpu", d.profile.gpu.name},
         {"nodes", (c.group_first_rank(gs.group + 1) - c.group_first_rank(gs.group) +
                    d.profile.node.gpus_per_node - 1) /
                       d.profile.node.gpus_per_node},
         {"first_rank", c.group_first_rank(gs.group)},
         {"gpus", c.group_first_rank(gs.group + 1) - c.group_first_rank(gs.group)},
         {"stages", gs.first_stage < 0 ? nlohmann::json::array()
                                       : nlohmann::json::array({gs.first_stage, gs.last_stage})},
         {"memory_gib", d.profile.gpu.memory_gib}});
  }
  return a;
}

namespace {

// Host memory an activation-offload plan pins (memory_model.h, offloaded_host_bytes), beside
// the GPU's verdict: a plan can fit its GPUs and still exhaust the node's host memory.
struct HostMemory {
  double per_gpu_gib = 0, per_node_gib = 0, capacity_gib = 0;
  bool fits = true;
};
std::optional<HostMemory> host_memory_of(const Resolved& r) {
  const HardwareProfile& hw = r.cluster.profile;
  const double per_gpu = offloaded_host_bytes(r.model, r.workload, r.plan);
  if (per_gpu <= 0 || hw.host.memory_gib <= 0) return std::nullopt;
  HostMemory h;
  h.per_gpu_gib = per_gpu / units::kGiB;
  h.per_node_gib = h.per_gpu_gib * std::max(1, hw.node.gpus_per_node);
  h.capacity_gib = hw.host.memory_gib;
  h.fits = host_memory_violation(r.model, r.workload, r.plan, hw).empty();
  return h;
}

// The communication dimension that sets the step, or -1: an overlapped collective (part of it
// hidden) that outlasts everything else in the step. Its exposed share alone would suggest the
// compute is what to shorten.
int comm_bound_dim(const Estimate& e) {
  for (int d = 0; d < kCommDims; ++d) {
    const double exposed = e.exposed_comm_s[d];
    if (exposed > 0 && exposed < e.comm_time_s[d] && e.comm_time_s[d] >= e.step_time_s - exposed)
      return d;
  }
  return -1;
}

}  // namespace

nlohmann::json estimate_to_json(const Resolved& r, const Estimate& e, FlopsConvention conv) {
  nlohmann::json j;
  j["model"] = r.model.name;
  j["cluster"] = {{"profile", r.cluster.profile.name},
                  {"gpus", r.cluster.num_gpus},
                  {"nodes", r.cluster.nodes()}};
  if (r.cluster.heterogeneous()) j["cluster"]["groups"] = device_groups_json(r.cluster, r.plan);
  const Plan& p = r.plan;
  j["plan"] = {{"tp", p.tp},
               {"pp", p.pp},
               {"dp", p.dp},
               {"cp", p.cp},
               {"ep", p.ep},
               {"etp", p.etp},
               {"vpp", p.vpp},
               {"sp", p.sp},
               {"zero", p.zero},
               {"recompute", to_string(p.recompute)},
               {"recompute_layers", p.recompute_layers},  // 0: every layer (with full)
               {"offload_layers", p.offload_layers},      // activation offloading, 0: none
               {"uneven_pp", p.uneven_pp},
               {"account_for_embedding_in_pipeline_split", p.account_for_embedding},
               {"stage_split",
                p.split_stages > 0 ? fmt::format("{}:{}", p.split_stages, p.split_layers) : ""},
               {"account_for_loss_in_pipeline_split", p.account_for_loss},
               {"mbs", p.mbs},
               {"gbs", p.gbs},
               {"seq", r.workload.seq_len},
               {"schedule", p.schedule},
               {"precision", to_string(r.workload.precision)},
               {"attention", p.flash_attention ? "flash" : "unfused"},
               {"microbatches", e.microbatches}};
  j["step_time_s"] = e.step_time_s;
  nlohmann::json volume, ctime;
  for (int d = 0; d < kCommDims; ++d) {
    volume[kCommDimNames[d]] = e.comm_volume_bytes[d];
    ctime[kCommDimNames[d]] = e.comm_time_s[d];
  }
  // The breakdown from the list of step terms (simulator/step/step_terms.h); a dotted key
  // nests ("exposed_comm_s.tp").
  nlohmann::json breakdown = nlohmann::json::object();
  for (const StepTermValue& t : step_terms(e)) {
    const std::string key = t.key;
    const size_t dot = key.find('.');
    if (dot == std::string::npos)
      breakdown[key] = t.seconds;
    else
      breakdown[key.substr(0, dot)][key.substr(dot + 1)] = t.seconds;
  }
  j["breakdown"] = breakdown;
  j["comm_volume_bytes"] = volume;
  j["comm_time_s"] = ctime;
  // Whose traffic the breakdown and the communication rows are: the busiest pipeline stage's,
  // the data-parallel row the stage the step waits for.
  j["breakdown_stage"] = e.busiest_stage;
  j["dp_stage"] = e.dp_stage;
  j["comm_share"] = e.comm_share;
  // The communication that sets the step (overlapped, and longer than the rest of it), or null.
  const int bound = comm_bound_dim(e);
  j["bound_by_comm"] = bound >= 0 ? nlohmann::json(kCommDimNames[bound]) : nlohmann::json();
  j["bubble_fraction"] = e.bubble_fraction;
  j["mfu"] = e.mfu;
  j["hfu"] = e.hfu;
  // The peak MFU and HFU are of (the training precision's dense peak per GPU).
  j["mfu_peak_tflops"] = e.mfu > 0 ? e.model_tflops_per_gpu / e.mfu : 0.0;
  j["mfu_peak_precision"] = to_string(r.workload.precision);
  j["flops_convention"] = describe(conv);
  j["model_flops_per_step"] = e.model_flops;
  j["model_tflops_per_gpu"] = e.model_tflops_per_gpu;
  j["tokens_per_s"] = e.tokens_per_s;
  j["tokens_per_s_per_gpu"] = e.tokens_per_s_per_gpu;
  if (r.workload.train_tokens > 0) j["time_to_train_days"] = e.time_to_train_days;
  // p10-p90 from dtplan's accuracy record (reports/uncertainty.h); absent without a band.
  const Uncertainty u = uncertainty_of(r.model, r.cluster, r.workload, p, e, r.framework);
  if (u.band.found) {
    j["step_time_s_interval"] = {u.step_low_s, u.step_high_s};
    j["mfu_interval"] = {u.mfu_low, u.mfu_high};
    j["tokens_per_s_interval"] = {u.tokens_low, u.tokens_high};
    j["tokens_per_s_per_gpu_interval"] = {u.tokens_low / r.cluster.num_gpus,
                                          u.tokens_high / r.cluster.num_gpus};
    if (r.workload.train_tokens > 0) j["time_to_train_days_interval"] = {u.days_low, u.days_high};
    j["error_band"] = {{"p10_ratio", u.band.low},     {"p90_ratio", u.band.high},
                       {"cases", u.band.cases},       {"groups", u.band.groups},
                       {"families", u.band.families}, {"regime", u.band.regime},
                       {"dropped", u.band.dropped}};
  }
  {
    const FailureCosts f = failure_costs(r.model, r.cluster, p, e.step_time_s, r.failure);
    const CheckpointCosts& k = f.checkpoint;
    j["checkpoint"] = {{"size_bytes", k.size_bytes},
                       {"items",
                        {{"weights_bytes", k.weights_bytes},
                         {"master_weights_bytes", k.master_weights_bytes},
                         {"optimizer_moments_bytes", k.optimizer_moments_bytes}}},
                       {"writers", k.writers},
                       {"written_by", checkpoint_writers_text(k)},
                       {"first_replica_bytes", k.first_replica_bytes},
                       {"per_rank_bytes", k.per_rank_bytes},
                       {"per_node_bytes", k.per_node_bytes},
                       {"d2h_s", k.d2h_s},
                       {"storage_write_s", k.storage_write_s},
                       {"file_system_bound", k.file_system_bound},
                       {"write_s_sync", k.write_s_sync},
                       {"write_s_async_blocking", k.write_s_async_blocking},
                       {"async_save", f.async_save},
                       {"blocking_s", f.checkpoint_blocking_s},
                       {"young_interval_s", f.young_interval_s},
                       {"daly_interval_s", f.daly_interval_s},
                       {"interval_s", f.interval_s},
                       {"interval_steps", f.interval_steps},
                       {"load_s", k.load_s},
                       {"restart_s", f.restart_s},
                       {"restart_given", f.restart_given},
                       {"interval_raised_to_write", f.interval_raised},
                       {"interval_raised_to_step", f.interval_raised_to_step},
                       {"restart_parts_s",
                        {{"detection", f.restart.detection_s},
                         {"requeue", f.restart.requeue_s},
                         {"init", f.restart.init_s},
                         {"checkpoint_load", f.restart.load_s},
                         {"fast_forward", f.restart.fast_forward_s}}}};
    j["failures"] = {{"job_mtbf_s", f.job_mtbf_s},
                     {"goodput", f.goodput},
                     {"lost_fraction", f.lost_fraction},
                     {"checkpoint_fraction", f.checkpoint_fraction},
                     {"rework_fraction", f.rework_fraction},
                     {"restart_fraction", f.restart_fraction},
                     {"skipped_fraction", f.skipped_fraction},
                     {"effective_tokens_per_s", e.tokens_per_s * f.goodput}};
    if (r.workload.train_tokens > 0 && f.goodput > 0)
      j["failures"]["time_to_train_days"] = e.time_to_train_days / f.goodput;
    const ClusterServices sv = services_of(r.cluster);
    j["failures"]["sources"] = {{"storage", sv.storage.source},
                                {"reliability", sv.reliability.source},
                                {"restart", sv.restart.source}};
    j["data_loader"] = {
        {"tokens_per_s_per_node", loader_tokens_per_s_per_node(r.cluster, r.plan.tp)},
        {"source", sv.data.source}};
  }
  nlohmann::json mem = nlohmann::json::array();
  auto stages = all_stage_memory(r.model, r.workload, p);
  for (size_t i = 0; i < stages.size(); ++i)
    mem.push_back(memory_json(stages[i], static_cast<int>(i),
                              stage_memory_capacity_bytes(r.cluster, p, static_cast<int>(i))));
  j["memory"] = mem;
  j["memory_capacity_gib"] = e.memory_capacity_bytes / units::kGiB;
  j["peak_memory_gib"] = e.memory_peak.total_bytes() / units::kGiB;
  j["peak_stage"] = e.peak_stage;
  j["fits"] = e.fits;
  if (const auto h = host_memory_of(r))
    j["host_memory"] = {{"offloaded_gib_per_gpu", h->per_gpu_gib},
                        {"per_node_gib", h->per_node_gib},
                        {"capacity_gib", h->capacity_gib},
                        {"fits", h->fits}};
  return j;
}

static std::string pct(double x, double total) {
  return total > 0 ? fmt::format("{:5.1f}%", 100.0 * x / total) : "";
}

static std::string human_bytes(double b) {
  if (b >= 1e12) return fmt::format("{:.2f} TB", b / 1e12);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b > 0) return fmt::format("{:.1f} kB", b / 1e3);
  return "0";
}

std::string estimate_to_text(const Resolved& r, const Estimate& e, FlopsConvention conv) {
  std::string o;
  auto out = std::back_inserter(o);
  const HardwareProfile& hw = r.cluster.profile;
  if (r.cluster.heterogeneous()) {
    fmt::format_to(out, "{} on {} GPUs in {} device groups ({} node(s))\n", r.model.display_name,
                   r.cluster.num_gpus, r.cluster.groups_used(), r.cluster.nodes());
    for (const GroupStages& gs : group_stages(r.cluster, r.plan)) {
      const DeviceGroup& d = r.cluster.groups[static_cast<size_t>(gs.group)];
      fmt::format_to(
          out, "  group {}: {} x {} ({}), ranks {}-{}, {}\n", gs.group,
          r.cluster.group_first_rank(gs.group + 1) - r.cluster.group_first_rank(gs.group),
          d.profile.gpu.name, d.profile.name, r.cluster.group_first_rank(gs.group),
          r.cluster.group_first_rank(gs.group + 1) - 1,
          gs.first_stage < 0 ? std::string("no stage")
          : gs.first_stage == gs.last_stage
              ? fmt::format("stage {}", gs.first_stage)
              : fmt::format("stages {}-{}", gs.first_stage, gs.last_stage));
    }
  } else {
    fmt::format_to(out, "{} on {} x {} ({}, {} node(s))\n", r.model.display_name,
                   r.cluster.num_gpus, hw.gpu.name, hw.name, r.cluster.nodes());
  }
  fmt::format_to(out, "plan  {}  ({} micro-batches, seq {}, {}, {} attention)\n\n",
                 r.plan.describe(), e.microbatches, r.workload.seq_len,
                 to_string(r.workload.precision), r.plan.flash_attention ? "flash" : "unfused");
  const double st = e.step_time_s;
  const Uncertainty u = uncertainty_of(r.model, r.cluster, r.workload, r.plan, e, r.framework);
  const bool band = u.band.found;
  fmt::format_to(
      out, "{:<28} {:>10.3f} s{}\n", "step time", st,
      band ? fmt::format("  (p10-p90 {:.3f}–{:.3f} s)", u.step_low_s, u.step_high_s) : "");
  for (const StepTermValue& t : step_terms(e))
    if (t.always_shown || t.seconds > 0)
      fmt::format_to(out, "  {:<26} {:>10.3f} s {}\n", t.label, t.seconds, pct(t.seconds, st));
  fmt::format_to(out, "\n");
  fmt::format_to(out, "{:<28} {:>10.0f}  ({:.0f} per GPU){}\n", "tokens/s", e.tokens_per_s,
                 e.tokens_per_s_per_gpu,
                 band ? fmt::format("  (p10-p90 {:.0f}–{:.0f})", u.tokens_low, u.tokens_high) : "");
  fmt::format_to(out, "{:<28} {:>10.{}f}  TFLOP/s per GPU\n", "model FLOPs", e.model_tflops_per_gpu,
                 e.model_tflops_per_gpu < 10 ? 3 : 1);
  fmt::format_to(
      out, "{:<28} {:>9.1f}%  HFU {:.1f}%{}\n", "MFU", 100 * e.mfu, 100 * e.hfu,
      band ? fmt::format("  (MFU p10-p90 {:.1f}–{:.1f}%)", 100 * u.mfu_low, 100 * u.mfu_high) : "");
  // Which peak the ratios are of: the training precision's (FP8 runs against the FP8 peak, twice
  // the BF16 one on Hopper and Blackwell), with the BF16 reading beside it for comparison.
  if (e.mfu > 0) {
    const double peak_tflops = e.model_tflops_per_gpu / e.mfu;
    const double bf16_tflops = r.cluster.profile.gpu.peak_flops(Precision::kBf16) / 1e12;
    fmt::format_to(out, "  (of the {:.0f} TFLOP/s {} dense peak{})\n", peak_tflops,
                   to_string(r.workload.precision),
                   r.workload.precision == Precision::kFp8 && bf16_tflops > 0
                       ? fmt::format("; MFU {:.1f}% of the BF16 peak",
                                     100 * e.model_tflops_per_gpu / bf16_tflops)
                       : "");
  }
  fmt::format_to(out, "  ({})\n", describe(conv));
  fmt::format_to(out, "{:<28} {:>9.1f}%   exposed communication share {:.1f}%\n", "bubble fraction",
                 100 * e.bubble_fraction, 100 * e.comm_share);
  if (e.time_to_train_days > 0)
    fmt::format_to(out, "{:<28} {:>10.1f} days for {:.3g} tokens{}\n", "time to train",
                   e.time_to_train_days, r.workload.train_tokens,
                   band ? fmt::format("  (p10-p90 {:.1f}–{:.1f})", u.days_low, u.days_high) : "");
  if (band)
    fmt::format_to(out,
                   "  (p10-p90: measured / predicted over {} published runs of {} groups like this "
                   "one: {}{}; docs/accuracy.md)\n",
                   u.band.cases, u.band.groups, u.band.regime,
                   u.band.dropped.empty() ? ""
                                          : fmt::format(", too few runs to match {}",
                                                        fmt::join(u.band.dropped, ", ")));
  {
    const FailureCosts f = failure_costs(r.model, r.cluster, r.plan, st, r.failure);
    const CheckpointCosts& k = f.checkpoint;
    fmt::format_to(
        out,
        "\ncheckpoints and failures (docs/resilience.md)\n"
        "  checkpoint {} (weights {}, fp32 master {}, Adam moments {}); {} per rank{}\n"
        "  write: copy to host {:.2f} s + storage {:.2f} s ({}) = {:.2f} s "
        "synchronous, {:.2f} s blocking with --async-save\n",
        human_bytes(k.size_bytes),
        k.weights_bytes > 0 ? human_bytes(k.weights_bytes)
                            : std::string("none: DeepSpeed's ZeRO-3 state dict holds no "
                                          "16-bit weights"),
        human_bytes(k.master_weights_bytes), human_bytes(k.optimizer_moments_bytes),
        human_bytes(k.per_rank_bytes),
        k.first_replica_bytes <= 0 ? std::string()
                                   : fmt::format(" at most ({})", checkpoint_writers_text(k)),
        k.d2h_s, k.storage_write_s, k.file_system_bound ? "file-system bound" : "node-link bound",
        k.write_s_sync, k.write_s_async_blocking);
    const std::string restart =
        f.restart_given
            ? fmt::format("restart {:.0f} s (given by --restart-s)", f.restart_s)
            : fmt::format(
                  "restart {:.0f} s (detect {:.0f} + requeue {:.0f} + start {:.0f} + load "
                  "{:.0f} + fast-forward {:.0f})",
                  f.restart_s, f.restart.detection_s, f.restart.requeue_s, f.restart.init_s,
                  f.restart.load_s, f.restart.fast_forward_s);
    fmt::format_to(
        out,
        "  job MTBF {:.2f} h; interval {:.0f} s ({:.0f} step{}; Young {:.0f} s, Daly "
        "{:.0f} s{}); {}\n",
        f.job_mtbf_s / 3600, f.interval_s, f.interval_steps,
        std::lround(f.interval_steps) == 1 ? "" : "s", f.young_interval_s, f.daly_interval_s,
        f.interval_raised_to_step ? "; raised to one step: a checkpoint is taken between steps"
        : f.interval_raised       ? "; raised to the write time: an asynchronous save must "
                                    "finish before the next"
                                  : "",
        restart);
    fmt::format_to(
        out,
        "  goodput {:.1f}% (checkpoints {:.1f}% + lost work {:.1f}% + restarts {:.1f}%{}"
        "); effective {:.0f} tokens/s{}\n",
        100 * f.goodput, 100 * f.checkpoint_fraction, 100 * f.rework_fraction,
        100 * f.restart_fraction,
        f.skipped_fraction > 0 ? fmt::format(" + skipped steps {:.1f}%", 100 * f.skipped_fraction)
                               : "",
        e.tokens_per_s * f.goodput,
        e.time_to_train_days > 0 && f.goodput > 0
            ? fmt::format(", {:.1f} days to train with failures", e.time_to_train_days / f.goodput)
            : "");
  }
  fmt::format_to(out, "\ncommunication per GPU per step   {:>10} {:>10} {:>10}\n", "volume", "time",
                 "exposed");
  // With a pipeline, stages carry different layers: each row is the rank the step's breakdown
  // follows (the busiest stage), the data-parallel row the stage the step waits for there.
  const int dp_dim = static_cast<int>(CommDim::kDP);
  for (int d = 0; d < kCommDims; ++d)
    if (e.comm_volume_bytes[d] > 0 || e.exposed_comm_s[d] > 0) {
      const std::string name = r.plan.pp > 1
                                   ? fmt::format("{} (stage {})", kCommDimNames[d],
                                                 d == dp_dim ? e.dp_stage : e.busiest_stage)
                                   : std::string(kCommDimNames[d]);
      fmt::format_to(out, "  {:<30} {:>10} {:>8.3f} s {:>8.3f} s\n", name,
                     human_bytes(e.comm_volume_bytes[d]), e.comm_time_s[d], e.exposed_comm_s[d]);
    }
  if (const int d = comm_bound_dim(e); d >= 0)
    fmt::format_to(out,
                   "  the step is bound by {} communication: {:.3f} s on its stream against {:.3f} "
                   "s for the rest of the step, so faster compute would not shorten it (less "
                   "volume, more bandwidth or another layout would)\n",
                   kCommDimNames[d], e.comm_time_s[d], st - e.exposed_comm_s[d]);
  const double g = units::kGiB;
  fmt::format_to(out, "\nmemory per GPU (GiB)   {:>12} {:>12} {:>14}\n", "first stage",
                 "last stage", fmt::format("peak (stage {})", e.peak_stage));
  auto row = [&](const char* name, double a, double b, double c) {
    fmt::format_to(out, "  {:<20} {:>12.2f} {:>12.2f} {:>14.2f}\n", name, a / g, b / g, c / g);
  };
  row("weights", e.memory_first.weights_bytes, e.memory_last.weights_bytes,
      e.memory_peak.weights_bytes);
  row("gradients", e.memory_first.grads_bytes, e.memory_last.grads_bytes,
      e.memory_peak.grads_bytes);
  row("optimizer", e.memory_first.optimizer_bytes, e.memory_last.optimizer_bytes,
      e.memory_peak.optimizer_bytes);
  row("activations", e.memory_first.activations_bytes, e.memory_last.activations_bytes,
      e.memory_peak.activations_bytes);
  row("buffers", e.memory_first.buffers_bytes, e.memory_last.buffers_bytes,
      e.memory_peak.buffers_bytes);
  row("total", e.memory_first.total_bytes(), e.memory_last.total_bytes(),
      e.memory_peak.total_bytes());
  fmt::format_to(out, "  capacity {:.0f} GiB{}: {}\n", e.memory_capacity_bytes / g,
                 r.cluster.heterogeneous() ? fmt::format(" (stage {}'s GPU, the fullest for its "
                                                         "memory)",
                                                         e.peak_stage)
                                           : "",
                 e.fits ? "fits" : "DOES NOT FIT");
  if (const auto h = host_memory_of(r))
    fmt::format_to(out,
                   "  host memory (offloaded activations, pinned): {:.1f} GiB per GPU, {:.0f} GiB "
                   "per node of {:.0f}: {}\n",
                   h->per_gpu_gib, h->per_node_gib, h->capacity_gib,
                   h->fits ? "fits" : "DOES NOT FIT");
  fmt::format_to(out, "\n");
  return o;
}

}  // namespace dtplan::cli

namespace dtplan::cli {

static const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "fwd";
    case Pass::kBackwardInput:
      return "bwd";
    case Pass::kBackwardWeight:
      return "wgrad";
  }
  return "?";
}

static const char* kind_name(OpKind k) {
  switch (k) {
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kAttention:
      return "attention";
    case OpKind::kElementwise:
      return "elementwise";
    case OpKind::kCollective:
      return "collective";
  }
  return "?";
}

static std::string op_shape(const Op& o) {
  switch (o.kind) {
    case OpKind::kGemm:
      return o.count > 1 ? fmt::format("{}x[{}x{}x{}]{}", o.count, o.m, o.n, o.k,
                                       o.grouped ? " grouped" : "")
                         : fmt::format("{}x{}x{}", o.m, o.n, o.k);
    case OpKind::kAttention:
      return fmt::format("s={} d={}", o.attn_seq, o.attn_head_dim);
    case OpKind::kElementwise:
      return fmt::format("{:.1f} MB", o.bytes / 1e6);
    case OpKind::kCollective:
      return fmt::format("{} {:.1f} MB n={}", to_string(o.collective), o.bytes / 1e6, o.group.size);
  }
  return "";
}

nlohmann::json ops_to_json(const Resolved& r) {
  nlohmann::json a = nlohmann::json::array();
  for (const OpCostRow& row : op_cost_rows(r.model, r.cluster, r.workload, r.plan)) {
    const Op& o = row.op;
    nlohmann::json j = {
        {"layer", row.layer},        {"name", o.name},       {"pass", pass_name(o.pass)},
        {"kind", kind_name(o.kind)}, {"shape", op_shape(o)}, {"time_s", row.time_s},
        {"host_s", row.host_s},      {"kernels", o.kernels}, {"recomputed", row.recomputed}};
    if (o.kind == OpKind::kGemm || o.kind == OpKind::kAttention) {
      j["flops"] = row.flops;
      j["efficiency"] = row.efficiency;
    }
    if (o.kind == OpKind::kElementwise || o.kind == OpKind::kAttention) j["bytes"] = o.bytes;
    if (o.kind == OpKind::kCollective) {
      j["bytes"] = o.bytes;
      j["dim"] = to_string(o.dim);
      j["algorithm"] = row.algorithm;
      j["overlappable"] = o.overlappable;
    }
    a.push_back(std::move(j));
  }
  return a;
}

std::string ops_to_text(const Resolved& r) {
  const std::vector<OpCostRow> rows = op_cost_rows(r.model, r.cluster, r.workload, r.plan);
  std::string out = fmt::format(
      "\nops of one micro-batch on one GPU ({} layers: times per layer; recomputed ops marked "
      "*)\n{:<10} {:<6} {:<24} {:<30} {:>10} {:>6} {:>9}\n",
      r.model.layers, "layer", "pass", "op", "shape", "time ms", "eff", "host us");
  const char* layer = "";
  double sums[3] = {0, 0, 0}, host[3] = {0, 0, 0};
  auto flush = [&] {
    if (!*layer) return;
    out += fmt::format(
        "{:<10} total  fwd {:.3f} ms, bwd {:.3f} ms, wgrad {:.3f} ms compute; "
        "host {:.0f} / {:.0f} / {:.0f} us\n",
        layer, sums[0] * 1e3, sums[1] * 1e3, sums[2] * 1e3, host[0] * 1e6, host[1] * 1e6,
        host[2] * 1e6);
    for (int i = 0; i < 3; ++i) sums[i] = host[i] = 0;
  };
  for (const OpCostRow& row : rows) {
    if (std::string_view(row.layer) != layer) {
      flush();
      layer = row.layer;
    }
    const Op& o = row.op;
    const int pi = static_cast<int>(o.pass);
    if (o.kind != OpKind::kCollective) sums[pi] += row.time_s;
    host[pi] += row.host_s;
    out += fmt::format(
        "{:<10} {:<6} {:<24} {:<30} {:>10.4f} {:>6} {:>9.1f}\n", row.layer, pass_name(o.pass),
        std::string(o.name) + (row.recomputed ? "*" : ""), op_shape(o), row.time_s * 1e3,
        row.efficiency > 0 ? fmt::format("{:.2f}", row.efficiency) : "", row.host_s * 1e6);
  }
  flush();
  return out;
}

std::vector<NumberWarning> step_warnings(const Resolved& r, const Estimate& e,
                                         const std::vector<std::string>& calibration_flags) {
  std::vector<NumberWarning> w;
  // A plan whose peak memory exceeds the GPU's is still estimated (the question may be how far
  // off it is), but it is said among the warnings, where scripts look, not only in the memory
  // table.
  if (!e.fits)
    w.push_back({"does-not-fit",
                 fmt::format("peak memory {:.1f} GiB per GPU exceeds the {:.0f} GiB usable: this "
                             "plan would run out of memory (more ZeRO, recomputation, TP/PP or a "
                             "smaller micro-batch; `dtplan search` finds one that fits)",
                             e.memory_peak.total_bytes() / units::kGiB,
                             e.memory_capacity_bytes / units::kGiB)});
  if (const std::string host =
          host_memory_violation(r.model, r.workload, r.plan, r.cluster.profile);
      !host.empty())
    w.push_back({"does-not-fit", host + ": this plan would run out of host memory"});
  // The waste fraction delta/tau + (tau/2 + R)/M (REFERENCE.md, Young/Daly) is a first-order
  // expansion in (tau + R)/M: past about half the job's MTBF its fractions stop meaning anything
  // (they pass 100%), and goodput is clamped to 0.
  const FailureCosts f = failure_costs(r.model, r.cluster, r.plan, e.step_time_s, r.failure);
  if (const double x = (f.interval_s + f.restart_s) / f.job_mtbf_s; x > 0.5)
    w.push_back(
        {"failure-model-out-of-range",
         fmt::format("checkpoint interval {:.0f} s + restart {:.0f} s is {:.1f}x the job MTBF "
                     "of {:.0f} s: the first-order failure model holds well under it, so its "
                     "goodput ({:.1f}%) and waste fractions are not meaningful here (shorten "
                     "--checkpoint-interval-s or the restart, or check --mtbf-per-gpu-hours)",
                     f.interval_s, f.restart_s, x, f.job_mtbf_s, 100 * f.goodput)});
  const Uncertainty u =
      uncertainty_of(r.model, r.cluster, r.workload, r.plan, e, r.framework, calibration_flags);
  w.insert(w.end(), u.warnings.begin(), u.warnings.end());
  return w;
}

void append_warnings(nlohmann::json& array, const std::vector<NumberWarning>& warnings) {
  for (const NumberWarning& w : warnings)
    array.push_back({{"code", w.code}, {"message", w.message}});
}

std::string warnings_to_text(const std::vector<NumberWarning>& warnings,
                             const std::vector<std::string>& calibration_flags,
                             const std::string& profile_name) {
  std::string text;
  for (const NumberWarning& w : warnings)
    if (w.code != "outside-calibration")
      text += fmt::format("warning [{}]: {}\n", w.code, w.message);
  if (!calibration_flags.empty()) {
    text += fmt::format("Calibration: {} input(s) outside the calibrated range of {}:\n",
                        calibration_flags.size(), profile_name);
    for (const auto& f : calibration_flags) text += "  - " + f + "\n";
  }
  return text;
}

}  // namespace dtplan::cli
