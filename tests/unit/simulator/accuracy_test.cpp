// The accuracy runner's statistics, case reading (schema v1 and v2) and best-feasible search.
// GCC 12 reports a false -Wrestrict inside std::string at -O3 here (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "simulator/validation/accuracy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/catalog.h"
#include "core/error.h"

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
  EXPECT_EQ(s.memory_cases, 0);
}

// Peak memory is summarised over the predicted cases whose source prints it; a skipped case
// with a printed figure does not count.
TEST(Accuracy, MemorySummaryOverPrintedPeaks) {
  std::vector<CaseResult> r(4);
  const double printed[] = {40, 50, 0, 20}, predicted[] = {37, 56, 30, 19};
  for (int i = 0; i < 4; ++i) {
    r[i].id = std::to_string(i);
    r[i].group = "g";
    r[i].measured_s = r[i].predicted_s = 1;
    if (printed[i] > 0) r[i].measured_peak_memory_gib = printed[i];
    r[i].predicted_peak_memory_gib = predicted[i];
  }
  r[3].skipped = "no layout";
  const AccuracySummary s = summarize(r);
  // Cases 0 and 1: -7.5% and +12%; case 2 prints none, case 3 is skipped.
  EXPECT_EQ(s.memory_cases, 2);
  EXPECT_NEAR(s.memory_mape_pct, (7.5 + 12) / 2.0, 1e-12);
  EXPECT_NEAR(s.memory_mean_signed_pct, (-7.5 + 12) / 2.0, 1e-12);
  EXPECT_EQ(s.memory_cases_within_10pct, 1);
}

// Writes `text` to a temporary case file and returns its path.
std::string case_file(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(Accuracy, ReadsTheCaseFormat) {
  // A v1 file: no framework block, so every framework fact reads as null.
  CaseFile f = load_case_file(case_file("dtplan_cases.yaml", R"(version: 1
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
)"));
  ASSERT_EQ(f.cases.size(), 1u);
  const AccuracyCase& c = f.cases[0];
  EXPECT_EQ(c.tp, 8);
  EXPECT_FALSE(c.mbs.has_value());  // null: unpublished, to be searched
  EXPECT_FALSE(c.sp.has_value());
  EXPECT_EQ(c.model.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.measured_step_time_s, 0.5);
  EXPECT_FALSE(c.framework.name || c.framework.version || c.framework.attention ||
               c.framework.tp_comm_overlap || c.framework.grad_reduce_overlap ||
               c.framework.param_gather_overlap || c.framework.fp8_recipe);
  // All-null framework facts take the runner's defaults: unfused attention, no overlap.
  FrameworkSettings s = framework_settings(c.framework, {});
  EXPECT_FALSE(s.flash_attention);
  EXPECT_FALSE(s.overlap_grad_reduce);
  EXPECT_FALSE(s.overlap_param_gather);
  EXPECT_FALSE(s.tp_comm_overlap);
}

// One v2 case of a 4-layer GPT-style model on DGX A100 40GB nodes; `plan`, `training` and
// `framework` are the flow maps of those blocks.
std::string v2_case(const std::string& id, const std::string& plan, const std::string& training,
                    const std::string& framework, int gpus = 8, int layers = 4) {
  return "- id: " + id + "\n  group: g\n  source: test\n" +
         "  hardware: {profile: dgx-a100-40g, num_gpus: " + std::to_string(gpus) + "}\n" +
         "  model: {name: t, layers: " + std::to_string(layers) +
         ", hidden: 4096, heads: 32, kv_heads: 32, head_dim: null,\n"
         "          ffn_hidden: 16384, ffn_act: gelu, vocab: 32000, tied_embeddings: true, "
         "moe: null, mla: null}\n"
         "  training: " +
         training + "\n  plan: " + plan + "\n  framework: " + framework +
         "\n  measured: {step_time_s: 1.0, derivation: x, peak_memory_gib: null, printed: {}}\n"
         "  notes: ''\n";
}

const char* kNullFramework =
    "{name: null, version: null, attention: null, tp_comm_overlap: null, grad_reduce_overlap: "
    "null, param_gather_overlap: null, fp8_recipe: null, notes: ''}";

// Profiles from hardware_profiles/ (DTPLAN_DATA_DIR), loaded once per name.
AccuracyOptions options() {
  auto cache = std::make_shared<std::map<std::string, HardwareProfile>>();
  AccuracyOptions o;
  o.profile = [cache](const std::string& name) -> const HardwareProfile* {
    auto it = cache->find(name);
    if (it == cache->end()) it = cache->emplace(name, load_profile(name)).first;
    return &it->second;
  };
  return o;
}

TEST(Accuracy, ReadsTheFrameworkBlock) {
  CaseFile f = load_case_file(case_file(
      "dtplan_cases_v2.yaml",
      "version: 2\ncases:\n" +
          v2_case("a",
                  "{tp: 8, pp: 1, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: true, zero: 0, "
                  "recompute: selective, schedule: null}",
                  "{seq_len: 2048, global_batch: 8, micro_batch: 1, precision: fp8}",
                  "{name: megatron-lm, version: '23.08', attention: flash, tp_comm_overlap: "
                  "true, grad_reduce_overlap: false, param_gather_overlap: true, fp8_recipe: "
                  "delayed, notes: 'from the recipe'}") +
          v2_case("b",
                  "{tp: 8, pp: 1, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: true, zero: 0, "
                  "recompute: selective, schedule: null}",
                  "{seq_len: 2048, global_batch: 8, micro_batch: 1, precision: bf16}",
                  kNullFramework)));
  ASSERT_EQ(f.cases.size(), 2u);
  const FrameworkFacts& a = f.cases[0].framework;
  EXPECT_EQ(a.name, "megatron-lm");
  EXPECT_EQ(a.version, "23.08");
  EXPECT_EQ(a.attention, "flash");
  EXPECT_EQ(a.tp_comm_overlap, true);
  EXPECT_EQ(a.grad_reduce_overlap, false);
  EXPECT_EQ(a.param_gather_overlap, true);
  EXPECT_EQ(a.fp8_recipe, "delayed");
  const FrameworkFacts& b = f.cases[1].framework;
  EXPECT_FALSE(b.name || b.attention || b.tp_comm_overlap || b.grad_reduce_overlap);
  // The facts set the plan; an override wins for every case.
  FrameworkSettings s = framework_settings(a, {});
  EXPECT_TRUE(s.flash_attention);
  EXPECT_TRUE(s.tp_comm_overlap);
  EXPECT_FALSE(s.overlap_grad_reduce);
  EXPECT_TRUE(s.overlap_param_gather);
  AccuracyOptions o;
  o.flash_attention = false;
  o.overlap_grad_reduce = true;
  s = framework_settings(a, o);
  EXPECT_FALSE(s.flash_attention);
  EXPECT_TRUE(s.overlap_grad_reduce);
}

TEST(Accuracy, RefusesAnUnknownFrameworkKey) {
  // Each case takes 11 lines after the 2 of the header: the second case's framework block is on
  // line 22, and its misspelt key starts at column 15, after "  framework: {".
  const std::string text =
      "version: 2\ncases:\n" +
      v2_case("a",
              "{tp: 8, pp: 1, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: true, zero: 0, "
              "recompute: selective, schedule: null}",
              "{seq_len: 2048, global_batch: 8, micro_batch: 1, precision: bf16}", kNullFramework) +
      v2_case("b",
              "{tp: 8, pp: 1, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: true, zero: 0, "
              "recompute: selective, schedule: null}",
              "{seq_len: 2048, global_batch: 8, micro_batch: 1, precision: bf16}",
              "{atention: flash}");
  const std::string path = case_file("dtplan_cases_bad.yaml", text);
  try {
    load_case_file(path);
    FAIL() << "an unknown key in the framework block was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "cases[1].framework.atention");
    EXPECT_EQ(e.location().line, 22);
    EXPECT_EQ(e.location().column, 15);
    EXPECT_NE(std::string(e.what()).find("unknown key 'atention' (did you mean 'attention'?)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Accuracy, AppliesEachCasesAttention) {
  // Two cases alike but for framework.attention: the flash one is faster (no s x s scores).
  const std::string plan =
      "{tp: 8, pp: 1, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: true, zero: 0, recompute: "
      "none, schedule: null}";
  const std::string training = "{seq_len: 2048, global_batch: 8, micro_batch: 1, precision: bf16}";
  auto fw = [](const char* att) {
    return std::string("{name: x, version: x, attention: ") + att +
           ", tp_comm_overlap: null, grad_reduce_overlap: null, param_gather_overlap: null, "
           "fp8_recipe: null, notes: ''}";
  };
  CaseFile f = load_case_file(
      case_file("dtplan_cases_att.yaml", "version: 2\ncases:\n" +
                                             v2_case("flash", plan, training, fw("flash")) +
                                             v2_case("unfused", plan, training, fw("unfused")) +
                                             v2_case("unknown", plan, training, fw("null"))));
  AccuracyOptions o = options();
  CaseResult flash = predict_case(f.cases[0], o), unfused = predict_case(f.cases[1], o),
             unknown = predict_case(f.cases[2], o);
  ASSERT_TRUE(flash.skipped.empty()) << flash.skipped;
  ASSERT_TRUE(unfused.skipped.empty()) << unfused.skipped;
  EXPECT_TRUE(flash.flash_attention);
  EXPECT_FALSE(unfused.flash_attention);
  EXPECT_LT(flash.predicted_s, unfused.predicted_s);
  EXPECT_FALSE(unknown.flash_attention);  // null: the runner default, unfused
  EXPECT_DOUBLE_EQ(unknown.predicted_s, unfused.predicted_s);
  // The override applies to every case alike.
  o.flash_attention = true;
  EXPECT_DOUBLE_EQ(predict_case(f.cases[1], o).predicted_s, flash.predicted_s);
}

TEST(Accuracy, TakesWhatTheCaseFormatLeavesOutFromTheZooModelItIs) {
  // The case format has no dropout field and the runner gives a GELU model GPT's 0.1; a zoo
  // model of the same dimensions states its own (Nemotron-4 340B: none, models/ cites NeMo's
  // NemotronConfig). Without the dropout masks the same layout needs less memory and time.
  const std::string plan =
      "{tp: 8, pp: 1, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: true, zero: 0, recompute: "
      "none, schedule: null}";
  CaseFile f = load_case_file(case_file(
      "dtplan_cases_zoo.yaml",
      "version: 2\ncases:\n" +
          v2_case("a", plan, "{seq_len: 2048, global_batch: 8, micro_batch: 1, precision: bf16}",
                  kNullFramework)));
  const AccuracyCase& c = f.cases[0];
  ASSERT_EQ(c.model.hidden_dropout, 0.1);
  ModelSpec same = c.model;  // the zoo's copy: no dropout, RMSNorm, RoPE
  same.name = "zoo-same";
  same.attention_dropout = same.hidden_dropout = 0;
  same.norm = NormKind::kRmsNorm;
  same.position_embedding = PositionEmbedding::kRope;
  ModelSpec other = same;  // another vocabulary: not this model
  other.name = "zoo-other";
  other.vocab = 32001;
  const std::vector<ModelSpec> zoo{other, same};
  ASSERT_EQ(zoo_match(c.model, zoo), &zoo[1]);
  // Two zoo models of these dimensions that disagree: neither is taken.
  ModelSpec twin = same;
  twin.hidden_dropout = 0.1;
  EXPECT_EQ(zoo_match(c.model, std::vector<ModelSpec>{same, twin}), nullptr);
  EXPECT_EQ(zoo_match(c.model, std::vector<ModelSpec>{other}), nullptr);
  AccuracyOptions o = options();
  const CaseResult rule = predict_case(c, o);
  o.zoo = &zoo;
  const CaseResult from_zoo = predict_case(c, o);
  ASSERT_TRUE(rule.skipped.empty() && from_zoo.skipped.empty()) << rule.skipped;
  ASSERT_TRUE(rule.predicted_peak_memory_gib && from_zoo.predicted_peak_memory_gib);
  EXPECT_LT(*from_zoo.predicted_peak_memory_gib, *rule.predicted_peak_memory_gib);
  EXPECT_LT(from_zoo.predicted_s, rule.predicted_s);
  // A zoo without the model changes nothing.
  const std::vector<ModelSpec> none{other};
  o.zoo = &none;
  EXPECT_DOUBLE_EQ(predict_case(c, o).predicted_s, rule.predicted_s);
  // The shipped Nemotron-4 340B states no dropout (the case that moved, docs/accuracy.md).
  EXPECT_EQ(load_model("nemotron4-340b").hidden_dropout, 0.0);
}

TEST(Accuracy, SearchesAnUnpublishedRecompute) {
  // Micro-batch 16 of 2048 tokens with unfused attention on a 40 GiB A100, TP 1: without
  // recomputation the s x s scores alone take 5*a*s^2*b bytes = 10.7 GB per layer, so `none`
  // does not fit; selective recomputation drops them and is cheaper than full. With
  // micro-batch 1 everything fits and `none`, the fastest, is kept.
  const std::string plan =
      "{tp: 1, pp: 1, dp: 8, cp: 1, ep: 1, etp: null, vpp: 1, sp: false, zero: 0, recompute: "
      "null, schedule: null}";
  CaseFile f = load_case_file(
      case_file("dtplan_cases_rec.yaml",
                "version: 2\ncases:\n" +
                    v2_case("big", plan,
                            "{seq_len: 2048, global_batch: 128, micro_batch: 16, precision: bf16}",
                            kNullFramework) +
                    v2_case("small", plan,
                            "{seq_len: 2048, global_batch: 128, micro_batch: 1, precision: bf16}",
                            kNullFramework)));
  EXPECT_FALSE(f.cases[0].recompute.has_value());
  const AccuracyOptions o = options();
  CaseResult big = predict_case(f.cases[0], o);
  ASSERT_TRUE(big.skipped.empty()) << big.skipped;
  EXPECT_NE(big.plan.find("recompute=selective"), std::string::npos) << big.plan;
  EXPECT_EQ(big.candidates, 3);  // none, selective, full
  // The premise: published as `none`, the one candidate is taken as it ran, and needs more
  // than the 40 GiB; published as `full`, it is slower than the selective choice.
  AccuracyCase none = f.cases[0], full = f.cases[0];
  none.recompute = "none";
  full.recompute = "full";
  CaseResult as_none = predict_case(none, o), as_full = predict_case(full, o);
  ASSERT_TRUE(as_none.predicted_peak_memory_gib.has_value());
  EXPECT_GT(*as_none.predicted_peak_memory_gib, 40.0);
  EXPECT_LT(big.predicted_s, as_full.predicted_s);
  CaseResult small = predict_case(f.cases[1], o);
  ASSERT_TRUE(small.skipped.empty()) << small.skipped;
  EXPECT_NE(small.plan.find("recompute=none"), std::string::npos) << small.plan;
}

TEST(Accuracy, SkipReasonNamesTheRealCause) {
  // 59 layers on pp*vpp = 32 chunks cannot be split (the 30 middle chunks take 2 each): every
  // candidate of the searched fields (sp, zero, recompute) fails that way, and the reason says
  // so rather than naming whichever candidate came last.
  CaseFile f = load_case_file(case_file(
      "dtplan_cases_skip.yaml",
      "version: 2\ncases:\n" +
          v2_case("split",
                  "{tp: 2, pp: 8, dp: 4, cp: 1, ep: 1, etp: null, vpp: 4, sp: null, zero: null, "
                  "recompute: null, schedule: interleaved}",
                  "{seq_len: 2048, global_batch: 64, micro_batch: 1, precision: bf16}",
                  kNullFramework, 64, 59) +
          // Micro-batch 64 at TP 1 fits in no recomputation mode on 40 GiB.
          v2_case("memory",
                  "{tp: 1, pp: 1, dp: 8, cp: 1, ep: 1, etp: null, vpp: 1, sp: false, zero: null, "
                  "recompute: null, schedule: null}",
                  "{seq_len: 8192, global_batch: 512, micro_batch: 64, precision: bf16}",
                  kNullFramework, 8, 32)));
  const AccuracyOptions o = options();
  CaseResult split = predict_case(f.cases[0], o);
  EXPECT_EQ(split.skipped,
            "--pp: layers (59) are not divisible by pp*vpp = 32, and no split exists with fewer "
            "layers on the first and last chunks (the 30 middle chunks would take 2 each, more "
            "than all the layers) (all 12 candidates)");
  CaseResult memory = predict_case(f.cases[1], o);
  EXPECT_EQ(memory.skipped.rfind("no candidate fits in memory: the smallest of the 6 that satisfy "
                                 "the published fields needs ",
                                 0),
            0u)
      << memory.skipped;
  EXPECT_NE(memory.skipped.find("GiB of 40.0 GiB (TP1 PP1 DP8 ZeRO-1 recompute=full"),
            std::string::npos)
      << memory.skipped;
}

TEST(Accuracy, UnevenSplitInsteadOfASkip) {
  // 30 layers on 4 stages: the first and last take 7, the middle ones 8 (Plan::uneven_pp).
  CaseFile f = load_case_file(case_file(
      "dtplan_cases_uneven.yaml",
      "version: 2\ncases:\n" +
          v2_case("uneven",
                  "{tp: 2, pp: 4, dp: 1, cp: 1, ep: 1, etp: null, vpp: 1, sp: true, zero: 0, "
                  "recompute: full, schedule: 1f1b}",
                  "{seq_len: 2048, global_batch: 16, micro_batch: 1, precision: bf16}",
                  kNullFramework, 8, 30)));
  CaseResult r = predict_case(f.cases[0], options());
  ASSERT_TRUE(r.skipped.empty()) << r.skipped;
  EXPECT_NE(r.plan.find("uneven-pp"), std::string::npos) << r.plan;
}

}  // namespace
}  // namespace dtplan
