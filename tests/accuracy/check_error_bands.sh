#!/usr/bin/env bash
# The shipped error-band record (accuracy/error_bands.json) is what `dtplan accuracy` generates from
# cases.yaml now: a change to the model that moves any prediction makes it stale, and this test
# fails until it is regenerated (the command is printed). Also bounds the bands' measured
# coverage: leave-one-group-out, between 75% and 90% of the cases inside their p10-p90 band
# (issue #16's target), with a median half-width of at most 15%. Exit 77
# (skipped) without the cases.
#
# usage: check_error_bands.sh DTPLAN CASES SHIPPED_JSON
set -u
bin=$1
cases=$2
shipped=$3
[[ -f "$cases" ]] || { echo "no ground truth at $cases: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" accuracy --cases "$cases" --json --out "$tmp/acc.json" --write-bands "$tmp/bands.json" ||
  { echo "dtplan accuracy failed"; exit 1; }
fail=0
if ! cmp -s "$tmp/bands.json" "$shipped"; then
  echo "FAIL $shipped is stale: regenerate it with"
  echo "  dtplan accuracy --cases ../shared/groundtruth/cases.yaml --write-bands accuracy/error_bands.json"
  diff <(head -c 2000 "$shipped") <(head -c 2000 "$tmp/bands.json") | head -10
  fail=1
fi
python3 - "$tmp/acc.json" <<'PY' || fail=1
import json, sys
b = json.load(open(sys.argv[1]))["error_bands"]
g, f = b["leave_one_group_out"], b["leave_one_family_out"]
print(f"leave-one-group-out: {100*g['inside_p10_p90']:.1f}% of {g['cases']} inside, median "
      f"half-width {100*g['median_half_width']:.1f}%; leave-one-family-out "
      f"{100*f['inside_p10_p90']:.1f}%, {100*f['median_half_width']:.1f}%")
# Issue #16's target is 75-90%; measured 75.4% of 1773 on 2026-12-03 (docs/accuracy.md,
# "Error bands"), after 74.99% earlier that day; the floor is the target.
ok = 0.75 <= g["inside_p10_p90"] <= 0.90 and g["median_half_width"] <= 0.15
if not ok:
    print("FAIL coverage outside 75-90% or half-width above 15%")
sys.exit(0 if ok else 1)
PY
exit $fail
