#!/usr/bin/env bash
# The search as a user runs it over several global batches: the text table gets a GBS column and
# says the ranking is per token, --json records each plan's batch and the batches searched, --csv
# takes each plan's own batch, --no-prune ranks the same plans; with one batch none of that
# shows. Expected values come from the flags given (the batches searched).
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
common=(--model llama3-8b --cluster dgx-h100 --gpus 16 --seq 4096 --top 6)
"$bin" search "${common[@]}" --gbs 32,64 > text.txt
"$bin" search "${common[@]}" --gbs 32,64 --json --csv plans.csv > plans.json 2> /dev/null
"$bin" search "${common[@]}" --gbs-tokens 131072,262144 --json --no-prune > tokens.json
"$bin" search "${common[@]}" --gbs 64 --json > one.json
"$bin" search "${common[@]}" --gbs 64 > one.txt
fail() { echo "FAIL: $*"; exit 1; }
grep -q 'batch 32-64 (2 values)' text.txt || fail "header does not name the batches"
grep -q 'per token' text.txt || fail "header does not say the ranking is per token"
grep -q ' GBS ' text.txt || fail "no GBS column"
grep -q ' GBS ' one.txt && fail "GBS column with one batch"
python3 - <<'PY' || exit 1
import csv, json, sys
def check(ok, what):
    if not ok:
        print("FAIL:", what); sys.exit(1)
j = json.load(open("plans.json"))
check(j["ranked_per_token"] is True, "ranked_per_token")
check(j["workload"]["gbs_searched"] == {"count": 2, "min": 32, "max": 64}, "gbs_searched")
check(j["flags"]["gbs"] == "32,64", "flags.gbs")
batches = [t["plan"]["gbs"] for t in j["top"]]
check(len(batches) == 6 and set(batches) <= {32, 64}, f"top batches {batches}")
obj = [t["objective_value"] for t in j["top"]]
check(obj == sorted(obj), "objective not ascending")
for t in j["top"]:  # per token: step time over the plan's own tokens
    want = t["step_time_s"] / (t["plan"]["gbs"] * 4096)
    check(abs(t["objective_value"] - want) <= 1e-12 * want, "objective is not time per token")
rows = list(csv.DictReader(open("plans.csv")))
check([int(r["GBS"]) for r in rows] == batches, "CSV GBS column")
tok = json.load(open("tokens.json"))  # 131072 and 262144 tokens = 32 and 64 sequences of 4096
check([(t["plan"]["gbs"], t["objective_value"]) for t in tok["top"]] ==
      [(t["plan"]["gbs"], t["objective_value"]) for t in j["top"]], "--gbs-tokens / --no-prune")
one = json.load(open("one.json"))
check(one["ranked_per_token"] is False and "gbs_searched" not in one["workload"], "one batch")
check(all(t["plan"]["gbs"] == 64 for t in one["top"]), "one batch: plans' gbs")
# The flags record the ranking as applied: distinct is the default (a new-user trial read
# "distinct": false in a distinct ranking).
check(one["flags"]["distinct"] is True and one["flags"]["no_distinct"] is False, "flags.distinct")
PY
# A model name with a comma, a quote and a leading '=' stays one CSV field, as text (issue #21:
# rows split and spreadsheets ran names as formulas).
sed 's/^name: .*/name: "=HYPERLINK(\\"http:\/\/x\\"),evil"/' "$DTPLAN_DATA_DIR/models/llama3-8b.yaml" > evil.yaml
"$bin" search -m evil.yaml -c dgx-h100 -g 8 --gbs 64 --top 2 --csv evil.csv > /dev/null 2>&1
python3 - <<'PY'
import csv
rows = list(csv.reader(open("evil.csv")))
assert len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows), rows
assert rows[1][0] == "'=HYPERLINK(\"http://x\"),evil", rows[1][0]
PY
# An output that would overwrite an input or another output is refused before anything is read
# or written, and the file is left as it was (a hostile-input trial lost data this way):
# search --csv X --out X, estimate --model M --out M, import-hf C --out C through a symlink,
# calibrate --out O --summary O.
cp "$DTPLAN_DATA_DIR/models/llama3-8b.yaml" m.yaml
cp "$DTPLAN_DATA_DIR/tests/fixtures/hf/qwen3-8b.json" c.json
ln -s c.json link.json
echo keep > same.txt
before=$(md5sum m.yaml c.json same.txt)
refused() {  # refused EXPECTED_MESSAGE COMMAND...
  local want=$1; shift
  local rc=0; "$bin" "$@" > /dev/null 2> clobber.err || rc=$?
  [[ $rc -eq 2 ]] && grep -qF -- "$want" clobber.err || fail "$* (rc $rc): $(cat clobber.err)"
}
refused "--out: 'same.txt' is also --csv's file" search "${common[@]}" --gbs 64 --csv same.txt --out same.txt
refused "--out: 'm.yaml' is the input of --model" estimate --model m.yaml -c dgx-h100 -g 8 --tp 8 --out m.yaml
refused "--out: 'link.json' is the input of config" import-hf c.json --out link.json
refused "--summary: 'same.txt' is also --out's file" calibrate --backend cpu --profile dgx-h100 --out same.txt --summary same.txt
[[ "$(md5sum m.yaml c.json same.txt)" == "$before" ]] || fail "a refused run changed its files"

# The MFU column says which peak it is of (the training precision's dense peak, the H100
# datasheet's 989 BF16 / 1979 FP8 TFLOP/s in dgx-h100.yaml); for FP8 the BF16 reading is given
# and equals twice the table's rank-1 MFU (the FP8 peak is twice the BF16 one on H100).
"$bin" search "${common[@]}" --gbs 64 --precision fp8 > fp8.txt
grep -q '^(MFU: of the 1979 TFLOP/s fp8 dense peak per GPU; against the BF16 peak (989 TFLOP/s) rank 1 reads ' fp8.txt \
  || fail "FP8 MFU peak not labelled: $(grep '^(MFU' fp8.txt)"
grep -q '^(MFU: of the 989 TFLOP/s bf16 dense peak per GPU)$' one.txt || fail "BF16 MFU peak not labelled"
python3 - <<'PY' || exit 1
import re
t = open("fp8.txt").read()
rank1 = float(re.search(r"^\s+1\s.*?\s(\d+\.\d)%", t, re.M).group(1))
bf16 = float(re.search(r"rank 1 reads (\d+\.\d)%", t).group(1))
assert abs(bf16 - 2 * rank1) <= 0.15, (rank1, bf16)
PY
echo "4 passed, 0 failed"
