// Claim checks (reports/claims.h): the seed case of issue #16 with its arithmetic worked by hand,
// consistent, refuted and under-specified claims, hardware FLOPs, and dtplan's model reading.
#include "reports/claims.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/catalog.h"
#include "core/error.h"

namespace dtplan {
namespace {

Claim load_one(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("dtplan_claims_" + name + ".yaml");
  std::ofstream(path) << text;
  std::vector<Claim> v = load_claims(path.string());
  EXPECT_EQ(v.size(), 1u);
  return v.front();
}

bool has(const std::vector<ClaimFinding>& v, const std::string& code, const std::string& text) {
  for (const ClaimFinding& f : v)
    if (f.code == code && f.message.find(text) != std::string::npos) return true;
  return false;
}

std::string dump(const ClaimResult& r) {
  std::string s;
  for (const auto& f : r.refuted) s += "refuted: " + f.message + "\n";
  for (const auto& f : r.consistent) s += "consistent: " + f.message + "\n";
  for (const auto& f : r.derived) s += "derived: " + f.message + "\n";
  for (const auto& m : r.missing) s += "missing: " + m + "\n";
  return s;
}

// The parallel-strategies chapter's project case (issue #16): 130B on 256 A100 80G, TP8 PP16
// DP2 ZeRO-3, MFU ~45%, 1T tokens in 14 days. By hand: 6 x 130e9 x 1e12 = 7.8e23 FLOPs;
// 256 x 312e12 (A100 BF16 dense peak, NVIDIA A100 datasheet) x 0.45 = 3.594e16 FLOP/s, so
// 2.170e7 s = 251.2 days; 14 days needs 7.8e23 / (14 x 86400 x 312e12 x 0.45) = 4,592.9 GPUs,
// or an MFU of 0.45 x 251.2 / 14 = 807%.
TEST(Claims, SeedCaseIsRefutedWithItsArithmetic) {
  const Claim c = load_one("seed", R"(
name: seed
params: 130e9
cluster: dgx-a100-80g
gpus: 256
plan: {tp: 8, pp: 16, dp: 2, zero: 3}
mfu: "45%"
train_tokens: 1e12
days: 14
)");
  const ClaimResult r = check_claim(c);
  const double days = 6 * 130e9 * 1e12 / (256 * 312e12 * 0.45) / 86400;
  const double gpus = 6 * 130e9 * 1e12 / (14 * 86400 * 312e12 * 0.45);
  const double mfu = 0.45 * days / 14;
  EXPECT_NEAR(days, 251.2, 0.1);
  EXPECT_NEAR(gpus, 4592.9, 0.1);
  EXPECT_TRUE(has(r.refuted, "throughput",
                  "1T tokens in 14 days on 256 A100-SXM4-80GB at 45% MFU is not possible: 45% "
                  "MFU gives " +
                      std::to_string(static_cast<int>(std::round(days))) +
                      " days; 14 days needs ≥ 4,593 GPUs at that MFU, or an MFU of " +
                      std::to_string(static_cast<int>(std::round(100 * mfu))) + "%"))
      << dump(r);
  EXPECT_TRUE(has(r.refuted, "peak", "needs an MFU of 807%")) << dump(r);
  // No model named: dtplan's model cannot read the layout, and says what it needs.
  EXPECT_TRUE(std::find(r.missing.begin(), r.missing.end(), "dtplan's model: needs model") !=
              r.missing.end())
      << dump(r);
}

// "45 %" (a space before the sign) reads as 45%; a percentage above 100 is refused at its
// line, as a fraction above 1 is.
TEST(Claims, PercentagesReadWithOrWithoutASpaceAndAtMostAHundred) {
  const std::string base = "name: p\nparams: 130e9\ncluster: dgx-a100-80g\ngpus: 256\n";
  EXPECT_DOUBLE_EQ(*load_one("pct_space", base + "mfu: \"45 %\"\n").mfu, 0.45);
  EXPECT_DOUBLE_EQ(*load_one("pct_plain", base + "mfu: \"45%\"\n").mfu, 0.45);
  for (const char* bad : {"\"150%\"", "\"0%\"", "\"4 5%\"", "1.5"}) {
    try {
      load_one("pct_bad", base + "mfu: " + bad + "\n");
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.location().line, 5) << bad << ": " << e.what();
    }
  }
}

TEST(Claims, ConsistentStatementsAgreeWithinTheTolerance) {
  // 45% MFU on 4,608 A100 (a node multiple above 4,593) trains 1T tokens of a 130B model in
  // 251.2 x 256 / 4608 = 13.96 days: consistent with "14 days".
  const Claim c = load_one("consistent", R"(
params: 130e9
cluster: dgx-a100-80g
gpus: 4608
mfu: 0.45
train_tokens: 1e12
days: 14
)");
  const ClaimResult r = check_claim(c);
  EXPECT_TRUE(r.refuted.empty()) << dump(r);
  EXPECT_TRUE(has(r.consistent, "throughput", "agree")) << dump(r);
}

TEST(Claims, UnderSpecifiedClaimsSayWhatIsMissing) {
  const ClaimResult r = check_claim(load_one("under", "params: 7e9\nmfu: 0.4\ndays: 3\n"));
  EXPECT_EQ(r.checks(), 0) << dump(r);
  auto missing = [&](const std::string& s) {
    return std::find(r.missing.begin(), r.missing.end(), s) != r.missing.end();
  };
  EXPECT_TRUE(missing("mfu: needs gpus")) << dump(r);
  EXPECT_TRUE(missing("days: needs train_tokens")) << dump(r);
}

TEST(Claims, StepTimeAndTokensPerSecondAreComparedAsThroughput) {
  // 1024 x 2048 tokens every 10 s = 209,715 tokens/s; stated 100K tokens/s: 2.1x apart.
  const ClaimResult r = check_claim(load_one("step", R"(
params: 7e9
seq_len: 2048
global_batch: 1024
step_time_s: 10
tokens_per_s: 100000
)"));
  EXPECT_TRUE(has(r.refuted, "throughput", "cannot both hold")) << dump(r);
  EXPECT_TRUE(has(r.refuted, "throughput", "(2.1x)")) << dump(r);
}

// Narayanan et al. 2021 §5.1: GPT-3 175B, 300B tokens on 1024 A100 at 140 TFLOP/s per GPU
// "would take about 34 days", counting 8 x N x T FLOPs (full recomputation repeats the
// forward): 8 x 175e9 x 300e9 / (1024 x 140e12) / 86400 = 33.9 days. As hardware TFLOP/s with
// full recomputation the statements agree; as model TFLOP/s (6 N) they do not (25.4 days).
TEST(Claims, HardwareFlopsCountTheRecomputedForward) {
  const std::string base = R"(
params: 175e9
gpus: 1024
cluster: dgx-a100-80g
train_tokens: 300e9
days: 34
)";
  const ClaimResult hw =
      check_claim(load_one("hw", base + "plan: {recompute: full}\nhardware_tflops_per_gpu: 140\n"));
  EXPECT_TRUE(hw.refuted.empty()) << dump(hw);
  EXPECT_TRUE(has(hw.consistent, "throughput", "agree")) << dump(hw);
  const ClaimResult model = check_claim(load_one("model", base + "tflops_per_gpu: 140\n"));
  EXPECT_TRUE(has(model.refuted, "throughput", "gives 25.4 days")) << dump(model);
  const ClaimResult no_recompute =
      check_claim(load_one("norc", base + "hardware_tflops_per_gpu: 140\n"));
  EXPECT_TRUE(std::find(no_recompute.missing.begin(), no_recompute.missing.end(),
                        "hardware_tflops_per_gpu: needs plan.recompute (hardware FLOPs count the "
                        "recomputed forward)") != no_recompute.missing.end())
      << dump(no_recompute);
}

// With the model, the GPUs and their profile known, a throughput far above dtplan's best plan
// is refuted, one below it is not (a run may be less efficient than the best layout).
TEST(Claims, ModelReadingRefutesOnlyWhatBeatsTheBestPlan) {
  const std::string base = R"(
model: llama3-8b
cluster: dgx-h100
gpus: 64
seq_len: 8192
global_batch: 512
)";
  const ClaimResult fast = check_claim(load_one("fast", base + "mfu: 0.95\n"));
  EXPECT_TRUE(has(fast.refuted, "model", "what dtplan's model allows on these GPUs")) << dump(fast);
  const ClaimResult slow = check_claim(load_one("slow", base + "mfu: 0.2\n"));
  EXPECT_TRUE(slow.refuted.empty()) << dump(slow);
  EXPECT_TRUE(has(slow.consistent, "model", "within dtplan's model")) << dump(slow);
  // A stated layout that does not use the GPUs, or whose stated sizes do not divide them; an
  // unstated size is searched (CP2 fills TP8 PP2 DP2 to 64 GPUs).
  const ClaimResult bad =
      check_claim(load_one("layout", base + "mfu: 0.4\nplan: {tp: 8, pp: 2, cp: 1, dp: 2}\n"));
  EXPECT_TRUE(has(bad.refuted, "layout", "uses 32 GPUs, not 64")) << dump(bad);
  const ClaimResult odd = check_claim(load_one("odd", base + "mfu: 0.4\nplan: {tp: 8, dp: 3}\n"));
  EXPECT_TRUE(has(odd.refuted, "layout", "TP8 DP3 (product 24) do not divide 64 GPUs"))
      << dump(odd);
  const ClaimResult filled =
      check_claim(load_one("filled", base + "mfu: 0.3\nplan: {tp: 8, pp: 2, dp: 2}\n"));
  EXPECT_TRUE(filled.refuted.empty()) << dump(filled);
  EXPECT_TRUE(has(filled.derived, "model", "DP2 CP2")) << dump(filled);
}

// The kernel ceiling: every model FLOP runs in a kernel, so no MFU passes the highest share of
// the peak any kernel of the profile reaches (for dgx-h100, its GEMM asymptote
// efficiency.gemm_max_fraction, read from the profile here).
TEST(Claims, AnMfuAboveTheFastestKernelIsRefuted) {
  const double ceiling = load_profile("dgx-h100").efficiency.gemm_max_fraction;
  const std::string base = "params: 70e9\ncluster: dgx-h100\ngpus: 64\n";
  const ClaimResult over =
      check_claim(load_one("over", base + fmt::format("mfu: {}\n", ceiling + 0.03)));
  EXPECT_TRUE(has(over.refuted, "peak",
                  fmt::format("above the {:.0f}% of the 989 TFLOP/s bf16 peak", 100 * ceiling)))
      << dump(over);
  const ClaimResult under =
      check_claim(load_one("under", base + fmt::format("mfu: {}\n", ceiling - 0.03)));
  EXPECT_TRUE(under.refuted.empty()) << dump(under);
}

// A stated peak memory is held to what the leanest reading of the claim keeps on the GPU even
// with its model states offloaded to the host: activations and buffers. The buffers alone hold
// the CUDA context, about 300 MB under lazy loading (pytorch/pytorch#107667, REFERENCE.md
// §2.2; core/plan.h kCudaContextBytes), so 0.001 GiB cannot be;
// 40 GiB, about half an H100, can.
TEST(Claims, AMemoryBelowTheLeanestReadingIsRefuted) {
  const std::string base = R"(
model: llama3-8b
cluster: dgx-h100
gpus: 64
seq_len: 8192
global_batch: 512
plan: {tp: 8, pp: 2}
)";
  const ClaimResult low = check_claim(load_one("memlow", base + "memory_gib_per_gpu: 0.001\n"));
  EXPECT_TRUE(has(low.refuted, "model", "below what any reading of the claim keeps")) << dump(low);
  // The fits-the-GPU check alone passes it.
  EXPECT_TRUE(has(low.consistent, "memory", "fits the H100")) << dump(low);
  const ClaimResult ok = check_claim(load_one("memok", base + "memory_gib_per_gpu: 40\n"));
  EXPECT_TRUE(ok.refuted.empty()) << dump(ok);
  EXPECT_TRUE(has(ok.consistent, "model", "is at or above")) << dump(ok);
}

TEST(Claims, ParamsAreCheckedAgainstTheNamedModel) {
  const ClaimResult r = check_claim(load_one("params", "model: llama3-8b\nparams: 70e9\n"));
  EXPECT_TRUE(has(r.refuted, "params", "70B parameters stated; llama3-8b has 8.03B")) << dump(r);
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// The public runs of examples/claims/public_runs.yaml (sources in the file): every statement
// they make agrees with the others and with the GPUs' peak (the arithmetic); dtplan's model reads
// each stated layout within its tolerance, except where the model is known to fall short.
// Verdicts measured 2026-12-01; a change of verdict is a change of the model to explain.
TEST(ClaimsGolden, PublicRunsAndTheSeed) {
  const std::string dir = std::string(DTPLAN_TEST_DATA_DIR) + "/examples/claims/";
  struct Expected {
    const char* name_prefix;
    const char* verdict;       // "consistent", "refuted" or "nothing to check"
    const char* refuted_code;  // the one kind of finding that refutes it, or ""
  };
  const Expected expected[] = {
      {"Llama 3 405B", "consistent", ""},
      // The GPU count is not stated: the GPU-hours cannot be turned into a rate.
      {"Llama 2 70B", "nothing to check", ""},
      {"LLaMA 65B", "consistent", ""},
      {"OPT-175B", "consistent", ""},
      {"BLOOM-176B", "consistent", ""},
      {"GPT-3 175B", "consistent", ""},
      {"Megatron 1T", "consistent", ""},
      {"Falcon-180B", "consistent", ""},
      {"MPT-7B", "consistent", ""},
      // DeepSeek-V3 on 2048 H800: the report's GPU-hours imply 20% of the FP8 peak. dtplan's
      // best reading reached 11% while the all-to-all capped the node's NICs at one H800's
      // NVLink (150 GB/s) before splitting them over 8 ranks (18.75 GB/s each); at each rank's
      // NIC share (45 GB/s, 2026-12-07) it reaches 15% (EP32 ZeRO-3), and 20% is within the
      // band: consistent, as the report is.
      {"DeepSeek-V3", "consistent", ""},
      // Above dtplan's best reading by more than the band admits, and above the 81% of the
      // peak that H100's fastest kernel reaches (the kernel ceiling, since 2026-12-04).
      {"Llama 3 8B at 90% MFU", "refuted", "model peak"},
  };
  const std::vector<Claim> claims = load_claims(dir + "public_runs.yaml");
  ASSERT_EQ(claims.size(), std::size(expected));
  for (size_t i = 0; i < claims.size(); ++i) {
    const Claim& c = claims[i];
    const Expected& e = expected[i];
    ASSERT_EQ(c.name.rfind(e.name_prefix, 0), 0u) << c.name;
    EXPECT_FALSE(c.source.empty()) << c.name;
    const ClaimResult r = check_claim(c);
    const std::string verdict = !r.refuted.empty() ? "refuted"
                                : r.checks() > 0   ? "consistent"
                                                   : "nothing to check";
    EXPECT_EQ(verdict, e.verdict) << c.name << "\n" << dump(r);
    for (const ClaimFinding& f : r.refuted)
      EXPECT_NE((std::string(" ") + e.refuted_code + " ").find(" " + f.code + " "),
                std::string::npos)
          << f.message;
  }
  const std::vector<Claim> seed = load_claims(dir + "seed.yaml");
  ASSERT_EQ(seed.size(), 1u);
  const ClaimResult r = check_claim(seed.front());
  EXPECT_TRUE(has(r.refuted, "throughput", "45% MFU gives 251 days; 14 days needs ≥ 4,593 GPUs"))
      << dump(r);
}

}  // namespace
}  // namespace dtplan
