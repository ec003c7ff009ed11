// Derivations: every formula's value equals the figure the estimator reports for the same
// quantity, over plans that exercise each branch (ZeRO 0/1/2/3, MoE experts, 1F1B, interleaved,
// GPipe, a schedule without a closed-form bubble, activation offloading), and one figure checked
// against an independent hand computation.
#include "reports/derivations.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/catalog.h"
#include "simulator/analytic/estimator.h"

namespace dtplan::reports {
namespace {

struct Case {
  const char* model;
  const char* profile;
  int gpus;
  int64_t seq, gbs;
  Plan plan;
};

Plan plan(int tp, int pp, int dp, int zero, const char* schedule, int vpp = 1, int ep = 1,
          Recompute rc = Recompute::kSelective) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.zero = zero;
  p.schedule = schedule;
  p.vpp = vpp;
  p.ep = ep;
  p.sp = tp > 1;
  p.recompute = rc;
  p.mbs = 1;
  return p;
}

Plan offloaded(Plan p, int layers) {
  p.recompute = Recompute::kNone;
  p.offload_layers = layers;
  return p;
}

std::vector<Case> cases() {
  return {
      {"gpt3-175b", "dgx-a100-80g", 256, 2048, 1536, plan(8, 8, 4, 1, "interleaved", 3)},
      {"gpt3-175b", "dgx-a100-80g", 256, 2048, 1536, plan(8, 8, 4, 0, "1f1b")},
      {"gpt3-175b", "dgx-a100-80g", 256, 2048, 1536, plan(4, 16, 4, 2, "gpipe")},
      {"gpt3-175b", "dgx-a100-80g", 256, 2048, 1536,
       plan(8, 1, 32, 3, "1f1b", 1, 1, Recompute::kFull)},
      {"llama3-70b", "dgx-h100", 64, 4096, 256, plan(4, 4, 4, 1, "zb-h1")},
      {"mixtral-8x7b", "dgx-h100", 64, 4096, 256, plan(2, 2, 16, 1, "1f1b", 1, 8)},
      {"llama3-8b", "dgx-h100", 16, 4096, 128, plan(1, 1, 16, 0, "1f1b")},
      // Activation offloading (Megatron-Core's CPU offloading of the first layers).
      {"llama3-70b", "gb200-nvl72", 64, 8192, 128, offloaded(plan(2, 1, 32, 1, "1f1b"), 40)},
      {"mixtral-8x7b", "dgx-h100", 64, 4096, 256, offloaded(plan(2, 1, 32, 1, "1f1b", 1, 8), 16)},
  };
}

// A case's model, cluster, workload and plan.
struct Loaded {
  ModelSpec m;
  Cluster cl;
  Workload w;
  Plan p;
};
Loaded load(const Case& c) {
  Loaded l{load_model(c.model), load_cluster(c.profile, c.gpus), {}, c.plan};
  l.w.seq_len = c.seq;
  l.w.global_batch = c.gbs;
  l.p.gbs = c.gbs;
  return l;
}

TEST(Derivations, EveryFormulaEqualsTheEstimatorsFigure) {
  for (const Case& c : cases()) {
    const auto [m, cl, w, p] = load(c);
    ASSERT_TRUE(validate_plan(m, c.gpus, w, p).empty()) << c.model << " " << p.describe();
    ASSERT_TRUE(validate_schedule(p).empty()) << p.describe();
    const Estimate e = estimate(m, cl, w, p);
    const auto ds = derive(m, cl, w, p, e);
    // Step time, tokens/s, MFU, three model-state terms, activations and the stage total; DP
    // traffic (+ its collective) when the data-parallel group has more than one rank; the bubble
    // when pipelined.
    size_t expected = 8 + (p.dp > 1 ? (p.zero == 3 ? 1 : 2) : 0) + (p.pp > 1 ? 1 : 0);
    EXPECT_EQ(ds.size(), expected) << p.describe();
    for (const auto& d : ds) {
      EXPECT_GT(d.estimator_value, 0) << d.quantity << " of " << p.describe();
      EXPECT_NEAR(d.value, d.estimator_value, 1e-9 * std::fabs(d.estimator_value))
          << d.quantity << " of " << c.model << " " << p.describe() << ": " << d.formula << " = "
          << d.substituted;
      EXPECT_FALSE(d.formula.empty());
      EXPECT_FALSE(d.substituted.empty());
    }
  }
}

// The checkpoint and failure derivations rebuild each figure from its parts; each must equal
// failure_costs()' figure (the loader's line states a need, compared with itself).
// Over the options too: asynchronous saves, a given restart and interval, skipped steps.
TEST(Derivations, FailureFiguresEqualTheFailureModel) {
  std::vector<FailureOptions> options(4);
  options[1].async_save = true;
  options[2].restart_s = 1200.0;
  options[2].interval_s = 900.0;
  options[3].async_save = true;
  options[3].interval_s = 1.0;  // raised to the write time
  options[3].skipped_step_fraction = 0.01;
  for (const Case& c : cases()) {
    const auto [m, cl, w, p] = load(c);
    const Estimate e = estimate(m, cl, w, p);
    for (const FailureOptions& o : options) {
      const auto ds = derive_failures(m, cl, w, p, e, o);
      EXPECT_EQ(ds.size(), 11u);
      for (const auto& d : ds) {
        EXPECT_GT(d.estimator_value, 0) << d.quantity;
        EXPECT_NEAR(d.value, d.estimator_value, 1e-9 * std::fabs(d.estimator_value))
            << d.quantity << " of " << c.model << " " << p.describe() << ": " << d.formula << " = "
            << d.substituted;
      }
    }
  }
}

// Independent figure: GPT-3 175B, TP8 PP8 DP4, distributed optimizer (ZeRO-1). Stage 0 holds 12
// of the 96 layers, each 12h^2 + 13h parameters (Narayanan et al. 2021, eq. 2 terms: QKV and
// projection 4h^2 + MLP 8h^2, biases and norms 13h), the matrices split 8 ways by TP, plus the
// TP-split word embedding (51200 x h, the padded vocab of the model file) and the 2048 x h
// learned positions. Optimizer state = 12 B x that / DP 4. The norm parameters (replicated, not
// split) are ignored here, hence a 0.1% tolerance.
TEST(Derivations, OptimizerStateOfGpt3MatchesAHandComputation) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster cl = load_cluster("dgx-a100-80g", 256);
  Workload w;
  Plan p = plan(8, 8, 4, 1, "interleaved", 3);
  p.gbs = w.global_batch;
  const Estimate e = estimate(m, cl, w, p);
  ASSERT_EQ(e.peak_stage, 0);
  const double h = 12288;
  const double stage0 = 12 * (12 * h * h + 13 * h) / 8 + 51200 * h / 8 + 2048 * h;
  const double expected = 12 * stage0 / 4;
  const auto ds = derive(m, cl, w, p, e);
  bool seen = false;
  for (const auto& d : ds)
    if (d.quantity.rfind("optimizer state", 0) == 0) {
      seen = true;
      EXPECT_NEAR(d.value, expected, 1e-3 * expected) << d.substituted;
    }
  EXPECT_TRUE(seen);
}

TEST(Derivations, HumanBytesUsesDecimalUnits) {
  EXPECT_EQ(human_bytes(2.16e9), "2.16 GB");
  EXPECT_EQ(human_bytes(629.1e6), "629.1 MB");
  EXPECT_EQ(human_bytes(1.5e12), "1.50 TB");
}

}  // namespace
}  // namespace dtplan::reports

namespace dtplan::reports {
namespace {

// FP8's weight copies in the report equal what FP8 adds to the memory model's weights against
// BF16 (the same plan), and MXFP8 adds its E8M0 scales: 1 byte per 32 elements of each copy.
TEST(Derivations, Fp8WeightCopiesMatchTheMemoryModelsDifference) {
  const ModelSpec m = load_model("llama3-70b");
  const Cluster cl = load_cluster("dgx-b200", 64);
  Plan p = plan(8, 2, 4, 1, "1f1b");
  Workload w;
  w.seq_len = 4096;
  w.global_batch = 256;
  p.gbs = 256;
  const Estimate bf16 = estimate(m, cl, w, p);
  for (Fp8Recipe r : {Fp8Recipe::kDelayed, Fp8Recipe::kMxfp8}) {
    Workload f = w;
    f.precision = Precision::kFp8;
    f.fp8_recipe = r;
    const Estimate e = estimate(m, cl, f, p);
    ASSERT_EQ(e.peak_stage, bf16.peak_stage);
    const double added = e.memory_peak.weights_bytes - bf16.memory_peak.weights_bytes;
    double copies = -1, linear = 0;
    for (const auto& d : derive_precision(m, cl, f, p, e)) {
      if (d.quantity == "FP8 weight copies") copies = d.value;
      if (d.quantity == "GEMMs in FP8") linear = d.value;
    }
    EXPECT_NEAR(copies, added, 1e-9 * added) << to_string(r);
    EXPECT_NEAR(added, (r == Fp8Recipe::kMxfp8 ? 2 * (1 + 1.0 / 32) : 2.0) * linear, 1e-6 * added);
  }
}

}  // namespace
}  // namespace dtplan::reports
