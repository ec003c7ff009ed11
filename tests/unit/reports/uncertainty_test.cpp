// How sure a prediction is (reports/uncertainty.h): the band applied to each figure, and the
// warnings for an unfitted profile, a sparse regime, no band, and inputs outside calibration.
#include "reports/uncertainty.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/catalog.h"
#include "simulator/analytic/estimator.h"

namespace dtplan {
namespace {

struct Case {
  ModelSpec m;
  Cluster c;
  Workload w;
  Plan p;
  Estimate e;
};

Case llama8b(const char* profile) {
  Case k{load_model("llama3-8b"), load_cluster(profile, 64), {}, {}, {}};
  k.w.seq_len = 8192;
  k.w.global_batch = 512;
  k.w.train_tokens = 1e12;
  k.p.tp = 8;
  k.p.dp = 8;
  k.p.sp = true;
  k.p.zero = 1;
  k.p.gbs = 512;
  k.e = estimate(k.m, k.c, k.w, k.p);
  return k;
}

// A record of twelve hopper / ampere cases (two families) at known ratios.
ErrorBandTable record(const std::string& generation) {
  ErrorBandTable t;
  for (int i = 0; i < 12; ++i) {
    BandRecord r;
    r.id = std::to_string(i);
    r.group = (i % 2 ? "fa_" : "fb_") + std::to_string(i);
    r.regime.generation = generation;
    r.regime.framework = "megatron";
    r.regime.scale = 1;
    r.ratio = 1.0 + 0.02 * i;
    r.gpus = 64;
    r.seq_len = 8192;
    t.records.push_back(r);
  }
  return t;
}

bool has(const Uncertainty& u, const std::string& code) {
  return std::any_of(u.warnings.begin(), u.warnings.end(),
                     [&](const NumberWarning& w) { return w.code == code; });
}

TEST(Uncertainty, TheBandScalesEachFigure) {
  const Case k = llama8b("dgx-h100");
  const ErrorBandTable t = record("hopper");
  const Uncertainty u = uncertainty_of(k.m, k.c, k.w, k.p, k.e, "megatron", {}, &t);
  ASSERT_TRUE(u.band.found);
  EXPECT_DOUBLE_EQ(u.step_low_s, k.e.step_time_s * u.band.low);
  EXPECT_DOUBLE_EQ(u.step_high_s, k.e.step_time_s * u.band.high);
  // A slower step is fewer tokens and a lower MFU: the band the other way round.
  EXPECT_DOUBLE_EQ(u.tokens_low, k.e.tokens_per_s / u.band.high);
  EXPECT_DOUBLE_EQ(u.mfu_high, k.e.mfu / u.band.low);
  EXPECT_DOUBLE_EQ(u.days_high, k.e.time_to_train_days * u.band.high);
  EXPECT_LT(u.step_low_s, u.step_high_s);
  EXPECT_FALSE(has(u, "regime-sparse"));
  EXPECT_EQ(with_band("64.1 s", 58.04, 71.2, "{:.0f}", true), "64.1 s (58–71)");
  EXPECT_EQ(with_band("64.1 s", 58.04, 71.2, "{:.0f}", false), "64.1 s");
}

// The band's fast end stops at the kernel ceiling (the profile's fastest kernel's share of the
// peak, kernel_ceiling): a record of runs over 3x faster than predicted must not give a plan
// an HFU beyond what any kernel reaches (a new-user trial saw 78.5% MFU at the fast end).
TEST(Uncertainty, TheFastEndStopsAtTheKernelCeiling) {
  const Case k = llama8b("dgx-h100");
  ErrorBandTable t = record("hopper");
  for (BandRecord& r : t.records) r.ratio *= 0.3;  // every run over 3x as fast as predicted
  const Uncertainty u = uncertainty_of(k.m, k.c, k.w, k.p, k.e, "megatron", {}, &t);
  ASSERT_TRUE(u.band.found);
  const HardwareProfile& hw = k.c.profile;
  // The ceiling: H100's GEMM asymptote or its fastest attention curve, whichever is higher.
  double expected = hw.efficiency.gemm_max_fraction;
  for (const auto& a : hw.efficiency.attention_kernels)
    expected = std::max({expected, a.fwd_max_fraction, a.bwd_max_fraction});
  expected = std::max({expected, hw.efficiency.attention_fwd_max_fraction,
                       hw.efficiency.attention_bwd_max_fraction});
  EXPECT_DOUBLE_EQ(kernel_ceiling(hw, Precision::kBf16), expected);
  ASSERT_GT(k.e.hfu / u.band.low, expected);  // the band alone would pass the ceiling
  EXPECT_NEAR(k.e.hfu * k.e.step_time_s / u.step_low_s, expected, 1e-12);
  EXPECT_NEAR(u.mfu_high, k.e.mfu * k.e.step_time_s / u.step_low_s, 1e-12);
  EXPECT_TRUE(has(u, "band-at-ceiling"));
  // The usual record leaves the band as it is.
  const ErrorBandTable plain = record("hopper");
  const Uncertainty v = uncertainty_of(k.m, k.c, k.w, k.p, k.e, "megatron", {}, &plain);
  EXPECT_DOUBLE_EQ(v.step_low_s, k.e.step_time_s * v.band.low);
  EXPECT_FALSE(has(v, "band-at-ceiling"));
}

TEST(Uncertainty, WarningsTravelWithTheNumbers) {
  // h100-96g-500w's efficiency is initial values (efficiency.status); dgx-a100-80g's is fitted.
  const Case h = llama8b("h100-96g-500w");
  const ErrorBandTable hopper = record("hopper");
  EXPECT_TRUE(
      has(uncertainty_of(h.m, h.c, h.w, h.p, h.e, "megatron", {}, &hopper), "profile-not-fitted"));
  const Case a = llama8b("dgx-a100-80g");
  const ErrorBandTable ampere = record("ampere");
  const Uncertainty fitted = uncertainty_of(a.m, a.c, a.w, a.p, a.e, "megatron", {}, &ampere);
  EXPECT_FALSE(has(fitted, "profile-not-fitted"));
  EXPECT_TRUE(fitted.warnings.empty());
  // Activation offload: the record's twelve ampere cases do not offload, so the band is
  // borrowed and said to be; the warning counts the record's offloading runs and names the host
  // rate every GPU gets when all copy (dgx-a100-80g: 32 GB/s shared by two GPUs per uplink).
  Case off = a;
  off.p.tp = 1;
  off.p.dp = 64;
  off.p.sp = false;
  off.p.zero = 3;
  off.p.offload_layers = 16;
  const Uncertainty offload = uncertainty_of(
      off.m, off.c, off.w, off.p, estimate(off.m, off.c, off.w, off.p), "megatron", {}, &ampere);
  ASSERT_TRUE(has(offload, "offload-unvalidated"));
  const std::string said =
      std::find_if(offload.warnings.begin(), offload.warnings.end(), [](const NumberWarning& w) {
        return w.code == "offload-unvalidated";
      })->message;
  EXPECT_NE(said.find("0 of dtplan's published runs on ampere GPUs"), std::string::npos) << said;
  EXPECT_NE(said.find("16 GB/s per GPU"), std::string::npos) << said;
  ErrorBandTable with_one = ampere;
  with_one.records.front().regime.offload = true;
  const Uncertainty one = uncertainty_of(
      off.m, off.c, off.w, off.p, estimate(off.m, off.c, off.w, off.p), "megatron", {}, &with_one);
  EXPECT_NE(std::find_if(one.warnings.begin(), one.warnings.end(),
                         [](const NumberWarning& w) { return w.code == "offload-unvalidated"; })
                ->message.find("1 of dtplan's published runs on ampere GPUs"),
            std::string::npos);
  // dgx-h100: its sustained fraction fitted, its host and collective values initial.
  const Case partly = llama8b("dgx-h100");
  const Uncertainty p =
      uncertainty_of(partly.m, partly.c, partly.w, partly.p, partly.e, "megatron", {}, &hopper);
  EXPECT_TRUE(has(p, "profile-partly-fitted"));
  EXPECT_FALSE(has(p, "profile-not-fitted"));
  // A record without this generation: no band (other GPUs do not stand in).
  const Uncertainty other_gpus = uncertainty_of(h.m, h.c, h.w, h.p, h.e, "megatron", {}, &ampere);
  EXPECT_FALSE(other_gpus.band.found);
  EXPECT_TRUE(has(other_gpus, "no-error-band"));
  auto message = [](const Uncertainty& u, const char* code) {
    for (const NumberWarning& w : u.warnings)
      if (w.code == code) return w.message;
    return std::string();
  };
  EXPECT_NE(message(other_gpus, "no-error-band").find("none is on hopper GPUs"), std::string::npos)
      << message(other_gpus, "no-error-band");
  // A record of this generation under another framework: the band drops the framework, and says
  // so.
  const Uncertainty sparse = uncertainty_of(h.m, h.c, h.w, h.p, h.e, "torchtitan", {}, &hopper);
  ASSERT_TRUE(sparse.band.found);
  EXPECT_TRUE(has(sparse, "regime-sparse"));
  // A record too small for any band: no interval, and a warning.
  ErrorBandTable tiny = record("hopper");
  tiny.records.resize(3);
  const Uncertainty none = uncertainty_of(h.m, h.c, h.w, h.p, h.e, "megatron", {}, &tiny);
  EXPECT_FALSE(none.band.found);
  EXPECT_TRUE(has(none, "no-error-band"));
  // Runs of this generation exist, too few: the warning says how many and what a band needs
  // (a new-user trial read "no published run resembles this regime" beside 59 such runs).
  EXPECT_NE(message(none, "no-error-band").find("holds 3 published run(s) on hopper GPUs"),
            std::string::npos)
      << message(none, "no-error-band");
  EXPECT_DOUBLE_EQ(none.step_low_s, h.e.step_time_s);
  // A shape beyond the record: 4x the longest sequence it holds.
  Case longer = llama8b("dgx-h100");
  longer.w.seq_len = int64_t{4} * 8192;
  EXPECT_TRUE(
      has(uncertainty_of(longer.m, longer.c, longer.w, longer.p, longer.e, "megatron", {}, &hopper),
          "outside-record"));
  EXPECT_FALSE(
      has(uncertainty_of(h.m, h.c, h.w, h.p, h.e, "megatron", {}, &hopper), "outside-record"));
  // TP beyond the 8-GPU NVLink domain of a DGX H100: said, as the search's rejection says it.
  Case wide = llama8b("dgx-h100");
  wide.p.tp = 16;
  wide.p.dp = 4;
  wide.e = estimate(wide.m, wide.c, wide.w, wide.p);
  EXPECT_TRUE(has(uncertainty_of(wide.m, wide.c, wide.w, wide.p, wide.e, "megatron", {}, &hopper),
                  "tp-crosses-nodes"));
  EXPECT_FALSE(
      has(uncertainty_of(h.m, h.c, h.w, h.p, h.e, "megatron", {}, &hopper), "tp-crosses-nodes"));
  // Inputs outside a calibrated range (calibration_coverage.h) become warnings too.
  const Uncertainty cal = uncertainty_of(h.m, h.c, h.w, h.p, h.e, "megatron",
                                         {"GEMM 1 x 2 x 3 is outside ..."}, &hopper);
  EXPECT_TRUE(has(cal, "outside-calibration"));
}

// DualPipe-V exists to hide the MoE all-to-all behind the paired micro-batch's compute: run with
// the overlap off, the plan is priced with the all-to-all exposed, and says so; with
// --ep-comm-overlap, or under a schedule without paired passes, it does not (a new-user trial:
// DeepSeek-V3 on 2048 H800 read 5.7 days per trillion tokens against the report's 3.7).
TEST(Uncertainty, DualPipeWithoutTheAllToAllOverlapSaysSo) {
  const ModelSpec m = load_model("deepseek-v3");
  const Cluster c = load_cluster("hgx-h800", 2048);
  Workload w;
  w.seq_len = 4096;
  w.global_batch = 15360;
  w.precision = Precision::kFp8;
  w.fp8_recipe = Fp8Recipe::kBlockwise;
  Plan p;
  p.pp = 16;
  p.vpp = 2;
  p.ep = 64;
  p.dp = 128;
  p.zero = 1;
  p.gbs = 15360;
  p.uneven_pp = true;
  p.schedule = "dualpipe-v";
  auto warned = [&](const Plan& q) {
    const Estimate e = estimate(m, c, w, q);
    EXPECT_GT(e.step_time_s, 0);
    const Uncertainty u = uncertainty_of(m, c, w, q, e, "megatron");
    return std::any_of(u.warnings.begin(), u.warnings.end(),
                       [](const NumberWarning& x) { return x.code == "ep-overlap-off"; });
  };
  EXPECT_TRUE(warned(p));
  Plan overlapped = p;
  overlapped.ep_comm_overlap = true;
  EXPECT_FALSE(warned(overlapped));
  Plan interleaved = p;
  interleaved.schedule = "interleaved";
  EXPECT_FALSE(warned(interleaved));
}

// The shipped record holds every predicted case of cases.yaml and gives a band to a plain
// A100 plan from its own A100 runs.
TEST(Uncertainty, TheShippedRecordAnswersAnA100Plan) {
  const ErrorBandTable* t = shipped_bands();
  ASSERT_NE(t, nullptr);
  EXPECT_GT(t->records.size(), 1800u);
  const Case a = llama8b("dgx-a100-80g");
  const Uncertainty u = uncertainty_of(a.m, a.c, a.w, a.p, a.e, "megatron");
  ASSERT_TRUE(u.band.found);
  EXPECT_TRUE(u.band.dropped.empty());
  EXPECT_GT(u.band.families, 1);
}

}  // namespace
}  // namespace dtplan
