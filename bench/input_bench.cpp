// Reading inputs: a single-line JSON file with n keys must load in time linear in n (issue #21:
// a copy of the line per quoted key made 40,000 keys take 11.7 s). Google Benchmark fits the
// growth: `input_bench` prints BM_LoadSingleLineJson_BigO, which should read "N" (with RMS
// well under 10%); measured 2026-12-02 on the 2-core dev host: 4k keys 11 ms, 400k keys 1.65 s,
// RMS 4% (before the fix: 10k keys 0.5 s, 40k keys 11.7 s).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/yaml_reader.h"

namespace {

std::string write_keys(int64_t n) {
  // mkstemps(3) replaces the six X's with a unique suffix and keeps ".json" (5 characters).
  std::string path =
      (std::filesystem::temp_directory_path() / "dtplan-input-bench-XXXXXX.json").string();
  const int fd = mkstemps(path.data(), 5);
  if (fd < 0) return {};
  close(fd);
  std::ofstream out(path);
  out << "{\"name\": \"x\"";
  for (int64_t i = 0; i < n; ++i) out << fmt::format(", \"k{}\": {}", i, i);
  out << "}";
  return path;
}

void BM_LoadSingleLineJson(benchmark::State& state) {
  const std::string path = write_keys(state.range(0));
  if (path.empty()) {
    state.SkipWithError("cannot create a temporary file");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(dtplan::load_yaml_file(path));
  std::remove(path.c_str());
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_LoadSingleLineJson)
    ->RangeMultiplier(10)
    ->Range(4000, 400000)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

}  // namespace

BENCHMARK_MAIN();
