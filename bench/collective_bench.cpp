// `dtplan collective --sweep 1K-16G` on 1,024 GPUs (issue #18 target: <= 0.2 s): the 25-point
// sweep of every registered all-reduce algorithm with its crossovers, as the command runs it.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "core/catalog.h"
#include "simulator/cost/collective_study.h"

namespace dtplan {
namespace {

void BM_AllReduceSweep1024Gpus(benchmark::State& state) {
  setenv("DTPLAN_DATA_DIR", DTPLAN_BENCH_DATA_DIR, 0);
  const HardwareProfile hw = load_profile("dgx-a100-80g");
  const GroupPlacement g = collective_placement(hw, 1024, 0, 1);
  size_t points = 0;
  for (auto _ : state) {
    const CollectiveSweep s =
        collective_sweep(hw, CollectiveOp::kAllReduce, 1024.0, 16.0 * (1ull << 30), g);
    points += s.points.size();
    benchmark::DoNotOptimize(s.crossovers.size());
  }
  state.counters["points/s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
  state.counters["target_s"] = 0.2;
}

BENCHMARK(BM_AllReduceSweep1024Gpus)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dtplan
BENCHMARK_MAIN();
