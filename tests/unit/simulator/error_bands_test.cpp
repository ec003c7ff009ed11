// Error bands (simulator/validation/error_bands.h): quantiles worked by hand on a small record,
// the fallback order of a sparse regime, group weighting, leave-one-out coverage, a record that
// round-trips through its file deterministically, and the reader's errors.
#include "simulator/validation/error_bands.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace dtplan {
namespace {

Regime hopper_bf16() {
  Regime r;
  r.generation = "hopper";
  r.scale = 1;
  return r;
}

// Ten cases in two families, ratios 1.00 ... 1.09 (one group each): equal weights, so p10 and
// p90 sit on the weight midpoints: positions (i + 0.5) / 10 hold 1.0i, p10 = 1.005 (halfway
// between the first two), p90 = 1.085.
ErrorBandTable ten_cases() {
  ErrorBandTable t;
  for (int i = 0; i < 10; ++i)
    t.records.push_back({fmt::format("c{}", i), fmt::format("{}_g{}", i < 5 ? "a" : "b", i),
                         hopper_bf16(), 1.0 + 0.01 * i, 64, 4096});
  return t;
}

TEST(ErrorBands, QuantilesOfTheRegime) {
  const ErrorBand b = band_for(ten_cases(), hopper_bf16());
  ASSERT_TRUE(b.found);
  EXPECT_NEAR(b.low, 1.005, 1e-12);
  EXPECT_NEAR(b.high, 1.085, 1e-12);
  EXPECT_EQ(b.cases, 10);
  EXPECT_EQ(b.groups, 10);
  EXPECT_EQ(b.families, 2);
  EXPECT_TRUE(b.dropped.empty());
  EXPECT_EQ(b.max_gpus, 64);
  EXPECT_EQ(b.max_seq_len, 4096);
}

TEST(ErrorBands, EachGroupWeighsAlike) {
  // Two groups of two families: nine cases at 1.0 in one group, one at 2.0 in the other. By
  // group weight the two values weigh 1/2 each: the midpoints are 0.25 (1.0) and 0.75 (2.0), so
  // p10 = 1.0 and p90 = 2.0; case-weighted, p90 would still be 1.0.
  ErrorBandTable t;
  for (int i = 0; i < 9; ++i) t.records.push_back({"x", "a_big", hopper_bf16(), 1.0, 8, 2048});
  t.records.push_back({"y", "b_small", hopper_bf16(), 2.0, 8, 2048});
  const ErrorBand b = band_for(t, hopper_bf16());
  ASSERT_TRUE(b.found);
  EXPECT_DOUBLE_EQ(b.low, 1.0);
  EXPECT_DOUBLE_EQ(b.high, 2.0);
}

TEST(ErrorBands, ASparseRegimeDropsFeaturesInOrder) {
  // No FP8 MoE case on 257+ GPUs: the band gives up calibration, scale, context parallelism and
  // MoE (in that order) before the framework and precision; these ten are hopper FP8 dense, so it
  // stops after MoE.
  ErrorBandTable t = ten_cases();
  for (BandRecord& r : t.records) r.regime.fp8 = true;
  Regime want = hopper_bf16();
  want.fp8 = true;
  want.moe = true;
  want.scale = 2;
  const ErrorBand b = band_for(t, want);
  ASSERT_TRUE(b.found);
  EXPECT_EQ(b.dropped,
            (std::vector<std::string>{"calibration", "scale", "context parallelism", "MoE"}));
  EXPECT_EQ(b.regime, "hopper, fp8, ZeRO 0-2, megatron");
  // Nothing of this generation: no band (other GPUs do not stand in).
  Regime other = want;
  other.generation = "blackwell";
  const ErrorBand none = band_for(t, other);
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.generation_cases, 0);
  // Too few cases or a single family: no band, and the band says what it had against what it
  // needs (the warning's reason).
  ErrorBandTable one_family = ten_cases();
  for (BandRecord& r : one_family.records) r.group = "a_" + r.id;
  const ErrorBand single = band_for(one_family, hopper_bf16());
  EXPECT_FALSE(single.found);
  EXPECT_EQ(single.generation_cases, 10);
  EXPECT_EQ(single.generation_families, 1);
  EXPECT_EQ(single.needed_families, 2);
  EXPECT_GT(single.needed_cases, 0);
}

TEST(ErrorBands, LeaveOneOutCoverageExcludesTheCase) {
  // Every case's band without its own group is the p10-p90 of the nine others: the two extreme
  // cases fall outside, the eight inner ones inside.
  const BandCoverage c = leave_one_out_coverage(ten_cases(), false);
  EXPECT_EQ(c.cases, 10);
  EXPECT_DOUBLE_EQ(c.inside, 0.8);
  // Without its family, each case is judged by the five of the other family (one family left:
  // no band), so nothing is covered.
  EXPECT_EQ(leave_one_out_coverage(ten_cases(), true).cases, 0);
}

TEST(ErrorBands, TheRecordRoundTripsDeterministically) {
  ErrorBandTable t = ten_cases();
  t.cases_file = "cases.yaml";
  t.records[3].regime.moe = t.records[4].regime.cp = t.records[5].regime.offload = true;
  const std::string text = bands_to_json(t);
  EXPECT_EQ(text, bands_to_json(t));
  const auto path = std::filesystem::temp_directory_path() / "dtplan_bands.json";
  std::ofstream(path) << text;
  const ErrorBandTable back = load_bands(path.string());
  EXPECT_EQ(bands_to_json(back), text);
  EXPECT_EQ(back.records.size(), 10u);
  EXPECT_TRUE(back.records[3].regime.moe);
  EXPECT_TRUE(back.records[4].regime.cp);
  EXPECT_TRUE(back.records[5].regime.offload);
  EXPECT_FALSE(back.records[4].regime.offload);
  EXPECT_EQ(back.records[4].gpus, 64);
  EXPECT_EQ(back.records[4].seq_len, 4096);
}

TEST(ErrorBands, ABadRecordNamesItsPlace) {
  const auto path = std::filesystem::temp_directory_path() / "dtplan_bands_bad.json";
  std::ofstream(path) << "{\"cases_file\": \"x\", \"records\": [\n  {\"id\": \"a\", \"group\": "
                         "\"g\", \"generation\": \"hopper\", \"framework\": \"megatron\", "
                         "\"calibrated\": false, \"fp8\": \"maybe\", \"zero3\": false, "
                         "\"moe\": false, \"cp\": false, \"offload\": false, \"scale\": 1, "
                         "\"gpus\": 8, \"seq\": 2048, \"ratio\": 1.0}]}\n";
  try {
    load_bands(path.string());
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("records[0].fp8"), std::string::npos) << e.what();
  }
  // A bare word is not JSON: refused at its line and column before any field is read.
  std::ofstream(path) << "{\"cases_file\": \"x\", \"records\": [\n  {\"fp8\": maybe}]}\n";
  try {
    load_bands(path.string());
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

// Valid JSON that is a bad record: the fast reader hands it to the located one, which names it.
TEST(ErrorBands, ADuplicateKeyOrAWrongTypeNamesItsPlace) {
  const std::string head =
      "{\"cases_file\": \"x\", \"records\": [\n  {\"id\": \"a\", \"group\": \"g\", "
      "\"generation\": \"hopper\", \"framework\": \"megatron\", \"calibrated\": false, "
      "\"fp8\": false, \"zero3\": false, \"moe\": false, \"cp\": false, \"offload\": false, "
      "\"scale\": 1, ";
  const auto path = std::filesystem::temp_directory_path() / "dtplan_bands_dup.json";
  for (const auto& [tail, expect] :
       {std::pair<std::string, std::string>{"\"gpus\": 8, \"seq\": 2048, \"ratio\": 1.0, "
                                            "\"ratio\": 2.0}]}\n",
                                            "ratio"},
        {"\"gpus\": \"eight\", \"seq\": 2048, \"ratio\": 1.0}]}\n", "records[0].gpus"},
        {"\"gpus\": 8, \"seq\": 2048, \"ratio\": 0}]}\n", "records[0].ratio"}}) {
    std::ofstream(path) << head << tail;
    try {
      load_bands(path.string());
      ADD_FAILURE() << "accepted: " << tail;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }
}

TEST(ErrorBands, GenerationsFromGpuNames) {
  EXPECT_EQ(gpu_generation("A100-SXM4-80GB"), "ampere");
  EXPECT_EQ(gpu_generation("H800-SXM5-80GB"), "hopper");
  EXPECT_EQ(gpu_generation("B200-GB200-186GB"), "blackwell");
  EXPECT_EQ(gpu_generation("host-cpu-core"), "other");
}

}  // namespace
}  // namespace dtplan
