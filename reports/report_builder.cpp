#include "reports/report_builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>

#include "reports/derivations.h"
#include "reports/uncertainty.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/step_sim.h"
#include "simulator/step/step_terms.h"

namespace dtplan::reports {

PlanRow make_row(const ModelSpec& m, const Workload& w, const Candidate& c) {
  PlanRow r;
  r.plan = c.plan;
  r.estimate = c.estimate;
  r.stages = all_stage_memory(m, w, c.plan);
  r.layout = c.plan.describe();
  return r;
}

std::vector<std::pair<std::string, double>> step_components(const Estimate& e) {
  std::vector<std::pair<std::string, double>> out;
  for (const StepTermValue& t : step_terms(e)) out.emplace_back(t.label, t.seconds);
  return out;
}

namespace {

std::vector<int> divisors_up_to(int n, int limit) {
  std::vector<int> out;
  for (int d = 1; d <= std::min(n, limit); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// The values of a dimension an alternative may take: the user's pins (or `all`) minus `not_this`.
std::vector<int> others(const std::vector<int>& pinned, const std::vector<int>& all, int not_this) {
  std::vector<int> out;
  for (int v : pinned.empty() ? all : pinned)
    if (v != not_this) out.push_back(v);
  return out;
}

bool allowed(const std::vector<int>& pins, int v) {
  return pins.empty() || std::find(pins.begin(), pins.end(), v) != pins.end();
}

// One line saying why an alternative is slower or faster: the breakdown part that changed most.
std::string explain(const std::string& what, const PlanRow& base, const PlanRow& alt,
                    int nvlink_domain) {
  const auto a = step_components(base.estimate), b = step_components(alt.estimate);
  size_t k = 0;
  for (size_t i = 1; i < a.size(); ++i)
    if (std::fabs(b[i].second - a[i].second) > std::fabs(b[k].second - a[k].second)) k = i;
  const double d = b[k].second - a[k].second;
  std::string where;
  if (b[k].first == "exposed TP comm" && alt.plan.tp > nvlink_domain)
    where = " (TP group crosses nodes: scale-out links)";
  const double dstep = alt.estimate.step_time_s - base.estimate.step_time_s;
  const double gib = units::kGiB;
  return fmt::format(
      "{}: {} {:+.3f} s{}; step {:+.3f} s ({:+.1f}%), peak memory {:.1f} GiB "
      "(recommended {:.1f})",
      what, b[k].first, d, where, dstep, 100 * dstep / base.estimate.step_time_s,
      alt.estimate.memory_peak.total_bytes() / gib, base.estimate.memory_peak.total_bytes() / gib);
}

}  // namespace

ReportData build_report(const ModelSpec& m, const Cluster& c, const Workload& w,
                        const SearchSpace& space, const SearchOptions& opt,
                        const SearchResult& result, const std::string& source_json,
                        const ReportOptions& ropt) {
  const auto started = std::chrono::steady_clock::now();
  ReportData d;
  const HardwareProfile& hw = c.profile;
  d.model_name = m.name;
  d.model_display = m.display_name.empty() ? m.name : m.display_name;
  d.model_source = m.source;
  d.params = static_cast<double>(count_params(m).total());
  d.layers = m.layers;
  d.hidden = m.hidden;
  d.profile_name = hw.name;
  d.profile_description = hw.description;
  d.gpu_name = hw.gpu.name;
  d.gpus = c.num_gpus;
  d.nodes = c.nodes();
  d.gpus_per_node = hw.node.gpus_per_node;
  d.hbm_gib = hw.gpu.memory_gib;
  d.memory_budget_gib = hw.gpu.memory_gib * (1.0 - opt.memory_margin);
  d.seq_len = w.seq_len;
  d.global_batch = w.global_batch;
  d.train_tokens = w.train_tokens;
  d.precision = to_string(w.precision);
  d.objective = objective_names()[static_cast<size_t>(opt.objective)];
  d.framework = ropt.framework_stack.empty()
                    ? std::string(framework_names()[static_cast<size_t>(opt.framework)])
                    : ropt.framework_stack;
  d.title = fmt::format("{} on {} x {}", d.model_display, c.num_gpus, hw.gpu.name);
  d.stats = {result.enumerated, result.evaluated, result.feasible, result.elapsed_s};
  d.source_json = source_json;

  // Each plan with its p10-p90 (reports/uncertainty.h); the first plan's warnings once.
  auto banded = [&](const Candidate& cand, Uncertainty* keep) {
    PlanRow row = make_row(m, w, cand);
    const Uncertainty u = uncertainty_of(m, c, w, cand.plan, cand.estimate, d.framework);
    row.band = u.band.found;
    row.step_low_s = u.step_low_s;
    row.step_high_s = u.step_high_s;
    row.mfu_low = u.mfu_low;
    row.mfu_high = u.mfu_high;
    row.days_low = u.days_low;
    row.days_high = u.days_high;
    if (keep) *keep = u;
    return row;
  };
  for (const auto& cand : result.top) {
    Uncertainty u;
    d.top.push_back(banded(cand, d.top.empty() ? &u : nullptr));
    if (d.top.size() == 1) {
      for (const NumberWarning& x : u.warnings) d.number_warnings.push_back({x.code, x.message});
      if (u.band.found)
        d.band_note = fmt::format(
            "p10-p90 of measured / predicted step time over {} published runs ({} groups) like "
            "this plan: {}{}",
            u.band.cases, u.band.groups, u.band.regime,
            u.band.dropped.empty()
                ? ""
                : fmt::format("; too few runs to match {}", fmt::join(u.band.dropped, ", ")));
    }
  }
  if (!d.top.empty() && opt.framework_rules)
    for (auto& x : framework_warnings(opt.framework, d.top.front().plan, m))
      d.framework_warnings.push_back({std::move(x.code), std::move(x.message)});
  for (const auto& cand : result.pareto) d.pareto.push_back(banded(cand, nullptr));
  for (int k = 0; k < kNumRejections; ++k)
    if (result.rejected[static_cast<size_t>(k)] > 0)
      d.rejections.push_back({describe(static_cast<Rejection>(k)),
                              result.rejected[static_cast<size_t>(k)],
                              result.example[static_cast<size_t>(k)]});

  const AnalyticEvaluator evaluator;
  auto pinned_search = [&](const SearchSpace& s, const SearchOptions& o) {
    SearchOptions one = o;
    one.top_k = 1;
    one.progress = nullptr;
    return search(m, c, w, s, one, evaluator);
  };
  const int domain = std::max(1, hw.node.nvlink_domain_gpus);

  // TP x PP heatmap: the best step time with both pinned.
  if (ropt.heatmap) {
    const int tp_limit = opt.allow_cross_node_tp ? 64 : domain;
    for (int tp : divisors_up_to(c.num_gpus, tp_limit))
      if (allowed(space.tp, tp) && (m.heads % tp == 0)) d.heat_tp.push_back(tp);
    for (int pp : divisors_up_to(c.num_gpus, std::min(64, m.layers)))
      if (allowed(space.pp, pp)) d.heat_pp.push_back(pp);
    for (int pp : d.heat_pp)
      for (int tp : d.heat_tp) {
        HeatCell cell{tp, pp, false, 0, ""};
        if (c.num_gpus % (tp * pp) == 0) {
          SearchSpace s = space;
          s.tp = {tp};
          s.pp = {pp};
          const SearchResult r = pinned_search(s, opt);
          if (!r.top.empty()) {
            cell.feasible = true;
            cell.step_time_s = r.top.front().estimate.step_time_s;
            cell.layout = r.top.front().plan.describe();
          }
        }
        d.heat.push_back(cell);
      }
  }

  if (d.top.empty()) {
    d.assumptions.push_back("No plan fits: the report lists why the layouts were rejected.");
  } else {
    const PlanRow& best = d.top.front();
    const Plan& bp = best.plan;
    d.derivations = derive(m, c, w, bp, best.estimate);
    d.failures = derive_failures(m, c, w, bp, best.estimate, ropt.failure);
    d.precision_notes = derive_precision(m, c, w, bp, best.estimate);

    // Alternatives: search again with one dimension pinned away from the recommended plan.
    if (ropt.alternatives) {
      struct Alt {
        std::string dim, what;
        SearchSpace s;
        SearchOptions o;
      };
      std::vector<Alt> alts;
      auto add = [&](std::string dim, std::string what, auto change) {
        Alt a{std::move(dim), std::move(what), space, opt};
        change(a.s, a.o);
        alts.push_back(std::move(a));
      };
      const std::vector<int> tps_in_node = divisors_up_to(c.num_gpus, domain);
      if (c.num_gpus % (2 * domain) == 0 && bp.tp <= domain && allowed(space.tp, 2 * domain))
        add("tp (cross-node)", fmt::format("TP across nodes (TP{})", 2 * domain),
            [&](SearchSpace& s, SearchOptions& o) {
              s.tp = {2 * domain};
              o.allow_cross_node_tp = true;
            });
      if (auto v = others(space.tp, tps_in_node, bp.tp); !v.empty())
        add("tp", "another TP size within the NVLink domain",
            [&](SearchSpace& s, SearchOptions&) { s.tp = v; });
      if (bp.pp > 1) {
        if (allowed(space.pp, 1)) {
          add("pp", "no pipeline parallelism (PP1)",
              [&](SearchSpace& s, SearchOptions&) { s.pp = {1}; });
          if (allowed(space.zero, 3))
            add("zero", "ZeRO-3 instead of pipeline parallelism (PP1, ZeRO-3)",
                [&](SearchSpace& s, SearchOptions&) {
                  s.pp = {1};
                  s.zero = {3};
                });
        }
        if (auto v = others(space.pp, divisors_up_to(c.num_gpus, m.layers), bp.pp); !v.empty())
          add("pp", "another pipeline depth", [&](SearchSpace& s, SearchOptions&) {
            s.pp.clear();
            for (int x : v)
              if (x > 1) s.pp.push_back(x);
          });
      } else if (auto v = others(space.pp, divisors_up_to(c.num_gpus, m.layers), 1); !v.empty()) {
        add("pp", "with pipeline parallelism", [&](SearchSpace& s, SearchOptions&) { s.pp = v; });
      }
      if (auto v = others(space.zero, {0, 1, 2, 3}, bp.zero); !v.empty())
        add("zero", fmt::format("another ZeRO stage than {}", bp.zero),
            [&](SearchSpace& s, SearchOptions&) { s.zero = v; });
      if (bp.vpp > 1 && allowed(space.vpp, 1))
        add("vpp", "no interleaving (VPP1)", [&](SearchSpace& s, SearchOptions&) { s.vpp = {1}; });
      else if (bp.pp > 1 && bp.vpp == 1)
        if (auto v = others(space.vpp, {2, 3, 4, 6, 8}, 1); !v.empty())
          add("vpp", "interleaved virtual stages (VPP>1)",
              [&](SearchSpace& s, SearchOptions&) { s.vpp = v; });
      {
        std::vector<Recompute> rc;
        for (Recompute r :
             space.recompute.empty()
                 ? std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull}
                 : space.recompute)
          if (r != bp.recompute) rc.push_back(r);
        if (!rc.empty())
          add("recompute",
              bp.recompute == Recompute::kNone
                  ? std::string("with activation recomputation")
                  : fmt::format("no {} recomputation", to_string(bp.recompute)),
              [&](SearchSpace& s, SearchOptions&) { s.recompute = rc; });
      }
      if (auto v = others(space.mbs, {1, 2, 4, 8, 16}, bp.mbs); !v.empty())
        add("mbs", fmt::format("another micro-batch size than {}", bp.mbs),
            [&](SearchSpace& s, SearchOptions&) { s.mbs = v; });
      if (bp.pp > 1) {
        std::vector<std::string> sch;
        for (const auto& n : space.schedules.empty() ? schedule_names() : space.schedules)
          if (n != bp.schedule) sch.push_back(n);
        if (!sch.empty())
          add("schedule", fmt::format("another pipeline schedule than {}", bp.schedule),
              [&](SearchSpace& s, SearchOptions&) { s.schedules = sch; });
      }
      if (auto v = others(space.cp, {1, 2, 4, 8}, bp.cp); !v.empty())
        add("cp", bp.cp == 1 ? "with context parallelism" : "another context-parallel size",
            [&](SearchSpace& s, SearchOptions&) { s.cp = v; });
      if (bp.tp > 1 && !space.sp.has_value())
        add("sp", bp.sp ? "no sequence parallelism" : "with sequence parallelism",
            [&](SearchSpace& s, SearchOptions&) { s.sp = !bp.sp; });

      for (auto& a : alts) {
        Alternative out;
        out.dimension = a.dim;
        out.what = a.what;
        const SearchResult r = pinned_search(a.s, a.o);
        if (r.top.empty()) {
          out.reason = fmt::format("{}: no feasible plan: {}", a.what, why_no_plan(r));
        } else {
          out.found = true;
          out.row = make_row(m, w, r.top.front());
          out.delta_step_s = out.row.estimate.step_time_s - best.estimate.step_time_s;
          out.delta_peak_gib = (out.row.estimate.memory_peak.total_bytes() -
                                best.estimate.memory_peak.total_bytes()) /
                               units::kGiB;
          out.reason = explain(a.what, best, out.row, domain);
          // The same plan can be the best alternative in several dimensions (no PP and ZeRO-3
          // instead of PP, say): one row naming every dimension.
          bool merged = false;
          for (auto& prev : d.alternatives)
            if (prev.found && prev.row.plan.describe() == out.row.plan.describe()) {
              prev.dimension += " / " + out.dimension;
              merged = true;
              break;
            }
          if (merged) continue;
        }
        d.alternatives.push_back(std::move(out));
      }
    }

    // The recommended plan's pipeline as the discrete-event simulator plays it.
    if (ropt.timeline) {
      Timeline& t = d.timeline;
      if (bp.pp > 1 && !des::simulator_supports(bp.schedule)) {
        t.note = fmt::format(
            "The discrete-event simulator orders gpipe, 1f1b, interleaved, zb-h1, zb-v and "
            "dualpipe-v pipelines; the recommended schedule '{}' is estimated in closed form only.",
            bp.schedule);
      } else {
        const des::StepSimResult s = des::simulate_step(m, c, w, bp, true, true);
        t.available = true;
        t.stages = bp.pp;
        t.makespan_s = s.pipeline_s;
        t.simulated_step_s = s.estimate.step_time_s;
        t.analytic_step_s = s.analytic_step_s;
        t.events = s.events;
        t.tasks.reserve(s.trace.size());
        for (const auto& ev : s.trace)
          if (ev.stream == des::StreamKind::kCompute)
            t.tasks.push_back(
                {ev.stage, ev.name.empty() ? 'F' : ev.name.front(), ev.start_s, ev.end_s});
        t.note = fmt::format(
            "{} tasks on {} pipeline stage(s); simulated pipeline {:.3f} s, simulated step "
            "{:.3f} s vs closed form {:.3f} s ({:+.2f}%).",
            t.tasks.size(), t.stages, t.makespan_s, t.simulated_step_s, t.analytic_step_s,
            100 * (t.simulated_step_s - t.analytic_step_s) / t.analytic_step_s);
      }
    }
  }

  // Assumptions and provenance.
  d.assumptions.push_back(fmt::format(
      "Memory budget per GPU: {:.0f} GiB HBM less a {:.0f}% margin (--memory-margin) = {:.1f} "
      "GiB.",
      d.hbm_gib, 100 * opt.memory_margin, d.memory_budget_gib));
  d.assumptions.push_back(fmt::format(
      "{}; TP {} the NVLink domain of {} GPUs.",
      opt.framework_rules
          ? fmt::format("Plans the {} framework cannot express are rejected", d.framework)
          : fmt::format("The framework profile's trainer ({}) has no rule set: no plan is "
                        "rejected for the framework",
                        d.framework),
      opt.allow_cross_node_tp ? "may cross" : "stays within", domain));
  d.assumptions.push_back(
      "Step times are the closed-form estimator's (simulator/analytic); the timeline is the "
      "discrete-event simulator's for the same per-stage costs.");
  d.assumptions.push_back(
      "Gradient reduction overlaps the backward (bucketed) and the ZeRO parameter all-gather "
      "overlaps the forward; TP communication is not overlapped with GEMMs; flash attention; "
      "fp32 main gradients (18 B/param with Adam, Megatron-LM).");
  d.assumptions.push_back(
      "Sequence parallelism is on whenever TP > 1 unless pinned; MFU counts model FLOPs with "
      "causal attention counted at half (Megatron-LM convention).");
  d.assumptions.push_back(fmt::format(
      "Runtime buffers: CUDA context {:.0f} MB{} plus NCCL buffers per communicator (4 MiB x 2 x "
      "16 channels).",
      (d.top.empty() ? Plan{} : d.top.front().plan).cuda_context_bytes / 1e6,
      d.top.empty() || d.top.front().plan.cuda_context_bytes == kCudaContextBytes
          ? " (lazy module loading)"
          : " (the framework profile's runtime)"));
  d.assumptions.push_back(
      hw.collective_algorithm.empty()
          ? std::string("Collectives use the fastest registered algorithm for each call (as "
                        "NCCL's tuner does).")
          : fmt::format("Collectives use the '{}' algorithm where it applies (pinned), the "
                        "fastest registered one elsewhere.",
                        hw.collective_algorithm));
  if (!m.source.empty()) d.provenance.push_back({"model", d.model_display, m.source});
  d.provenance.push_back(
      {"gpu",
       fmt::format("{}: {:.0f} GiB, {:.0f} TFLOP/s {}, {:.0f} GB/s HBM", hw.gpu.name,
                   hw.gpu.memory_gib, hw.gpu.peak_flops(w.precision) / 1e12, d.precision,
                   hw.gpu.hbm_gbps),
       hw.gpu.source});
  d.provenance.push_back(
      {"node",
       fmt::format("{} GPUs, {} NVLink domain, {}, {:.0f} GB/s per direction, "
                   "{:.1f} us",
                   hw.node.gpus_per_node, hw.node.nvlink_domain_gpus, hw.node.fabric,
                   hw.node.nvlink_gbps_per_direction, hw.node.latency_us),
       hw.node.source});
  d.provenance.push_back(
      {"scale_out",
       fmt::format("{} NICs x {:.1f} GB/s, {}, oversubscription {:.2f}, {:.1f} us",
                   hw.scale_out.nics_per_node, hw.scale_out.nic_gbps, hw.scale_out.topology,
                   hw.scale_out.oversubscription, hw.scale_out.latency_us),
       hw.scale_out.source});
  if (!hw.host.source.empty())
    d.provenance.push_back(
        {"host",
         fmt::format("{:.0f} GiB, PCIe {:.0f} GB/s per GPU{}", hw.host.memory_gib,
                     hw.host.pcie_gbps_per_gpu,
                     hw.host.gpus_per_uplink > 1
                         ? fmt::format(", {} GPUs per uplink to the CPU", hw.host.gpus_per_uplink)
                         : std::string()),
         hw.host.source});
  const EfficiencyParams& ef = hw.efficiency;
  d.provenance.push_back(
      {"efficiency",
       fmt::format("GEMM max {:.3f}, half-saturation {:.2f} GFLOP, HBM {:.3f}, NVLink {:.3f}, "
                   "network {:.3f}, dispatch {:.1f} us, collective overhead {:.1f} us",
                   ef.gemm_max_fraction, ef.gemm_half_saturation_gflop, ef.memory_bw_fraction,
                   ef.nvlink_bw_fraction, ef.network_bw_fraction, ef.host_dispatch_us,
                   ef.collective_overhead_us),
       ef.source});
  if (hw.checkpoint_write_gbps_per_node)
    d.provenance.push_back({"storage",
                            fmt::format("{:.1f} GB/s per node", *hw.checkpoint_write_gbps_per_node),
                            hw.storage_source});
  {
    // The failure rate the report's numbers use: the profile's, a cluster YAML's or
    // --mtbf-per-gpu-hours (services_of), with its source.
    const ReliabilitySpec rel = services_of(c).reliability;
    d.provenance.push_back(
        {"reliability", fmt::format("MTBF {:.0f} h per GPU", rel.mtbf_per_gpu_hours), rel.source});
  }
  if (hw.usd_per_gpu_hour)
    d.provenance.push_back(
        {"price", fmt::format("{:.2f} USD per GPU-hour", *hw.usd_per_gpu_hour), hw.price_source});
  if (!hw.calibration.empty())
    d.provenance.push_back(
        {"calibration",
         fmt::format("{} GEMM points, {} collective tables", hw.calibration.gemm.size(),
                     hw.calibration.collectives.size()),
         hw.calibration.provenance.source});
  d.generation_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return d;
}

}  // namespace dtplan::reports
