#!/usr/bin/env bash
# Time to train on search, report and whatif, and the deadline inversion through the CLI
# (issue #16 item 4): `search --train-tokens` gives every ranked plan its time_to_train_days
# (= tokens / tokens_per_s / 86400, recomputed here); `--deadline-days` adds the answer, on
# whole nodes, at least the 100%-MFU bound; without --gpus the ranking is on the answer's count.
# usage: time_to_train.sh DTPLAN_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { if [[ $2 -ne 0 ]]; then echo "FAIL $1"; fail=1; else echo "ok   $1"; fi; }

"$bin" search -m gpt3-175b -c dgx-a100-80g -g 256 --gbs 1536 --train-tokens 3e11 --top 5 --json \
  >"$tmp/s.json" 2>/dev/null
ok "search --train-tokens: exit 0" $?
python3 - "$tmp/s.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["flags"]["train_tokens"] == 3e11
for p in j["top"]:
    want = 3e11 / p["tokens_per_s"] / 86400
    assert abs(p["time_to_train_days"] / want - 1) < 1e-9, (p["time_to_train_days"], want)
PY
ok "search --json: time_to_train_days on every plan" $?

"$bin" search -m gpt3-175b -c dgx-a100-80g --gbs 1536 --train-tokens 1e12 --deadline-days 30 \
  --top 1 --json >"$tmp/d.json" 2>/dev/null
ok "search --deadline-days without --gpus: exit 0" $?
python3 - "$tmp/d.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
d = j["deadline"]
assert d["found"] and d["gpus"] % 8 == 0 and d["gpus"] >= d["peak_bound_gpus"], d
assert d["time_to_train_days"] <= 30, d
assert abs(d["gpu_hours"] - d["gpus"] * d["time_to_train_days"] * 24) < 1e-6 * d["gpu_hours"]
# 100%-MFU bound: 1e12 tokens x dtplan's FLOPs per token / (312e12 x 30 x 86400), whole nodes.
fpt = j["top"][0]["model_flops_per_step"] / (1536 * 2048)
bound = 1e12 * fpt / (312e12 * 30 * 86400)
assert d["peak_bound_gpus"] == 8 * -(-bound // 8), (d["peak_bound_gpus"], bound)
assert j["cluster"]["gpus"] == d["gpus"], (j["cluster"], d)
# The answer's band in days is its plan's (the ranking's first row at the answer's count), and
# where its p90 misses the deadline, the deadline to ask for: 30 x days / p90.
lo, hi = d["time_to_train_days_interval"]
assert lo < d["time_to_train_days"] < hi, d
t = j["top"][0]
assert abs(t["step_time_s"] / d["step_time_s"] - 1) < 1e-12, (t, d)
tp = t["plan"]
assert d["plan"].startswith(f"TP{tp['tp']} PP{tp['pp']} DP{tp['dp']} "), (tp, d["plan"])
assert all(abs(a / b - 1) < 1e-9 for a, b in zip(t["time_to_train_days_interval"], (lo, hi)))
assert d["meets_deadline_at_p90"] == (hi <= 30), d
if hi > 30:
    assert abs(d["deadline_days_for_p90"] / (30 * d["time_to_train_days"] / hi) - 1) < 1e-9, d
else:
    assert "deadline_days_for_p90" not in d, d
print(f"    answer: {d['gpus']} GPUs, {d['time_to_train_days']:.1f} days, {d['plan']}")
PY
ok "deadline: whole nodes, above the bound, in time; the ranking on its count" $?

# The answer's band in days (the plan's p10-p90 step ratio); where its p90 misses the deadline
# the text says so and names the deadline that meets it there: deadline x days / p90 days
# (Llama 3 8B, 15T tokens in 30 days: 896 GPUs, 26.9 days, p90 30.8 days, 2026-12-07).
"$bin" search -m llama3-8b -c dgx-h100 --seq 8192 --gbs 512 --train-tokens 15e12 --deadline-days 30 \
  --top 1 >"$tmp/d8.txt" 2>/dev/null
python3 - "$tmp/d8.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
days = float(re.search(r"needs \d+ GPUs \(\d+ nodes of \d+\): ([0-9.]+) days", t).group(1))
m = re.search(r"p10-p90 ([0-9.]+)–([0-9.]+) days(: at its p90 it misses the deadline; to meet it "
              r"there, search with --deadline-days ([0-9.]+))?", t)
assert m, t
lo, hi = float(m.group(1)), float(m.group(2))
assert lo < days < hi, (lo, days, hi)
assert (hi > 30) == (m.group(3) is not None), t
if m.group(3):
    # days and p90 are printed to 0.1 and the suggestion is computed from the unrounded ones:
    # it must lie within what the printed pair allows, each +-0.05, itself rounded to 0.1.
    lo_s = 30 * (days - 0.05) / (hi + 0.05) - 0.05
    hi_s = 30 * (days + 0.05) / (hi - 0.05) + 0.05
    assert lo_s <= float(m.group(4)) <= hi_s, (m.group(4), lo_s, hi_s)
PY
ok "deadline text: the answer's p10-p90 in days, and what to ask where p90 misses it" $?

"$bin" report -m gpt3-175b -c dgx-a100-80g -g 256 --gbs 1536 --train-tokens 3e11 --out "$tmp/r.md" \
  2>/dev/null
grep -q "| time to train 0.3T tokens | " "$tmp/r.md"
ok "report --train-tokens: the time to train figure" $?

"$bin" whatif "$src/examples/whatif/gpu-generations.yaml" --train-tokens 3e11 >"$tmp/w.md"
grep -q "| time to train (days) |" "$tmp/w.md"
ok "whatif --train-tokens: the time to train row" $?

"$bin" estimate -m llama3-70b -c h100-96g-500w -g 64 --tp 8 --pp 2 --sp --zero 1 --gbs 512 --seq 8192 \
  --train-tokens 1e12 --json >"$tmp/e.json"
ok "estimate --json: exit 0" $?
python3 - "$tmp/e.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("step_time_s", "mfu", "tokens_per_s", "tokens_per_s_per_gpu", "time_to_train_days"):
    lo, hi = j[k + "_interval"]
    assert lo < hi, (k, lo, hi)
b = j["error_band"]
lo, hi = j["step_time_s_interval"]
assert abs(lo / j["step_time_s"] - b["p10_ratio"]) < 1e-9 and abs(hi / j["step_time_s"] - b["p90_ratio"]) < 1e-9
lo, hi = j["mfu_interval"]
assert abs(lo * b["p90_ratio"] - j["mfu"]) < 1e-9 and abs(hi * b["p10_ratio"] - j["mfu"]) < 1e-9
codes = [w["code"] for w in j["warnings"]]
assert "profile-not-fitted" in codes, codes  # h100-96g-500w's efficiency is initial values
PY
ok "estimate --json: *_interval from the error band, warnings[] with codes" $?
"$bin" estimate -m llama3-70b -c h100-96g-500w -g 64 --tp 8 --pp 2 --sp --zero 1 --gbs 512 --seq 8192 \
  >"$tmp/e.txt"
grep -q "^step time .* s  (p10-p90 .*–.* s)$" "$tmp/e.txt" && grep -q "^warning \[profile-not-fitted\]" "$tmp/e.txt"
ok "estimate text: the step time with its p10-p90, the warning once" $?

# --mtbf-per-gpu-hours replaces the cluster's failure rate: job MTBF = hours x 3600 / GPUs
# (5,070 h on 64 GPUs: 285,187.5 s), and Young's interval sqrt(2 delta M) follows it.
"$bin" estimate -m llama3-70b -c dgx-h100 -g 64 --tp 8 --pp 2 --sp --zero 1 --gbs 512 --seq 8192 \
  --mtbf-per-gpu-hours 5070 --json >"$tmp/m.json"
python3 - "$tmp/m.json" <<'PY'
import json, math, sys
j = json.load(open(sys.argv[1]))
f, k = j["failures"], j["checkpoint"]
assert abs(f["job_mtbf_s"] - 5070 * 3600 / 64) < 1e-6, f["job_mtbf_s"]
assert abs(k["young_interval_s"] - math.sqrt(2 * k["blocking_s"] * f["job_mtbf_s"])) < 1e-6 * k["young_interval_s"]
assert f["sources"]["reliability"] == "--mtbf-per-gpu-hours", f["sources"]
PY
ok "estimate --mtbf-per-gpu-hours: job MTBF and Young's interval follow it" $?

exit $fail
