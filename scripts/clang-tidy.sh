#!/usr/bin/env bash
# clang-tidy on every translation unit of the build (issue #21), with the checks of .clang-tidy
# (bug-prone patterns, performance, narrowing). Configures build/ with compile_commands.json if
# needed; exits non-zero on any finding.
#   bash scripts/clang-tidy.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-$(nproc)}
if [[ ! -f build/compile_commands.json ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > /dev/null
fi
command -v run-clang-tidy-14 > /dev/null || { echo "run-clang-tidy-14 not found (apt install clang-tidy-14)"; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
run-clang-tidy-14 -p build -j "$jobs" -quiet > "$log" 2>&1 || rc=$?
findings=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "^/.*: (warning|error): " | sort -u || true)
if [[ -n "$findings" || $rc != 0 ]]; then
  echo "$findings"
  echo "clang-tidy: $(printf '%s\n' "$findings" | grep -c . || true) finding(s), exit $rc"
  exit 1
fi
echo "clang-tidy: $(grep -c '"file"' build/compile_commands.json) translation units, no finding"
