// Invariants of the performance model (issue #3): they hold for any parameter values, so they
// are checked on the shipped profiles across layouts.
#include "simulator/analytic/estimator.h"

#include <gtest/gtest.h>

#include "core/catalog.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {
namespace {

struct Scenario {
  ModelSpec model;
  Cluster cluster;
  Workload work;
};

Scenario gpt3_on_a100(int gpus) {
  Scenario s{load_model("gpt3-175b"), load_cluster("dgx-a100-80g", gpus), {}};
  s.work.seq_len = 2048;
  s.work.global_batch = 1536;
  return s;
}

Plan plan(int tp, int pp, int dp) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.gbs = 1536;
  p.sp = tp > 1;
  p.recompute = Recompute::kSelective;
  return p;
}

TEST(Estimator, ZeroThreeStatesNeverGrowWithDp) {
  Scenario s = gpt3_on_a100(1024);
  double prev = 1e300;
  for (int dp : {8, 16, 32, 64, 128}) {
    Plan p = plan(8, 1, dp);
    p.zero = 3;
    s.cluster.num_gpus = 8 * dp;
    Estimate e = estimate(s.model, s.cluster, s.work, p);
    const double states =
        e.memory_peak.weights_bytes + e.memory_peak.grads_bytes + e.memory_peak.optimizer_bytes;
    EXPECT_LE(states, prev) << "dp " << dp;
    prev = states;
  }
}

TEST(Estimator, BubbleFractionFallsAsMicroBatchesGrow) {
  Scenario s = gpt3_on_a100(512);
  double prev = 1.0;
  for (int64_t gbs : {64, 128, 256, 512, 1024}) {
    Plan p = plan(8, 16, 4);
    p.gbs = gbs;
    s.work.global_batch = gbs;
    Estimate e = estimate(s.model, s.cluster, s.work, p);
    EXPECT_LT(e.bubble_fraction, prev) << "gbs " << gbs;
    prev = e.bubble_fraction;
  }
}

// Megatron-LM schedules.py batches each pipeline send with the next receive: per micro-batch
// an interior rank waits for two transfers, the first and last ranks for one, and an
// interleaved rank for v (one per forward-backward pair). The busiest rank's exposed pipeline
// communication is that count x micro-batches x one send's time.
TEST(Estimator, PipelineExchangesFollowMegatronsBatchedSendRecv) {
  EXPECT_EQ(pipeline_exchanges_per_pass(0, 8, 1), 0.5);
  EXPECT_EQ(pipeline_exchanges_per_pass(3, 8, 1), 1.0);
  EXPECT_EQ(pipeline_exchanges_per_pass(7, 8, 1), 0.5);
  EXPECT_EQ(pipeline_exchanges_per_pass(0, 8, 4), 2.0);
  Scenario s = gpt3_on_a100(256);
  for (int vpp : {1, 3}) {
    Plan p = plan(8, 8, 4);
    p.vpp = vpp;
    p.schedule = vpp > 1 ? "interleaved" : "1f1b";
    StepCosts det;
    EstimatorCache cache;
    const Estimate e = estimate(s.model, s.cluster, s.work, p, EstimatorOptions{}, &cache, &det);
    const int b = e.busiest_stage;
    const double per_mb = vpp > 1 ? vpp : (b == 0 || b == 7 ? 1.0 : 2.0);
    EXPECT_NEAR(e.exposed_comm_s[static_cast<int>(CommDim::kPP)],
                p.num_microbatches() * per_mb * det.p2p_s, 1e-12)
        << "vpp " << vpp << " busiest " << b;
  }
}

// --recompute-layers k (full recomputation of the first k layers of each chunk; the memory
// model keeps only those layers' inputs) costs k layers' recomputation, not all of them: the
// recomputation time grows linearly in k and reaches full recomputation at every layer.
TEST(Estimator, PartialRecomputationCostsItsLayers) {
  Scenario s = gpt3_on_a100(256);
  auto recompute_s = [&](int k) {
    Plan p = plan(8, 1, 32);
    p.recompute = Recompute::kFull;
    p.recompute_layers = k;
    return estimate(s.model, s.cluster, s.work, p).recompute_s;
  };
  const double r24 = recompute_s(24), r48 = recompute_s(48), r72 = recompute_s(72);
  const double all = recompute_s(0);
  EXPECT_GT(r24, 0);
  EXPECT_NEAR(r48 - r24, r72 - r48, 1e-9 * all);
  EXPECT_NEAR(recompute_s(96), all, 1e-9 * all);  // 96 layers: every one
  EXPECT_LT(r72, all);
}

TEST(Estimator, UtilizationBoundedAndExposedWithinTotal) {
  for (const char* name : {"dgx-a100-80g", "dgx-h100", "dgx-b200"}) {
    Scenario s = gpt3_on_a100(256);
    s.cluster = load_cluster(name, 256);
    for (int tp : {2, 4, 8})
      for (int pp : {4, 8, 16}) {
        const int dp = 256 / (tp * pp);
        Plan p = plan(tp, pp, dp);
        p.gbs = 512;
        p.recompute = (tp / 2 + pp / 4) % 2 ? Recompute::kFull : Recompute::kSelective;
        s.work.global_batch = 512;
        if (!validate_plan(s.model, 256, s.work, p).empty()) continue;
        Estimate e = estimate(s.model, s.cluster, s.work, p);
        EXPECT_GT(e.mfu, 0);
        EXPECT_LE(e.mfu, 1.0);
        EXPECT_LE(e.mfu, e.hfu);
        for (int d = 0; d < kCommDims; ++d)
          EXPECT_LE(e.exposed_comm_s[d], e.comm_time_s[d] * (1 + 1e-9) + 1e-12)
              << name << " " << p.describe() << " dim " << kCommDimNames[d];
        // The breakdown adds up to the step time.
        double sum = e.compute_s + e.recompute_s + e.bubble_s + e.optimizer_s + e.overhead_s;
        for (double x : e.exposed_comm_s) sum += x;
        EXPECT_NEAR(sum, e.step_time_s, e.step_time_s * 1e-6) << p.describe();
      }
  }
}

TEST(Estimator, FasterGpuIsFaster) {
  Scenario s = gpt3_on_a100(256);
  Plan p = plan(8, 8, 4);
  Estimate a100 = estimate(s.model, s.cluster, s.work, p);
  s.cluster = load_cluster("dgx-h100", 256);
  Estimate h100 = estimate(s.model, s.cluster, s.work, p);
  EXPECT_LT(h100.step_time_s, a100.step_time_s);
}

TEST(OpProgram, GemmFlopsMatchTheClosedForm) {
  // Forward GEMM FLOPs of one GPT-3 layer on one TP rank: 24 b s h^2 / t (Korthikanti §4).
  Scenario s = gpt3_on_a100(8);
  Plan p = plan(8, 1, 1);
  p.gbs = 1;
  p.flash_attention = true;
  OpProgram prog;
  build_op_program(s.model, s.work, p, s.cluster, prog);
  double fwd = 0;
  for (const Op& o : prog.dense_layer)
    if (o.kind == OpKind::kGemm && o.pass == Pass::kForward) fwd += o.gemm_flops();
  const double h = 12288;
  EXPECT_NEAR(fwd, 24.0 * 2048 * h * h / 8, 24.0 * 2048 * h * h / 8 * 1e-9);
}

TEST(OpProgram, TpCollectivesFollowMegatronConjugates) {
  // Without SP: 2 all-reduces forward, 2 backward. With SP: 2 all-gathers + 2 reduce-scatters
  // forward, the mirror backward, plus the re-gathers for the weight gradients.
  Scenario s = gpt3_on_a100(8);
  for (bool sp : {false, true}) {
    Plan p = plan(8, 1, 1);
    p.sp = sp;
    OpProgram prog;
    build_op_program(s.model, s.work, p, s.cluster, prog);
    int ar = 0, ag = 0, rs = 0;
    for (const Op& o : prog.dense_layer) {
      if (o.kind != OpKind::kCollective || o.dim != CommDim::kTP) continue;
      ar += o.collective == CollectiveOp::kAllReduce;
      ag += o.collective == CollectiveOp::kAllGather;
      rs += o.collective == CollectiveOp::kReduceScatter;
    }
    if (!sp) {
      EXPECT_EQ(ar, 4);
      EXPECT_EQ(ag + rs, 0);
    } else {
      EXPECT_EQ(ar, 0);
      EXPECT_EQ(ag, 4 + 2);
      EXPECT_EQ(rs, 4);
    }
  }
}

TEST(Placement, DataParallelAcrossNodesWithTp8) {
  Plan p = plan(8, 2, 4);
  HardwareProfile hw = load_profile("dgx-a100-80g");
  Placements g = place_groups(p, hw, 64);
  EXPECT_EQ(g.tp.nodes, 1);
  EXPECT_EQ(g.tp.ranks_per_node, 8);
  EXPECT_EQ(g.dp.nodes, 4);  // one rank per node: the rails
  EXPECT_EQ(g.dp.ranks_per_node, 1);
}

TEST(StageLayout, UnevenSplitGivesFirstAndLastFewerLayers) {
  ModelSpec m = load_model("llama3.1-405b");  // 126 layers
  Plan p;
  p.pp = 16;
  p.uneven_pp = true;
  int total = 0;
  for (int i = 0; i < 16; ++i) total += layers_on_rank(m, p, i).total();
  EXPECT_EQ(total, 126);
  EXPECT_EQ(layers_on_rank(m, p, 1).total(), 8);
  EXPECT_EQ(layers_on_rank(m, p, 0).total(), 7);
  EXPECT_EQ(layers_on_rank(m, p, 15).total(), 7);
}

TEST(Collectives, RingTimeMatchesBusBandwidthDefinition) {
  // A large all-reduce inside a DGX A100 takes S x 2(n-1)/n / busbw (nccl-tests definition).
  HardwareProfile hw = load_profile("dgx-a100-80g");
  GroupPlacement g;
  g.size = 8;
  g.ranks_per_node = 8;
  g.nodes = 1;
  g.node_gpus_busy = 8;
  const double bytes = 1e9;
  const double busbw = hw.node.nvlink_gbps_per_direction * hw.efficiency.nvlink_bw_fraction * 1e9;
  const double t = collective_cost(hw, CollectiveOp::kAllReduce, bytes, g).time_s;
  EXPECT_NEAR(t, bytes * 1.75 / busbw, bytes * 1.75 / busbw * 0.02);
}

TEST(Schedules, InterleavingShrinksTheBubbleByV) {
  const int pp = 8;
  std::vector<double> f(pp, 1.0), b(pp, 2.0), w(pp, 0.0);
  PipelineInput one{pp, 1, 32, f.data(), b.data(), w.data()};
  PipelineInput four{pp, 4, 32, f.data(), b.data(), w.data()};
  EXPECT_DOUBLE_EQ(find_schedule("1f1b")->time(one).bubble_s, 7 * 3.0);
  EXPECT_DOUBLE_EQ(find_schedule("interleaved")->time(four).bubble_s, 7 * 3.0 / 4);
  // Memory: stage 0 holds p micro-batches under 1F1B, p + (p-1)/v interleaved, m under GPipe.
  EXPECT_DOUBLE_EQ(find_schedule("1f1b")->inflight_microbatches(0, pp, 1, 32), 8);
  EXPECT_DOUBLE_EQ(find_schedule("interleaved")->inflight_microbatches(0, pp, 4, 32), 8 + 7.0 / 4);
  EXPECT_DOUBLE_EQ(find_schedule("gpipe")->inflight_microbatches(3, pp, 1, 32), 32);
}

// Every field of two estimates, bit for bit (the cache must not change a single number).
void expect_same(const Estimate& a, const Estimate& b, const std::string& what) {
  auto same_memory = [&](const StageMemory& x, const StageMemory& y) {
    EXPECT_EQ(x.weights_bytes, y.weights_bytes) << what;
    EXPECT_EQ(x.grads_bytes, y.grads_bytes) << what;
    EXPECT_EQ(x.optimizer_bytes, y.optimizer_bytes) << what;
    EXPECT_EQ(x.activations_bytes, y.activations_bytes) << what;
    EXPECT_EQ(x.buffers_bytes, y.buffers_bytes) << what;
    EXPECT_EQ(x.layers, y.layers) << what;
  };
  EXPECT_EQ(a.step_time_s, b.step_time_s) << what;
  EXPECT_EQ(a.compute_s, b.compute_s) << what;
  EXPECT_EQ(a.recompute_s, b.recompute_s) << what;
  EXPECT_EQ(a.bubble_s, b.bubble_s) << what;
  EXPECT_EQ(a.optimizer_s, b.optimizer_s) << what;
  EXPECT_EQ(a.overhead_s, b.overhead_s) << what;
  EXPECT_EQ(a.exposed_comm_s, b.exposed_comm_s) << what;
  EXPECT_EQ(a.comm_volume_bytes, b.comm_volume_bytes) << what;
  EXPECT_EQ(a.comm_time_s, b.comm_time_s) << what;
  EXPECT_EQ(a.model_flops, b.model_flops) << what;
  EXPECT_EQ(a.hardware_flops, b.hardware_flops) << what;
  EXPECT_EQ(a.mfu, b.mfu) << what;
  EXPECT_EQ(a.tokens_per_s, b.tokens_per_s) << what;
  EXPECT_EQ(a.microbatches, b.microbatches) << what;
  EXPECT_EQ(a.peak_stage, b.peak_stage) << what;
  EXPECT_EQ(a.busiest_stage, b.busiest_stage) << what;
  same_memory(a.memory_first, b.memory_first);
  same_memory(a.memory_last, b.memory_last);
  same_memory(a.memory_peak, b.memory_peak);
}

// Valid plans of a model on a cluster across every plan field a search varies, in search-like
// order (the next plan differs in one field), for two global batches.
std::vector<Plan> varied_plans(const ModelSpec& m, int gpus, const Workload& w) {
  std::vector<Plan> out;
  for (int tp : {1, 2, 8})
    for (int pp : {1, 2, 4, 8})
      for (int vpp : {1, 2, 3})
        for (int64_t gbs : {w.global_batch, w.global_batch / 4})
          for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
            for (int mbs : {1, 2, 4})
              for (int zero : {0, 1, 3})
                for (const char* sched : {"1f1b", "interleaved", "gpipe", "zb-h1", "zb-v"}) {
                  Plan p;
                  p.tp = tp;
                  p.pp = pp;
                  p.dp = gpus / (tp * pp);
                  p.vpp = vpp;
                  p.sp = tp > 1;
                  p.recompute = rc;
                  p.recompute_layers = rc == Recompute::kFull && mbs == 2 ? 1 : 0;
                  p.mbs = mbs;
                  p.zero = zero;
                  p.gbs = gbs;
                  p.schedule = sched;
                  p.uneven_pp = pp > 2 && m.layers % pp != 0 && vpp == 1;
                  if (m.moe) p.ep = std::min(m.moe->experts, p.dp);
                  if (gpus % (tp * pp) != 0 || !validate_plan(m, gpus, w, p).empty() ||
                      !validate_schedule(p).empty())
                    continue;
                  out.push_back(p);
                }
  return out;
}

// The search's hot path (a cache shared by every plan, global batches alternating) gives the
// same numbers as estimating each plan on its own, and the two pruning aids hold: the memory
// check is the estimate's, the floor is under the step time of every ZeRO stage.
TEST(EstimatorCache, SameNumbersAsWithoutAndFloorsHold) {
  struct Case {
    const char* model;
    const char* profile;
    int gpus;
    int64_t gbs;
  };
  for (const Case& k :
       {Case{"gpt3-175b", "dgx-a100-80g", 64, 512}, Case{"mixtral-8x7b", "dgx-h100", 64, 256},
        Case{"llama3.1-405b", "dgx-h100", 64, 256}}) {
    const ModelSpec m = load_model(k.model);
    const Cluster c = load_cluster(k.profile, k.gpus);
    Workload w;
    w.global_batch = k.gbs;
    const std::vector<Plan> plans = varied_plans(m, k.gpus, w);
    ASSERT_GT(plans.size(), 100u) << k.model;
    EstimatorCache cache;
    for (const Plan& p : plans) {
      Workload wp = w;  // the workload carries the plan's batch, as in a search over batches
      wp.global_batch = p.gbs;
      const std::string what = std::string(k.model) + " " + p.describe();
      const Estimate alone = estimate(m, c, wp, p);
      EXPECT_EQ(peak_memory_bytes(m, c, wp, p, &cache), alone.memory_peak.total_bytes()) << what;
      const double floor = step_time_floor(m, c, wp, p, &cache);
      expect_same(estimate(m, c, wp, p, {}, &cache), alone, what);
      for (int zero = 0; zero <= 3; ++zero) {
        if (zero > 0 && p.dp * p.cp == 1) continue;
        Plan q = p;
        q.zero = zero;
        EXPECT_LE(floor, estimate(m, c, wp, q).step_time_s) << what << " as ZeRO-" << zero;
      }
      EXPECT_EQ(step_time_floor(m, c, wp, p), floor) << what;
      EXPECT_GT(floor, 0) << what;
      // The plan's own ZeRO stage adds at least zero_time_floor; one micro-batch's floor holds
      // for every batch of the plan (a multiple of dp x mbs, as the search's batch ranges).
      EXPECT_LE(floor + zero_time_floor(m, c, wp, p, &cache), alone.step_time_s) << what;
      const double per_mb = microbatch_time_floor(m, c, wp, p, &cache);
      EXPECT_GT(per_mb, 0) << what;
      for (int64_t times : {1, 2, 3, 5, 8}) {
        Plan q = p;
        q.gbs = times * p.dp * p.mbs;
        if (q.pp > 1 && !plan_schedule(q)->accepts_microbatches(q.pp, q.vpp, q.num_microbatches()))
          continue;
        Workload wq = w;
        wq.global_batch = q.gbs;
        EXPECT_LE(per_mb * q.num_microbatches(), estimate(m, c, wq, q).step_time_s * (1 + 1e-12))
            << what << " at gbs " << q.gbs;
      }
    }
  }
}

}  // namespace
}  // namespace dtplan
