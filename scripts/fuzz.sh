#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan + UBSan) and runs each for SECONDS
# (default 60), one target per core at a time, seeded with the repository's own inputs (zoo
# models, profiles, clusters, HF fixtures, what-if files, recorded measurements, fuzz/seeds/, the
# bad-input corpus). A crash, a sanitizer report, an exception other than InputError, or an input
# that takes over 10 s fails the run; findings land in $build/findings (build-fuzz by default).
#   bash scripts/fuzz.sh [SECONDS]        (DTPLAN_FUZZ_JOBS=N: N targets at a time; default nproc)
# DTPLAN_FUZZ_BUILD=DIR uses a build folder already configured with -DDTPLAN_FUZZ=ON (CI's
# sanitizer build, which also builds the tests) instead of configuring build-fuzz.
set -euo pipefail
seconds=${1:-60}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
build=${DTPLAN_FUZZ_BUILD:-build-fuzz}
if [ -n "${DTPLAN_FUZZ_BUILD:-}" ]; then
  grep -q '^DTPLAN_FUZZ:BOOL=ON$' "$build/CMakeCache.txt" 2> /dev/null ||
    { echo "FAIL: $build is not a build configured with -DDTPLAN_FUZZ=ON"; exit 1; }
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DDTPLAN_FUZZ=ON -DDTPLAN_BUILD_TESTS=OFF -DDTPLAN_BUILD_BENCH=OFF -DDTPLAN_CUDA=OFF \
    -DDTPLAN_MPI=OFF > /dev/null || { echo "FAIL: configuring the fuzz build"; exit 1; }
fi
cmake --build "$build" --target fuzzers
export DTPLAN_DATA_DIR="$repo"
mkdir -p "$build/findings"
seed() {  # seed TARGET FILES...: a fresh corpus folder from the repository's files
  local dir="$build/corpus/$1"
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$@" "$dir"/ 2> /dev/null || true
}
seed fuzz_model_yaml models/*.yaml tests/e2e/bad_inputs/m_*.yaml
seed fuzz_hf_config tests/fixtures/hf/*.json tests/e2e/bad_inputs/hf_*.json
seed fuzz_profile_yaml hardware_profiles/*.yaml tests/e2e/bad_inputs/p_*.yaml
seed fuzz_cluster_yaml examples/clusters/*.yaml tests/e2e/bad_inputs/c_*.yaml
seed fuzz_case_yaml fuzz/seeds/cases_v*.yaml tests/e2e/bad_inputs/a_*.yaml
seed fuzz_whatif_yaml examples/whatif/*.yaml tests/e2e/bad_inputs/w_*.yaml
seed fuzz_search_json fuzz/seeds/search_*.json
seed fuzz_recorded tests/e2e/data/*.journal tests/fixtures/calibrate/* tests/e2e/bad_inputs/cal/*
seed fuzz_journal tests/e2e/data/*.journal
seed fuzz_rl_yaml examples/rl/*.yaml tests/e2e/bad_inputs/rl/*.yaml
targets="fuzz_model_yaml fuzz_hf_config fuzz_profile_yaml fuzz_cluster_yaml fuzz_case_yaml
  fuzz_whatif_yaml fuzz_search_json fuzz_recorded fuzz_journal fuzz_rl_yaml"
# The targets run side by side, one per core (DTPLAN_FUZZ_JOBS to change), each for SECONDS.
jobs_max=${DTPLAN_FUZZ_JOBS:-$(nproc)}
run_one() {  # run_one TARGET: its log in $build/TARGET.log, its exit status in $build/TARGET.rc
  local t=$1 rc=0
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -max_len=65536 -artifact_prefix="$build/findings/$t-" -print_final_stats=1 \
    "$build/corpus/$t" > "$build/$t.log" 2>&1 || rc=$?
  echo "$rc" > "$build/$t.rc"
}
for t in $targets; do
  rm -f "$build/$t.rc"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  run_one "$t" &
done
wait
total=0
failed=0
for t in $targets; do
  if [ "$(cat "$build/$t.rc" 2> /dev/null || echo missing)" != 0 ]; then
    tail -40 "$build/$t.log"
    echo "FAIL: $t found a crash, hang or sanitizer report (see $build/findings)"
    failed=1
    continue
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$t.log" | tail -1)
  echo "$t: ${runs:-?} executions in ${seconds} s, no finding"
  total=$((total + ${runs:-0}))
done
[ "$failed" = 0 ] || exit 1
echo "fuzz: $total executions in all, no finding"
