// Search throughput: plans enumerated and evaluated per second over the full default space
// (issue #4: Calculon's exhaustive search manages ~100-250 configurations/s on 2 cores).
//
//   ./build/bench/search_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include "core/catalog.h"
#include "planner/search.h"

namespace dtplan {
namespace {

void BM_Search(benchmark::State& state, const char* model, const char* profile, int gpus) {
  setenv("DTPLAN_DATA_DIR", DTPLAN_BENCH_DATA_DIR, 0);
  const ModelSpec m = load_model(model);
  const Cluster c = load_cluster(profile, gpus);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 1536;
  SearchOptions opt;
  opt.threads = static_cast<int>(state.range(0));
  AnalyticEvaluator ev;
  long enumerated = 0, evaluated = 0;
  for (auto _ : state) {
    SearchResult r = search(m, c, w, {}, opt, ev);
    enumerated += r.enumerated;
    evaluated += r.evaluated;
    benchmark::DoNotOptimize(r);
  }
  state.counters["plans/s"] =
      benchmark::Counter(static_cast<double>(enumerated), benchmark::Counter::kIsRate);
  state.counters["evaluated/s"] =
      benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_Search, gpt3_175b_1024_a100, "gpt3-175b", "dgx-a100-80g", 1024)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Search, llama405b_16384_h100, "llama3.1-405b", "dgx-h100", 16384)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Search, mixtral_8x22b_256_h100, "mixtral-8x22b", "dgx-h100", 256)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dtplan

BENCHMARK_MAIN();
