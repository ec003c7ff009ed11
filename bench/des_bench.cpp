// The discrete-event engine alone (issue #5 target: >= 5 million events/s): many independent
// chains of self-rescheduling events, so the queue holds `range(0)` events at a time.
#include <benchmark/benchmark.h>

#include "simulator/des/engine.h"

namespace dtplan::des {
namespace {

struct Ticker final : Handler {
  Engine::HandlerId id = 0;
  void on_event(Engine& e, uint32_t kind, uint64_t payload) override {
    if (payload > 0) e.schedule_in(1e-6 * (1 + kind % 7), id, kind, payload - 1);
  }
};

void BM_EngineEvents(benchmark::State& state) {
  const int chains = static_cast<int>(state.range(0));
  const uint64_t per_chain = 2000;
  uint64_t events = 0;
  for (auto _ : state) {
    Engine e;
    Ticker t;
    t.id = e.add_handler(&t);
    e.reserve(static_cast<size_t>(chains) + 16);
    for (int c = 0; c < chains; ++c) e.schedule_at(0, t.id, static_cast<uint32_t>(c), per_chain);
    events += e.run();
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_EngineEvents)->Arg(16)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dtplan::des

// Issue #5 scale target: one step of Llama-3.1-405B on 16,384 H100 (TP8 PP16 DP128, 1F1B,
// seq 8192, global batch 2048, micro-batch 1, layers split 7 / 8 x 14 / 7).
#include "bench/bench_plans.h"
#include "core/catalog.h"
#include "simulator/des/step_sim.h"

namespace dtplan::des {
namespace {

// range(0) = 1: every one of the 16,384 GPUs is a simulated rank (--ranks all); 2: the same
// without the symmetry reduction (every replica on one engine: the baseline).
void BM_Llama405B_16K_Step(benchmark::State& state) {
  setenv("DTPLAN_DATA_DIR", DTPLAN_BENCH_DATA_DIR, 0);
  const bool all_ranks = state.range(0) != 0;
  SimOptions o;
  o.all_ranks = all_ranks;
  o.reduce_symmetry = state.range(0) != 2;
  const ModelSpec m = load_model("llama3.1-405b");
  const Cluster c = load_cluster("dgx-h100", 16384);
  const Plan p = llama405b_plan(16384);
  Workload w;
  w.seq_len = 8192;
  w.global_batch = p.gbs;
  long events = 0;
  for (auto _ : state) {
    StepSimResult r = simulate_step(m, c, w, p, o);
    events += r.events;
    benchmark::DoNotOptimize(r);
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Llama405B_16K_Step)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dtplan::des
BENCHMARK_MAIN();
