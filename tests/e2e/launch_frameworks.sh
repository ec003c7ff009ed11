#!/usr/bin/env bash
# Launch files against the frameworks' own code (issue #17), for every registered emitter:
#   launch_frameworks.sh DTPLAN_BINARY
#   - an emitter without a check here fails the test (each `dtplan list emitters` name must have
#     one, and a golden case in tests/golden/launch);
#   - megatron: every argument of megatron_args.txt, and every flag the sbatch script adds, is a
#     flag of Megatron-LM @d98e8a6 with a value of its type and choices
#     (tests/data/framework_flags/megatron-lm.json, made by scripts/framework_flags/
#     extract_argparse.py from megatron/training/arguments.py and the dataclasses it turns into
#     flags; argparse aborts on an unknown flag);
#   - deepspeed: the same for Megatron-DeepSpeed @f4157be (megatron-deepspeed.json, including
#     DeepSpeed's own --deepspeed/--deepspeed_config); ds_config.json is loaded by the real
#     DeepSpeed in e2e.deepspeed_config (tests/e2e/deepspeed_config.sh);
#   - torchtitan: torchtitan.toml against torchtitan v0.2.2's job config, registered models,
#     flavors and converters (torchtitan-v0.2.2.json, scripts/framework_flags/
#     extract_torchtitan.py); the Python config of --framework-version main against main @b5bcd76
#     (torchtitan-head.json);
#   - the checks can fail: an unknown flag, a wrong choice and an unknown TOML key are refused;
#   - shellcheck is in the unit test Emitters.ScriptsPassBashAndShellcheck.
set -euo pipefail
bin=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
export DTPLAN_DATA_DIR="${DTPLAN_DATA_DIR:-$repo}"
flags="$repo/scripts/framework_flags"
tables="$repo/tests/data/framework_flags"
golden="$repo/tests/golden/launch"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
passed=0

# Flags a launch script adds beside its argument list (DATA_ARGS, TRAIN_ARGS, CKPT_ARGS,
# LOG_ARGS, and ARGS again), with the literal value after each where there is one; launcher lines
# (srun, torchrun, deepspeed) are not the framework's arguments. Each flag must exist, and a
# literal value (not a "$VARIABLE") must be of the flag's choices.
check_script() {  # TABLE SCRIPT
  python3 - "$1" "$2" <<'PY' || fail "$2: flags the framework does not have"
import json, re, sys
table = json.load(open(sys.argv[1]))["flags"]
bad = []
for n, line in enumerate(open(sys.argv[2]), 1):
    if line.startswith("#") or "srun " in line or line.startswith("deepspeed "):
        continue
    for m in re.finditer(r"'?(--[a-z][a-z0-9_-]*)'?(?:\s+'?([A-Za-z][A-Za-z0-9_.]*)'?)?", line):
        flag, value = m.group(1), m.group(2)
        if flag not in table:
            bad.append(f"{sys.argv[2]}:{n}: {flag}: not a flag of the framework")
            continue
        choices = table[flag].get("choices")
        if value and isinstance(choices, list) and value not in [str(c) for c in choices]:
            bad.append(f"{sys.argv[2]}:{n}: {flag} {value}: not one of {choices}")
if bad:
    print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

check_args() {  # TABLE FILE...
  python3 "$flags/check_args.py" "$@" > "$work/check.log" 2>&1 ||
    fail "$(cat "$work/check.log")"
}

declare -A checks=([megatron]=1 [deepspeed]=1 [torchtitan]=1)
mapfile -t emitters < <("$bin" list emitters | awk '/^[a-z]/ {print $1}')
[[ ${#emitters[@]} -ge 3 ]] || fail "dtplan list emitters: ${emitters[*]}"
for e in "${emitters[@]}"; do
  [[ -n ${checks[$e]:-} ]] ||
    fail "emitter '$e' is registered without a check against its framework in $0"
  compgen -G "$golden/*/$e" > /dev/null || fail "emitter '$e' has no golden case in $golden"
done
passed=$((passed + 1))

n=0
for d in "$golden"/*/megatron; do
  check_args "$tables/megatron-lm.json" "$d/megatron_args.txt"
  check_script "$tables/megatron-lm.json" "$d/train_megatron.sbatch"
  n=$((n + 1))
done
echo "megatron: $n golden cases checked against Megatron-LM @d98e8a6"
passed=$((passed + n))

n=0
for d in "$golden"/*/deepspeed; do
  check_args "$tables/megatron-deepspeed.json" "$d/megatron_deepspeed_args.txt"
  check_script "$tables/megatron-deepspeed.json" "$d/train_deepspeed.sh"
  n=$((n + 1))
done
echo "deepspeed: $n golden cases checked against Megatron-DeepSpeed @f4157be"
passed=$((passed + n))

n=0
for d in "$golden"/*/torchtitan; do
  python3 "$flags/check_torchtitan.py" "$tables/torchtitan-v0.2.2.json" "$d/torchtitan.toml" \
    > "$work/tt.log" 2>&1 || fail "$d/torchtitan.toml: $(cat "$work/tt.log")"
  n=$((n + 1))
done
echo "torchtitan: $n golden TOMLs checked against torchtitan v0.2.2"
passed=$((passed + n))

# torchtitan main: the Python config module, for the golden plans torchtitan writes.
"$bin" launch -f torchtitan --framework-version main -m llama3.1-405b -c dgx-h100 -g 1024 \
  --tp 8 --sp --pp 16 --cp 2 --zero 3 --uneven-pp --recompute full --seq 8192 --gbs 512 \
  --out "$work/tt_main" > /dev/null 2> "$work/tt_main.err" ||
  fail "launch --framework-version main: $(cat "$work/tt_main.err")"
python3 "$flags/check_torchtitan.py" --config dtplan_job --module-name dtplan_job \
  "$tables/torchtitan-head.json" "$work/tt_main/dtplan_job.py" > "$work/tt.log" 2>&1 ||
  fail "dtplan_job.py against torchtitan main: $(cat "$work/tt.log")"
echo "torchtitan main: the Python config checked against b5bcd76"
passed=$((passed + 1))

# Checkpoints: the interval the files save at by default is estimate's (Young's optimum for
# the job's MTBF and the plan's checkpoint, in whole steps), and --async-save becomes Megatron's
# own flags (checked against its table like every other flag of the script).
plan=(-m llama3-70b -c dgx-h100 -g 64 --tp 4 --pp 2 --mbs 1 --gbs 128 --seq 8192 --async-save)
"$bin" launch -f megatron "${plan[@]}" --out "$work/ckpt" > /dev/null 2> "$work/ckpt.err" ||
  fail "launch --async-save: $(cat "$work/ckpt.err")"
check_script "$tables/megatron-lm.json" "$work/ckpt/train_megatron.sbatch"
grep -q -- '--async-save --use-persistent-ckpt-worker)' "$work/ckpt/train_megatron.sbatch" ||
  fail "launch --async-save: no --async-save in CKPT_ARGS"
want=$("$bin" estimate "${plan[@]}" --json 2> /dev/null |
  python3 -c 'import json, sys; print(max(1, round(json.load(sys.stdin)["checkpoint"]["interval_steps"])))')
got=$(sed -n 's/.*--save-interval "${SAVE_INTERVAL:-\([0-9]*\)}".*/\1/p' "$work/ckpt/train_megatron.sbatch")
[[ -n $want && $got == "$want" ]] ||
  fail "SAVE_INTERVAL defaults to '$got' iterations; estimate's interval is $want steps"
"$bin" launch -f torchtitan "${plan[@]/llama3-70b/llama3.1-70b}" --zero 3 --sp \
  --out "$work/ckpt_tt" > /dev/null 2> "$work/tt.err" ||
  fail "launch -f torchtitan --async-save: $(cat "$work/tt.err")"
python3 "$flags/check_torchtitan.py" "$tables/torchtitan-v0.2.2.json" "$work/ckpt_tt/torchtitan.toml" \
  > "$work/tt.log" 2>&1 || fail "torchtitan.toml with [checkpoint]: $(cat "$work/tt.log")"
! "$bin" launch -f deepspeed "${plan[@]}" --out "$work/ckpt_ds" > /dev/null 2> "$work/ds.err" ||
  fail "launch -f deepspeed --async-save: Megatron-DeepSpeed has no asynchronous save"
grep -q "asynchronous checkpoint save" "$work/ds.err" || fail "deepspeed refusal: $(cat "$work/ds.err")"
echo "checkpoints: SAVE_INTERVAL $got = estimate's interval; --async-save checked"
passed=$((passed + 1))

# The checks refuse what the frameworks refuse.
d=$(compgen -G "$golden/*/megatron" | head -1)
{ cat "$d/megatron_args.txt"; echo "--position-embedding-typo"; echo rope; } > "$work/bad1.txt"
sed 's/^RMSNorm$/rmsnorm/' "$golden/qwen2.5-72b_64xh100/megatron/megatron_args.txt" > "$work/bad2.txt"
for bad in "$work/bad1.txt" "$work/bad2.txt"; do
  ! python3 "$flags/check_args.py" "$tables/megatron-lm.json" "$bad" > "$work/check.log" 2>&1 ||
    fail "check_args.py accepted $bad"
done
t=$(compgen -G "$golden/*/torchtitan/torchtitan.toml" | head -1)
sed 's/^seq_len = /sequence_len = /' "$t" > "$work/bad.toml"
! python3 "$flags/check_torchtitan.py" "$tables/torchtitan-v0.2.2.json" "$work/bad.toml" \
  > "$work/tt.log" 2>&1 || fail "check_torchtitan.py accepted an unknown key"
sed 's/^flavor = "405B"/flavor = "406B"/' "$t" > "$work/bad.toml"
! python3 "$flags/check_torchtitan.py" "$tables/torchtitan-v0.2.2.json" "$work/bad.toml" \
  > "$work/tt.log" 2>&1 || fail "check_torchtitan.py accepted an unknown flavor"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
