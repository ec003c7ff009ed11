// Cost-model rules of issue #15's second batch, each checked against a number computed here from
// its source: FP8 quantization traffic per recipe and GPU (Transformer Engine @d0067d0, table in
// docs/performance-model.md §4), FP8-saved linear inputs and dropout masks in the activation
// memory, the MXFP8 GEMM asymptote, NCCL's LL128 protocol in the ring (tuning.cc @5067397c),
// ZeRO-3 gathers per layer or per tensor, the parameter all-gather's overlap, the optimizer's
// once-per-step FP8 weight quantization, and the op table behind `estimate --ops`.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/registry.h"
#include "core/units.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/cost/dp_cost.h"
#include "simulator/cost/i_collective_algorithm.h"
#include "simulator/cost/layer_cost.h"
#include "simulator/cost/memory_model.h"
#include "simulator/cost/optimizer_cost.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/step/step_costs.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {
namespace {

Plan plan(int tp, int dp, bool sp) {
  Plan p;
  p.tp = tp;
  p.dp = dp;
  p.sp = sp;
  p.mbs = 1;
  p.gbs = dp * 4;
  return p;
}

Workload work(Precision prec, Fp8Recipe r = Fp8Recipe::kDelayed, int64_t seq = 4096) {
  Workload w;
  w.seq_len = seq;
  w.global_batch = 32;
  w.precision = prec;
  w.fp8_recipe = r;
  return w;
}

// Bytes read + written per element by one quantization, from the table of the TE source
// reading (docs/performance-model.md §4): X plain / after a norm / dY / W.
TEST(Fp8Quantization, BytesPerElementFollowTransformerEngine) {
  struct Row {
    Fp8Recipe r;
    bool blackwell;
    double plain, after_norm, grad, weight;
  } rows[] = {
      {Fp8Recipe::kDelayed, false, 2 + 2, 1 + 1, 2 + 2, 2 + 2},
      {Fp8Recipe::kDelayed, true, 2 + 1, 0, 2 + 1, 2 + 1},
      {Fp8Recipe::kTensorwise, false, 4 + 2, 2 + 2, 4 + 2, 4 + 2},
      {Fp8Recipe::kTensorwise, true, 4 + 1, 2 + 1, 4 + 1, 4 + 1},
      {Fp8Recipe::kMxfp8, true, 2 + 2 + 2.0 / 32, 2 + 2 + 2.0 / 32, 2 + 2 + 2.0 / 32,
       2 + 2 + 2.0 / 32},
      {Fp8Recipe::kBlockwise, false, 2 + 2 + 8.0 / 128, 2 + 2 + 8.0 / 128, 2 + 2 + 8.0 / 128, 4},
  };
  for (const Row& r : rows) {
    const std::string what = std::string(to_string(r.r)) + (r.blackwell ? " Blackwell" : " Hopper");
    EXPECT_DOUBLE_EQ(fp8_quantize_bytes_per_element(r.r, r.blackwell, Fp8Tensor::kInput), r.plain)
        << what;
    EXPECT_DOUBLE_EQ(fp8_quantize_bytes_per_element(r.r, r.blackwell, Fp8Tensor::kInputAfterNorm),
                     r.after_norm)
        << what;
    EXPECT_DOUBLE_EQ(fp8_quantize_bytes_per_element(r.r, r.blackwell, Fp8Tensor::kOutputGradient),
                     r.grad)
        << what;
    EXPECT_DOUBLE_EQ(fp8_quantize_bytes_per_element(r.r, r.blackwell, Fp8Tensor::kWeight), r.weight)
        << what;
  }
  // Current scaling launches zero-amax, amax, scale and cast: 4 kernels; after a norm only the
  // cast.
  EXPECT_EQ(fp8_quantize_kernels(Fp8Recipe::kTensorwise, Fp8Tensor::kInput), 4);
  EXPECT_EQ(fp8_quantize_kernels(Fp8Recipe::kTensorwise, Fp8Tensor::kInputAfterNorm), 1);
  EXPECT_EQ(fp8_quantize_kernels(Fp8Recipe::kDelayed, Fp8Tensor::kInput), 1);
}

// Llama 3 8B, TP1: four weighted GEMMs per layer (qkv and fc1 after their norms, attn_out and
// fc2 plain); each gets an input quantization in the forward and an output-gradient one in the
// backward, with T x K and T x N elements. Nothing under BF16.
TEST(Fp8Quantization, EveryWeightedGemmQuantizesItsInputAndGradient) {
  const ModelSpec m = load_model("llama3-8b");
  const Plan p = plan(1, 8, false);
  const double T = 4096, h = 4096, f = 14336;
  const double kv = 8.0 * 128;
  for (const char* profile : {"dgx-h100", "gb200-nvl72"}) {
    const Cluster c = load_cluster(profile, 8);
    const bool bw = c.profile.gpu.fp8_non_tn_gemm;
    OpProgram prog;
    build_op_program(m, work(Precision::kFp8), p, c, prog);
    double in_bytes = 0, grad_bytes = 0;
    int in_ops = 0, grad_ops = 0;
    for (const Op& o : prog.dense_layer) {
      if (std::string(o.name) == "fp8_quantize_input") {
        EXPECT_EQ(o.pass, Pass::kForward);
        in_bytes += o.bytes;
        ++in_ops;
      } else if (std::string(o.name) == "fp8_quantize_grad") {
        EXPECT_NE(o.pass, Pass::kForward);
        grad_bytes += o.bytes;
        ++grad_ops;
      }
    }
    auto b = [&](Fp8Tensor t) {
      return fp8_quantize_bytes_per_element(Fp8Recipe::kDelayed, bw, t);
    };
    const double after_norm = b(Fp8Tensor::kInputAfterNorm);
    EXPECT_EQ(in_ops, after_norm > 0 ? 4 : 2) << profile;  // fused away on Blackwell (delayed)
    EXPECT_DOUBLE_EQ(in_bytes, T * h * after_norm * 2 + T * h * b(Fp8Tensor::kInput) +
                                   T * f * b(Fp8Tensor::kInput))
        << profile;
    EXPECT_EQ(grad_ops, 4) << profile;
    EXPECT_DOUBLE_EQ(grad_bytes, T * (h + 2 * kv + h + 2 * f + h) * b(Fp8Tensor::kOutputGradient))
        << profile;
    OpProgram bf16;
    build_op_program(m, work(Precision::kBf16), p, c, bf16);
    for (const Op& o : bf16.dense_layer) EXPECT_NE(std::string(o.name).rfind("fp8_", 0), 0u);
  }
}

// Under FP8 the linear layers keep their inputs for the weight gradient as the 1-byte copy: qkv
// and fc1 inputs (h/sp each), the projection input (heads x head_dim / t) and the fc2 input (f/t)
// lose a byte per element. Without dropout no mask is kept; with it two 1-byte masks of h/sp.
TEST(ActivationMemory, Fp8InputsAndDropoutMasks) {
  ModelSpec m = load_model("llama3-8b");
  ASSERT_EQ(m.hidden_dropout, 0);
  for (int tp : {1, 4}) {
    const Plan p = plan(tp, 8, tp > 1);
    const double T = 4096, sp = tp > 1 ? tp : 1;
    const double h = 4096, f = 14336.0 / tp, proj = 32.0 / tp * 128;
    const double bf16 = layer_activation_bytes(m, work(Precision::kBf16), p, false);
    const double fp8 = layer_activation_bytes(m, work(Precision::kFp8), p, false);
    EXPECT_NEAR(bf16 - fp8, T * (h / sp + proj + h / sp + f), 1e-6 * bf16) << "tp " << tp;
    ModelSpec d = m;
    d.hidden_dropout = 0.1;
    EXPECT_NEAR(layer_activation_bytes(d, work(Precision::kBf16), p, false) - bf16, T * 2 * h / sp,
                1e-6 * bf16)
        << "tp " << tp;
  }
}

// MXFP8 GEMMs take the profile's MXFP8 asymptote (GB200: 0.60, per-tensor FP8 0.59); a 32k^3
// GEMM is saturated, so its efficiency is the asymptote times the saturation term.
TEST(GemmEfficiency, Mxfp8TakesItsOwnAsymptote) {
  const HardwareProfile hw = load_profile("gb200-nvl72");
  const ComputeCostModel fp8{&hw, Precision::kFp8, Fp8Recipe::kTensorwise};
  const ComputeCostModel mx{&hw, Precision::kFp8, Fp8Recipe::kMxfp8};
  const int64_t n = 32768;
  const double gflop = 2.0 * n * n * n / 1e9;
  const EfficiencyParams& e = hw.efficiency;
  // 128 x 128 tiles, none padded; the last of ceil(tiles / SMs) waves is partly idle.
  const double tiles = (n / 128.0) * (n / 128.0), sms = hw.gpu.sm_count;
  const double wave_q = tiles / (std::ceil(tiles / sms) * sms);
  // Both are derated alike by the profile's sustained fraction (clocks over a whole step).
  const double k = e.sustained_compute_fraction;
  EXPECT_NEAR(
      fp8.gemm_efficiency(n, n, n),
      k * e.gemm_max_fraction_fp8 * wave_q * gflop / (gflop + e.gemm_half_saturation_gflop_fp8),
      1e-12);
  EXPECT_NEAR(
      mx.gemm_efficiency(n, n, n),
      k * e.gemm_max_fraction_mxfp8 * wave_q * gflop / (gflop + e.gemm_half_saturation_gflop_mxfp8),
      1e-12);
  EXPECT_NE(e.gemm_max_fraction_fp8, e.gemm_max_fraction_mxfp8);
}

// A group filling `nodes` 8-GPU nodes, every GPU of each busy.
GroupPlacement dense_group(int nodes) {
  GroupPlacement g;
  g.size = 8 * nodes;
  g.ranks_per_node = 8;
  g.nodes = nodes;
  g.node_gpus_busy = 8;
  return g;
}

// NCCL prices LL128 and Simple and runs the cheaper: a 512-rank all-gather of 50 MB is
// latency-bound (LL128: its per-step latencies 1.9/3.4 of Simple's on NVLink, 4.0/14 across the
// network, 5.6 us more base, 0.92 of the bandwidth: src/graph/tuning.cc, NVIDIA/nccl@5067397c);
// an 8-rank 1 GB all-reduce is not.
TEST(RingProtocols, Ll128WhereLatencyDominates) {
  const HardwareProfile hw = load_profile("dgx-h100");
  const GroupPlacement g = dense_group(64);
  const LinkRates l = link_rates(hw, g);
  const double bytes = 50e6;
  const double beta = bytes * 511.0 / 512 / (l.inter_busbw_gbps * 1e9);
  const double steps_intra = 511 - 63, steps_inter = 63;
  const double simple = steps_intra * l.alpha_intra_s + steps_inter * l.alpha_inter_s + beta;
  const double ll128 = 5.6e-6 + steps_intra * l.alpha_intra_s * 1.9 / 3.4 +
                       steps_inter * l.alpha_inter_s * 4.0 / 14.0 + beta / 0.92;
  ASSERT_LT(ll128, simple);
  const double overhead = hw.efficiency.collective_overhead_us * 1e-6;
  EXPECT_NEAR(collective_cost(hw, CollectiveOp::kAllGather, bytes, g).time_s, ll128 + overhead,
              1e-9);
  const GroupPlacement node = dense_group(1);
  const LinkRates ln = link_rates(hw, node);
  const double big = 1e9;
  const double b2 = big * 2 * 7 / 8 / (ln.intra_busbw_gbps * 1e9);
  const CollectiveCost ar = collective_cost(hw, CollectiveOp::kAllReduce, big, node);
  EXPECT_EQ(std::string(ar.algorithm), "ring");
  EXPECT_NEAR(ar.time_s, 14 * ln.alpha_intra_s + b2 + overhead, 1e-9);
}

// LL for a small message: per-step latency 0.6/3.4 of Simple's on NVLink, base 6.6 - 8.4 us,
// bandwidth min(0.5 busBw, llMaxBw 87.7 GB/s) (src/graph/tuning.cc, NVIDIA/nccl@5067397c).
TEST(RingProtocols, LlForSmallMessages) {
  const HardwareProfile hw = load_profile("dgx-h100");
  const GroupPlacement node = dense_group(1);
  const LinkRates l = link_rates(hw, node);
  const double bytes = 64e3;
  const double ll = std::max(0.0, -1.8e-6 + 14 * l.alpha_intra_s * 0.6 / 3.4) +
                    bytes * 2 * 7 / 8 / (std::min(0.5 * l.intra_busbw_gbps, 87.7) * 1e9);
  const double simple = 14 * l.alpha_intra_s + bytes * 2 * 7 / 8 / (l.intra_busbw_gbps * 1e9);
  ASSERT_LT(ll, simple);
  const double overhead = hw.efficiency.collective_overhead_us * 1e-6;
  bool found = false;
  for (const AlgorithmCost& a :
       collective_cost_by_algorithm(hw, CollectiveOp::kAllReduce, bytes, node)) {
    if (a.algorithm != "ring") continue;
    found = true;
    EXPECT_NEAR(a.time.time_s(), ll + overhead, 1e-12);
  }
  EXPECT_TRUE(found);
}

// The tree prices NCCL's protocols as the ring does: a tree's LL steps take 0.6/4 of Simple's
// on NVLink and 5.0/14 across the network, 6.8 us more base, min(0.5 tree bandwidth, llMaxBw);
// LL128 1.25/4 and 8.5/14, 14 us more base, 0.92 of it (src/graph/tuning.cc, NVIDIA/nccl@5067397c
// hwLat Tree rows, baseLat Tree {6.8, 14, 0}). A 1 KiB all-reduce on 128 DGX H100 nodes
// (1024 ranks) runs the tree at LL latency; a 1 GB one the tree or ring at Simple's bandwidth.
TEST(TreeProtocols, LlForSmallAllReduces) {
  const HardwareProfile hw = load_profile("dgx-h100");
  const GroupPlacement g = dense_group(128);
  const LinkRates l = link_rates(hw, g);
  const double bytes = 1024;
  const double intra = 2.0 * 7, inter = 2.0 * 7;  // 8 ranks per node, log2(128) = 7
  const double ll_bw = std::min(0.25 * l.inter_busbw_gbps, 20.4);
  const double ll = 6.8e-6 + intra * l.alpha_intra_s * 0.6 / 4.0 +
                    inter * l.alpha_inter_s * 5.0 / 14.0 + bytes / (ll_bw * 1e9);
  const double simple =
      intra * l.alpha_intra_s + inter * l.alpha_inter_s + bytes / (0.5 * l.inter_busbw_gbps * 1e9);
  ASSERT_LT(ll, simple);
  const double overhead = hw.efficiency.collective_overhead_us * 1e-6;
  const CollectiveCost small = collective_cost(hw, CollectiveOp::kAllReduce, bytes, g);
  EXPECT_EQ(std::string(small.algorithm), "tree");
  EXPECT_NEAR(small.time_s, ll + overhead, 1e-12);
  // Large: the tree's Simple protocol (its full bandwidth), where the tree is priced.
  const double big = 1e9;
  bool priced = false;
  for (const AlgorithmCost& a :
       collective_cost_by_algorithm(hw, CollectiveOp::kAllReduce, big, g)) {
    if (a.algorithm != "tree") continue;
    priced = true;
    EXPECT_NEAR(a.time.time_s(),
                intra * l.alpha_intra_s + inter * l.alpha_inter_s +
                    big / (0.5 * l.inter_busbw_gbps * 1e9) + overhead,
                1e-9);
  }
  EXPECT_TRUE(priced);
}

double price_fn(void*, CollectiveOp op, double bytes, const GroupPlacement& g) {
  static const HardwareProfile hw = load_profile("dgx-h100");
  return collective_cost(hw, op, bytes, g).time_s;
}

// ZeRO-3: one all-gather of a layer's parameters (FSDP, Megatron-FSDP), or one per parameter
// tensor (DeepSpeed stage 3 of 2021); the second forward gather for recomputation only per tensor.
TEST(Zero3, OneGatherPerLayerUnlessPerTensor) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster c = load_cluster("dgx-h100", 256);
  Plan p = plan(1, 256, false);
  p.zero = 3;
  p.recompute = Recompute::kFull;
  const Placements g = place_groups(p, c.profile, 256);
  const RankLayers l = layers_on_rank(m, p, 0);
  const CollectivePrice price{&price_fn, nullptr};
  const DpStage flat = dp_stage(m, count_params(m), p, 0, l, g, 4.0, price);
  const double layer = flat.prm.total() / l.total();
  EXPECT_NEAR(flat.layer_gather_s, price_fn(nullptr, CollectiveOp::kAllGather, layer * 2, g.dp),
              1e-12);
  EXPECT_EQ(zero3_forward_gathers(p), 1.0);
  Plan q = p;
  q.zero3_gather_per_tensor = true;
  const DpStage per = dp_stage(m, count_params(m), q, 0, l, g, 4.0, price);
  const int n = param_tensors_per_layer(m);
  EXPECT_NEAR(per.layer_gather_s,
              n * price_fn(nullptr, CollectiveOp::kAllGather, layer * 2 / n, g.dp), 1e-12);
  EXPECT_GT(per.layer_gather_s, flat.layer_gather_s);
  EXPECT_EQ(zero3_forward_gathers(q), 2.0);
  // Prefetched, a layer's gather hides behind the previous layer's compute; blocking (DeepSpeed
  // stage 3 of 2021) every gather and reduce-scatter is exposed.
  const int layers = l.total();
  const double f = layers * 2 * per.layer_gather_s, bw = layers * 4 * per.layer_gather_s;
  const DpCost hidden = dp_step_cost(per, q, layers, 4, f, bw, 0, 0);
  EXPECT_LT(hidden.exposed_s, 0.5 * hidden.time_s);
  q.zero3_prefetch = false;
  const DpCost blocking = dp_step_cost(per, q, layers, 4, f, bw, 0, 0);
  EXPECT_DOUBLE_EQ(blocking.time_s, hidden.time_s);
  EXPECT_DOUBLE_EQ(blocking.exposed_s, blocking.time_s);
}

// Megatron-Core's default bucket: max(40000000, 1000000 * dp_group.size()) parameters
// (megatron/core/distributed/distributed_data_parallel.py:133-134 @d98e8a6).
TEST(ParamGather, DefaultBucketIsMegatronCores) {
  EXPECT_DOUBLE_EQ(default_bucket_params(8), 40e6);
  EXPECT_DOUBLE_EQ(default_bucket_params(40), 40e6);
  EXPECT_DOUBLE_EQ(default_bucket_params(256), 256e6);
}

// ZeRO-3 with experts: dense parameters are gathered over the data-parallel group, experts over
// the expert-data-parallel group. With EP8 filling each DGX H100, that group has one rank per
// node, and the node's eight such groups share its eight 400 Gb/s NICs (DGX H100 datasheet:
// 8 x ConnectX-7): an expert gather cannot beat 50 GB/s per GPU. It was priced on the DP
// group's placement (about 290 GB/s, found by a new-user trial). With EP = DP nothing of the
// experts is sharded, so only the dense parameters move.
TEST(Zero3, ExpertsGatherOverTheExpertDataParallelGroup) {
  const ModelSpec m = load_model("mixtral-8x22b");
  const Cluster c = load_cluster("dgx-h100", 512);
  Plan p = plan(1, 128, false);
  p.pp = 4;
  p.ep = 8;
  p.zero = 3;
  const Placements g = place_groups(p, c.profile, 512);
  ASSERT_EQ(g.edp.size, 16);
  const RankLayers l = layers_on_rank(m, p, 0);
  const CollectivePrice price{&price_fn, nullptr};
  const DpStage s = dp_stage(m, count_params(m), p, 0, l, g, 4.0, price);
  ASSERT_GT(s.prm.expert, 0);
  const double expert_layer_sent = s.prm.expert / l.total() * 2.0 * 15 / 16;
  EXPECT_GE(s.layer_gather_s, expert_layer_sent / 50e9);
  EXPECT_NEAR(s.layer_gather_bytes * l.total(),
              (s.prm.dense * 127 / 128 + s.prm.expert * 15 / 16) * 2.0, 1e-6 * s.prm.total());

  Plan q = plan(1, 8, false);
  q.ep = 8;
  q.zero = 3;
  const Placements h = place_groups(q, c.profile, 8);
  ASSERT_EQ(h.edp.size, 1);
  const RankLayers lq = layers_on_rank(m, q, 0);
  const DpStage t = dp_stage(m, count_params(m), q, 0, lq, h, 4.0, price);
  EXPECT_NEAR(t.layer_gather_bytes * lq.total(), t.prm.dense * 2.0 * 7 / 8, 1e-6 * t.prm.dense);
}

// A rank's bucket share: one default bucket over the parameters it reduces (Llama 3 8B, one
// stage, DP 256: 256M of about 8.0B parameters).
TEST(ParamGather, BucketShareIsOneBucketOfTheRanksParameters) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster c = load_cluster("dgx-h100", 256);
  Plan p = plan(1, 256, false);
  p.zero = 1;
  const Placements g = place_groups(p, c.profile, 256);
  const RankLayers l = layers_on_rank(m, p, 0);
  const CollectivePrice price{&price_fn, nullptr};
  const DpStage s = dp_stage(m, count_params(m), p, 0, l, g, 4.0, price);
  ASSERT_GT(s.prm.total(), 7.9e9);
  ASSERT_LT(s.prm.total(), 8.1e9);
  EXPECT_NEAR(s.bucket_share, 256e6 / s.prm.total(), 1e-12);
}

// ZeRO-1's parameter all-gather after the optimizer: exposed whole without overlap, or all but
// its first bucket behind the next step's first forward with overlap_param_gather. A rank
// holding 400M parameters in 40M-parameter buckets leaves a tenth exposed.
TEST(ParamGather, OverlapHidesAllButTheFirstBucket) {
  DpStage s;
  s.reduce_s = 0.5;
  s.gather_s = 0.3;
  s.bucket_share = default_bucket_params(8) / 400e6;
  Plan p;
  p.zero = 1;
  p.overlap_grad_reduce = false;
  p.overlap_param_gather = false;
  DpCost c = dp_step_cost(s, p, 4, 8, /*f_s=*/1.0, 2.0, 0.0, 0.0);
  EXPECT_DOUBLE_EQ(c.gather_exposed_s, 0.3);
  EXPECT_DOUBLE_EQ(c.exposed_s, 0.5 + 0.3);
  p.overlap_param_gather = true;
  c = dp_step_cost(s, p, 4, 8, 1.0, 2.0, 0.0, 0.0);
  EXPECT_DOUBLE_EQ(c.gather_exposed_s, 0.03);
  c = dp_step_cost(s, p, 4, 8, /*f_s=*/0.1, 2.0, 0.0, 0.0);  // a forward too short to hide it
  EXPECT_DOUBLE_EQ(c.gather_exposed_s, 0.2);
  EXPECT_DOUBLE_EQ(c.trailing_s, 0.5);  // what the simulator replays: the reduction alone
}

// What of the data-parallel traffic runs beside the rank's compute (DpCost::hidden_s): with
// overlap, the bucketed reduction but its trailing part and the gathered parameters but the
// first bucket; without, nothing. Independent arithmetic on the dp_step_cost contract: a
// 0.5 s reduction in a 2 s window with a tenth in the last bucket leaves 0.05 s trailing, a
// 0.3 s gather behind a 1 s forward 0.03 s exposed.
TEST(DpContention, HiddenIsWhatRunsBesideCompute) {
  DpStage s;
  s.reduce_s = 0.5;
  s.gather_s = 0.3;
  s.bucket_share = 0.1;
  Plan p;
  p.zero = 1;
  p.overlap_grad_reduce = false;
  p.overlap_param_gather = false;
  EXPECT_DOUBLE_EQ(dp_step_cost(s, p, 4, 8, 1.0, 2.0, 2.0, 0.0).hidden_s, 0.0);
  p.overlap_grad_reduce = true;
  p.overlap_param_gather = true;
  const DpCost c = dp_step_cost(s, p, 4, 8, 1.0, 2.0, 2.0, 0.0);
  EXPECT_NEAR(c.hidden_s, (0.5 - 0.05) + (0.3 - 0.03), 1e-12);
  EXPECT_NEAR(c.hidden_s + c.exposed_s, c.time_s, 1e-12);
  // ZeRO-2: the 7 reductions before the last hide behind the next micro-batches as well.
  p.zero = 2;
  EXPECT_NEAR(dp_step_cost(s, p, 4, 8, 1.0, 2.0, 2.0, 0.0).hidden_s, 7 * 0.5 + 0.45 + 0.27, 1e-12);
  // ZeRO-3: prefetched, the gathers and reduce-scatters not exposed ran beside the compute;
  // blocking (no prefetch), none did.
  DpStage z;
  z.layer_gather_s = 0.01;
  z.layer_reduce_s = 0.02;
  p.zero = 3;
  const DpCost pre = dp_step_cost(z, p, 10, 4, 1.0, 2.0, 0.0, 0.0);
  EXPECT_GT(pre.hidden_s, 0.0);
  EXPECT_NEAR(pre.hidden_s + pre.exposed_s, pre.time_s, 1e-12);
  p.zero3_prefetch = false;
  EXPECT_DOUBLE_EQ(dp_step_cost(z, p, 10, 4, 1.0, 2.0, 0.0, 0.0).hidden_s, 0.0);
}

// The closed form slows a rank's compute by the profile's comm_compute_slowdown for the
// data-parallel traffic hidden beside it, as it does for overlapped TP communication and as the
// discrete-event simulator does while a rank's DP traffic runs (pipeline_sim.cpp): FSDP on
// 64 H100 (TP1, no TP traffic) is slower by slowdown x the hidden DP time, and the step with
// the contention off is what it was before.
TEST(DpContention, HiddenDataParallelTrafficSlowsTheStep) {
  const ModelSpec m = load_model("llama3-8b");
  Cluster c = load_cluster("dgx-h100", 64);
  Plan p = plan(1, 64, false);
  p.zero = 3;
  const Workload w = work(Precision::kBf16);
  const Estimate with = estimate(m, c, w, p);
  ASSERT_GT(c.profile.efficiency.comm_compute_slowdown, 0.0);
  const double slowdown = c.profile.efficiency.comm_compute_slowdown;
  c.profile.efficiency.comm_compute_slowdown = 0;
  const Estimate without = estimate(m, c, w, p);
  const int dp = static_cast<int>(CommDim::kDP);
  const double hidden = without.comm_time_s[dp] - without.exposed_comm_s[dp];
  ASSERT_GT(hidden, 0.1 * without.comm_time_s[dp]);
  EXPECT_NEAR(with.step_time_s - without.step_time_s, slowdown * hidden,
              1e-6 * without.step_time_s);
  EXPECT_NEAR(with.compute_s - without.compute_s, slowdown * hidden, 1e-6 * without.step_time_s);
}

// FP8 training quantizes the rank's linear weights once per step (Megatron's
// is_first_microbatch): delayed scaling on Hopper reads 2 and writes 2 bytes per parameter.
TEST(OptimizerStep, Fp8QuantizesTheWeightsOncePerStep) {
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  const Plan p = plan(1, 8, false);
  const ParamsOnRank prm = params_on_rank(m, p, 0);
  ASSERT_GT(prm.linear, 0.9 * 32 * (4096.0 * 6144 + 4096.0 * 4096 + 3 * 4096.0 * 14336));
  const double extra = optimizer_step_s(hw, work(Precision::kFp8), p, prm) -
                       optimizer_step_s(hw, work(Precision::kBf16), p, prm);
  EXPECT_NEAR(extra, prm.linear * 4.0 / (hw.gpu.hbm_gbps * 1e9 * hw.efficiency.memory_bw_fraction),
              1e-12);
}

// With ZeRO-3 a rank holds and casts only its shard of the weights (the FP8 all-gather's
// cast: torchao precompute_float8_dynamic_scale_for_fsdp, Megatron-FSDP's FP8 parameter
// gather): the same bytes per parameter over the linear share of the shard, 1/8 at DP 8.
TEST(OptimizerStep, Fp8UnderZero3QuantizesTheShardOnly) {
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  Plan p = plan(1, 8, false);
  p.zero = 3;
  const ParamsOnRank prm = params_on_rank(m, p, 0);
  const double extra = optimizer_step_s(hw, work(Precision::kFp8), p, prm) -
                       optimizer_step_s(hw, work(Precision::kBf16), p, prm);
  EXPECT_NEAR(extra,
              prm.linear / 8 * 4.0 / (hw.gpu.hbm_gbps * 1e9 * hw.efficiency.memory_bw_fraction),
              1e-12);
}

// `estimate --ops`: the rows' compute per pass are what the layer cost sums.
TEST(OpCostRows, PassSumsEqualTheLayerCost) {
  struct Case {
    const char* model;
    const char* profile;
    Precision prec;
    int tp;
  } cases[] = {{"llama3-8b", "dgx-h100", Precision::kBf16, 1},
               {"llama3-70b", "dgx-h100", Precision::kFp8, 4},
               {"qwen3-30b-a3b", "gb200-nvl72", Precision::kFp8, 1}};
  for (const Case& k : cases) {
    const ModelSpec m = load_model(k.model);
    const Cluster c = load_cluster(k.profile, 64);
    Plan p = plan(k.tp, 64 / k.tp, k.tp > 1);
    if (m.moe) p.ep = 8;
    const Workload w = work(k.prec);
    const LayerCostSet set = layer_costs(m, c, w, p);
    double f = 0, b = 0, wg = 0;
    for (const OpCostRow& r : op_cost_rows(m, c, w, p)) {
      if (std::string(r.layer) != (m.moe ? "moe" : "dense") || r.op.kind == OpKind::kCollective)
        continue;
      (r.op.pass == Pass::kForward ? f : r.op.pass == Pass::kBackwardInput ? b : wg) += r.time_s;
      if (r.op.kind == OpKind::kGemm) {
        EXPECT_GT(r.efficiency, 0) << r.op.name;
      }
    }
    const LayerCost& lc = m.moe ? set.moe : set.dense;
    EXPECT_NEAR(f, lc.compute_f, 1e-12) << k.model;
    EXPECT_NEAR(b, lc.compute_b, 1e-12) << k.model;
    EXPECT_NEAR(wg, lc.compute_w, 1e-12) << k.model;
  }
}

// Activation offloading (Megatron-Core --cpu-offloading-num-layers): the offloaded layers keep
// only the one in flight on the GPU; their activations cross the host link after the forward and
// back before the backward, and a pass waits for what its compute does not cover.
TEST(ActivationOffload, KeepsOneLayerAndWaitsForTheLink) {
  const ModelSpec m = load_model("llama3-8b");
  Cluster c = load_cluster("dgx-h100", 8);
  Plan p = plan(1, 8, false);
  p.zero = 1;
  p.gbs = 16;
  Workload w = work(Precision::kBf16, Fp8Recipe::kDelayed, 8192);
  w.global_batch = 16;
  Plan off = p;
  off.offload_layers = 16;
  ASSERT_TRUE(validate_plan(m, 8, w, off).empty());
  const double layer = layer_activation_bytes(m, w, p, false);
  const IPipelineSchedule& s = *find_schedule("1f1b");
  const double kept = stage_memory(m, w, p, s, 0).activations_bytes;
  EXPECT_NEAR(kept - stage_memory(m, w, off, s, 0).activations_bytes, 15 * layer, 1e-6 * kept);
  // On a 1 GB/s link the copies outlast the passes: each micro-batch waits t - F and t - B.
  c.profile.host.pcie_gbps_per_gpu = 1;
  EstimatorCache cache;
  StepCosts det;
  const Estimate base = estimate(m, c, w, p, {}, &cache, &det);
  const Estimate slow = estimate(m, c, w, off, {});
  const double t = 16 * layer / 1e9;
  ASSERT_GT(t, det.f[0]);
  ASSERT_GT(t, det.b[0]);
  const double mb = 16.0 / 8;
  EXPECT_NEAR(slow.step_time_s - base.step_time_s, mb * ((t - det.f[0]) + (t - det.b[0])),
              1e-6 * slow.step_time_s);
  // Two GPUs behind one 2 GB/s uplink copy at 1 GB/s each when every GPU offloads: the same
  // waits as one GPU on a 1 GB/s link (DGX A100: two GPUs per PCIe Gen4 switch).
  HardwareProfile shared = c.profile;
  shared.host.pcie_gbps_per_gpu = 2;
  shared.host.gpus_per_uplink = 2;
  EXPECT_DOUBLE_EQ(shared.host.concurrent_gbps_per_gpu(), 1.0);
  EXPECT_DOUBLE_EQ(shared.host.gbps_per_gpu_when(1), 2.0);
  Cluster cs = c;
  cs.profile = shared;
  EXPECT_NEAR(estimate(m, cs, w, off, {}).step_time_s, slow.step_time_s, 1e-9 * slow.step_time_s);
  // The offloaded layers' activations of one micro-batch wait in host memory: 16 layers' worth
  // per GPU (the per-layer activation bytes times the plan's offloaded layers), times the
  // node's 8 GPUs against host.memory_gib.
  EXPECT_NEAR(offloaded_host_bytes(m, w, off), 16 * layer, 1e-9 * layer);
  HardwareProfile small_host = c.profile;
  small_host.host.memory_gib = 8 * 16 * layer / units::kGiB * 1.01;
  EXPECT_TRUE(host_memory_violation(m, w, off, small_host).empty());
  small_host.host.memory_gib = 8 * 16 * layer / units::kGiB * 0.99;
  EXPECT_NE(host_memory_violation(m, w, off, small_host).find("host memory per node"),
            std::string::npos);
  EXPECT_TRUE(host_memory_violation(m, w, p, small_host).empty());  // nothing offloaded
  // No host link, no offloading; a chunk keeps at least one layer (the framework rules:
  // planner's FrameworkRules.ActivationOffloadingIsMegatronCoresWithoutPipelineOrRecompute).
  HardwareProfile no_host = c.profile;
  no_host.host.pcie_gbps_per_gpu = 0;
  EXPECT_EQ(validate_against_hardware(no_host, w, off).size(), 1u);
  Plan all = off;
  all.offload_layers = 32;
  ASSERT_EQ(validate_plan(m, 8, w, all).size(), 1u);
  EXPECT_EQ(validate_plan(m, 8, w, all).front().flag, "--cpu-offloading-num-layers");
}

// Adam's state is Plan::optimizer_state_bytes_per_param per parameter, sharded over the data-
// parallel ranks by the distributed optimizer: 10 bytes (Apex's param remainders, NeMo) hold
// 10/12 of the 12 (fp32 master and moments), and nothing else in memory moves.
TEST(OptimizerState, BytesPerParamScaleTheShardedState) {
  const ModelSpec m = load_model("llama3-8b");
  Plan p = plan(1, 8, false);
  p.zero = 1;
  const Workload w = work(Precision::kBf16);
  Plan q = p;
  q.optimizer_state_bytes_per_param = 10;
  const IPipelineSchedule& s = *find_schedule("1f1b");
  const StageMemory a = stage_memory(m, w, p, s, 0), b = stage_memory(m, w, q, s, 0);
  EXPECT_NEAR(b.optimizer_bytes, a.optimizer_bytes * 10 / 12, 1e-9 * a.optimizer_bytes);
  // 12 bytes per parameter over 8 ranks (ZeRO-1): the model's parameter count (count_params,
  // the parameter formula of docs/performance-model.md) times 12 / 8.
  EXPECT_NEAR(a.optimizer_bytes, static_cast<double>(count_params(m).total()) * 12.0 / 8,
              1e-6 * a.optimizer_bytes);
  EXPECT_EQ(a.weights_bytes, b.weights_bytes);
  EXPECT_EQ(a.grads_bytes, b.grads_bytes);
  EXPECT_EQ(a.activations_bytes, b.activations_bytes);
}

// The CUDA context is part of the runtime buffers and nothing else: a stack that loads every
// kernel at start-up (the megatron-deepspeed profile's 1573 MiB, measured by the BLOOM runs)
// adds exactly its difference from lazy loading's 300 MB to every rank's buffers.
TEST(RuntimeBuffers, CudaContextIsTheFrameworksOnly) {
  const ModelSpec m = load_model("llama3-8b");
  const Plan p = plan(2, 4, false);
  const Workload w = work(Precision::kBf16);
  Plan q = p;
  q.cuda_context_bytes = 1573.0 * 1048576;
  const IPipelineSchedule& s = *find_schedule("1f1b");
  for (int rank : {0, p.pp - 1}) {
    const StageMemory a = stage_memory(m, w, p, s, rank), b = stage_memory(m, w, q, s, rank);
    EXPECT_NEAR(b.buffers_bytes - a.buffers_bytes, 1573.0 * 1048576 - 300e6, 1.0);
    EXPECT_NEAR(b.total_bytes() - a.total_bytes(), 1573.0 * 1048576 - 300e6, 1.0);
    EXPECT_EQ(a.activations_bytes, b.activations_bytes);
  }
  EXPECT_EQ(p.cuda_context_bytes, kCudaContextBytes);
}

// Independent computation for moe_node_dedup_share: enumerate every set of experts a token may
// pick (uniformly: force-balanced routing; with group-limited routing, group_topk of the groups
// uniformly, then the experts among theirs), and take E[distinct other nodes touched] /
// E[token-expert pairs on other nodes] for a token on node 0, experts in contiguous blocks.
double enumerated_dedup_share(int experts, int topk, int nodes, int groups, int group_topk) {
  const int per_node = experts / nodes;
  double pairs = 0, distinct = 0, weight_sum = 0;
  auto visit = [&](const std::vector<int>& pool, double w) {
    // Every topk-subset of `pool`, each with weight w.
    std::vector<int> idx(topk);
    for (int i = 0; i < topk; ++i) idx[i] = i;
    const int n = static_cast<int>(pool.size());
    while (true) {
      std::vector<bool> touched(nodes, false);
      for (int i : idx) {
        const int node = pool[i] / per_node;
        if (node != 0) {
          pairs += w;
          touched[node] = true;
        }
      }
      for (int j = 1; j < nodes; ++j) distinct += touched[j] ? w : 0;
      weight_sum += w;
      int i = topk - 1;
      while (i >= 0 && idx[i] == n - topk + i) --i;
      if (i < 0) break;
      ++idx[i];
      for (int j = i + 1; j < topk; ++j) idx[j] = idx[j - 1] + 1;
    }
  };
  if (groups <= 1) {
    std::vector<int> all(experts);
    for (int i = 0; i < experts; ++i) all[i] = i;
    visit(all, 1.0);
  } else {
    const int per_group = experts / groups;
    for (int mask = 0; mask < (1 << groups); ++mask) {
      if (__builtin_popcount(mask) != group_topk) continue;
      std::vector<int> pool;
      for (int g = 0; g < groups; ++g)
        if (mask >> g & 1)
          for (int e = 0; e < per_group; ++e) pool.push_back(g * per_group + e);
      visit(pool, 1.0);
    }
  }
  return distinct / pairs;
}

TEST(MoeDispatch, NodeDedupShareMatchesEnumeration) {
  struct Case {
    int experts, topk, nodes, groups, group_topk;
  };
  for (const Case& c :
       {Case{16, 4, 4, 0, 0}, Case{16, 4, 2, 0, 0}, Case{24, 3, 8, 0, 0}, Case{16, 4, 4, 4, 2},
        Case{16, 4, 8, 4, 2}, Case{16, 4, 2, 4, 2}, Case{24, 4, 3, 6, 3}}) {
    MoeSpec e;
    e.experts = c.experts;
    e.topk = c.topk;
    e.router.groups = c.groups;
    e.router.group_topk = c.group_topk;
    SCOPED_TRACE(fmt::format("E={} k={} nodes={} groups={}/{}", c.experts, c.topk, c.nodes,
                             c.groups, c.group_topk));
    EXPECT_NEAR(moe_node_dedup_share(e, c.nodes),
                enumerated_dedup_share(c.experts, c.topk, c.nodes, c.groups, c.group_topk), 1e-9);
  }
  MoeSpec one;
  one.experts = 64;
  one.topk = 1;
  EXPECT_EQ(moe_node_dedup_share(one, 8), 1.0);  // one expert per token: nothing to share
  one.topk = 8;
  EXPECT_EQ(moe_node_dedup_share(one, 1), 1.0);  // one node: no network
}

// DeepSeek-V3 (256 experts, top-8, 8 groups of which 4 per token) on EP64 over 8 nodes: a group
// is a node, so a token reaches at most 4 nodes: 7 x 0.454 = 3.2 other nodes expected against 7
// token-expert pairs on other nodes, under half the plain all-to-all's network traffic.
TEST(MoeDispatch, DeepSeekV3NodeLimitedRoutingHalvesTheNetworkTraffic) {
  MoeSpec e;
  e.experts = 256;
  e.topk = 8;
  e.router.groups = 8;
  e.router.group_topk = 4;
  // P(node touched) = 4/8 x (1 - C(96, 8)/C(128, 8)); share = 8 x P / 8.
  double miss = 1;
  for (int i = 0; i < 8; ++i) miss *= (96.0 - i) / (128.0 - i);
  EXPECT_NEAR(moe_node_dedup_share(e, 8), 0.5 * (1 - miss), 1e-12);
  EXPECT_LT(moe_node_dedup_share(e, 8), 0.5);
  e.router.groups = 0;  // without the node limit: 1 - C(224, 8)/C(256, 8)
  double miss_all = 1;
  for (int i = 0; i < 8; ++i) miss_all *= (224.0 - i) / (256.0 - i);
  EXPECT_NEAR(moe_node_dedup_share(e, 8), 1 - miss_all, 1e-12);
}

// The pairwise all-to-all with a node-deduplicating dispatcher: the network carries the share,
// NVLink the local pairs and the forwarded remote ones, concurrently.
TEST(MoeDispatch, PairwiseAllToAllChargesTheDeduplicatedShare) {
  const HardwareProfile hw = load_profile("dgx-h100");
  GroupPlacement g = dense_group(8);
  const LinkRates l = link_rates(hw, g);
  const double bytes = 1e9;
  const double overhead = hw.efficiency.collective_overhead_us * 1e-6;
  const double remote = 56.0 / 64, local = 7.0 / 64;
  // Each rank's NIC share: the DGX H100 datasheet's 8 x 50 GB/s NICs x the profile's network
  // fraction 0.9, over the node's 8 ranks = 45 GB/s.
  const double rank_nic_gbps = 8 * 50 * 0.9 / 8;
  const double plain = collective_cost(hw, CollectiveOp::kAllToAll, bytes, g).time_s;
  EXPECT_NEAR(plain, 2 * l.alpha_inter_s + bytes * remote / (rank_nic_gbps * 1e9) + overhead, 1e-9);
  g.remote_share = 0.45;
  const double dedup = collective_cost(hw, CollectiveOp::kAllToAll, bytes, g).time_s;
  const double t_inter = bytes * remote * 0.45 / (rank_nic_gbps * 1e9);
  const double t_intra = bytes * (local + remote) / (l.intra_busbw_gbps * 1e9);
  EXPECT_NEAR(dedup, 2 * l.alpha_inter_s + std::max(t_inter, t_intra) + overhead, 1e-9);
  EXPECT_LT(dedup, plain);
}

// The registered pairwise algorithm's own time for an all-to-all (not the cost model's pick).
AlgorithmTime pairwise_cost(const HardwareProfile& hw, double bytes, const GroupPlacement& g) {
  const ICollectiveAlgorithm* a = Registry<ICollectiveAlgorithm>::global().find("pairwise");
  EXPECT_NE(a, nullptr);
  return a ? a->cost(CollectiveOp::kAllToAll, bytes, g, link_rates(hw, g)) : kUnsupported;
}

// The network part of an all-to-all is each rank's NIC share, whatever the node's NVLink: HGX
// H800 (NVLink 200 GB/s per direction, its datasheet) and DGX H100 (450) have the same 8 x 50
// GB/s NICs, so 1 GB over 64 ranks on 8 nodes takes the same time on both (it was 2.25x slower on
// the H800, whose NVLink capped the node's NIC total before the split by rank).
TEST(MoeDispatch, AllToAllNetworkShareIsNotCappedByOneGpusNvlink) {
  const GroupPlacement g = dense_group(8);
  const HardwareProfile h800 = load_profile("hgx-h800");
  const HardwareProfile h100 = load_profile("dgx-h100");
  const double bytes = 1e9;
  const AlgorithmTime a = pairwise_cost(h800, bytes, g);
  const AlgorithmTime b = pairwise_cost(h100, bytes, g);
  const double remote = 56.0 / 64;
  EXPECT_NEAR(a.beta_s, bytes * remote / (8 * 50 * 0.9 / 8 * 1e9), 1e-12);
  EXPECT_NEAR(b.beta_s, a.beta_s, 1e-12);
  EXPECT_EQ(a.bottleneck, Bottleneck::kNetwork);
}

// The plan's dispatcher reaches the op program: DeepEP prices DeepSeek-V3's dispatch below the
// all-to-all across nodes, and changes nothing inside one node.
TEST(MoeDispatch, DeepEPShortensCrossNodeDispatchOnly) {
  const ModelSpec m = load_model("deepseek-v3");
  Cluster c;
  c.profile = load_profile("dgx-h100");
  c.num_gpus = 1024;
  Workload w = work(Precision::kBf16);
  w.global_batch = 8192;
  Plan p;
  p.tp = 2;
  p.sp = true;
  p.pp = 8;
  p.vpp = 4;
  p.ep = 64;
  p.dp = 64;
  p.mbs = 1;
  p.gbs = 8192;
  p.uneven_pp = true;
  p.schedule = "interleaved";
  const Estimate a2a = estimate(m, c, w, p);
  p.moe_dispatcher = MoeDispatcher::kDeepEP;
  const Estimate deepep = estimate(m, c, w, p);
  const int ep = static_cast<int>(CommDim::kEP);
  EXPECT_LT(deepep.comm_time_s[ep], 0.7 * a2a.comm_time_s[ep]);
  EXPECT_EQ(deepep.comm_volume_bytes[ep], a2a.comm_volume_bytes[ep]);
  p.ep = 8;  // one node
  p.moe_dispatcher = MoeDispatcher::kAllToAll;
  const Estimate node_a2a = estimate(m, c, w, p);
  p.moe_dispatcher = MoeDispatcher::kHybridEP;
  EXPECT_NEAR(estimate(m, c, w, p).comm_time_s[ep], node_a2a.comm_time_s[ep], 1e-12);
}

}  // namespace
}  // namespace dtplan
