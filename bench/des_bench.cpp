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

BENCHMARK_MAIN();
