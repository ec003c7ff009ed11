// The calibrator's fits, journal and recorded-measurement readers. Expected values come from
// synthetic data generated with known parameters (the fit must recover them, within 2% as the
// calibration issue asks) and from an nccl-tests report whose bus bandwidth the file states.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "calibrate/driver.h"
#include "calibrate/fit.h"
#include "calibrate/journal.h"
#include "calibrate/process_group.h"
#include "calibrate/recorded.h"
#include "calibrate/sweep.h"
#include "core/catalog.h"
#include "core/error.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/calibration_coverage.h"
#include "simulator/cost/compute_cost.h"

namespace dtplan::calibrate {
namespace {

namespace fs = std::filesystem;

const ProcessGroup& world() {
  static ProcessGroup w(nullptr, nullptr);  // one process (MPI singleton when built with MPI)
  return w;
}

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("dtplan_calibrate_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

Measurement collective(CollectiveOp op, int n, int64_t bytes, double t) {
  Measurement m;
  m.task.kind = TaskKind::kCollective;
  m.task.op = op;
  m.task.scope = CommScope::kIntraNode;
  m.task.group_size = n;
  m.task.bytes = bytes;
  m.time_s = t;
  return m;
}

TEST(FitCollectives, RecoversOneAlphaBetaRegimeWithin2Percent) {
  // Synthetic: t = 12 us + bytes / (80 GB/s), sizes 1 KiB .. 1 GiB.
  std::vector<Measurement> ms;
  for (int64_t b = 1024; b <= (int64_t{1} << 30); b *= 2)
    ms.push_back(collective(CollectiveOp::kAllReduce, 8, b, 12e-6 + b / 80e9));
  auto fits = fit_collectives(ms);
  ASSERT_EQ(fits.size(), 1u);
  ASSERT_EQ(fits[0].segments.size(), 1u);
  EXPECT_NEAR(fits[0].segments[0].alpha_us, 12.0, 0.02 * 12.0);
  EXPECT_NEAR(fits[0].segments[0].bw_gbps, 80.0, 0.02 * 80.0);
  EXPECT_LT(fits[0].max_rel_residual, 1e-6);
  EXPECT_GT(fits[0].r2, 0.999999);
}

TEST(FitCollectives, FindsTwoRegimesAtTheirBoundary) {
  // Synthetic protocol switch: up to 64 KiB t = 5 us + b / 20 GB/s, above t = 30 us + b / 150 GB/s.
  std::vector<Measurement> ms;
  for (int64_t b = 1024; b <= (int64_t{1} << 28); b *= 2) {
    const double t = b <= 65536 ? 5e-6 + b / 20e9 : 30e-6 + b / 150e9;
    ms.push_back(collective(CollectiveOp::kAllGather, 4, b, t));
  }
  auto fits = fit_collectives(ms);
  ASSERT_EQ(fits.size(), 1u);
  ASSERT_EQ(fits[0].segments.size(), 2u);
  const auto& s = fits[0].segments;
  EXPECT_EQ(s[0].max_bytes, 65536);
  EXPECT_NEAR(s[0].alpha_us, 5.0, 0.1);
  EXPECT_NEAR(s[0].bw_gbps, 20.0, 0.4);
  EXPECT_NEAR(s[1].alpha_us, 30.0, 0.6);
  EXPECT_NEAR(s[1].bw_gbps, 150.0, 3.0);
  EXPECT_LT(fits[0].max_rel_residual, 1e-6);
}

// GEMM times of a grid of shapes from the estimator's own cost model with known parameters.
std::vector<Measurement> synthetic_gemms(const HardwareProfile& hw, Precision p) {
  ComputeCostModel cm{&hw, p};
  std::vector<Measurement> ms;
  for (int64_t m : {256, 1024, 4096, 16384})
    for (int64_t n : {512, 2048, 8192})
      for (int64_t k : {256, 1024, 4096, 12288}) {
        Measurement x;
        x.task.kind = TaskKind::kGemm;
        x.task.precision = p;
        x.task.m = m, x.task.n = n, x.task.k = k;
        x.time_s = cm.gemm_s(m, n, k, 1);
        ms.push_back(x);
      }
  return ms;
}

TEST(FitGemm, RecoversEfficiencyParametersWithin2Percent) {
  HardwareProfile hw = load_profile("dgx-h100");
  hw.calibration = {};
  hw.efficiency.gemm_max_fraction = 0.72;
  hw.efficiency.gemm_half_saturation_gflop = 3.5;
  hw.efficiency.sustained_compute_fraction = 1.0;  // microbenchmarks: short runs
  auto ms = synthetic_gemms(hw, Precision::kBf16);
  HardwareProfile base = load_profile("dgx-h100");  // starts from other parameters
  GemmFit f = fit_gemm(ms, base, Precision::kBf16);
  EXPECT_NEAR(f.max_fraction, 0.72, 0.02 * 0.72);
  EXPECT_NEAR(f.half_saturation_gflop, 3.5, 0.02 * 3.5);
  EXPECT_LT(f.max_rel_residual, 0.01);
  EXPECT_EQ(f.points, static_cast<int>(ms.size()));
}

TEST(FitGemm, RefusesMeasurementsAboveTheProfilePeak) {
  HardwareProfile hw = load_profile("dgx-h100");
  auto ms = synthetic_gemms(hw, Precision::kBf16);
  for (auto& m : ms) m.time_s /= 10;  // ten times faster than the datasheet allows
  EXPECT_THROW(fit_gemm(ms, hw, Precision::kBf16), InputError);
}

TEST(Replay, SyntheticCsvRoundTripsThroughTheCalibratedProfile) {
  const std::string dir = temp_dir("replay");
  HardwareProfile truth = load_profile("dgx-h100");
  truth.calibration = {};
  truth.efficiency.gemm_max_fraction = 0.66;
  truth.efficiency.gemm_half_saturation_gflop = 2.0;
  truth.efficiency.sustained_compute_fraction = 1.0;  // microbenchmarks: short runs
  {
    std::ofstream csv(dir + "/rec.csv");
    csv << "kind,precision,m,n,k,op,scope,group_size,bytes,time_us\n";
    for (const auto& m : synthetic_gemms(truth, Precision::kBf16))
      csv << "gemm,bf16," << m.task.m << "," << m.task.n << "," << m.task.k << ",,,,,"
          << m.time_s * 1e6 << "\n";
    for (int64_t b = 4096; b <= (int64_t{1} << 30); b *= 4)
      csv << "collective,,,,,reduce_scatter,inter_node,16," << b << "," << (25e-6 + b / 40e9) * 1e6
          << "\n";
  }
  CalibrateOptions o;
  o.backend = "replay";
  o.backend_options.inputs = {dir + "/rec.csv"};
  o.profile = "dgx-h100";
  o.out = dir + "/cal.yaml";
  o.progress = false;
  ASSERT_EQ(run_calibration(o, world()), 0);
  HardwareProfile got = load_profile_file(o.out);
  EXPECT_NEAR(got.efficiency.gemm_max_fraction, 0.66, 0.02 * 0.66);
  EXPECT_NEAR(got.efficiency.gemm_half_saturation_gflop, 2.0, 0.02 * 2.0);
  ASSERT_EQ(got.calibration.collective_fits.size(), 1u);
  const auto& cf = got.calibration.collective_fits[0];
  EXPECT_EQ(cf.op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(cf.scope, CommScope::kInterNode);
  EXPECT_EQ(cf.group_size, 16);
  ASSERT_EQ(cf.segments.size(), 1u);
  EXPECT_NEAR(cf.segments[0].alpha_us, 25.0, 0.5);
  EXPECT_NEAR(cf.segments[0].bw_gbps, 40.0, 0.8);
  // The fitted curve is the kernels' own: the base profile's sustained-in-training derating
  // stays in the profile and applies to the curve and the measured tables alike.
  EXPECT_DOUBLE_EQ(got.efficiency.sustained_compute_fraction,
                   load_profile("dgx-h100").efficiency.sustained_compute_fraction);
  {
    const auto& g0 = got.calibration.gemm.front();
    const ComputeCostModel cm{&got, Precision::kBf16};
    EXPECT_NEAR(
        cm.gemm_s(g0.m, g0.n, g0.k, 1),
        2.0 * g0.m * g0.n * g0.k / (g0.tflops * 1e12 * got.efficiency.sustained_compute_fraction),
        1e-12);
  }
  // The measured tables are in the profile too (they replace the model where they cover).
  EXPECT_EQ(got.calibration.gemm.size(), synthetic_gemms(truth, Precision::kBf16).size());
  ASSERT_EQ(got.calibration.collectives.size(), 1u);
  EXPECT_FALSE(got.calibration.provenance.date.empty());
  EXPECT_TRUE(fs::exists(dir + "/cal.md"));

  // An estimate on the calibrated profile flags what the calibration did not cover. GPT-3 at
  // 16K tokens with TP 1 has GEMMs of 2 x 16384 x 49152 x 12288 = 19.8 TFLOP, above the
  // synthetic grid's largest (2 x 16384 x 8192 x 12288 = 3.3 TFLOP); with TP 8 its all-reduce
  // inside a node has no measured table (only a cross-node reduce-scatter was recorded).
  Cluster c;
  c.profile = got;
  c.num_gpus = 8;
  Workload w;
  w.seq_len = 16384;
  w.global_batch = 8;
  Plan p;
  p.tp = 8;
  p.dp = 1;
  p.sp = true;
  p.recompute = Recompute::kFull;
  Plan p1 = p;
  p1.tp = 1;
  p1.dp = 8;
  CalibrationCoverage cov;
  {
    CoverageScope scope(cov);
    (void)estimate(load_model("gpt3-175b"), c, w, p1, {});
    (void)estimate(load_model("gpt3-175b"), c, w, p, {});
  }
  auto warnings = cov.warnings();
  auto has = [&](const std::string& s) {
    for (const auto& x : warnings)
      if (x.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("outside the calibrated range")) << warnings.size();
  EXPECT_TRUE(has("all_reduce intra_node group of 8: no measured table"));
  CalibrationCoverage none;  // not active: nothing recorded
  (void)estimate(load_model("gpt3-175b"), c, w, p, {});
  EXPECT_TRUE(none.warnings().empty());
}

TEST(Replay, NcclTestsJsonYieldsTheBusBandwidthTheFileStates) {
  const std::string path =
      std::string(DTPLAN_TEST_DATA_DIR) + "/tests/fixtures/calibrate/nccl_tests_all_reduce.json";
  auto recs = read_recorded(path);
  ASSERT_EQ(recs.size(), 6u);
  for (const auto& r : recs) {
    EXPECT_EQ(r.measurement.task.op, CollectiveOp::kAllReduce);
    EXPECT_EQ(r.measurement.task.group_size, 8);
    EXPECT_EQ(r.measurement.task.scope, CommScope::kIntraNode);
    // nccl-tests prints bus_bw with 6 decimals.
    EXPECT_NEAR(r.measurement.busbw_gbps(), r.stated_busbw_gbps, 1e-5 + 1e-6 * r.stated_busbw_gbps)
        << r.measurement.task.key();
  }
  EXPECT_EQ(recs[0].device, "NVIDIA H100 80GB HBM3");
}

TEST(Journal, ResumeKeepsMeasurementsAndCutsATornLine) {
  const std::string dir = temp_dir("journal");
  const std::string path = dir + "/j.journal";
  {
    Journal j(path, "run A", false);
    for (int i = 0; i < 3; ++i)
      j.append(collective(CollectiveOp::kAllReduce, 2, 1024 << i, 1e-5 * (i + 1)));
  }
  {
    std::ofstream torn(path, std::ios::app);
    torn << "{\"kind\":\"collective\",\"op\":\"all_re";  // killed mid-write
  }
  EXPECT_THROW(Journal(path, "run A", false), InputError);  // exists: needs --resume
  EXPECT_THROW(Journal(path, "run B", true), InputError);   // another run's journal
  Journal j(path, "run A", true);
  EXPECT_EQ(j.existing().size(), 3u);
  EXPECT_GT(j.torn_bytes(), 0u);
  EXPECT_TRUE(j.has(collective(CollectiveOp::kAllReduce, 2, 2048, 1).task.key()));
  EXPECT_DOUBLE_EQ(j.existing()[2].time_s, 3e-5);
}

TEST(Sweep, ParsesSizeRanges) {
  int64_t lo = 0, hi = 0;
  parse_size_range("1K-64M", lo, hi);
  EXPECT_EQ(lo, 1024);
  EXPECT_EQ(hi, 64 << 20);
  EXPECT_THROW(parse_size_range("64M-1K", lo, hi), InputError);
  EXPECT_THROW(parse_size_range("lots", lo, hi), InputError);
  EXPECT_THROW(parse_size_range("1X-2M", lo, hi), InputError);
}

}  // namespace
}  // namespace dtplan::calibrate
