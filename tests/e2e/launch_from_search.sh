#!/usr/bin/env bash
# End to end as a user runs it: search, then launch the best plan from the search's JSON, in
# every format; the files named on stdout must exist and the scripts must parse.
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" search --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --gbs 256 --seq 4096 --zero 3 \
  --pp 1 --tp 2 --ep 8 --top 3 --json > plans.json
for format in megatron deepspeed torchtitan; do
  "$bin" launch --from plans.json --rank 1 --format "$format" --out "run_$format" > "files_$format.txt"
  [[ -s "files_$format.txt" ]] || { echo "FAIL: $format printed no file names"; exit 1; }
  while read -r f; do
    [[ -f "$f" ]] || { echo "FAIL: $format: $f missing"; exit 1; }
    case "$f" in *.sh|*.sbatch) bash -n "$f" ;; esac
  done < "files_$format.txt"
done
# The chosen plan survives the round trip: search's rank-1 TP and EP are in the Megatron args.
grep -qx -- '--tensor-model-parallel-size' run_megatron/megatron_args.txt
tp=$(python3 -c 'import json;print(json.load(open("plans.json"))["top"][0]["plan"]["tp"])')
[[ "$(grep -A1 -x -- '--tensor-model-parallel-size' run_megatron/megatron_args.txt | tail -1)" == "$tp" ]]
echo "1 passed, 0 failed"
