// What-if studies: a scenarios YAML (docs/file-formats.md, "What-if scenarios") names a base
// and variations; each scenario is searched in full and its best plan becomes one column.
//
// Contract: load_scenarios() reads with the strict YAML reader (core/yaml_reader.h): unknown
// keys, wrong types and bad values are InputErrors naming file:line:col; names of models,
// profiles, schedules and collective algorithms are checked when the scenario runs, and their
// errors name the key's file:line:col too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "reports/report_data.h"

namespace dtplan::reports {

// Settings one scenario gives; unset fields come from the base (and then from the defaults of
// `dtplan search`).
struct ScenarioSettings {
  std::string name;
  SourceLocation where;  // the scenario's map in the file
  std::optional<std::string> model, profile, cluster;
  SourceLocation model_at, profile_at, cluster_at, algorithm_at, schedule_at;
  std::optional<int> gpus;
  std::optional<int64_t> seq, gbs;
  std::optional<std::string> precision, objective, framework, sp, collective_algorithm;
  std::optional<double> memory_margin, nic_gbps, nvlink_gbps;
  // Failure rate and checkpointing: MTBF per GPU, checkpoint write bandwidth per node (GB/s),
  // time to restart after a failure (default: reading the checkpoint back at the write rate).
  std::optional<double> mtbf_per_gpu_hours, checkpoint_write_gbps_per_node, restart_s;
  std::optional<bool> async_save;  // checkpoints block only for the device-to-host copy
  // Beyond the step: the data loader's rate per node, stragglers (closed form), parameter
  // servers for `collective_algorithm: ps`.
  std::optional<double> loader_tokens_per_s_per_node, straggler_fraction, straggler_factor;
  std::optional<int> parameter_servers;
  std::optional<double> train_tokens;  // time to train (days) for this many tokens
  std::optional<bool> allow_cross_node_tp;
  std::optional<std::vector<int>> tp, pp, cp, ep, vpp, mbs, zero;
  std::optional<std::vector<std::string>> recompute, schedule;
  std::vector<std::string> keys;  // the keys this scenario set, in file order (for descriptions)
};

struct ScenarioFile {
  std::string file;
  std::string title;
  ScenarioSettings base;
  std::vector<ScenarioSettings> variations;
};

ScenarioFile load_scenarios(const std::string& path);

// Runs every scenario (the base first) and fills the columns; `threads` as SearchOptions.
WhatifData run_whatif(const ScenarioFile& f, int threads = 0);

}  // namespace dtplan::reports
