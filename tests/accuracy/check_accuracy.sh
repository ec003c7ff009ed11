#!/usr/bin/env bash
# Runs `dtplan accuracy` on a ground-truth case file and fails when fewer cases are predicted than
# MIN_PREDICTED or the MAPE / median |error| grow past the bounds given (the figures measured when
# docs/accuracy.md was last updated, plus a small margin). Exit 77 (skipped) when the case file is
# not beside the checkout.
#
# With FAMILY_BOUNDS (a JSON file {family: {"mape_pct": max, "abs_bias_pct": max}}), each
# family of the cases (the families of scripts/fit_efficiency.py, shared/tools/accuracy-families)
# must stay within its bounds too. With MIN_MEMORY_WITHIN_10, at least that many of the cases
# whose source prints peak memory must be predicted within 10% of it.
#
# usage: check_accuracy.sh DTPLAN CASES MAX_MAPE_PCT MAX_MEDIAN_PCT MIN_PREDICTED [FAMILY_BOUNDS
#        [MIN_MEMORY_WITHIN_10]]
set -u
bin=$1
cases=$2
[[ $# -ge 5 && $# -le 7 ]] ||
  { echo "usage: $0 DTPLAN CASES MAX_MAPE_PCT MAX_MEDIAN_PCT MIN_PREDICTED [FAMILY_BOUNDS [MIN_MEMORY_WITHIN_10]]"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
[[ -f "$cases" ]] || { echo "no ground truth at $cases: skipped"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" accuracy --cases "$cases" --json --out "$out" || { echo "dtplan accuracy failed"; exit 1; }
python3 - "$out" "$3" "$4" "$5" "${6:-}" "$here/../../scripts" "${7:-}" <<'PY'
import json, statistics, sys
sys.path.insert(0, sys.argv[6])
from fit_efficiency import family
j = json.load(open(sys.argv[1]))
s = j["summary"]
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
if sys.argv[5]:
    fam = {}
    for c in j["cases"]:
        if c["skipped"] is None:
            fam.setdefault(family(c["group"]), []).append(c["error_pct"])
    for f, b in sorted(json.load(open(sys.argv[5])).items()):
        e = fam.get(f, [])
        if not e:
            print(f"FAIL family {f}: no case predicted")
            ok = False
            continue
        mape, bias = statistics.mean(map(abs, e)), statistics.mean(e)
        good = mape <= b["mape_pct"] and abs(bias) <= b["abs_bias_pct"]
        print(f"{'ok  ' if good else 'FAIL'} {f}: MAPE {mape:.2f}% (at most {b['mape_pct']}), "
              f"mean signed {bias:+.2f}% (within {b['abs_bias_pct']}), {len(e)} cases")
        ok &= good
if sys.argv[7]:
    need = int(sys.argv[7])
    got = s["memory_cases_within_10pct"]
    good = got >= need
    print(f"{'ok  ' if good else 'FAIL'} memory: {got} of {s['memory_cases']} printed peaks "
          f"within 10% (at least {need})")
    ok &= good
sys.exit(0 if ok else 1)
PY
