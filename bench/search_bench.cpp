// Search throughput over full default spaces (issue #4: >= 1,000,000 analytic plan evaluations
// per second per core; the 1T model on 3072 A100 in <= 2 s on a 2-core machine; Calculon's
// exhaustive search manages ~100-250 configurations/s on 2 cores).
//
//   ./build/bench/search_bench --benchmark_min_time=1
//
// Time and rates are per process CPU second (all search threads together), i.e. per core, so
// that other load on the machine does not distort them; wall_ms is the wall-clock time of one
// search. Counters: plans/s (enumerated), evaluated/s (plans estimated in full), pruned/s (plans
// skipped by the top-K / Pareto floor), considered/s (memory checked: evaluated + pruned + did not
// fit). Arguments: threads, pruning (1 on, 0 off: every fitting plan is evaluated in full).
#include <benchmark/benchmark.h>

#include <chrono>

#include "core/catalog.h"
#include "planner/search.h"

namespace dtplan {
namespace {

void BM_Search(benchmark::State& state, const char* model, const char* profile, int gpus,
               int64_t gbs_lo, int64_t gbs_hi) {
  setenv("DTPLAN_DATA_DIR", DTPLAN_BENCH_DATA_DIR, 0);
  const ModelSpec m = load_model(model);
  const Cluster c = load_cluster(profile, gpus);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = gbs_lo;
  SearchSpace space;
  for (int64_t g = gbs_lo; gbs_hi > gbs_lo && g <= gbs_hi; ++g) space.gbs.push_back(g);
  SearchOptions opt;
  opt.threads = static_cast<int>(state.range(0));
  opt.prune = state.range(1) != 0;
  AnalyticEvaluator ev;
  long enumerated = 0, evaluated = 0, pruned = 0, considered = 0;
  double wall = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    SearchResult r = search(m, c, w, space, opt, ev);
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    enumerated += r.enumerated;
    evaluated += r.evaluated;
    const long p = r.rejected[static_cast<size_t>(Rejection::kCannotBeatTopK)];
    pruned += p;
    considered += r.evaluated + p + r.rejected[static_cast<size_t>(Rejection::kMemory)];
    benchmark::DoNotOptimize(r);
  }
  auto rate = [](long n) {
    return benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
  };
  state.counters["plans/s"] = rate(enumerated);
  state.counters["evaluated/s"] = rate(evaluated);
  state.counters["pruned/s"] = rate(pruned);
  state.counters["considered/s"] = rate(considered);
  state.counters["wall_ms"] = benchmark::Counter(1e3 * wall, benchmark::Counter::kAvgIterations);
}

// Rates per process CPU second: per core.
#define DTPLAN_SEARCH_BENCH(name, ...)            \
  BENCHMARK_CAPTURE(BM_Search, name, __VA_ARGS__) \
      ->ArgNames({"threads", "prune"})            \
      ->MeasureProcessCPUTime()                   \
      ->Unit(benchmark::kMillisecond)

DTPLAN_SEARCH_BENCH(gpt3_175b_1024_a100, "gpt3-175b", "dgx-a100-80g", 1024, 1536, 1536)
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({2, 1});
// Narayanan et al. 2021's 1T run: 3072 A100, batch 3072 x 2048 tokens; every dimension.
DTPLAN_SEARCH_BENCH(megatron_1t_3072_a100, "megatron-1t", "dgx-a100-80g", 3072, 3072, 3072)
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({2, 1});
// The same with the global batch searched over 1536-6144 sequences.
DTPLAN_SEARCH_BENCH(megatron_1t_3072_a100_gbs_range, "megatron-1t", "dgx-a100-80g", 3072, 1536,
                    6144)
    ->Args({1, 1})
    ->Args({2, 1});
DTPLAN_SEARCH_BENCH(llama405b_16384_h100, "llama3.1-405b", "dgx-h100", 16384, 1536, 1536)
    ->Args({2, 1});
DTPLAN_SEARCH_BENCH(mixtral_8x22b_256_h100, "mixtral-8x22b", "dgx-h100", 256, 1536, 1536)
    ->Args({1, 0})
    ->Args({2, 1});

}  // namespace
}  // namespace dtplan

BENCHMARK_MAIN();
