#!/usr/bin/env bash
# dtplan launch -f deepspeed: every ds_config.json it writes is read by the real DeepSpeed
# (deepspeed.runtime.config.DeepSpeedConfig, scripts/framework_flags/check_ds_config.py) with the
# plan's data-parallel size as the world size, for each pinned DeepSpeed release:
#   deepspeed_config.sh VENV_DIR DTPLAN_BINARY
# One venv per release under VENV_DIR (deepspeed-X.Y.Z), reused while its pins match. DeepSpeed
# comes from PyPI without its dependencies (pip --no-deps; DS_BUILD_OPS=0, no torch, so no ops are
# built): only the pure-python packages that `import deepspeed` and DeepSpeedConfig need are
# installed, pinned below; torch is a stand-in inside the checker. The checker must also refuse
# a wrong data-parallel size and an unknown ZeRO key, so a check that reads nothing cannot pass.
# Skips (77) only when the package index cannot be reached; a failed install is a failure.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 VENV_DIR DTPLAN_BINARY" >&2; exit 2; }
venv_root=$(realpath -m "$1")
bin=$(realpath "$2")
repo=$(cd "$(dirname "$0")/../.." && pwd)
checker="$repo/scripts/framework_flags/check_ds_config.py"
export DTPLAN_DATA_DIR="${DTPLAN_DATA_DIR:-$repo}"
py="${PYTHON:-python3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- pins -----------------------------------------------------------------------------------
# The two releases dtplan's DeepSpeed emitter writes for (--framework-version; 0.19.8, the
# default, was the newest on PyPI when this was written, `pip index versions deepspeed`).
ds_versions=(0.16.5 0.19.8)
# What `import deepspeed` imports besides torch: DeepSpeed's requirements/requirements.txt less
# torch (a stand-in in the checker) and ninja (only for building ops). Wheels for CPython
# 3.10-3.13.
common_pins=(hjson==3.1.0 packaging==24.2 psutil==7.0.0 py-cpuinfo==9.0.0 numpy==2.2.6
             tqdm==4.67.1 einops==0.8.1 msgpack==1.1.0)
# pydantic of each release's time (2.10 for 0.16.5, March 2025; the newest for 0.19.8), with the
# exact dependencies each needs, since everything is installed with --no-deps.
pydantic_pins() {
  case $1 in
    0.16.5) echo "pydantic==2.10.6 pydantic-core==2.27.2 annotated-types==0.7.0" \
                 "typing-extensions==4.12.2" ;;
    0.19.8) echo "pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0" \
                 "typing-extensions==4.16.0 typing-inspection==0.4.5" ;;
    *) fail "no pydantic pins for DeepSpeed $1" ;;
  esac
}
pip_opts=(--disable-pip-version-check --no-input --quiet --retries 2 --timeout 30)

# ---- venvs ----------------------------------------------------------------------------------
index_checked=
check_index() {  # the index answers for deepspeed (PIP_INDEX_URL and pip.conf are honoured)
  [[ -n $index_checked ]] && return
  local v
  # -vvv: pip reports an unreachable index only as "Could not fetch URL ...", then "No matching
  # distribution", the same words as for a package the index does not have.
  "$1/bin/python" -m pip index versions deepspeed --disable-pip-version-check --retries 0 \
    --timeout 15 -vvv > "$work/index.log" 2>&1 || true
  if ! grep -q "^deepspeed (" "$work/index.log"; then
    if grep -q "Could not fetch URL" "$work/index.log"; then
      echo "SKIP: the package index cannot be reached to install DeepSpeed:" \
           "$(grep -m1 "Could not fetch URL" "$work/index.log" | cut -c1-300)"
      rm -rf "$1"
      exit 77
    fi
    fail "pip index versions deepspeed: $(grep -v "^WARNING: pip index" "$work/index.log" | tail -3)"
  fi
  for v in "${ds_versions[@]}"; do
    grep -q "^Available versions:.* $v\(,\|$\)" "$work/index.log" ||
      fail "the index has no deepspeed $v: $(grep "^Available versions" "$work/index.log" | cut -c1-200)"
  done
  index_checked=1
}

setup() {  # setup VERSION: sets $venv to a venv with deepspeed VERSION and the pins
  local v=$1 dir="$venv_root/deepspeed-$1"
  local pins
  read -r -a pins <<< "$(pydantic_pins "$v")"
  local stamp="deepspeed==$v ${common_pins[*]} ${pins[*]}"
  venv=$dir
  if [[ -f $dir/.dtplan-pins && $(cat "$dir/.dtplan-pins") == "$stamp" ]] &&
     "$dir/bin/python" -c "import importlib.metadata as m; assert m.version('deepspeed') == '$v'" \
       2> /dev/null; then
    return
  fi
  rm -rf "$dir"
  mkdir -p "$venv_root"
  "$py" -m venv "$dir" > "$work/venv.log" 2>&1 ||
    fail "$py -m venv $dir: $(tail -3 "$work/venv.log") (Debian: apt-get install python3-venv)"
  check_index "$dir"
  "$dir/bin/python" -m pip install "${pip_opts[@]}" --no-deps "${common_pins[@]}" "${pins[@]}" \
    > "$work/pip.log" 2>&1 || fail "pip install ${common_pins[*]} ${pins[*]}: $(tail -5 "$work/pip.log")"
  DS_BUILD_OPS=0 "$dir/bin/python" -m pip install "${pip_opts[@]}" --no-deps "deepspeed==$v" \
    > "$work/pip.log" 2>&1 || fail "pip install deepspeed==$v: $(tail -5 "$work/pip.log")"
  echo "$stamp" > "$dir/.dtplan-pins"
}

# ---- plans ----------------------------------------------------------------------------------
# name | data-parallel size | dtplan launch flags. Each is a plan the DeepSpeed emitter accepts:
# ZeRO-1/2/3, with and without PP (ZeRO-1 only), MoE with EP (ZeRO-1/2), fp16 and bf16, a
# micro-batch above 1.
plans=(
  "mixtral_ep8_zero1|32|-m mixtral-8x7b -c dgx-h100 -g 64 --tp 2 --ep 8 --zero 1"
  "mixtral_ep4_zero2|16|-m mixtral-8x7b -c dgx-h100 -g 64 --tp 4 --ep 4 --zero 2 --mbs 2 --gbs 512"
  "llama8b_tp8_zero2|2|-m llama3-8b -c dgx-h100 -g 16 --tp 8 --zero 2"
  "llama8b_pp2_zero1|2|-m llama3-8b -c dgx-h100 -g 32 --tp 8 --pp 2 --zero 1"
  "llama70b_zero3|8|-m llama3-70b -c dgx-h100 -g 64 --tp 8 --zero 3 --gbs 256"
  "llama8b_fp16_zero0|4|-m llama3-8b -c dgx-a100-80g -g 32 --tp 8 --zero 0 --precision fp16 --mbs 2 --gbs 64"
  "mixtral22b_pp2_ep8|8|-m mixtral-8x22b -c dgx-h100 -g 128 --tp 8 --sp --pp 2 --ep 8 --zero 1 --gbs 256"
)

configs=()
dps=()
for entry in "${plans[@]}"; do
  IFS='|' read -r name dp flags <<< "$entry"
  read -r -a args <<< "$flags"
  out="$work/$name"
  "$bin" launch -f deepspeed "${args[@]}" --out "$out" > "$work/$name.out" 2> "$work/$name.err" ||
    fail "$name: dtplan launch exit $?: $(cat "$work/$name.err")"
  [[ -f $out/ds_config.json ]] || fail "$name: no ds_config.json in $(cat "$work/$name.out")"
  # The plan as dtplan wrote it (train_deepspeed.sh "# Plan: TP.. PP.. DP.."): its DP is the world
  # size DeepSpeed sees through Megatron's mpu.
  plan_dp=$(sed -n 's/^# Plan: .* DP\([0-9][0-9]*\).*/\1/p' "$out/train_deepspeed.sh")
  [[ $plan_dp == "$dp" ]] || fail "$name: plan DP '$plan_dp', expected $dp"
  configs+=("$out/ds_config.json")
  dps+=("$dp")
done

# The golden launch set's ds_config.json files (tests/golden/launch/*/deepspeed), at their plans'
# data-parallel sizes.
for g in "$repo"/tests/golden/launch/*/deepspeed; do
  dp=$(sed -n 's/^# Plan: .* DP\([0-9][0-9]*\).*/\1/p' "$g/train_deepspeed.sh")
  [[ -n $dp ]] || fail "$g/train_deepspeed.sh: no '# Plan:' line with DP"
  configs+=("$g/ds_config.json")
  dps+=("$dp")
done

# Not vacuous: DeepSpeed's batch assertion at a wrong world size, and pydantic's extra="forbid"
# on zero_optimization, must both refuse.
cp "${configs[0]}" "$work/wrong_dp.json"
"$py" - "${configs[0]}" "$work/bad_zero.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["zero_optimization"]["stage3_prefetch_bucket"] = 1  # not a DeepSpeedZeroConfig field
json.dump(d, open(sys.argv[2], "w"))
PY
jobs=()
for i in "${!configs[@]}"; do jobs+=(--each "${dps[$i]}" "${configs[$i]}"); done
jobs+=(--each $((dps[0] * 2)) "$work/wrong_dp.json" --each "${dps[0]}" "$work/bad_zero.json")
block() {  # the checker's lines under "FAIL: FILE (" in $work/check.log
  awk -v h="FAIL: $1 (" 'index($0, h) == 1 {on = 1; next} /^(ok|FAIL|note): / {on = 0} on' \
    "$work/check.log"
}

passed=0
for v in "${ds_versions[@]}"; do
  t0=$(date +%s%N)
  setup "$v"
  t1=$(date +%s%N)
  rc=0
  "$venv/bin/python" "$checker" "${jobs[@]}" > "$work/check.log" 2>&1 || rc=$?
  t2=$(date +%s%N)
  [[ $rc == 1 ]] || fail "DeepSpeed $v: checker exit $rc (1 expected: two refusals): $(cat "$work/check.log")"
  for c in "${configs[@]}"; do
    grep -qxF "ok: $c (deepspeed $v)" "$work/check.log" ||
      fail "DeepSpeed $v refuses $c:"$'\n'"$(block "$c")"$'\n'"$(cat "$c")"
    passed=$((passed + 1))
  done
  block "$work/wrong_dp.json" |
    grep -qF "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size" ||
    fail "DeepSpeed $v: a wrong data-parallel size passed: $(cat "$work/check.log")"
  block "$work/bad_zero.json" | grep -qF "Extra inputs are not permitted" ||
    fail "DeepSpeed $v: an unknown zero_optimization key passed: $(cat "$work/check.log")"
  passed=$((passed + 2))
  echo "deepspeed $v: venv ready in $(((t1 - t0) / 1000000)) ms;" \
       "${#configs[@]} configs and 2 refusals checked in $(((t2 - t1) / 1000000)) ms"
done
echo "$passed passed, 0 failed"
