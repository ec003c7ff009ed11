#!/usr/bin/env bash
# simulate's budget (issue #21): the simulator estimates a run's events and memory once it knows
# the ranks it will simulate, before the first event, and refuses beyond --max-events or
# --max-memory-gib unless --force: exit 2 naming the flag and the figures, no trace written,
# in well under a second. The estimate bounds what a run really does: the simulated events are
# between 70% and 100% of the estimate (3.5 events per task against 3.1-3.2 measured).
set -euo pipefail
dtplan=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plan=(-m gpt3-175b -c dgx-h100 -g 2048 --tp 8 --pp 16 --vpp 6 --gbs 8192)

echo "== the estimate bounds the run"
"$dtplan" simulate "${plan[@]}" --json > "$work/run.json"
python3 - "$work/run.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
est, got = j["estimated_events"], j["simulated_events"]
print(f"   {got} events simulated, {est:.0f} estimated ({got / est:.2f} of it)")
assert 0.7 * est <= got <= est, "the event estimate is off"
assert j["estimated_memory_gib"] > 0
PY

echo "== over --max-events: refused before it starts"
start=$(date +%s%N)
if "$dtplan" simulate "${plan[@]}" --max-events 10000 --trace "$work/t.json" 2> "$work/e.err"; then
  echo "FAIL: a run over the budget exited 0"; exit 1
else
  rc=$?
fi
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$work/e.err"
[[ $rc == 2 ]] || { echo "FAIL: exit $rc, expected 2"; exit 1; }
grep -q -- "--max-events: this simulation would run about .* events" "$work/e.err" || { echo "FAIL: the refusal does not name --max-events and the figures"; exit 1; }
grep -q -- "--force" "$work/e.err" || { echo "FAIL: the refusal does not name --force"; exit 1; }
[[ -e "$work/t.json" ]] && { echo "FAIL: a refused run wrote its trace"; exit 1; }
ls -A "$work" | grep -q '\.tmp\.' && { echo "FAIL: a temporary was left behind"; exit 1; }
echo "   refused in $ms ms"

echo "== over --max-memory-gib (the trace counts): refused; without the trace it runs"
if "$dtplan" simulate "${plan[@]}" --max-memory-gib 0.01 --trace "$work/t.json" 2> "$work/m.err"; then
  echo "FAIL: a run over the memory budget exited 0"; exit 1
fi
grep -q -- "--max-memory-gib: .* GiB with the trace" "$work/m.err" || { cat "$work/m.err"; echo "FAIL: the refusal does not name --max-memory-gib"; exit 1; }
"$dtplan" simulate "${plan[@]}" --max-memory-gib 0.01 > /dev/null  # 98k tasks x 64 B: 6 MB
"$dtplan" simulate "${plan[@]}" --max-memory-gib 0.001 > /dev/null 2>&1 && { echo "FAIL: 1 MiB should refuse it"; exit 1; }

echo "== --force runs beyond the budget"
"$dtplan" simulate "${plan[@]}" --max-events 10000 --force --trace "$work/t.json.gz" > /dev/null 2> "$work/f.err"
python3 -c "import gzip, json, sys; n = len(json.load(gzip.open(sys.argv[1]))['traceEvents']); print(f'   forced: trace of {n} events'); assert n > 1000" "$work/t.json.gz"
echo "simulate_budget: all checks passed"
