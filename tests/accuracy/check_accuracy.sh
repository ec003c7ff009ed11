#!/usr/bin/env bash
# Runs `dtplan accuracy` on a ground-truth case file and fails when fewer cases are predicted than
# MIN_PREDICTED or the MAPE / median |error| grow past the bounds given (the figures measured when
# docs/accuracy.md was last updated, plus a small margin). Exit 77 (skipped) when the case file is
# not beside the checkout.
#
# usage: check_accuracy.sh DTPLAN CASES MAX_MAPE_PCT MAX_MEDIAN_PCT MIN_PREDICTED
set -u
bin=$1
cases=$2
[[ $# -eq 5 ]] || { echo "usage: $0 DTPLAN CASES MAX_MAPE_PCT MAX_MEDIAN_PCT MIN_PREDICTED"; exit 1; }
[[ -f "$cases" ]] || { echo "no ground truth at $cases: skipped"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" accuracy --cases "$cases" --json --out "$out" || { echo "dtplan accuracy failed"; exit 1; }
python3 - "$out" "$3" "$4" "$5" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
bounds = {"mape_pct": float(sys.argv[2]), "median_abs_pct": float(sys.argv[3])}
min_predicted = int(sys.argv[4])
print(f"coverage {s['cases_predicted']}/{s['cases_total']} (at least {min_predicted}), "
      f"MAPE {s['mape_pct']:.2f}% (at most {bounds['mape_pct']}), "
      f"median {s['median_abs_pct']:.2f}% (at most {bounds['median_abs_pct']}), "
      f"max {s['max_abs_pct']:.1f}%")
ok = s["cases_predicted"] >= min_predicted
if not ok:
    print(f"FAIL coverage {s['cases_predicted']} < {min_predicted}")
for k, v in bounds.items():
    if s[k] > v:
        print(f"FAIL {k} = {s[k]:.2f} > {v}")
        ok = False
sys.exit(0 if ok else 1)
PY
