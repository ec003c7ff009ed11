// Worked examples E1-E10 of shared/docs/REFERENCE.md §9 (see README.md beside this file).
// Expected values are the sources' stated numbers, never dtplan's own output.
#include <gtest/gtest.h>

#include <cmath>

#include "core/catalog.h"
#include "core/units.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/flops.h"
#include "simulator/cost/i_collective_algorithm.h"
#include "simulator/cost/memory_model.h"
#include "simulator/cost/reliability.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {

constexpr double kGiB = units::kGiB;

ModelSpec gpt(int layers, int64_t hidden, int heads, int64_t vocab = 51200) {
  ModelSpec m;
  m.name = "gpt";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = static_cast<int>(hidden / heads);
  m.ffn_hidden = 4 * hidden;
  m.ffn_act = FfnAct::kGelu;
  m.vocab = vocab;
  m.tied_embeddings = true;
  m.max_seq = 2048;
  m.norm = NormKind::kLayerNorm;
  m.linear_bias = false;  // the papers' 12 h^2 per layer
  m.position_embedding = PositionEmbedding::kNone;
  // Megatron's default dropout (0.1), which Korthikanti et al.'s runs used: its masks are the
  // 1-byte terms of their Table 2.
  m.attention_dropout = m.hidden_dropout = 0.1;
  return m;
}

// E1: Megatron README (2021): GPT-3 175B, B = 1536, ~32 s/iter on 1024 A100 -> 138 TFLOP/s.
TEST(WorkedExamples, E1_Gpt3HardwareFlopsWithFullRecompute) {
  ModelSpec m = gpt(96, 12288, 96);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 1536;
  Plan p;
  p.recompute = Recompute::kFull;
  StepFlops f = step_flops(m, w, p, FlopsConvention::kFullAttention);
  const double hw = f.model + f.recompute;
  EXPECT_NEAR(hw, 4.511e18, 4.511e18 * 1e-3) << "Expectation: 4.511e18 (Narayanan Eq. 3)";
  EXPECT_NEAR(hw / (1024 * 32.0) / 1e12, 137.7, 0.2) << "Expectation: 137.7 TFLOP/s per GPU";
}

// E2: Korthikanti Table 5 / Megatron README (2022): 175B, 64 A100, 13.75 s: MFU 51.4%, HFU 52.8%.
TEST(WorkedExamples, E2_Korthikanti175BMfuAndHfu) {
  ModelSpec m = gpt(96, 12288, 96);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 64;
  Plan p;
  p.recompute = Recompute::kSelective;
  StepFlops f = step_flops(m, w, p, FlopsConvention::kFullAttention);
  EXPECT_NEAR(f.model, 1.4109e17, 1.4109e17 * 1e-3);
  const double peak = 64 * 13.75 * 312e12;
  EXPECT_NEAR(100 * f.model / peak, 51.39, 0.05);
  EXPECT_NEAR(100 * (f.model + f.recompute) / peak, 52.77, 0.05);
}

// E3: Korthikanti Fig. 1 as encoded in Calculon: params + optimizer = 18 B x 12 h^2 x (L/p)/t.
TEST(WorkedExamples, E3_WeightsAndOptimizerPerGpu) {
  struct Row {
    int layers;
    int64_t hidden;
    int heads, pp;
    double gib;
  } rows[] = {{48, 6144, 64, 1, 45.5625},
              {96, 12288, 96, 8, 45.5625},
              {105, 20480, 128, 35, 31.640625},
              {128, 25600, 160, 64, 32.958984375}};
  for (const Row& r : rows) {
    ModelSpec m = gpt(r.layers, r.hidden, r.heads);
    ParamCounts c = count_params(m);
    // Layer parameters only (the figure leaves out embeddings, norms and biases).
    const double layer_params = static_cast<double>(c.attention_per_layer + c.dense_mlp_per_layer);
    const double per_gpu = 18.0 * layer_params * (static_cast<double>(r.layers) / r.pp) / 8;
    EXPECT_NEAR(per_gpu / kGiB, r.gib, r.gib * 5e-3) << r.hidden;
  }
}

// E3: activations per GPU, none vs SP + selective (Table 2 x L x interleave penalty).
TEST(WorkedExamples, E3_ActivationsNoneVsSpSelective) {
  struct Row {
    int layers;
    int64_t hidden;
    int heads, pp, vpp, mbs;
    double none_gib, sp_sel_gib;
  } rows[] = {{48, 6144, 64, 1, 1, 4, 59.25, 9.5625},
              {96, 12288, 96, 8, 3, 1, 66.84375, 12.3515625},
              {105, 20480, 128, 35, 3, 1, 114.0234375, 23.076171875},
              {128, 25600, 160, 64, 1, 1, 131.25, 26.5625}};
  for (const Row& r : rows) {
    ModelSpec m = gpt(r.layers, r.hidden, r.heads);
    Workload w;
    w.seq_len = 2048;
    Plan p;
    p.tp = 8;
    p.pp = r.pp;
    p.vpp = r.vpp;
    p.mbs = r.mbs;
    p.flash_attention = false;
    const IPipelineSchedule* s = find_schedule(r.vpp > 1 ? "interleaved" : "1f1b");
    ASSERT_NE(s, nullptr);
    // First stage: in-flight micro-batches (m large) x layers on the rank.
    const double inflight = s->inflight_microbatches(0, r.pp, r.vpp, 1 << 20);
    const double layers_on_rank = static_cast<double>(r.layers) / r.pp;
    const double none = inflight * layers_on_rank * layer_activation_bytes(m, w, p, false);
    p.sp = true;
    p.recompute = Recompute::kSelective;
    const double sp_sel = inflight * layers_on_rank * layer_activation_bytes(m, w, p, false);
    EXPECT_NEAR(none / kGiB, r.none_gib, r.none_gib * 5e-3) << r.hidden;
    EXPECT_NEAR(sp_sel / kGiB, r.sp_sel_gib, r.sp_sel_gib * 5e-3) << r.hidden;
  }
}

// E4: DeepSpeed estimate_zero3_model_states_mem_needs: 2851M params, largest layer 32M,
// 8 GPUs: 4 x 32e6 + 18 x 2851e6 / 8 bytes = 6.09 GiB.
TEST(WorkedExamples, E4_DeepSpeedZero3) {
  // A model whose layers are 32M parameters each: h = 1632 gives 12 h^2 = 31.96M.
  ModelSpec m = gpt(89, 1632, 16, 4);
  m.tied_embeddings = true;
  ParamCounts c = count_params(m);
  Workload w;
  w.seq_len = 1;
  Plan p;
  p.dp = 8;
  p.zero = 3;
  p.mbs = 1;
  p.gbs = 8;
  const IPipelineSchedule* s = find_schedule("1f1b");
  StageMemory mem = stage_memory(m, w, p, *s, 0);
  const double states = mem.weights_bytes + mem.grads_bytes + mem.optimizer_bytes;
  const double gathered = 4.0 * static_cast<double>(c.attention_per_layer + c.dense_mlp_per_layer);
  const double expected = 4 * 32e6 + 18 * 2851e6 / 8;  // the source's own inputs
  const double ours = states + gathered;
  // Our model has 89 x 31.96M = 2845M params: compare per parameter.
  EXPECT_NEAR(ours / static_cast<double>(c.total()), expected / 2851e6, expected / 2851e6 * 5e-3);
  EXPECT_NEAR(expected / kGiB, 6.09, 0.005);
  // The ZeRO-3 gathered buffer in the stage memory is that 4 x largest-layer term.
  EXPECT_NEAR(mem.buffers_bytes - kCudaContextBytes - kNcclBytesPerCommunicator, gathered, 1.0);
}

// E5: ZeRO paper Fig. 1: Psi = 7.5B, K = 12, N = 64: 120 -> 31.4 -> 16.6 -> 1.9 GB.
TEST(WorkedExamples, E5_ZeroStages) {
  // One dense layer of 7.5B parameters is enough: memory per parameter is what is compared.
  ModelSpec m = gpt(1, 25000, 100, 4);
  const double psi = static_cast<double>(count_params(m).total());
  Workload w;
  w.seq_len = 1;
  const double stated[] = {120.0, 31.4, 16.6, 1.875};
  for (int zero = 0; zero <= 3; ++zero) {
    Plan p;
    p.dp = 64;
    p.zero = zero;
    p.main_grads_fp32 = false;  // the paper's 2 + 2 + 12 bytes
    p.gbs = 64;
    StageMemory s = stage_memory(m, w, p, *find_schedule("1f1b"), 0);
    const double gb = (s.weights_bytes + s.grads_bytes + s.optimizer_bytes) / psi * 7.5e9 / 1e9;
    EXPECT_NEAR(gb, stated[zero], stated[zero] * 0.01) << "ZeRO-" << zero;
  }
}

// E6: Daly 2006 figure captions, delta = 5 min.
TEST(WorkedExamples, E6_DalyAndYoungIntervals) {
  const double delta = 300;
  struct Row {
    double mtbf_s, daly_min, young_min;
  } rows[] = {{24 * 3600.0, 117, 120}, {6 * 3600.0, 57, 60}, {15 * 60.0, 9.1, 12.2}};
  for (const Row& r : rows) {
    EXPECT_NEAR(daly_interval_s(delta, r.mtbf_s) / 60, r.daly_min, r.daly_min * 0.01);
    EXPECT_NEAR(young_interval_s(delta, r.mtbf_s) / 60, r.young_min, r.young_min * 0.01);
  }
}

// E7: Narayanan §5.1: 8 T Psi / (n X) for T = 300B, Psi = 175B, n = 1024, X = 140 TFLOP/s.
TEST(WorkedExamples, E7_TimeToTrain) {
  ModelSpec m = gpt(96, 12288, 96);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 1536;
  Plan p;
  p.recompute = Recompute::kFull;
  // Our hardware FLOPs per token (4 passes with recompute) in place of 8 Psi:
  const StepFlops f = step_flops(m, w, p, FlopsConvention::kFullAttention);
  const double per_token = (f.model + f.recompute) / (1536.0 * 2048);
  const double days = 300e9 * per_token / (1024 * 140e12) / 86400;
  EXPECT_NEAR(8 * 300e9 * 175e9 / (1024 * 140e12) / 86400, 33.9, 0.1);
  // 8 Psi leaves out attention and logits (about 3.5% for GPT-3 at s = 2048).
  EXPECT_NEAR(days, 33.9, 33.9 * 0.05);
}

// E8: nccl-tests bus bandwidth factors.
TEST(WorkedExamples, E8_BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 64), 1.96875);
}

// E9: Llama 3: 419 unexpected interruptions in 54 days on 16,384 GPUs -> 3.09 h job MTBF.
TEST(WorkedExamples, E9_Llama3JobMtbf) {
  const double per_gpu_h = 54.0 * 24 * 16384 / 419;  // ~50,700 h (REFERENCE §6)
  EXPECT_NEAR(per_gpu_h, 50700, 100);
  EXPECT_NEAR(job_mtbf_s(per_gpu_h, 16384) / 3600, 3.09, 0.01);
}

// E10: with F = B = W = 1: 1F1B bubble 3(p-1), ZB-H1 (p-1).
TEST(WorkedExamples, E10_ZeroBubbleVs1F1B) {
  for (int pp : {2, 4, 8, 16}) {
    std::vector<double> f(pp, 1.0), b(pp, 1.0), w(pp, 1.0);
    PipelineInput in{pp, 1, 64, f.data(), b.data(), w.data()};
    EXPECT_DOUBLE_EQ(find_schedule("1f1b")->time(in).bubble_s, 3.0 * (pp - 1));
    EXPECT_DOUBLE_EQ(find_schedule("zb-h1")->time(in).bubble_s, 1.0 * (pp - 1));
  }
}

}  // namespace
}  // namespace dtplan
