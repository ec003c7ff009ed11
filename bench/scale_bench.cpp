// Issue #22's figures, each measured in this run and printed with its target and, where a
// baseline can run in the same process, the ratio baseline / now:
//
//   ./build/bench/scale_bench               # ~30 s on a 2-core machine
//   ./build/bench/scale_bench --baselines   # also the full simulation of 131,072 GPUs (~10 s)
//
// Wall-clock seconds on an otherwise idle machine (this VM's noise is about +-30%); memory is
// the process's peak resident set (getrusage), read after each figure that can raise it.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "bench/bench_plans.h"
#include "core/catalog.h"
#include "core/gzip.h"
#include "planner/search.h"
#include "simulator/des/step_sim.h"

namespace dtplan {
namespace {

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024 / (1024.0 * 1024 * 1024);
}

void row(const char* what, const std::string& now, const char* target, const std::string& base,
         const std::string& ratio) {
  fmt::print("{:<58} {:>14} {:>12} {:>14} {:>8}\n", what, now, target, base, ratio);
}

}  // namespace
}  // namespace dtplan

int main(int argc, char** argv) {
  using namespace dtplan;
  setenv("DTPLAN_DATA_DIR", DTPLAN_BENCH_DATA_DIR, 0);
  const bool baselines = argc > 1 && std::strcmp(argv[1], "--baselines") == 0;
  fmt::print("{:<58} {:>14} {:>12} {:>14} {:>8}\n", "figure", "now", "target", "baseline", "ratio");

  // 1. Every rank of Llama 3.1 405B: reduced against the full simulation.
  const ModelSpec llama = load_model("llama3.1-405b");
  Workload w405;
  w405.seq_len = 8192;
  w405.global_batch = 2048;
  for (const int gpus : {16384, 131072}) {
    const Cluster c = load_cluster("dgx-h100", gpus);
    const Plan p = llama405b_plan(gpus);
    w405.global_batch = p.gbs;
    des::SimOptions o;
    o.all_ranks = true;
    des::StepSimResult red;
    const double t = seconds([&] { red = des::simulate_step(llama, c, w405, p, o); });
    const double rss = peak_rss_gib();
    std::string base = "-", ratio = "-";
    if (gpus <= 16384 || baselines) {
      o.reduce_symmetry = false;
      des::StepSimResult full;
      const double tf = seconds([&] { full = des::simulate_step(llama, c, w405, p, o); });
      const double diff = std::abs(full.estimate.step_time_s - red.estimate.step_time_s) /
                          full.estimate.step_time_s;
      base = fmt::format("{:.3f} s", tf);
      ratio = fmt::format("{:.0f}x", tf / t);
      fmt::print("  ({} GPUs: step {:.6f} s reduced, {:.6f} s full, |diff| {:.1e})\n", gpus,
                 red.estimate.step_time_s, full.estimate.step_time_s, diff);
    }
    row(gpus == 16384 ? "405B, 16,384 H100, --ranks all (TP8 PP16 DP128)"
                      : "405B, 131,072 H100, --ranks all (DP1024)",
        fmt::format("{:.3f} s", t), gpus == 16384 ? "<= 0.5 s" : "<= 10 s", base, ratio);
    if (gpus == 131072)
      row("  peak memory of the process so far", fmt::format("{:.2f} GiB", rss), "<= 4 GiB", "-",
          "-");
  }

  // 2. search --refine 200 on GPT-3 175B / 1,024 A100: the search, then 200 simulations on the
  // search's threads with cached step costs; baseline: the same 200 one by one, uncached.
  {
    const ModelSpec m = load_model("gpt3-175b");
    const Cluster c = load_cluster("dgx-a100-80g", 1024);
    Workload w;
    w.seq_len = 2048;
    w.global_batch = 1536;
    SearchOptions opt;
    opt.top_k = 200;
    SearchResult r;
    const double t = seconds([&] {
      r = search(m, c, w, SearchSpace{}, opt, AnalyticEvaluator{});
      refine_top(r, m, c, w, opt, DesEvaluator{}, 200);
    });
    const double tb = seconds([&] {
      for (const Candidate& k : r.top) {
        Workload wk = w;
        wk.global_batch = k.plan.gbs;
        (void)des::simulate_step(m, c, wk, k.plan);
      }
    });
    row("search --refine 200, GPT-3 175B / 1,024 A100", fmt::format("{:.3f} s", t), "<= 2 s",
        fmt::format("{:.3f} s", tb), fmt::format("{:.1f}x", tb / t));
    fmt::print("  (baseline: the 200 simulations alone, one thread, no cache)\n");
  }

  // 3. 1T / 3,072 A100, --gbs 1536-6144 on one thread, against one batch.
  {
    const ModelSpec m = load_model("megatron-1t");
    const Cluster c = load_cluster("dgx-a100-80g", 3072);
    Workload w;
    w.seq_len = 2048;
    w.global_batch = 1536;
    SearchSpace range;
    for (int64_t g = 1536; g <= 6144; ++g) range.gbs.push_back(g);
    SearchOptions opt;
    opt.threads = 1;
    opt.top_k = 80;  // the CLI's distinct ranking asks for 8 x --top
    const double t = seconds([&] { (void)search(m, c, w, range, opt, AnalyticEvaluator{}); });
    w.global_batch = 6144;
    const double t1 =
        seconds([&] { (void)search(m, c, w, SearchSpace{}, opt, AnalyticEvaluator{}); });
    row("1T / 3,072 A100, --gbs 1536-6144 (4,609 batches), 1 thread", fmt::format("{:.3f} s", t),
        "<= 0.5 s", fmt::format("{:.3f} s", t1), fmt::format("{:.1f}x", t / t1));
    fmt::print(
        "  (baseline: one batch, 6144; the ratio is range / one batch. Before this work the\n"
        "   range took 2.3 s: measured 2026-12-02 on this machine, same command)\n");
  }

  // 4. A trace of 256 GPUs, --ranks all, every GPU shown: merged and gzip'd, against one process
  // per GPU (the full simulation's trace written as before).
  {
    const ModelSpec m = load_model("gpt3-175b");
    const Cluster c = load_cluster("dgx-a100-80g", 256);
    Workload w;
    w.seq_len = 2048;
    w.global_batch = 1536;
    Plan p;
    p.tp = 8;
    p.pp = 8;
    p.vpp = 3;
    p.dp = 4;
    p.sp = true;
    p.zero = 1;
    p.recompute = Recompute::kSelective;
    p.gbs = 1536;
    p.schedule = "interleaved";
    des::SimOptions o;
    o.all_ranks = true;
    o.record_trace = true;
    const des::StepSimResult r = des::simulate_step(m, c, w, p, o);
    std::vector<int> all;
    all.reserve(static_cast<size_t>(r.ranks));
    for (int k = 0; k < r.ranks; ++k) all.push_back(k);
    const std::string json = des::trace_json(r.trace, des::trace_processes(r, p.pp, all));
    const std::string gz = gzip(json);
    o.reduce_symmetry = false;
    const des::StepSimResult full = des::simulate_step(m, c, w, p, o);
    const size_t before = des::trace_json(full.trace, full.ranks, full.gpus, p.pp).size();
    row("trace, 256 GPUs --ranks all --trace-ranks all (.json.gz)",
        fmt::format("{:.1f} MB", static_cast<double>(gz.size()) / 1e6), "<= 20 MB",
        fmt::format("{:.1f} MB", static_cast<double>(before) / 1e6),
        fmt::format("{:.0f}x", static_cast<double>(before) / static_cast<double>(gz.size())));
    fmt::print("  ({:.1f} MB of JSON before gzip; baseline: one process per GPU, plain JSON)\n",
               static_cast<double>(json.size()) / 1e6);
  }

  // 5. Closed-form speed: every plan of the GPT-3 175B / 1,024 A100 space estimated in full
  // (no pruning), one thread.
  {
    const ModelSpec m = load_model("gpt3-175b");
    const Cluster c = load_cluster("dgx-a100-80g", 1024);
    Workload w;
    w.seq_len = 2048;
    w.global_batch = 1536;
    SearchOptions opt;
    opt.threads = 1;
    opt.prune = false;
    SearchResult r;
    double t = 1e300;  // the best of three: this VM's noise only ever slows a run
    for (int i = 0; i < 3; ++i)
      t = std::min(t,
                   seconds([&] { r = search(m, c, w, SearchSpace{}, opt, AnalyticEvaluator{}); }));
    row("closed form, estimates/s on one core (GPT-3 / 1,024 A100)",
        fmt::format("{:.2f} M", static_cast<double>(r.evaluated) / t / 1e6), ">= 1 M", "-", "-");
    fmt::print(
        "  (best of three; callgrind counts are the stable measure: docs/ARCHITECTURE.md)\n");
  }
  fmt::print("peak memory of the process: {:.2f} GiB\n", peak_rss_gib());
  return 0;
}
