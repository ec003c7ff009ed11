// Plan validation: every rule of issue #2 item 7 yields a violation naming its flag.
#include "core/plan.h"

#include <gtest/gtest.h>

#include "core/catalog.h"

namespace dtplan {
namespace {

bool has_flag(const std::vector<Violation>& v, const std::string& flag) {
  for (const auto& x : v)
    if (x.flag == flag) return true;
  return false;
}

Plan gpt3_plan() {
  // Narayanan 2021 Table 1, 175B row: TP8 PP16 on 1536 GPUs (DP12), batch 1536.
  Plan p;
  p.tp = 8;
  p.pp = 16;
  p.dp = 12;
  p.gbs = 1536;
  return p;
}

TEST(PlanValidation, PublishedLayoutIsValid) {
  ModelSpec m = load_model("gpt3-175b");
  Workload w;
  w.global_batch = 1536;
  auto v = validate_plan(m, 1536, w, gpt3_plan());
  EXPECT_TRUE(v.empty()) << v.front().flag << ": " << v.front().reason;
}

TEST(PlanValidation, EachRuleNamesItsFlag) {
  ModelSpec gpt = load_model("gpt3-175b");
  ModelSpec llama = load_model("llama3-70b");
  ModelSpec mix = load_model("mixtral-8x7b");
  Workload w;
  w.global_batch = 1536;
  w.seq_len = 2048;

  Plan p = gpt3_plan();
  EXPECT_TRUE(has_flag(validate_plan(gpt, 1024, w, p), "--dp"));  // world size

  p = gpt3_plan();
  p.tp = 5;  // 96 heads % 5
  p.dp = 1536 / (5 * 16);
  EXPECT_TRUE(has_flag(validate_plan(gpt, 5 * 16 * p.dp, w, p), "--tp"));

  p = gpt3_plan();
  p.tp = 16;  // llama3-70b: 8 kv heads, tp 16 is a multiple: allowed (KV replicated)
  p.pp = 8;
  p.dp = 12;
  EXPECT_FALSE(has_flag(validate_plan(llama, 16 * 8 * 12, w, p), "--tp"));
  p.tp = 4;  // 8 kv heads % 4 == 0: fine
  EXPECT_FALSE(has_flag(validate_plan(llama, 4 * 8 * 12, w, p), "--tp"));

  p = gpt3_plan();
  p.pp = 7;  // 96 % 7 != 0
  p.dp = 1;
  EXPECT_TRUE(has_flag(validate_plan(gpt, 56, w, p), "--pp"));
  p.uneven_pp = true;  // allowed only when stated
  EXPECT_FALSE(has_flag(validate_plan(gpt, 56, w, p), "--pp"));

  p = gpt3_plan();
  p.mbs = 5;  // 1536 % (5*12)
  EXPECT_TRUE(has_flag(validate_plan(gpt, 1536, w, p), "--gbs"));

  p = gpt3_plan();
  p.tp = 1;
  p.sp = true;
  p.dp = 96;
  EXPECT_TRUE(has_flag(validate_plan(gpt, 1536, w, p), "--sp"));

  p = gpt3_plan();
  p.cp = 3;  // 2048 % 6
  p.dp = 4;
  EXPECT_TRUE(has_flag(validate_plan(gpt, 8 * 16 * 3 * 4, w, p), "--cp"));

  Workload longw = w;
  longw.seq_len = 4096;  // GPT-3 max_seq 2048
  EXPECT_TRUE(has_flag(validate_plan(gpt, 1536, longw, gpt3_plan()), "--seq"));

  p = gpt3_plan();
  p.vpp = 2;
  p.pp = 1;
  p.dp = 192;
  p.schedule = "interleaved";
  EXPECT_TRUE(has_flag(validate_plan(gpt, 1536, w, p), "--vpp"));

  Plan mp;  // Mixtral: 8 experts
  mp.tp = 2;
  mp.dp = 12;
  mp.ep = 3;
  mp.gbs = 1536;
  EXPECT_TRUE(has_flag(validate_plan(mix, 24, w, mp), "--ep"));
  mp.ep = 8;  // 8 does not divide tp*cp*dp = 24 ... 24 % 8 == 0 -> fine; etp*ep = 16 does not
  mp.etp = 2;
  EXPECT_TRUE(has_flag(validate_plan(mix, 24, w, mp), "--ep"));
  mp.etp = 1;
  EXPECT_FALSE(has_flag(validate_plan(mix, 24, w, mp), "--ep"));

  p = gpt3_plan();
  p.ep = 2;  // dense model
  EXPECT_TRUE(has_flag(validate_plan(gpt, 1536, w, p), "--ep"));

  p = gpt3_plan();
  p.zero = 1;
  p.dp = 1;
  p.gbs = 16;
  EXPECT_TRUE(has_flag(validate_plan(gpt, 128, w, p), "--zero"));

  p = gpt3_plan();
  p.tp = 0;
  EXPECT_TRUE(has_flag(validate_plan(gpt, 1536, w, p), "--tp"));
}

TEST(PlanValidation, ReportsEveryViolationNotJustTheFirst) {
  ModelSpec gpt = load_model("gpt3-175b");
  Workload w;
  Plan p;
  p.tp = 5;
  p.pp = 7;
  p.dp = 3;
  p.sp = false;
  p.gbs = 1000;
  p.mbs = 7;
  auto v = validate_plan(gpt, 1, w, p);
  EXPECT_GE(v.size(), 4u);
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// The uneven split: every middle chunk takes ceil(L / n) layers, the first and last share the
// rest. Llama 3 405B (126 layers) on 16 stages is 7 / 8 x 14 / 7 (Llama 3 paper, section 3.3.2).
TEST(PlanValidation, UnevenSplitExistsWhenFirstAndLastKeepALayer) {
  EXPECT_TRUE(uneven_split_exists(126, 16, 1));  // 126 - 14 x 8 = 14 = 7 + 7
  EXPECT_TRUE(uneven_split_exists(32, 5, 1));    // 32 - 3 x 7 = 11 = 6 + 5
  EXPECT_TRUE(uneven_split_exists(32, 12, 1));   // 32 - 10 x 3 = 2 = 1 + 1
  EXPECT_FALSE(uneven_split_exists(32, 20, 1));  // 32 - 18 x 2 < 0
  EXPECT_FALSE(uneven_split_exists(9, 8, 1));    // 9 - 6 x 2 < 0
  // DeepSeek-V3 on 8 stages x 4 virtual: 61 - 30 x 2 = 1, the first chunk's; the last holds
  // only the loss (Megatron-Bridge's layout 'Et|(tt|)*30mL'). Without virtual stages the first
  // and last stage need a layer each.
  EXPECT_TRUE(uneven_split_exists(61, 8, 4));
  EXPECT_FALSE(uneven_split_exists(61, 32, 1));
  const UnevenEnds ds = uneven_ends(61, 32);
  EXPECT_EQ(ds.middle, 2);
  EXPECT_EQ(ds.first, 1);
  EXPECT_EQ(ds.last, 0);
  const UnevenEnds odd = uneven_ends(32, 5);  // the larger half first
  EXPECT_EQ(odd.first, 6);
  EXPECT_EQ(odd.last, 5);
  const ModelSpec m = load_model("llama3-8b");
  Workload w;
  Plan p;
  p.tp = 1, p.pp = 4, p.vpp = 5, p.dp = 8, p.uneven_pp = true;
  p.schedule = "interleaved";
  bool named = false;
  for (const auto& v : validate_plan(m, 32, w, p))
    if (v.flag == "--pp" && v.reason.find("no split exists") != std::string::npos) named = true;
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// Plan::schedule is typed (issue #14): a name is interned once, so plans compare and copy it
// as a pointer; the text is kept for output, and more than kMaxPipelineStages stages are refused.
TEST(PlanFields, ScheduleNamesAreInternedAndPipelinesBounded) {
  const ScheduleName a("zb-h1"), b(std::string("zb-") + "h1"), c("1f1b");
  EXPECT_EQ(a, b);
  EXPECT_EQ(&a.str(), &b.str());  // one copy of the text
  EXPECT_FALSE(a == c);
  EXPECT_EQ(Plan{}.schedule, c);  // the default
  EXPECT_EQ(fmt::format("{}", a), "zb-h1");
  EXPECT_TRUE(a == "zb-h1");
  Plan p;
  p.pp = kMaxPipelineStages + 1;
  ModelSpec m = load_model("gpt3-175b");
  m.layers = 2 * p.pp;
  bool refused = false;
  for (const Violation& v : validate_plan(m, p.world(), Workload{}, p))
    refused = refused || (v.flag == "--pp" && v.reason.find("at most 1024") != std::string::npos);
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace dtplan
