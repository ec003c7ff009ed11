// RL post-training planner (planner/rl.h) and the rollout cost model
// (simulator/cost/inference_cost.h). Expected values are computed here from the formulas of
// REFERENCE.md section 8 and HybridFlow Table 2 with the profile's numbers, independently of the
// code under test's own composition.
#include "planner/rl.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/catalog.h"
#include "core/error.h"
#include "simulator/cost/inference_cost.h"

namespace dtplan {
namespace {

const std::string kData = DTPLAN_TEST_DATA_DIR;

TEST(KvCache, BytesPerTokenFollowTheFormula) {
  const ModelSpec m = load_model("llama3-70b");
  // 2 x L x n_kv x d_h x bytes = 2 x 80 x 8 x 128 x 2 (REFERENCE.md 8).
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, Precision::kBf16), 2.0 * 80 * 8 * 128 * 2);
  InferenceLayout l;
  l.tp = 8;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, l), 2.0 * 80 * 1 * 128 * 2);
  l.tp = 16;  // fewer KV heads than GPUs: each GPU still holds one head
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, l), 2.0 * 80 * 1 * 128 * 2);
  // MLA: the compressed latent and the rotary key, L x (kv_lora_rank + qk_rope_head_dim) x bytes
  // (DeepSeek-V3: 61 layers, 512 + 64).
  const ModelSpec ds = load_model("deepseek-v3");
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(ds, Precision::kBf16), 61.0 * (512 + 64) * 2);
}

TEST(DecodeStep, MemoryBoundAtSmallBatch) {
  const ModelSpec m = load_model("llama3-70b");
  const HardwareProfile hw = load_profile("dgx-h100");
  const InferenceParams& ip = hw.inference;
  InferenceLayout l;
  l.tp = 8;
  const DecodeStep d = decode_step(m, hw, ip, l, 1, 1000);
  const ParamCounts pc = count_params(m);
  // Weights but the input embedding (gathered, not streamed), plus 1000 cached tokens' KV.
  const double bytes = (double(pc.total() - pc.embedding) * 2 + 1000.0 * 2 * 80 * 128 * 2 * 8) / 8;
  const double expect_mem = bytes / (3350e9 * ip.decode_bw_fraction);
  EXPECT_NEAR(d.memory_s, expect_mem, 1e-9 * expect_mem);
  EXPECT_TRUE(d.memory_bound());
  EXPECT_NEAR(d.comm_s, 2 * 80 * ip.tp_allreduce_us * 1e-6, 1e-12);
  EXPECT_NEAR(d.overhead_s, (ip.step_overhead_us + 80 * ip.layer_overhead_us) * 1e-6, 1e-12);
  EXPECT_NEAR(d.time_s, d.memory_s + d.comm_s + d.overhead_s, 1e-12);
  // About 6.5 ms of weight streaming on 8 H100 at 0.8 of 3.35 TB/s.
  EXPECT_GT(d.memory_s, 6e-3);
  EXPECT_LT(d.memory_s, 7e-3);
}

TEST(DecodeStep, PipelineStagesHoldMoreKvButDoNotSpeedAToken) {
  // pp micro-batches pass every stage: each GPU reads its weights pp times a step, so the
  // memory term is TP's alone; the KV cache of a token is split over the stages.
  const ModelSpec m = load_model("llama3-70b");
  const HardwareProfile hw = load_profile("dgx-h100");
  InferenceLayout a, b;
  a.tp = b.tp = 4;
  b.pp = 2;
  const DecodeStep da = decode_step(m, hw, hw.inference, a, 64, 64 * 2000);
  const DecodeStep db = decode_step(m, hw, hw.inference, b, 64, 64 * 2000);
  const double w = double(count_params(m).total() - count_params(m).embedding) * 2 / 4 /
                   (3350e9 * hw.inference.decode_bw_fraction);
  // Two KV heads per GPU at TP4 (8 / 4), half the layers' cache on each of 2 stages.
  const double kv_a = 2.0 * 80 * 2 * 128 * 2;
  EXPECT_NEAR(da.memory_s - db.memory_s,
              64.0 * 2000 * (kv_a / 2) / (3350e9 * hw.inference.decode_bw_fraction), 1e-12);
  EXPECT_NEAR(decode_step(m, hw, hw.inference, b, 64, 0).memory_s, w, 1e-9 * w);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, b), kv_bytes_per_token_per_gpu(m, a) / 2);
  EXPECT_DOUBLE_EQ(inference_weight_bytes_per_gpu(m, b), inference_weight_bytes_per_gpu(m, a) / 2);
}

TEST(DecodeStep, ComputeBoundAtLargeBatch) {
  const ModelSpec m = load_model("llama3-70b");
  const HardwareProfile hw = load_profile("dgx-h100");
  const InferenceParams& ip = hw.inference;
  InferenceLayout l;
  l.tp = 8;
  const DecodeStep d = decode_step(m, hw, ip, l, 4096, 0);
  // 2 x N_active x batch / t_g at decode efficiency of the BF16 peak.
  const double expect =
      2.0 * double(count_params(m).active()) * 4096 / 8 / (989e12 * ip.decode_compute_fraction);
  EXPECT_NEAR(d.compute_s, expect, 1e-9 * expect);
  EXPECT_FALSE(d.memory_bound());
}

TEST(Generation, EqualsTheSumOfItsDecodeSteps) {
  // Fixed lengths, every sequence admitted at once: the batch stays N for L steps while the
  // context grows by N a step; the time is the prefills plus sum_j step(N, N (P + j)).
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  InferenceLayout l;
  l.tp = 1;
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::kFixed;
  d.mean_tokens = 300;
  const int N = 64;
  const double P = 200;
  const GenerationResult g = generate(m, hw, hw.inference, l, 1, N, 1, P, d);
  double expect = N * prefill_time_s(m, hw, hw.inference, l, P, P);
  for (int j = 0; j < 300; ++j)
    expect += decode_step(m, hw, hw.inference, l, N, N * (P + j)).time_s;
  EXPECT_NEAR(g.time_s, expect, 1e-9 * expect);
  EXPECT_FALSE(g.kv_limited);
  EXPECT_DOUBLE_EQ(g.tokens, N * 300.0);
}

TEST(Generation, TheLongestResponseBoundsTheSynchronousStep) {
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  InferenceLayout l;
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::kLognormal;
  d.mean_tokens = 2000;
  d.sigma = 1.0;
  d.max_tokens = 16000;
  d.prepare();
  EXPECT_NEAR(d.mean(), 2000, 1e-6);
  const GenerationResult g = generate(m, hw, hw.inference, l, 4, 1024, 8, 500, d);
  // The longest response takes its own steps one after another, each at least a batch-1 step.
  const double floor = g.longest_tokens * decode_step(m, hw, hw.inference, l, 1, 500).time_s;
  EXPECT_GE(g.time_s, floor);
  EXPECT_GT(g.tail_s, 0);
  EXPECT_NEAR(g.longest_tokens, std::round(d.quantile(1 - 0.5 / 1024)), 0.5);
}

TEST(Generation, MoreRolloutReplicasNeverSlowIt) {
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  InferenceLayout l;
  l.max_num_seqs = 64;  // so that fewer replicas queue
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::kLognormal;
  d.mean_tokens = 1500;
  d.sigma = 0.8;
  d.max_tokens = 8000;
  d.prepare();
  double last = 1e300;
  for (int r = 1; r <= 64; r *= 2) {
    const GenerationResult g = generate(m, hw, hw.inference, l, r, 2048, 8, 400, d);
    EXPECT_LE(g.time_s, last * (1 + 1e-12)) << r << " replicas";
    last = g.time_s;
  }
}

TEST(SumMaxLinear, EqualsTheStepByStepSum) {
  // Lines that cross in either direction, on and between whole steps, and that do not cross.
  const double cases[][4] = {{1, 0.1, 0, 0.3},   {0, 0.3, 1, 0.1}, {2, -0.1, 0, 0.1},
                             {0, 0.2, 2, 0.0},   {5, 0.0, 1, 0.5}, {1, 0.25, 2, 0.0},
                             {3, 0.01, 1, 0.02}, {1, 1, 1, 1}};
  for (const auto& c : cases)
    for (double k : {0.0, 1.0, 7.0, 8.0, 9.0, 40.0, 1000.0}) {
      double brute = 0;
      for (int j = 0; j < k; ++j) brute += std::max(c[0] + c[1] * j, c[2] + c[3] * j);
      EXPECT_NEAR(sum_max_linear(c[0], c[1], c[2], c[3], k), brute, 1e-9 * (1 + brute))
          << c[0] << " " << c[1] << " " << c[2] << " " << c[3] << " k " << k;
    }
}

TEST(Generation, StreamingIsBoundedByTheResponsesInFlight) {
  // A replica kept busy runs at most its share of the responses in flight: with few of them,
  // Little's law caps the rate (in flight / latency), not max_num_seqs.
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  InferenceLayout l;
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::kFixed;
  d.mean_tokens = 1000;
  const GenerationResult many = generate(m, hw, hw.inference, l, 4, 4096, 1, 200, d);
  const GenerationResult few = generate(m, hw, hw.inference, l, 4, 4096, 1, 200, d, 64);
  EXPECT_DOUBLE_EQ(many.streaming_batch, 256);  // max_num_seqs
  EXPECT_DOUBLE_EQ(few.streaming_batch, 16);    // 64 in flight over 4 replicas
  EXPECT_LT(few.streaming_tokens_per_s_per_replica, many.streaming_tokens_per_s_per_replica);
  // The rate is the batch over the step (and the prefill spread over the response).
  const DecodeStep st = decode_step(m, hw, hw.inference, l, 16, 16 * (200 + 500));
  const double per_token = st.time_s / 16 + prefill_time_s(m, hw, hw.inference, l, 200, 200) / 1000;
  EXPECT_NEAR(few.streaming_tokens_per_s_per_replica, 1 / per_token, 1e-9 / per_token);
}

TEST(Generation, KvLimitedAdmissionWaitsAndTakesLonger) {
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::kFixed;
  d.mean_tokens = 2000;
  InferenceLayout roomy, tight;
  tight.gpu_memory_utilization = 0.3;  // 24 GiB: 15 GiB of weights, ~57k tokens of KV
  // 128 sequences of 2,500 tokens: 320k tokens fit the roomy ~450k-token cache at once.
  const GenerationResult a = generate(m, hw, hw.inference, roomy, 1, 128, 1, 500, d);
  const GenerationResult b = generate(m, hw, hw.inference, tight, 1, 128, 1, 500, d);
  EXPECT_FALSE(a.kv_limited);
  EXPECT_DOUBLE_EQ(a.peak_batch, 128);
  EXPECT_TRUE(b.kv_limited);
  EXPECT_LT(b.peak_batch, 128);
  EXPECT_LE(b.peak_batch * 2500, b.kv_capacity_tokens + 2500);  // the reservation holds
  EXPECT_GT(b.time_s, a.time_s);
}

TEST(Generation, TheLongestSequenceMustFitTheKvCache) {
  const ModelSpec m = load_model("llama3-8b");
  const HardwareProfile hw = load_profile("dgx-h100");
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::kFixed;
  d.mean_tokens = 100000;
  InferenceLayout tight;
  tight.gpu_memory_utilization = 0.25;
  const GenerationResult g = generate(m, hw, hw.inference, tight, 1, 8, 1, 500, d);
  EXPECT_FALSE(g.fits);
  EXPECT_NE(g.why.find("exceeds a replica's KV cache"), std::string::npos) << g.why;
}

TEST(LengthDistribution, EmpiricalQuantileAndMean) {
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::kEmpirical;
  d.cdf = {{100, 0.5}, {300, 1.0}};
  // Half the mass at 100, the rest uniform on (100, 300]: mean 0.5 x 100 + 0.5 x 200.
  EXPECT_DOUBLE_EQ(d.mean(), 150);
  EXPECT_DOUBLE_EQ(d.quantile(0.25), 100);
  EXPECT_DOUBLE_EQ(d.quantile(0.75), 200);
}

TEST(WeightSync, ReshardVolumeIsHybridFlowTable2) {
  // (t p - t_g p_g) / (t_g p_g t p) M with p_g = 1 wherever t_g <= t.
  const double M = 140e9;
  for (int t : {2, 4, 8})
    for (int p : {1, 2, 4})
      for (int tg = 1; tg <= t; tg *= 2) {
        Plan pl;
        pl.tp = t;
        pl.pp = p;
        const double hybridflow = double(t * p - tg) / (double(tg) * t * p) * M;
        EXPECT_NEAR(rl::reshard_volume_bytes(M, pl, tg), hybridflow, 1e-6 * M)
            << "t " << t << " p " << p << " t_g " << tg;
      }
  // With generation stages too: (t p - t_g p_g) / (t_g p_g t p) M for t_g <= t, p_g <= p.
  for (int pg : {1, 2, 4}) {
    Plan pl;
    pl.tp = 4;
    pl.pp = 4;
    const double hybridflow = double(16 - 2 * pg) / (2.0 * pg * 16) * M;
    EXPECT_NEAR(rl::reshard_volume_bytes(M, pl, 2, pg), hybridflow, 1e-6 * M) << "p_g " << pg;
  }
  Plan same;
  same.tp = 8;
  EXPECT_DOUBLE_EQ(rl::reshard_volume_bytes(M, same, 8), 0);  // the same sharding: nothing moves
}

rl::RlConfig example(const char* file) {
  return rl::load_rl_file(kData + "/examples/rl/" + file).base;
}

TEST(WeightSync, NcclBroadcastGoesThroughOneNic) {
  rl::RlConfig c = example("grpo-70b-disaggregated.yaml");
  c.sync_method = rl::SyncMethod::kNcclBroadcast;
  const HardwareProfile& hw = c.cluster.profile;
  Plan p;
  p.tp = 8;
  InferenceLayout il;
  il.tp = 8;
  const rl::WeightSync w = rl::weight_sync(c, true, p, 96, il);
  const double M = double(count_params(c.policy).total()) * 2;
  const double nic = 8 * 50e9 / 8 * hw.efficiency.network_bw_fraction;  // one 400G NIC
  const double buckets = std::ceil(M / c.sync_bucket_bytes);
  const double alpha = (hw.scale_out.latency_us + hw.efficiency.collective_overhead_us) * 1e-6;
  const double gather = M * (1 - 1.0 / 8) / (450e9 * hw.efficiency.nvlink_bw_fraction);
  const double load = M / (hw.inference.weight_load_gbps * 1e9);
  EXPECT_NEAR(w.time_s, std::max({M / nic, gather, load}) + buckets * alpha, 1e-9);
  EXPECT_DOUBLE_EQ(w.bytes, M);
}

TEST(RlStep, ArchitecturesKeepTheirInvariants) {
  rl::RlConfig c = example("grpo-70b-disaggregated.yaml");
  c.rollout_gpus = 128;
  c.rollout_tp = 8;
  auto run = [&](rl::Architecture a) {
    rl::RlConfig x = c;
    x.architecture = a;
    if (a == rl::Architecture::kColocated) x.rollout_gpus = 0;
    return rl::evaluate_rl(x, 1);
  };
  const rl::RlResult colo = run(rl::Architecture::kColocated);
  const rl::RlResult dis = run(rl::Architecture::kDisaggregated);
  const rl::RlResult off = run(rl::Architecture::kOneStepOff);
  const rl::RlResult async = run(rl::Architecture::kFullyAsync);
  EXPECT_EQ(colo.staleness_steps, 0);
  EXPECT_EQ(dis.staleness_steps, 0);
  EXPECT_EQ(off.staleness_steps, 1);
  // Fully asynchronous: the queue's step, plus a response's latency in steps (no interval).
  EXPECT_NEAR(async.staleness_steps, 1 + async.generation.streaming_latency_s / async.step_time_s,
              1e-12);
  // Overlapping the pools never makes the step longer than running them in turn.
  EXPECT_LE(off.step_time_s, dis.step_time_s);
  EXPECT_LE(async.step_time_s, dis.step_time_s);
  // The synchronous architectures' step is the sum of their phases.
  for (const rl::RlResult* r : {&colo, &dis}) {
    double sum = 0;
    for (const auto& [n, s] : r->phases_s) sum += s;
    EXPECT_NEAR(r->step_time_s, sum, 1e-9 * sum) << rl::to_string(r->architecture);
  }
  // Separate pools: each pool idles while the other works.
  EXPECT_GT(dis.idle_share_rollout, 0);
  EXPECT_GT(dis.idle_share_training, 0);
  EXPECT_EQ(dis.rollout_gpus + dis.training_gpus, 256);
  // GPU-seconds are held time x the pool's GPUs for every phase: a rule-based reward (CPU) holds
  // the rollout pool apart, every GPU colocated (a new-user trial found it free when apart).
  auto gpu_s = [](const rl::RlResult& r, const std::string& phase) {
    for (const auto& [n, s] : r.gpu_seconds)
      if (n == phase) return s;
    return -1.0;
  };
  auto phase_s = [](const rl::RlResult& r, const std::string& phase) {
    for (const auto& [n, s] : r.phases_s)
      if (n == phase) return s;
    return -1.0;
  };
  ASSERT_GT(phase_s(dis, "reward"), 0);
  EXPECT_NEAR(gpu_s(dis, "reward"), phase_s(dis, "reward") * dis.rollout_gpus, 1e-9);
  EXPECT_NEAR(gpu_s(colo, "reward"), phase_s(colo, "reward") * 256, 1e-9);
}

// The trainer's sequence is prompt + mean response rounded up to 128 tokens. A lognormal's mean
// comes out of floating-point arithmetic: 1024 + 8192 arrived as 9216.000000000015 and was
// rounded up to 9344 (a new-user trial), moving the update by 1.4%.
TEST(RlStep, AWholeMultipleOf128IsNotRoundedUpByFloatingPointNoise) {
  rl::RlConfig c = example("grpo-70b-colocated.yaml");
  c.response.mean_tokens = 8192;
  c.response.max_tokens = 32768;
  c.response.prepare();
  ASSERT_NEAR(c.prompt_tokens + c.response.mean(), 9216, 1e-6);
  const rl::RlResult r = rl::evaluate_rl(c, 1);
  bool found = false;
  for (const rl::Derivation& d : r.derivations)
    if (d.name == "policy update") {
      found = true;
      EXPECT_NE(d.value.find(" x 1.000 = "), std::string::npos) << d.value;
    }
  EXPECT_TRUE(found);
}

// Colocated, the trainer keeps its state beside the rollout's share of HBM, so the layout is the
// fastest whose resident state (weights, gradients, optimizer) fits there: as the engine takes
// more, the layouts shard more, and none is picked that does not fit (the search took the
// fastest and then refused the architecture when it did not fit).
TEST(RlStep, ColocatedTrainingLayoutFitsBesideTheRollout) {
  rl::RlConfig c = example("grpo-70b-colocated.yaml");
  c.architecture = rl::Architecture::kColocated;
  // Without ZeRO-3 in the space, the fastest layouts keep the most state per GPU.
  c.space.zero = {0, 1, 2};
  const double hbm = c.cluster.profile.gpu.memory_gib * 1073741824.0;
  double last_resident = 0;
  int feasible = 0;
  for (double util : {0.5, 0.7, 0.8, 0.85}) {
    rl::RlConfig x = c;
    x.colocated_gpu_memory_utilization = util;
    rl::RlResult r;
    try {
      r = rl::evaluate_rl(x, 1);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("resident state"), std::string::npos) << e.what();
      continue;
    }
    ++feasible;
    EXPECT_LE(r.trainer_resident_bytes, (1 - util) * hbm) << util;
    if (last_resident > 0) {
      EXPECT_LE(r.trainer_resident_bytes, last_resident) << util;
    }
    last_resident = r.trainer_resident_bytes;
  }
  EXPECT_GE(feasible, 2);
}

TEST(RlStep, PpoWithACriticAndARewardModel) {
  rl::RlConfig c = example("grpo-70b-disaggregated.yaml");
  c.algorithm = rl::Algorithm::kPpo;
  c.reward_model = load_model("llama3-8b");
  c.rollout_gpus = 128;
  c.rollout_tp = 8;
  for (rl::Architecture a : {rl::Architecture::kColocated, rl::Architecture::kDisaggregated}) {
    rl::RlConfig x = c;
    x.architecture = a;
    if (a == rl::Architecture::kColocated) x.rollout_gpus = 0;
    const rl::RlResult r = rl::evaluate_rl(x, 1);
    double sum = 0, critic = 0, reward = 0;
    for (const auto& [n, s] : r.phases_s) {
      sum += s;
      if (n == "critic") critic = s;
      if (n == "reward") reward = s;
    }
    EXPECT_GT(critic, 0);
    EXPECT_GT(reward, 0);  // the reward model's forward, on the trainer's GPUs
    EXPECT_NEAR(r.step_time_s, sum, 1e-9 * sum) << rl::to_string(a);
  }
}

TEST(RlSearch, SeventyBOnTwoHundredFiftySixH100) {
  rl::RlConfig c = example("grpo-70b-colocated.yaml");
  c.architecture.reset();
  const rl::RlSearchResult s = rl::search_rl(c, 1);
  ASSERT_EQ(s.best_per_architecture.size(), 4u);
  for (const auto& r : s.best_per_architecture) EXPECT_GE(r.step_time_s, s.best.step_time_s);
  EXPECT_GT(s.considered.size(), 100u);
  // Every pool split considered is on node boundaries and leaves GPUs to both pools.
  for (const auto& a : s.considered) {
    EXPECT_EQ(a.rollout_gpus % 8, 0);
    if (a.architecture != rl::Architecture::kColocated) {
      EXPECT_LT(a.rollout_gpus, 256);
    }
  }
}

}  // namespace
}  // namespace dtplan
