// What-if scenarios: the strict reader (positions, unknown keys, bad values), merging of the base
// into variations, the shipped examples, and the collective-algorithm pin they use.
#include "reports/whatif.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "core/catalog.h"
#include "reports/renderers.h"
#include "simulator/cost/collective_cost.h"

namespace dtplan::reports {
namespace {

std::string examples() { return std::string(DTPLAN_TEST_DATA_DIR) + "/examples/whatif/"; }

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("dtplan_whatif_" + name);
  std::ofstream(path) << text;
  return path.string();
}

// The error's message for a scenarios file, or "" when it loads.
std::string error_of(const std::string& name, const std::string& text) {
  try {
    load_scenarios(write_temp(name, text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Whatif, ExamplesLoad) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples())) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    const ScenarioFile f = load_scenarios(entry.path().string());
    EXPECT_FALSE(f.variations.empty()) << entry.path();
    EXPECT_FALSE(f.title.empty());
  }
  EXPECT_EQ(files, 7);
  const ScenarioFile g = load_scenarios(examples() + "gpu-generations.yaml");
  EXPECT_EQ(g.base.name, "A100 80GB");
  ASSERT_EQ(g.variations.size(), 2u);
  EXPECT_EQ(*g.variations[1].profile, "dgx-b200");
}

TEST(Whatif, ErrorsNameFileLineAndColumn) {
  EXPECT_NE(error_of("a.yaml", "base:\n  gpus: 8\n  profile: dgx-h100\n  tpp: 8\n")
                .find("dtplan_whatif_a.yaml:4:3"),
            std::string::npos);
  EXPECT_NE(
      error_of("b.yaml", "base:\n  gpus: 8\n  profile: dgx-h100\n  zero: [1, 4]\n").find(":4:13"),
      std::string::npos);
  EXPECT_NE(error_of("c.yaml", "base:\n  profile: dgx-h100\n  gpus: 8\nvariations:\n  - gpus: 16\n")
                .find("name"),
            std::string::npos);
  EXPECT_NE(error_of("d.yaml",
                     "base:\n  name: x\n  profile: dgx-h100\n  gpus: 8\nvariations:\n  - name: x\n")
                .find("used twice"),
            std::string::npos);
  EXPECT_NE(
      error_of("e.yaml", "base:\n  profile: dgx-h100\n  gpus: 8\n  precision: fp4\n").find(":4:14"),
      std::string::npos);
  EXPECT_NE(error_of("f.yaml", "base:\n  profile: dgx-h10\n  gpus: 8\n").find(":2:12"),
            std::string::npos);
  EXPECT_NE(error_of("g.yaml", "base:\n  profile: dgx-h100\n  gpus: 8\n  schedule: [1f1b, zb]\n")
                .find(":4:20"),
            std::string::npos);
  EXPECT_NE(error_of("h.yaml", "base:\n  profile: dgx-h100\n  gpus: 8\ntitel: t\n").find(":4:1"),
            std::string::npos);
  // The keys beyond the step (#18).
  const char* head = "base:\n  profile: dgx-h100\n  gpus: 8\n";
  for (const auto& [name, line, where] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"i.yaml", "  straggler_fraction: 1.5\n", ":4:23"},
           {"j.yaml", "  straggler_factor: 0.5\n", ":4:21"},
           {"k.yaml", "  parameter_servers: 0\n", ":4:22"},
           {"l.yaml", "  async_save: yes please\n", ":4:15"},
           {"m.yaml", "  loader_tokens_per_s_per_node: -1\n", ":4:33"},
           {"n.yaml", "  loader_tokens_per_s_per_nod: 5\n", ":4:3"}}) {
    const std::string err = error_of(name, std::string(head) + line);
    EXPECT_NE(err.find(where), std::string::npos) << name << ": " << err;
  }
  EXPECT_EQ(error_of("ok.yaml", "base:\n  profile: dgx-h100\n  gpus: 8\n"), "");
}

// Interleaving divides the 1F1B bubble by about v (Narayanan et al. 2021, section 2.2.2). The
// zero-bubble V schedule (Qi et al. 2024) idles nowhere inside a rank's span, but a synchronized
// step still pays the fill, (p-1)F/2 with equal passes: about interleaving's bubble at v = 6 (the
// best here), with a third of its sends and 1F1B's activation memory, so the faster step. Its
// last chunk runs on rank 0 (the V), so rank 0 holds the embedding and the output layer and is
// the busiest: the other ranks' fill partly hides behind its extra work, and the bubble is at
// most interleaving's. Each column keeps the pinned TP8 x PP16 and its own schedule.
TEST(Whatif, PipelineScheduleStudyShrinksTheBubble) {
  const WhatifData d = run_whatif(load_scenarios(examples() + "pipeline-schedules.yaml"), 2);
  ASSERT_EQ(d.columns.size(), 3u);
  const char* schedules[] = {"1f1b", "interleaved", "zb-v"};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(d.columns[i].found) << d.columns[i].top_rejection;
    EXPECT_EQ(d.columns[i].best.plan.schedule, schedules[i]);
    EXPECT_EQ(d.columns[i].best.plan.tp, 8);
    EXPECT_EQ(d.columns[i].best.plan.pp, 16);
  }
  const Estimate &one_f_one_b = d.columns[0].best.estimate, &inter = d.columns[1].best.estimate,
                 &zbv = d.columns[2].best.estimate;
  EXPECT_GT(one_f_one_b.bubble_s, inter.bubble_s);
  EXPECT_LT(zbv.bubble_s, one_f_one_b.bubble_s / 4);
  EXPECT_GT(zbv.bubble_s, 0);
  EXPECT_LT(zbv.bubble_s, 1.2 * inter.bubble_s);
  EXPECT_LT(zbv.step_time_s, inter.step_time_s);
  EXPECT_LT(zbv.memory_peak.activations_bytes, inter.memory_peak.activations_bytes);
  EXPECT_NE(d.source_json.find("schedule=zb-v"), std::string::npos);
}

// ZeRO shards the optimizer state over the data-parallel group from stage 1 on (Rajbhandari et
// al. 2020): 12 B/param unsharded, 12/64 with 64 ranks.
TEST(Whatif, ZeroStudyShardsTheOptimizerState) {
  const WhatifData d = run_whatif(load_scenarios(examples() + "zero-stages.yaml"), 2);
  ASSERT_EQ(d.columns.size(), 4u);
  for (const auto& c : d.columns) ASSERT_TRUE(c.found) << c.name << ": " << c.top_rejection;
  const double unsharded = d.columns[0].best.estimate.memory_peak.optimizer_bytes;
  for (int z = 1; z <= 3; ++z) {
    EXPECT_EQ(d.columns[static_cast<size_t>(z)].best.plan.zero, z);
    EXPECT_NEAR(d.columns[static_cast<size_t>(z)].best.estimate.memory_peak.optimizer_bytes,
                unsharded / 64, 1e-6 * unsharded);
  }
  // Peak memory falls stage by stage.
  for (size_t z = 1; z < 4; ++z)
    EXPECT_LT(d.columns[z].best.estimate.memory_peak.total_bytes(),
              d.columns[z - 1].best.estimate.memory_peak.total_bytes());
}

TEST(Whatif, PinnedCollectiveAlgorithmAppliesWhereItCan) {
  HardwareProfile hw = load_profile("dgx-a100-80g");
  GroupPlacement across;  // 32 ranks, 8 per node on 4 nodes
  across.size = 32;
  across.ranks_per_node = 8;
  across.nodes = 4;
  across.node_gpus_busy = 8;
  GroupPlacement inside;  // 8 ranks in one node
  inside.size = 8;
  inside.ranks_per_node = 8;
  inside.nodes = 1;
  inside.node_gpus_busy = 8;
  hw.collective_algorithm = "tree";
  EXPECT_STREQ(collective_cost(hw, CollectiveOp::kAllReduce, 1e9, across).algorithm, "tree");
  // Tree does not implement all-gather: the fastest algorithm that does (ring) runs it.
  EXPECT_STREQ(collective_cost(hw, CollectiveOp::kAllGather, 1e9, across).algorithm, "ring");
  hw.collective_algorithm = "hierarchical";
  EXPECT_STREQ(collective_cost(hw, CollectiveOp::kAllReduce, 1e9, across).algorithm,
               "hierarchical");
  // Within one node there is no hierarchy: not the pinned algorithm.
  EXPECT_STRNE(collective_cost(hw, CollectiveOp::kAllReduce, 1e9, inside).algorithm,
               "hierarchical");
  hw.collective_algorithm = "ring";
  const double ring = collective_cost(hw, CollectiveOp::kAllReduce, 1e9, across).time_s;
  hw.collective_algorithm = "";
  const CollectiveCost fastest = collective_cost(hw, CollectiveOp::kAllReduce, 1e9, across);
  EXPECT_LE(fastest.time_s, ring);
}

}  // namespace
}  // namespace dtplan::reports

namespace dtplan::reports {
namespace {

// Failure-rate columns against a hand computation: job MTBF = per-GPU MTBF / GPUs; a checkpoint
// of 14 B/param (16-bit weights + fp32 master, Adam m, v), every rank copying its 1/1024 shard
// to the host (PCIe Gen4, 32 GB/s, dgx-a100-80g) and every node writing its 8 shards at the
// scenario's rate (synchronous save: copy + write); Young's interval sqrt(2 delta M) (Young
// 1974); a restart of detection 90 s + requeue 300 s + init 30 s + 2.76 s per 1,000 ranks +
// reading the checkpoint back (docs/resilience.md defaults); lost share
// delta/tau + (tau/2 + restart)/M.
TEST(Whatif, FailureRateStudyMatchesAHandComputation) {
  const WhatifData d = run_whatif(load_scenarios(examples() + "failure-rate.yaml"), 2);
  ASSERT_EQ(d.columns.size(), 4u);
  const double params = 174.6e9;  // GPT-3 175B as the zoo counts it (dtplan list models)
  const double mtbf[] = {50600, 12650, 50600, 50600}, gbps[] = {5, 5, 20, 5};
  for (size_t i = 0; i < 4; ++i) {
    const ScenarioColumn& c = d.columns[i];
    ASSERT_TRUE(c.found && c.has_reliability) << c.name;
    const double m = mtbf[i] * 3600 / 1024;
    const double d2h = 14 * params / 1024 / 16e9;  // PCIe Gen4 32 GB/s, two GPUs per uplink
    const double write = 14 * params / (gbps[i] * 1e9 * 128);
    const double delta = d2h + write;
    const double restart = i == 3 ? 1800 : 90 + 300 + 30 + 265.0 / 96 * 1.024 + write + d2h;
    const double tau = std::sqrt(2 * delta * m);
    const double lost = delta / tau + (tau / 2 + restart) / m;
    EXPECT_NEAR(c.job_mtbf_s, m, 1e-9 * m) << c.name;
    EXPECT_NEAR(c.checkpoint_s, delta, 1e-3 * delta) << c.name;
    EXPECT_NEAR(c.checkpoint_interval_s, tau, 1e-3 * tau) << c.name;
    EXPECT_NEAR(c.lost_fraction, lost, 1e-3 * lost) << c.name;
    EXPECT_NEAR(c.goodput_tokens_per_s, c.best.estimate.tokens_per_s * (1 - c.lost_fraction), 1e-6);
  }
  // More failures or slower restarts lose more; faster checkpoints lose less.
  EXPECT_GT(d.columns[1].lost_fraction, d.columns[0].lost_fraction);
  EXPECT_LT(d.columns[2].lost_fraction, d.columns[0].lost_fraction);
  EXPECT_GT(d.columns[3].lost_fraction, d.columns[0].lost_fraction);
}

// train_tokens: each scenario's time to train is tokens / tokens_per_s, and at the goodput
// with failures; a variation inherits the base's and may change it.
TEST(Whatif, TimeToTrainFollowsTheTokensAndTheGoodput) {
  const std::string path = write_temp("tokens.yaml", R"(
base:
  model: llama3-8b
  profile: dgx-h100
  gpus: 64
  gbs: 512
  mtbf_per_gpu_hours: 50600
  checkpoint_write_gbps_per_node: 5
  train_tokens: 1.0e11
variations:
  - name: more tokens
    train_tokens: 2.0e11
  - name: H200
    profile: dgx-h200
)");
  const WhatifData d = run_whatif(load_scenarios(path), 2);
  ASSERT_EQ(d.columns.size(), 3u);
  const double tokens[] = {1e11, 2e11, 1e11};
  for (size_t i = 0; i < 3; ++i) {
    const ScenarioColumn& c = d.columns[i];
    ASSERT_TRUE(c.found && c.has_reliability) << c.name;
    EXPECT_EQ(c.train_tokens, tokens[i]) << c.name;
    EXPECT_NEAR(c.time_to_train_days, tokens[i] / c.best.estimate.tokens_per_s / 86400,
                1e-9 * c.time_to_train_days)
        << c.name;
    EXPECT_NEAR(c.time_to_train_with_failures_days, tokens[i] / c.goodput_tokens_per_s / 86400,
                1e-9 * c.time_to_train_days)
        << c.name;
    EXPECT_GT(c.time_to_train_with_failures_days, c.time_to_train_days) << c.name;
  }
  EXPECT_NE(render_whatif_markdown(d).find("| time to train (days) |"), std::string::npos);
}

}  // namespace
}  // namespace dtplan::reports

namespace dtplan::reports {
namespace {

// beyond-the-step.yaml: each variation moves the figure it is about, and only in the direction
// the model says (docs/resilience.md): asynchronous saves block less, a 10-minute-detection
// restart loses more, stragglers slow the step by P x (factor - 1) x compute, a loader above
// the need changes nothing.
TEST(Whatif, BeyondTheStepVariationsMoveTheirFigures) {
  const WhatifData d = run_whatif(load_scenarios(examples() + "beyond-the-step.yaml"), 2);
  ASSERT_EQ(d.columns.size(), 7u);
  const ScenarioColumn& base = d.columns[0];
  ASSERT_TRUE(base.found && base.has_reliability);
  EXPECT_GT(1 - base.lost_fraction, 0.90);  // Llama 3: > 90% effective training time
  EXPECT_LT(d.columns[1].checkpoint_s, base.checkpoint_s);
  EXPECT_GT(d.columns[1].goodput_tokens_per_s, base.goodput_tokens_per_s);
  EXPECT_NEAR(d.columns[2].restart_s, 978, 1e-9);
  EXPECT_GT(d.columns[2].lost_fraction, base.lost_fraction);
  const Estimate& slow = d.columns[3].best.estimate;
  const double p_any = 1 - std::pow(1 - 0.0005, 16384);
  EXPECT_NEAR(slow.step_time_s - base.best.estimate.step_time_s,
              p_any * 0.3 * (slow.compute_s + slow.recompute_s), 1e-6);
  EXPECT_DOUBLE_EQ(d.columns[4].best.estimate.step_time_s, base.best.estimate.step_time_s);
  // The parameter server with 64 servers per group is no faster than NCCL's rings and trees.
  EXPECT_GE(d.columns[6].best.estimate.step_time_s, d.columns[5].best.estimate.step_time_s);
}

}  // namespace
}  // namespace dtplan::reports
