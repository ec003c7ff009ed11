#!/usr/bin/env bash
# search's simulation budget (issue #21): `search --evaluator des` simulates every plan that
# fits and `--refine K` the best K; both are priced before the first simulation (the same
# event estimate simulate's budget uses, summed over the plans) and refused beyond --max-events
# unless --force: exit 2 naming the flag, the plan count and the figures, nothing written.
# Independent check of the per-plan figure: simulate reports its own estimate for the same
# plan (its hook, computed from the simulator's input), and --refine 1 over that plan must be
# refused one event below it and run at it.
set -euo pipefail
dtplan=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
spec=(-m gpt3-175b -c dgx-a100-80g -g 256 --gbs 1536 --seq 2048)

echo "== --evaluator des over the budget: refused before the first simulation"
start=$(date +%s%N)
rc=0
"$dtplan" search "${spec[@]}" --evaluator des --max-events 1000 --out "$work/s.txt" \
  --csv "$work/s.csv" 2> "$work/e.err" > /dev/null || rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$work/e.err"
[[ $rc == 2 ]] || { echo "FAIL: exit $rc, expected 2"; exit 1; }
grep -q -- "--max-events: search --evaluator des would simulate [0-9]* plan(s), about .* events" "$work/e.err" \
  || { echo "FAIL: the refusal does not name --max-events, the plans and the events"; exit 1; }
grep -q -- "--force" "$work/e.err" || { echo "FAIL: the refusal does not name --force"; exit 1; }
grep -q -- "--refine K" "$work/e.err" || { echo "FAIL: the refusal does not offer --refine"; exit 1; }
[[ -z "$(ls -A "$work" | grep -v e.err)" ]] || { ls -A "$work"; echo "FAIL: a refused search wrote files"; exit 1; }
echo "   refused in $ms ms"

echo "== the per-plan estimate is simulate's"
"$dtplan" search "${spec[@]}" --pp 8 --top 1 --json > "$work/top.json" 2> /dev/null
read -r -a plan < <(python3 - "$work/top.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["top"][0]["plan"]
flags = ["--tp", p["tp"], "--pp", p["pp"], "--vpp", p["vpp"], "--dp", p["dp"], "--mbs", p["mbs"],
         "--zero", p["zero"], "--recompute", p["recompute"], "--schedule", p["schedule"]]
if p["sp"]: flags.append("--sp")
print(" ".join(str(f) for f in flags))
PY
)
echo "   top plan: ${plan[*]}"
events=$("$dtplan" simulate "${spec[@]}" "${plan[@]}" --json 2> /dev/null \
  | python3 -c "import json, sys; print(int(json.load(sys.stdin)['estimated_events']))")
echo "   simulate estimates $events events"
[[ $events -gt 1000 ]] || { echo "FAIL: implausible estimate"; exit 1; }
rc=0
"$dtplan" search "${spec[@]}" --pp 8 --top 1 --refine 1 --max-events $((events - 1)) > /dev/null 2> "$work/r.err" || rc=$?
[[ $rc == 2 ]] || { cat "$work/r.err"; echo "FAIL: --refine 1 one event below simulate's estimate: exit $rc"; exit 1; }
grep -q -- "--max-events: --refine would simulate 1 plan(s)" "$work/r.err" || { cat "$work/r.err"; echo "FAIL: refusal text"; exit 1; }
"$dtplan" search "${spec[@]}" --pp 8 --top 1 --refine 1 --max-events "$events" > "$work/ok.txt" 2> /dev/null \
  || { echo "FAIL: --refine 1 at simulate's estimate was refused"; exit 1; }
grep -q "re-ranked by the discrete-event simulator" "$work/ok.txt" || { echo "FAIL: no refined plan"; exit 1; }

echo "== --force runs beyond the budget; a small space runs within the default"
"$dtplan" search "${spec[@]}" --pp 8 --tp 8 --mbs 1 --top 1 --refine 1 --max-events 1 --force > /dev/null 2>&1 \
  || { echo "FAIL: --force was refused"; exit 1; }
"$dtplan" search "${spec[@]}" --pp 8 --tp 8 --mbs 1 --vpp 1 --top 1 --evaluator des --json > "$work/des.json" 2> /dev/null
python3 -c "import json, sys; j = json.load(open(sys.argv[1])); assert j['evaluator'] == 'des' and j['top'], j['evaluator']" "$work/des.json"
echo "search_budget: all checks passed"
