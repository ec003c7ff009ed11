#include "reports/whatif.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "core/registry.h"
#include "core/yaml_reader.h"
#include "planner/search.h"
#include "reports/report_builder.h"
#include "reports/uncertainty.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/i_collective_algorithm.h"
#include "simulator/cost/reliability.h"

namespace dtplan::reports {

namespace {

ScenarioSettings read_settings(YamlMap& y, bool is_base) {
  ScenarioSettings s;
  const std::string& file = y.file();
  s.where = location_of(y.node(), file);
  for (const auto& kv : y.node()) s.keys.push_back(kv.first.as<std::string>());
  if (is_base)
    s.name = y.opt_string("name").value_or("base");
  else
    s.name = y.get_string("name");
  auto checked = [&](const char* key, SourceLocation& at, auto resolve) {
    std::optional<std::string> v = y.opt_string(key);
    if (!v) return v;
    at = location_of(y.node()[key], file);
    v = relative_to(*v, file);
    try {
      resolve(*v);
    } catch (const InputError& e) {
      throw InputError(at, y.field(key), e.reason());
    }
    return v;
  };
  s.model = checked("model", s.model_at, [](const std::string& v) { resolve_model_path(v); });
  s.profile = checked("profile", s.profile_at, [](const std::string& v) { load_profile(v); });
  s.cluster = checked("cluster", s.cluster_at, [](const std::string& v) { load_cluster(v, 0); });
  if (s.profile && s.cluster)
    y.fail("cluster", "give either a profile (with gpus) or a cluster file, not both");
  if (auto g = y.opt_int("gpus", 1)) {
    if (*g > (1 << 22)) y.fail("gpus", "more than 4 million GPUs");
    s.gpus = static_cast<int>(*g);
  }
  if (auto v = y.opt_int("seq", 1)) s.seq = *v;
  if (auto v = y.opt_int("gbs", 1)) s.gbs = *v;
  s.precision = y.opt_enum("precision", {"bf16", "fp16", "fp8"});
  s.objective = y.opt_enum("objective", objective_names());
  s.framework = y.opt_enum("framework", framework_names());
  s.sp = y.opt_enum("sp", {"auto", "on", "off"});
  if (y.has("collective_algorithm")) {
    s.algorithm_at = location_of(y.node()["collective_algorithm"], file);
    s.collective_algorithm =
        y.get_enum("collective_algorithm", Registry<ICollectiveAlgorithm>::global().names());
  }
  if (auto v = y.opt_double("memory_margin", 0.0, true)) {
    if (*v > 0.9) y.fail("memory_margin", "must be at most 0.9");
    s.memory_margin = v;
  }
  s.nic_gbps = y.opt_double_in("nic_gbps", 0.001, 1e5);
  s.nvlink_gbps = y.opt_double_in("nvlink_gbps", 0.01, 1e6);
  s.allow_cross_node_tp = y.opt_bool("allow_cross_node_tp");
  s.mtbf_per_gpu_hours = y.opt_double_in("mtbf_per_gpu_hours", 1, 1e12);
  s.checkpoint_write_gbps_per_node = y.opt_double_in("checkpoint_write_gbps_per_node", 0.001, 1e6);
  s.restart_s = y.opt_double("restart_s", 0.0, true);
  s.async_save = y.opt_bool("async_save");
  s.loader_tokens_per_s_per_node = y.opt_double_in("loader_tokens_per_s_per_node", 1, 1e15);
  if (auto v = y.opt_double("straggler_fraction", 0.0, true)) {
    if (*v > 1) y.fail("straggler_fraction", "must be at most 1 (a share of the GPUs)");
    s.straggler_fraction = v;
  }
  if (auto v = y.opt_double("straggler_factor", 1.0, true)) {
    if (*v > 1000) y.fail("straggler_factor", "must be at most 1000");
    s.straggler_factor = v;
  }
  if (auto v = y.opt_int("parameter_servers", 1)) {
    if (*v > (1 << 20)) y.fail("parameter_servers", "more than a million servers");
    s.parameter_servers = static_cast<int>(*v);
  }
  s.train_tokens = y.opt_double("train_tokens", 0.0);
  auto ints = [&](const char* key, int lo, int hi) -> std::optional<std::vector<int>> {
    if (!y.has(key)) return std::nullopt;
    return int_list(y.child(key), file, y.field(key), lo, hi);
  };
  s.tp = ints("tp", 1, 1024);
  s.pp = ints("pp", 1, 1024);
  s.cp = ints("cp", 1, 1024);
  s.ep = ints("ep", 1, 4096);
  s.vpp = ints("vpp", 1, 256);
  s.mbs = ints("mbs", 1, 1 << 20);
  s.zero = ints("zero", 0, 3);
  if (y.has("recompute"))
    s.recompute = string_list(y.child("recompute"), file, y.field("recompute"),
                              {"none", "selective", "full"});
  if (y.has("schedule")) {
    s.schedule_at = location_of(y.node()["schedule"], file);
    s.schedule = string_list(y.child("schedule"), file, y.field("schedule"), schedule_names());
  }
  y.finish();
  return s;
}

template <typename T>
void take(std::optional<T>& into, const std::optional<T>& from) {
  if (from) into = from;
}

ScenarioSettings merge(const ScenarioSettings& base, const ScenarioSettings& v) {
  ScenarioSettings s = base;
  s.name = v.name;
  s.where = v.where;
  s.keys = v.keys;
  if (v.profile) {
    s.cluster.reset();
    s.profile = v.profile;
    s.profile_at = v.profile_at;
  }
  if (v.cluster) {
    s.profile.reset();
    s.cluster = v.cluster;
    s.cluster_at = v.cluster_at;
  }
  if (v.model) {
    s.model = v.model;
    s.model_at = v.model_at;
  }
  take(s.gpus, v.gpus);
  take(s.seq, v.seq);
  take(s.gbs, v.gbs);
  take(s.precision, v.precision);
  take(s.objective, v.objective);
  take(s.framework, v.framework);
  take(s.sp, v.sp);
  if (v.collective_algorithm) {
    s.collective_algorithm = v.collective_algorithm;
    s.algorithm_at = v.algorithm_at;
  }
  take(s.memory_margin, v.memory_margin);
  take(s.nic_gbps, v.nic_gbps);
  take(s.nvlink_gbps, v.nvlink_gbps);
  take(s.allow_cross_node_tp, v.allow_cross_node_tp);
  take(s.mtbf_per_gpu_hours, v.mtbf_per_gpu_hours);
  take(s.checkpoint_write_gbps_per_node, v.checkpoint_write_gbps_per_node);
  take(s.restart_s, v.restart_s);
  take(s.async_save, v.async_save);
  take(s.loader_tokens_per_s_per_node, v.loader_tokens_per_s_per_node);
  take(s.straggler_fraction, v.straggler_fraction);
  take(s.straggler_factor, v.straggler_factor);
  take(s.parameter_servers, v.parameter_servers);
  take(s.train_tokens, v.train_tokens);
  take(s.tp, v.tp);
  take(s.pp, v.pp);
  take(s.cp, v.cp);
  take(s.ep, v.ep);
  take(s.vpp, v.vpp);
  take(s.mbs, v.mbs);
  take(s.zero, v.zero);
  take(s.recompute, v.recompute);
  if (v.schedule) {
    s.schedule = v.schedule;
    s.schedule_at = v.schedule_at;
  }
  return s;
}

std::string describe_settings(const ScenarioSettings& s, bool is_base) {
  std::vector<std::string> parts;
  auto ints = [](const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, ",")); };
  for (const auto& k : s.keys) {
    if (k == "name") continue;
    if (k == "model" && s.model) parts.push_back("model " + *s.model);
    if (k == "profile" && s.profile) parts.push_back("profile " + *s.profile);
    if (k == "cluster" && s.cluster) parts.push_back("cluster " + *s.cluster);
    if (k == "gpus" && s.gpus) parts.push_back(fmt::format("{} GPUs", *s.gpus));
    if (k == "seq" && s.seq) parts.push_back(fmt::format("seq {}", *s.seq));
    if (k == "gbs" && s.gbs) parts.push_back(fmt::format("gbs {}", *s.gbs));
    if (k == "precision" && s.precision) parts.push_back(*s.precision);
    if (k == "objective" && s.objective) parts.push_back("objective " + *s.objective);
    if (k == "framework" && s.framework) parts.push_back("framework " + *s.framework);
    if (k == "sp" && s.sp) parts.push_back("SP " + *s.sp);
    if (k == "collective_algorithm" && s.collective_algorithm)
      parts.push_back("collectives " + *s.collective_algorithm);
    if (k == "memory_margin" && s.memory_margin)
      parts.push_back(fmt::format("memory margin {:g}", *s.memory_margin));
    if (k == "nic_gbps" && s.nic_gbps) parts.push_back(fmt::format("NIC {:g} GB/s", *s.nic_gbps));
    if (k == "nvlink_gbps" && s.nvlink_gbps)
      parts.push_back(fmt::format("NVLink {:g} GB/s", *s.nvlink_gbps));
    if (k == "mtbf_per_gpu_hours" && s.mtbf_per_gpu_hours)
      parts.push_back(fmt::format("MTBF {:g} h per GPU", *s.mtbf_per_gpu_hours));
    if (k == "checkpoint_write_gbps_per_node" && s.checkpoint_write_gbps_per_node)
      parts.push_back(
          fmt::format("checkpoint writes {:g} GB/s per node", *s.checkpoint_write_gbps_per_node));
    if (k == "restart_s" && s.restart_s)
      parts.push_back(fmt::format("restart {:g} s", *s.restart_s));
    if (k == "async_save" && s.async_save)
      parts.push_back(*s.async_save ? "asynchronous checkpoints" : "synchronous checkpoints");
    if (k == "loader_tokens_per_s_per_node" && s.loader_tokens_per_s_per_node)
      parts.push_back(
          fmt::format("loader {:.3g} tokens/s per node", *s.loader_tokens_per_s_per_node));
    if (k == "straggler_fraction" && s.straggler_fraction)
      parts.push_back(fmt::format("{:g}% of GPUs slow", 100 * *s.straggler_fraction));
    if (k == "straggler_factor" && s.straggler_factor)
      parts.push_back(fmt::format("stragglers x{:g}", *s.straggler_factor));
    if (k == "parameter_servers" && s.parameter_servers)
      parts.push_back(fmt::format("{} parameter servers", *s.parameter_servers));
    if (k == "train_tokens" && s.train_tokens)
      parts.push_back(fmt::format("train {:.3g}T tokens", *s.train_tokens / 1e12));
    if (k == "allow_cross_node_tp" && s.allow_cross_node_tp)
      parts.push_back(*s.allow_cross_node_tp ? "TP may cross nodes" : "TP within a node");
    for (auto [key, v] : {std::pair{"tp", &s.tp}, std::pair{"pp", &s.pp}, std::pair{"cp", &s.cp},
                          std::pair{"ep", &s.ep}, std::pair{"vpp", &s.vpp},
                          std::pair{"mbs", &s.mbs}, std::pair{"zero", &s.zero}})
      if (k == key && *v) parts.push_back(std::string(key) + " " + ints(**v));
    if (k == "recompute" && s.recompute)
      parts.push_back(fmt::format("recompute {}", fmt::join(*s.recompute, ",")));
    if (k == "schedule" && s.schedule)
      parts.push_back(fmt::format("schedule {}", fmt::join(*s.schedule, ",")));
  }
  if (parts.empty()) return is_base ? "base" : "as the base";
  return fmt::format("{}", fmt::join(parts, "; "));
}

nlohmann::json column_json(const ScenarioColumn& c) {
  nlohmann::json j = {{"name", c.name},
                      {"settings", c.description},
                      {"model", c.model_display},
                      {"profile", c.profile_name},
                      {"gpus", c.gpus},
                      {"seq", c.seq_len},
                      {"gbs", c.global_batch},
                      {"precision", c.precision},
                      {"feasible_plans", c.feasible}};
  if (!c.found) {
    j["best"] = nullptr;
    j["why_none"] = c.top_rejection;
    return j;
  }
  const Estimate& e = c.best.estimate;
  nlohmann::json breakdown;
  for (const auto& [name, v] : step_components(e)) breakdown[name] = v;
  nlohmann::json volume;
  for (int d = 0; d < kCommDims; ++d) volume[kCommDimNames[d]] = e.comm_volume_bytes[d];
  j["best"] = {{"layout", c.best.layout},
               {"step_time_s", e.step_time_s},
               {"breakdown_s", breakdown},
               {"comm_volume_bytes", volume},
               {"tokens_per_s", e.tokens_per_s},
               {"tokens_per_s_per_gpu", e.tokens_per_s_per_gpu},
               {"mfu", e.mfu},
               {"mfu_of_bf16_peak", c.mfu_bf16},
               {"bubble_fraction", e.bubble_fraction},
               {"peak_memory_gib", e.memory_peak.total_bytes() / units::kGiB}};
  if (c.band) {
    j["best"]["step_time_s_interval"] = {c.step_low_s, c.step_high_s};
    if (c.train_tokens > 0) j["best"]["time_to_train_days_interval"] = {c.days_low, c.days_high};
  }
  j["warnings"] = c.warning_codes;
  if (c.train_tokens > 0) {
    j["best"]["train_tokens"] = c.train_tokens;
    j["best"]["time_to_train_days"] = c.time_to_train_days;
    if (c.time_to_train_with_failures_days > 0)
      j["best"]["time_to_train_with_failures_days"] = c.time_to_train_with_failures_days;
  }
  if (c.has_reliability)
    j["reliability"] = {
        {"job_mtbf_s", c.job_mtbf_s},       {"checkpoint_s", c.checkpoint_s},
        {"restart_s", c.restart_s},         {"checkpoint_interval_s", c.checkpoint_interval_s},
        {"lost_fraction", c.lost_fraction}, {"goodput_tokens_per_s", c.goodput_tokens_per_s}};
  return j;
}

}  // namespace

ScenarioFile load_scenarios(const std::string& path) {
  YAML::Node root = load_yaml_file(path);
  if (!root.IsMap())
    throw InputError(location_of(root, path), "",
                     "a scenarios file is a map with base and variations");
  YamlMap y(root, path, "");
  ScenarioFile f;
  f.file = path;
  f.title = y.opt_string("title").value_or(std::filesystem::path(path).stem().string());
  YamlMap base = y.get_map("base");
  f.base = read_settings(base, true);
  const YAML::Node vars = y.child("variations");
  if (vars.IsDefined() && !vars.IsNull()) {
    if (!vars.IsSequence())
      throw InputError(location_of(vars, path), "variations", "expected a list of scenarios");
    for (size_t i = 0; i < vars.size(); ++i) {
      const std::string field = fmt::format("variations[{}]", i);
      if (!vars[i].IsMap())
        throw InputError(location_of(vars[i], path), field, "expected a map with a name");
      YamlMap v(vars[i], path, field);
      f.variations.push_back(read_settings(v, false));
      const std::string& name = f.variations.back().name;
      bool twice = name == f.base.name;
      for (size_t k = 0; k + 1 < f.variations.size(); ++k) twice |= f.variations[k].name == name;
      if (twice)
        throw InputError(location_of(vars[i]["name"], path), field + ".name",
                         fmt::format("scenario name '{}' is used twice", name));
    }
  }
  y.finish();
  return f;
}

WhatifData run_whatif(const ScenarioFile& f, int threads) {
  const auto started = std::chrono::steady_clock::now();
  WhatifData d;
  d.title = f.title;
  d.file = f.file;
  std::vector<ScenarioSettings> all = {f.base};
  for (const auto& v : f.variations) all.push_back(merge(f.base, v));
  nlohmann::json j;
  j["title"] = f.title;
  j["scenarios"] = nlohmann::json::array();
  for (size_t i = 0; i < all.size(); ++i) {
    const ScenarioSettings& s = all[i];
    ModelSpec model = load_model(s.model.value_or("gpt3-175b"));
    Cluster cluster;
    try {
      if (s.cluster)
        cluster = load_cluster(*s.cluster, s.gpus.value_or(0));
      else
        cluster = load_cluster(s.profile.value_or("dgx-a100-80g"), s.gpus.value_or(256));
    } catch (const InputError& e) {
      throw InputError(s.cluster           ? s.cluster_at
                       : s.profile_at.line ? s.profile_at
                                           : s.where,
                       fmt::format("scenario '{}'", s.name), e.reason());
    }
    if (cluster.heterogeneous())
      throw InputError(s.cluster_at, fmt::format("scenario '{}'", s.name),
                       "a cluster with device groups: what-if studies vary one cluster's "
                       "hardware and take homogeneous clusters only (estimate, search and "
                       "simulate take heterogeneous ones)");
    HardwareProfile& hw = cluster.profile;
    if (s.nic_gbps) hw.scale_out.nic_gbps = *s.nic_gbps;
    if (s.nvlink_gbps) hw.node.nvlink_gbps_per_direction = *s.nvlink_gbps;
    if (s.collective_algorithm) hw.collective_algorithm = *s.collective_algorithm;
    if (s.parameter_servers) hw.parameter_servers = *s.parameter_servers;
    if (s.mtbf_per_gpu_hours || s.checkpoint_write_gbps_per_node ||
        s.loader_tokens_per_s_per_node || s.straggler_fraction) {
      ClusterServices sv = services_of(cluster);
      if (s.loader_tokens_per_s_per_node) {
        sv.data.tokens_per_s_per_node = *s.loader_tokens_per_s_per_node;
        sv.data.source = "what-if scenario";
      }
      if (s.straggler_fraction)
        sv.stragglers = {*s.straggler_fraction, s.straggler_factor.value_or(1.2)};
      if (s.mtbf_per_gpu_hours) {
        sv.reliability.mtbf_per_gpu_hours = *s.mtbf_per_gpu_hours;
        sv.reliability.source = "what-if scenario";
      }
      if (s.checkpoint_write_gbps_per_node) {
        sv.storage.write_gbps_per_node = *s.checkpoint_write_gbps_per_node;
        sv.storage.read_gbps_per_node = *s.checkpoint_write_gbps_per_node;
        sv.storage.source = "what-if scenario";
      }
      cluster.services = sv;
    }
    Workload w;
    w.seq_len = s.seq.value_or(2048);
    w.global_batch = s.gbs.value_or(1536);
    w.precision = parse_precision(s.precision.value_or("bf16")).value_or(Precision::kBf16);
    w.train_tokens = s.train_tokens.value_or(0);
    SearchSpace space;
    space.tp = s.tp.value_or(std::vector<int>{});
    space.pp = s.pp.value_or(std::vector<int>{});
    space.cp = s.cp.value_or(std::vector<int>{});
    space.ep = s.ep.value_or(std::vector<int>{});
    space.vpp = s.vpp.value_or(std::vector<int>{});
    space.mbs = s.mbs.value_or(std::vector<int>{});
    space.zero = s.zero.value_or(std::vector<int>{});
    for (const auto& r : s.recompute.value_or(std::vector<std::string>{}))
      space.recompute.push_back(r == "full"        ? Recompute::kFull
                                : r == "selective" ? Recompute::kSelective
                                                   : Recompute::kNone);
    space.schedules = s.schedule.value_or(std::vector<std::string>{});
    if (s.sp && *s.sp != "auto") space.sp = *s.sp == "on";
    SearchOptions opt;
    const auto& objs = objective_names();
    opt.objective = static_cast<Objective>(
        std::find(objs.begin(), objs.end(), s.objective.value_or("step_time")) - objs.begin());
    opt.framework = parse_framework(s.framework.value_or("megatron"));
    opt.memory_margin = s.memory_margin.value_or(0.10);
    opt.allow_cross_node_tp = s.allow_cross_node_tp.value_or(false);
    opt.threads = threads;
    opt.top_k = 1;
    const SearchResult r = search(model, cluster, w, space, opt, AnalyticEvaluator{});

    ScenarioColumn c;
    c.name = s.name;
    c.description = describe_settings(i == 0 ? f.base : f.variations[i - 1], i == 0);
    c.model_display = model.display_name.empty() ? model.name : model.display_name;
    c.gpu_name = hw.gpu.name;
    c.profile_name = hw.name;
    c.gpus = cluster.num_gpus;
    c.seq_len = w.seq_len;
    c.global_batch = w.global_batch;
    c.precision = to_string(w.precision);
    c.feasible = r.feasible;
    if (!r.top.empty()) {
      c.found = true;
      c.best = make_row(model, w, r.top.front());
      if (const double bf16 = hw.gpu.peak_flops(Precision::kBf16); bf16 > 0)
        c.mfu_bf16 = c.best.estimate.model_tflops_per_gpu * 1e12 / bf16;
      {
        FailureOptions fo;
        fo.restart_s = s.restart_s;
        fo.async_save = s.async_save.value_or(false);
        fo.writers = checkpoint_writers_of_stack(framework_name(opt.framework));
        const FailureCosts fc = failure_costs(model, cluster, r.top.front().plan,
                                              r.top.front().estimate.step_time_s, fo);
        c.has_reliability = true;
        c.checkpoint_s = fc.checkpoint_blocking_s;
        c.restart_s = fc.restart_s;
        c.job_mtbf_s = fc.job_mtbf_s;
        c.checkpoint_interval_s = fc.interval_s;
        c.lost_fraction = fc.lost_fraction;
        c.goodput_tokens_per_s = c.best.estimate.tokens_per_s * fc.goodput;
      }
      {
        const Uncertainty u = uncertainty_of(model, cluster, w, r.top.front().plan,
                                             r.top.front().estimate, framework_name(opt.framework));
        c.band = u.band.found;
        c.step_low_s = u.step_low_s;
        c.step_high_s = u.step_high_s;
        c.days_low = u.days_low;
        c.days_high = u.days_high;
        for (const NumberWarning& x : u.warnings) c.warning_codes.push_back(x.code);
      }
      if (w.train_tokens > 0) {
        c.train_tokens = w.train_tokens;
        c.time_to_train_days = c.best.estimate.time_to_train_days;
        if (c.has_reliability && c.goodput_tokens_per_s > 0)
          c.time_to_train_with_failures_days =
              w.train_tokens / c.goodput_tokens_per_s / units::kSecondsPerDay;
      }
    } else {
      c.top_rejection = why_no_plan(r);
    }
    j["scenarios"].push_back(column_json(c));
    d.columns.push_back(std::move(c));
  }
  d.source_json = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  d.generation_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return d;
}

}  // namespace dtplan::reports
