// The accuracy runner's statistics and case reading.
// GCC 12 reports a false -Wrestrict inside std::string at -O3 here (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"
#include "simulator/validation/accuracy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace dtplan {
namespace {

TEST(Accuracy, SpearmanWithTies) {
  // Ranks (1..5) vs (1, 2, 3.5, 5, 3.5): Pearson correlation of the ranks = 0.8207827
  // (computed independently with the textbook formula).
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 0.8207827, 1e-6);
  EXPECT_NEAR(spearman({1, 2, 3}, {30, 20, 10}), -1.0, 1e-12);
}

TEST(Accuracy, SummaryStatistics) {
  std::vector<CaseResult> r(4);
  const double errs[] = {-10, 5, 2, 0};
  for (int i = 0; i < 4; ++i) {
    r[i].id = std::to_string(i);
    r[i].group = i < 3 ? "g" : "h";
    r[i].measured_s = 10 + i;
    r[i].predicted_s = r[i].measured_s * (1 + errs[i] / 100);
    r[i].error_pct = errs[i];
  }
  r.push_back({});
  r.back().id = "skipped";
  r.back().skipped = "no layout";
  AccuracySummary s = summarize(r);
  EXPECT_EQ(s.cases_total, 5);
  EXPECT_EQ(s.cases_predicted, 4);
  EXPECT_DOUBLE_EQ(s.mape_pct, (10 + 5 + 2 + 0) / 4.0);
  EXPECT_DOUBLE_EQ(s.median_abs_pct, (2 + 5) / 2.0);
  EXPECT_DOUBLE_EQ(s.max_abs_pct, 10);
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_DOUBLE_EQ(s.groups[0].mape_pct, 17 / 3.0);
}

TEST(Accuracy, ReadsTheCaseFormat) {
  auto path = std::filesystem::temp_directory_path() / "dtplan_cases.yaml";
  std::ofstream(path) << R"(version: 1
cases:
- id: tiny
  group: g
  source: test
  hardware: {profile: dgx-a100-80g, num_gpus: 8}
  model: {name: t, layers: 4, hidden: 1024, heads: 16, kv_heads: 16, head_dim: null,
          ffn_hidden: 4096, ffn_act: gelu, vocab: 1000, tied_embeddings: true, moe: null, mla: null}
  training: {seq_len: 1024, global_batch: 16, micro_batch: null, precision: bf16}
  plan: {tp: 8, pp: 1, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: null, zero: 0,
         recompute: none, schedule: null}
  measured: {step_time_s: 0.5, derivation: x, peak_memory_gib: null, printed: {}}
  notes: ''
)";
  CaseFile f = load_case_file(path.string());
  ASSERT_EQ(f.cases.size(), 1u);
  const AccuracyCase& c = f.cases[0];
  EXPECT_EQ(c.tp, 8);
  EXPECT_FALSE(c.mbs.has_value());  // null: unpublished, to be searched
  EXPECT_FALSE(c.sp.has_value());
  EXPECT_EQ(c.model.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.measured_step_time_s, 0.5);
}

}  // namespace
}  // namespace dtplan
