// Report generation time and size (issue: a report for GPT-3 175B on 256 A100 in <= 2 s and
// under 2 MB): the search, the report's own searches (TP x PP heatmap, one per alternative), the
// discrete-event timeline, derivations, and rendering to HTML and to Markdown.
//
//   ./build/bench/report_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include "core/catalog.h"
#include "reports/renderers.h"
#include "reports/report_builder.h"

namespace dtplan {
namespace {

void BM_Report(benchmark::State& state, bool html) {
  setenv("DTPLAN_DATA_DIR", DTPLAN_BENCH_DATA_DIR, 0);
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 256);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 1536;
  SearchOptions opt;
  opt.threads = static_cast<int>(state.range(0));
  size_t bytes = 0;
  for (auto _ : state) {
    const SearchResult r = search(m, c, w, {}, opt, AnalyticEvaluator{});
    const reports::ReportData d = reports::build_report(m, c, w, {}, opt, r, "{}");
    const std::string text =
        html ? reports::render_report_html(d) : reports::render_report_markdown(d);
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

BENCHMARK_CAPTURE(BM_Report, gpt3_175b_256_a100_html, true)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Report, gpt3_175b_256_a100_markdown, false)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dtplan

BENCHMARK_MAIN();
