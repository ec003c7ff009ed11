// Latency of one analytic estimate (issue #3 target: <= 2 us, no heap allocation in the hot
// path). Heap allocations are counted by replacing global operator new for this binary
// (alloc_counter.cpp); the counter is reported per estimate and must read 0.
//
//   ./build/bench/estimator_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include "bench/alloc_counter.h"
#include "core/catalog.h"
#include "simulator/analytic/estimator.h"

namespace dtplan {
namespace {

struct Fixture {
  ModelSpec model;
  Cluster cluster;
  Workload work;
  Plan plan;
};

Fixture make(const char* model, const char* profile, int gpus, int tp, int pp, int vpp) {
  setenv("DTPLAN_DATA_DIR", DTPLAN_BENCH_DATA_DIR, 0);
  Fixture f{load_model(model), load_cluster(profile, gpus), {}, {}};
  f.work.seq_len = 2048;
  f.work.global_batch = 1536;
  f.plan.tp = tp;
  f.plan.pp = pp;
  f.plan.vpp = vpp;
  f.plan.dp = gpus / (tp * pp);
  f.plan.sp = true;
  f.plan.zero = 1;
  f.plan.recompute = Recompute::kSelective;
  f.plan.gbs = 1536;
  f.plan.schedule = vpp > 1 ? "interleaved" : "1f1b";
  return f;
}

void run(benchmark::State& state, const Fixture& f) {
  // Warm the registries and caches outside the timed loop.
  benchmark::DoNotOptimize(estimate(f.model, f.cluster, f.work, f.plan));
  const long before = testing::heap_allocations();
  for (auto _ : state) {
    Estimate e = estimate(f.model, f.cluster, f.work, f.plan);
    benchmark::DoNotOptimize(e);
  }
  state.counters["allocs_per_estimate"] =
      static_cast<double>(testing::heap_allocations() - before) /
      static_cast<double>(state.iterations());
}

// The search's hot path: per-layer costs cached per layer key (EstimatorCache), the rest of the
// estimate (pipeline, data-parallel, optimizer, memory, FLOPs) recomputed for each plan.
void run_cached(benchmark::State& state, const Fixture& f) {
  EstimatorCache cache;
  benchmark::DoNotOptimize(estimate(f.model, f.cluster, f.work, f.plan, {}, &cache));
  const long before = testing::heap_allocations();
  for (auto _ : state) {
    Estimate e = estimate(f.model, f.cluster, f.work, f.plan, {}, &cache);
    benchmark::DoNotOptimize(e);
  }
  state.counters["allocs_per_estimate"] =
      static_cast<double>(testing::heap_allocations() - before) /
      static_cast<double>(state.iterations());
}

void BM_Gpt3_1024Gpus_Cached(benchmark::State& s) {
  static const Fixture f = make("gpt3-175b", "dgx-a100-80g", 1024, 8, 16, 1);
  run_cached(s, f);
}
void BM_DeepSeekV3_Moe_Cached(benchmark::State& s) {
  static Fixture f = [] {
    Fixture x = make("deepseek-v3", "dgx-h100", 2048, 1, 16, 1);
    x.plan.uneven_pp = true;
    x.plan.ep = 64;
    return x;
  }();
  run_cached(s, f);
}

void BM_Gpt3_1024Gpus(benchmark::State& s) {
  static const Fixture f = make("gpt3-175b", "dgx-a100-80g", 1024, 8, 16, 1);
  run(s, f);
}
void BM_Gpt3_Interleaved(benchmark::State& s) {
  static const Fixture f = make("gpt3-175b", "dgx-a100-80g", 1024, 8, 8, 3);
  run(s, f);
}
void BM_Llama405B_16K(benchmark::State& s) {
  static const Fixture f = make("llama3.1-405b", "dgx-h100", 16384, 8, 16, 1);
  run(s, f);
}
void BM_DeepSeekV3_Moe(benchmark::State& s) {
  static Fixture f = [] {
    Fixture x = make("deepseek-v3", "dgx-h100", 2048, 1, 16, 1);
    x.plan.uneven_pp = true;
    x.plan.ep = 64;
    return x;
  }();
  run(s, f);
}

BENCHMARK(BM_Gpt3_1024Gpus);
BENCHMARK(BM_Gpt3_Interleaved);
BENCHMARK(BM_Llama405B_16K);
BENCHMARK(BM_DeepSeekV3_Moe);
BENCHMARK(BM_Gpt3_1024Gpus_Cached);
BENCHMARK(BM_DeepSeekV3_Moe_Cached);

}  // namespace
}  // namespace dtplan

BENCHMARK_MAIN();
