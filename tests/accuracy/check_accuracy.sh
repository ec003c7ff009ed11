#!/usr/bin/env bash
# Runs `dtplan accuracy` on the ground-truth dev set and fails when coverage drops below 100% or
# the errors grow past the bounds below (the figures measured when docs/accuracy.md was last
# updated, plus a small margin). Exit 77 (skipped) when the dev set is not beside the checkout.
set -u
bin=$1
cases=$2
[[ -f "$cases" ]] || { echo "no ground truth at $cases: skipped"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" accuracy --cases "$cases" --json --out "$out" || { echo "dtplan accuracy failed"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
bounds = {"mape_pct": 6.7, "median_abs_pct": 4.2}
ok = s["cases_predicted"] == s["cases_total"]
print(f"coverage {s['cases_predicted']}/{s['cases_total']}, MAPE {s['mape_pct']:.2f}%, "
      f"median {s['median_abs_pct']:.2f}%, max {s['max_abs_pct']:.1f}%")
for k, v in bounds.items():
    if s[k] > v:
        print(f"FAIL {k} = {s[k]:.2f} > {v}")
        ok = False
sys.exit(0 if ok else 1)
PY
