#!/usr/bin/env bash
# End to end as a user runs it: search, then launch the best plan from the search's JSON, in
# every format; the files named on stdout must exist and the scripts must parse.
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# Each format launches the best plan of a search under its own framework's rules (--framework):
# Megatron's best here offloads activations to the host, which DeepSpeed cannot express.
for format in megatron deepspeed; do
  "$bin" search --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --gbs 256 --seq 4096 --zero 1 \
    --pp 1 --tp 2 --ep 8 --top 3 --framework "$format" --json > "plans_$format.json"
  "$bin" launch --from "plans_$format.json" --rank 1 --format "$format" --out "run_$format" \
    > "files_$format.txt" 2> "notes_$format.txt"
  # stdout: the paths; stderr: the release written for and what each file still needs.
  grep -q "launch files for" "notes_$format.txt" || { echo "FAIL: $format: no version line"; exit 1; }
  [[ -s "files_$format.txt" ]] || { echo "FAIL: $format printed no file names"; exit 1; }
  while read -r f; do
    [[ -f "$f" ]] || { echo "FAIL: $format: $f missing"; exit 1; }
    case "$f" in *.sh|*.sbatch) bash -n "$f" ;; esac
  done < "files_$format.txt"
done
cp plans_megatron.json plans.json
# A plan DeepSpeed cannot run is refused, exit 2, nothing written (layer-wise activation
# offloading, which Megatron's best plan above may use).
rc=0; "$bin" launch --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --gbs 256 --seq 4096 \
  --tp 2 --ep 8 --zero 1 --recompute none --cpu-offloading-num-layers 8 --format deepspeed \
  --out run_ds_off 2> ds.err || rc=$?
[[ $rc -eq 2 ]] && grep -q "deepspeed cannot run" ds.err && [[ ! -e run_ds_off ]] ||
  { echo "FAIL: deepspeed launch of an offloaded plan: rc $rc: $(cat ds.err)"; exit 1; }
# A framework profile's defaults travel from the search to the launch: Megatron-Bridge's
# performance recipes reduce gradients in BF16 and run FP8 with the per-tensor recipe
# (frameworks/megatron-bridge.yaml), so the launched arguments say so; without the profile,
# Megatron's defaults (fp32 gradient reduction, delayed scaling) are written.
"$bin" search --model llama3-8b --cluster dgx-h100 --gpus 16 --gbs 128 --seq 4096 --precision fp8 \
  --tp 1 --pp 1 --zero 1 --top 1 --framework megatron-bridge --json > bridge.json
"$bin" launch --from bridge.json --format megatron --out run_bridge > /dev/null 2>&1
grep -qx -- '--grad-reduce-in-bf16' run_bridge/megatron_args.txt &&
  [[ "$(grep -A1 -x -- '--fp8-recipe' run_bridge/megatron_args.txt | tail -1)" == tensorwise ]] ||
  { echo "FAIL: launch --from a megatron-bridge search lost the profile's defaults"; exit 1; }
"$bin" launch --from bridge.json --framework megatron --format megatron --out run_plain \
  > /dev/null 2>&1
! grep -qx -- '--grad-reduce-in-bf16' run_plain/megatron_args.txt &&
  [[ "$(grep -A1 -x -- '--fp8-recipe' run_plain/megatron_args.txt | tail -1)" == delayed ]] ||
  { echo "FAIL: launch --framework megatron kept a profile's defaults"; exit 1; }
# torchtitan has no Mixtral (no registered flavor of this architecture) and no ZeRO-1: refused,
# exit 2, nothing written.
rc=0; "$bin" launch --from plans.json --format torchtitan --out run_tt 2> tt.err || rc=$?
[[ $rc -eq 2 ]] && grep -q "torchtitan cannot run" tt.err && [[ ! -e run_tt ]] ||
  { echo "FAIL: torchtitan launch of Mixtral ZeRO-1: rc $rc: $(cat tt.err)"; exit 1; }
# The chosen plan survives the round trip: search's rank-1 TP and EP are in the Megatron args.
grep -qx -- '--tensor-model-parallel-size' run_megatron/megatron_args.txt
tp=$(python3 -c 'import json;print(json.load(open("plans.json"))["top"][0]["plan"]["tp"])')
[[ "$(grep -A1 -x -- '--tensor-model-parallel-size' run_megatron/megatron_args.txt | tail -1)" == "$tp" ]]
# A --from file goes through the same checks as the flags (issue #21): a sequence length of
# -2048 or an unknown precision in it exits 2 naming the flag, and writes nothing.
python3 - <<'PY'
import json
j = json.load(open("plans.json"))
j["top"][0]["plan"]["seq"] = -2048
json.dump(j, open("bad_seq.json", "w"))
j = json.load(open("plans.json"))
j["flags"]["precision"] = "fp4"
json.dump(j, open("bad_precision.json", "w"))
PY
rc=0; "$bin" launch --from bad_seq.json --format megatron --out run_bad 2> bad_seq.err || rc=$?
[[ $rc -eq 2 ]] && grep -q -- "/top/0/plan/seq: --seq: Value -2048 not in range 1 to 1073741824" bad_seq.err && [[ ! -e run_bad ]] ||
  { echo "FAIL: launch --from with seq -2048: rc $rc: $(cat bad_seq.err)"; exit 1; }
rc=0; "$bin" report --from bad_precision.json --out bad.md 2> bad_precision.err || rc=$?
[[ $rc -eq 2 ]] && grep -q -- "/flags/precision: --precision: fp4 not in {bf16,fp16,fp8}" bad_precision.err && [[ ! -e bad.md ]] ||
  { echo "FAIL: report --from with precision fp4: rc $rc: $(cat bad_precision.err)"; exit 1; }
# A model given as a file: the search records its absolute path, so launch --from and report
# --from work from another folder (they used to look the model up by its display name, which
# names no file), and the launch trains that model.
sed 's/^name: .*/name: my-8b/' "$DTPLAN_DATA_DIR/models/llama3-8b.yaml" > my8b.yaml
"$bin" search --model my8b.yaml --cluster dgx-h100 --gpus 16 --gbs 64 --seq 4096 --top 1 --json \
  > file_model.json
mkdir -p elsewhere
(cd elsewhere && "$bin" launch --from ../file_model.json --format megatron --out run_file > /dev/null 2>&1 &&
  "$bin" report --from ../file_model.json --out r.md > /dev/null 2>&1) ||
  { echo "FAIL: launch/report --from a search of a model file, from another folder"; exit 1; }
grep -qx -- '--num-layers' elsewhere/run_file/megatron_args.txt || { echo "FAIL: no args"; exit 1; }
# A plan flag beside --from would be silently overwritten: refused, naming the flag; so is a
# --model that is not the model the search ranked plans for.
rc=0; "$bin" launch --from plans.json --tp 8 --format megatron --out run_tp 2> tp.err || rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--tp: cannot be combined with --from" tp.err && [[ ! -e run_tp ]] ||
  { echo "FAIL: launch --from with --tp: rc $rc: $(cat tp.err)"; exit 1; }
rc=0; "$bin" launch --from file_model.json --model llama3-8b --format megatron --out run_m 2> m.err || rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--model: names llama3-8b, but file_model.json ranked plans for my-8b" m.err &&
  [[ ! -e run_m ]] || { echo "FAIL: launch --from with another --model: rc $rc: $(cat m.err)"; exit 1; }
# Fewer GPUs than a node: every launcher starts that many ranks on the one node (it started a
# whole node's 8, which Megatron would have taken as DP 4).
"$bin" launch --model llama3-8b --cluster dgx-h100 --gpus 4 --tp 2 --gbs 16 --format megatron \
  --out run_four > /dev/null 2>&1
grep -q -- "--gpus-per-node=4" run_four/train_megatron.sbatch &&
  grep -q -- "--nproc-per-node 4" run_four/train_megatron.sbatch ||
  { echo "FAIL: a 4-GPU launch does not start 4 ranks"; exit 1; }
echo "7 passed, 0 failed"
