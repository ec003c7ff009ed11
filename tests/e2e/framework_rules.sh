#!/usr/bin/env bash
# --framework on check, estimate and simulate when the plan runs: without the flag, Megatron-LM's
# rules are applied as warnings (exit 0; text says so, JSON has `framework` and `warnings`); with
# it, a plan the framework can run passes with that framework named. The refusals (exit 2) are
# cases of bad_inputs/cases.txt (fw_*).
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
passed=0
gpipe=(--model llama3-8b --cluster dgx-h100 --gpus 32 --tp 8 --sp --pp 4 --schedule gpipe)
# torchtitan v0.2.2 runs TP only with sequence parallelism (planner/frameworks.cpp).
zero3_pp=(--model llama3-8b --cluster dgx-h100 --gpus 32 --tp 8 --sp --pp 2 --zero 3)
zero3_pp_search=(--model llama3-8b --cluster dgx-h100 --gpus 32 --tp 8 --pp 2 --zero 3)

for cmd in check estimate simulate; do
  # GPipe: Megatron-LM's rules refuse it, so the default warns and names who can run it.
  "$bin" $cmd "${gpipe[@]}" --json > "$cmd.json" || fail "$cmd: exit $? without --framework"
  python3 - "$cmd.json" <<'PY' || fail "$cmd: JSON"
import json, sys
j = json.load(open(sys.argv[1]))
fw = j["framework"]
assert fw["name"] == "megatron" and fw["given"] is False, fw
assert len(fw["rules_applied"]) == 7 and all(r["rule"] for r in fw["rules_applied"]), fw
# The framework's warnings; estimate adds how sure its numbers are (reports/uncertainty.h), and
# that GPipe holding all 1536 micro-batches of the default batch does not fit.
number = {"profile-not-fitted", "profile-partly-fitted", "regime-sparse", "no-error-band", "outside-calibration", "does-not-fit"}
codes = [w["code"] for w in j["warnings"] if w["code"] not in number]
assert codes == ["framework-cannot-run"], codes
assert "torchtitan can (--framework torchtitan)" in j["warnings"][0]["message"], j["warnings"]
PY
  "$bin" $cmd "${gpipe[@]}" > "$cmd.txt" || fail "$cmd: text exit $?"
  grep -q '^framework megatron (the default; --framework refuses what a framework cannot run): 7 rules applied, 1 warning(s)$' "$cmd.txt" ||
    fail "$cmd: no framework line: $(grep -i framework "$cmd.txt")"
  grep -q '^  warning \[framework-cannot-run\]: megatron cannot run this plan' "$cmd.txt" ||
    fail "$cmd: no warning line"
  # ZeRO-3 with PP: Megatron runs it, through Megatron-FSDP version 1 only.
  "$bin" $cmd "${zero3_pp[@]}" --json > "$cmd.z3.json" || fail "$cmd: ZeRO-3 PP exit $?"
  python3 -c "
import json, sys
number = {'profile-not-fitted', 'profile-partly-fitted', 'regime-sparse', 'no-error-band', 'outside-calibration'}
codes = [w['code'] for w in json.load(open('$cmd.z3.json'))['warnings'] if w['code'] not in number]
assert codes == ['megatron-fsdp', 'zero3-with-pp'], codes" || fail "$cmd: ZeRO-3 PP warnings"
  # Named, and the plan runs: that framework's rules, no warning.
  "$bin" $cmd "${zero3_pp[@]}" --framework torchtitan --json > "$cmd.tt.json" ||
    fail "$cmd: torchtitan exit $?"
  python3 -c "
import json
j = json.load(open('$cmd.tt.json'))
assert j['framework']['name'] == 'torchtitan' and j['framework']['given'] is True, j['framework']
number = {'profile-not-fitted', 'profile-partly-fitted', 'regime-sparse', 'no-error-band', 'outside-calibration'}
assert len(j['framework']['rules_applied']) == 7, j  # planner/frameworks.cpp kTorchtitanRules
assert [w for w in j['warnings'] if w['code'] not in number] == [], j" ||
    fail "$cmd: torchtitan JSON"
  passed=$((passed + 1))
done
# search: its first plan carries the framework's warnings, as estimate gives them for that plan
# (README: search JSON's `warnings[]` are the first plan's); they were missing (2026-12-04).
"$bin" search "${zero3_pp_search[@]}" --top 1 --json > search.json || fail "search exit $?"
python3 -c "
import json
j = json.load(open('search.json'))
number = {'profile-not-fitted', 'profile-partly-fitted', 'regime-sparse', 'no-error-band', 'outside-calibration'}
assert j['top'][0]['plan']['zero'] == 3 and j['top'][0]['plan']['pp'] == 2, j['top'][0]['plan']
codes = [w['code'] for w in j['warnings'] if w['code'] not in number]
assert codes == ['megatron-fsdp', 'zero3-with-pp'], codes" || fail "search: the first plan's warnings"
"$bin" search "${zero3_pp_search[@]}" --top 1 > search.txt || fail "search text exit $?"
grep -q '^warning \[zero3-with-pp\]: ZeRO-3 with pipeline parallelism' search.txt ||
  fail "search: no warning line: $(grep -i warning search.txt)"
# A framework profile (frameworks/*.yaml) names its stack's rules and changes the estimate:
# llm-foundry runs flash-attn v2 at its fitted compute efficiency (its own trainer: no launch
# rules); Megatron-Bridge's perf recipes keep 16-bit gradients and run per-tensor current
# scaling as "FP8" (4 launches per quantization in --ops), which --grads and --fp8-recipe
# override.
mpt=(--model llama3-8b --cluster dgx-h100 --gpus 8 --zero 3 --mbs 1 --gbs 32 --seq 8192)
"$bin" estimate "${mpt[@]}" --json > plain.json || fail "plain estimate exit $?"
"$bin" estimate "${mpt[@]}" --framework llm-foundry --json > foundry.json || fail "foundry exit $?"
python3 - plain.json foundry.json <<'PY' || fail "llm-foundry JSON"
import json, sys
plain, foundry = (json.load(open(f)) for f in sys.argv[1:3])
fw = foundry["framework"]
assert fw["name"] == "none" and fw["rules_applied"] == [], fw
assert fw["profile"]["name"] == "llm-foundry" and fw["profile"]["attention_kernel"] == "fa2", fw
assert fw["profile"]["stack"] == "other", fw
assert foundry["step_time_s"] > 1.2 * plain["step_time_s"], (foundry["step_time_s"], plain["step_time_s"])
PY
"$bin" estimate "${mpt[@]}" --framework llm-foundry > foundry.txt
grep -q '^framework profile llm-foundry (frameworks/llm-foundry.yaml): attention kernel fa2, compute efficiency .*; its own trainer: no launch rules apply$' foundry.txt ||
  fail "llm-foundry text: $(grep -i framework foundry.txt)"
fp8=(--model llama3-8b --cluster dgx-h100 --gpus 8 --zero 1 --mbs 1 --gbs 32 --seq 4096 --precision fp8)
"$bin" estimate "${fp8[@]}" --framework megatron-bridge --ops --json > bridge.json || fail "bridge exit $?"
"$bin" estimate "${fp8[@]}" --framework megatron-bridge --fp8-recipe delayed --grads fp32 --ops --json > given.json ||
  fail "bridge with flags exit $?"
python3 - bridge.json given.json <<'PY' || fail "megatron-bridge defaults"
import json, sys
bridge, given = (json.load(open(f)) for f in sys.argv[1:3])
assert bridge["framework"]["name"] == "megatron" and len(bridge["framework"]["rules_applied"]) == 7
def launches(j):
    return {o["kernels"] for o in j["ops"] if o["name"] == "fp8_quantize_grad"}
assert launches(bridge) == {4}, launches(bridge)   # current scaling: amax, scale, cast
assert launches(given) == {1}, launches(given)     # --fp8-recipe delayed wins
g16, g32 = bridge["memory"][0]["grads_gib"], given["memory"][0]["grads_gib"]
assert abs(g32 / g16 - 2.0) < 1e-6, (g16, g32)     # 16-bit against fp32 gradients
PY
# A profile's `false` overlap default (megatron-deepspeed: DeepSpeed's overlap_comm off with
# ZeRO 1-2 under pipelines) gives way to an explicit --overlap-grad-reduce, and both flags of a
# pair together are refused (exit 2).
ds=(--model llama3-8b --cluster dgx-h100 --gpus 16 --zero 1 --mbs 1 --gbs 32 --seq 4096)
"$bin" estimate "${ds[@]}" --framework megatron-deepspeed --json > ds_off.json || fail "ds exit $?"
"$bin" estimate "${ds[@]}" --framework megatron-deepspeed --overlap-grad-reduce --json > ds_on.json ||
  fail "ds --overlap-grad-reduce exit $?"
python3 - ds_off.json ds_on.json <<'PY' || fail "--overlap-grad-reduce over a profile's default"
import json, sys
off, on = (json.load(open(f))["breakdown"]["exposed_comm_s"]["dp"] for f in sys.argv[1:3])
assert on < off, (on, off)
PY
rc=0; "$bin" estimate "${ds[@]}" --overlap-grad-reduce --no-overlap-grad-reduce 2> both.err || rc=$?
[[ $rc -eq 2 ]] || fail "--overlap-grad-reduce with --no-overlap-grad-reduce: rc $rc $(cat both.err)"
# An unknown framework names the rule sets and the profiles.
if "$bin" estimate "${fp8[@]}" --framework megatron-brige 2> unknown.err; then fail "unknown framework accepted"; fi
grep -q "unknown framework 'megatron-brige' (did you mean 'megatron-bridge'?); known: megatron, deepspeed, torchtitan, llm-foundry, megatron-bridge" unknown.err ||
  fail "unknown framework message: $(cat unknown.err)"
"$bin" list frameworks > list.txt
grep -q '^megatron-bridge ' list.txt && grep -q '^llm-foundry .* other ' list.txt || fail "list frameworks: $(cat list.txt)"
# A plan that does not fit is still estimated, and says so among the warnings (where scripts
# look), not only in the memory table. Llama-3 70B at TP 4 without ZeRO: 70.6e9 parameters x 18
# bytes (BF16 weights and gradients, FP32 master and Adam moments) / 4 = 296 GiB per GPU before
# activations, far above an H100's 80 GB.
"$bin" estimate --model llama3-70b --cluster dgx-h100 --gpus 16 --tp 4 --json > nofit.json ||
  fail "does-not-fit estimate exit $?"
python3 -c "
import json
j = json.load(open('nofit.json'))
assert j['fits'] is False and j['peak_memory_gib'] > 296, (j['fits'], j['peak_memory_gib'])
assert [w['code'] for w in j['warnings']][0] == 'does-not-fit', j['warnings']" ||
  fail "does-not-fit warning"
"$bin" estimate --model llama3-70b --cluster dgx-h100 --gpus 16 --tp 4 | grep -q '^warning \[does-not-fit\]: peak memory' ||
  fail "does-not-fit text"
# simulate says it too, text and JSON, as estimate does (found by a new-user trial: simulate
# printed the framework's warnings only).
"$bin" simulate --model llama3-70b --cluster dgx-h100 --gpus 16 --tp 4 --json > nofit_sim.json ||
  fail "does-not-fit simulate exit $?"
python3 -c "
import json
j = json.load(open('nofit_sim.json'))
codes = [w['code'] for w in j['warnings']]
assert codes[0] == 'does-not-fit' and 'profile-partly-fitted' in codes, codes" ||
  fail "does-not-fit simulate JSON"
"$bin" simulate --model llama3-70b --cluster dgx-h100 --gpus 16 --tp 4 | grep -q '^warning \[does-not-fit\]: peak memory' ||
  fail "does-not-fit simulate text"
# The first-order failure model (REFERENCE.md: delta/tau + (tau/2 + R)/M) holds for interval +
# restart well under the job MTBF; far outside it (a 1 h MTBF per GPU over 16 GPUs is a 225 s job
# MTBF; a 1e6 s interval) its fractions pass 100%, and estimate says they mean nothing.
"$bin" estimate --model llama3-70b --cluster dgx-h100 --gpus 16 --tp 4 --mtbf-per-gpu-hours 1 \
  --checkpoint-interval-s 1e6 --json > failure_range.json || fail "failure range exit $?"
python3 -c "
import json
j = json.load(open('failure_range.json'))
w = [w for w in j['warnings'] if w['code'] == 'failure-model-out-of-range']
assert len(w) == 1 and 'job MTBF of 225 s' in w[0]['message'], j['warnings']" ||
  fail "failure-model-out-of-range warning"
python3 -c "
import json
assert 'failure-model-out-of-range' not in [w['code'] for w in json.load(open('nofit.json'))['warnings']]" ||
  fail "failure-model-out-of-range at the defaults"
passed=$((passed + 1))
# Host memory: a plan can fit its GPUs and not the node's host memory. Llama 3.1 70B at 128K
# tokens with 79 of 80 layers offloaded pins 662 GiB of activations per GPU, 5298 GiB per 8-GPU
# node, above dgx-h100's 2048 GiB (host.memory_gib): the memory table's host line and the JSON's
# host_memory say so beside the GPU verdict (found by a new-user trial: it said only "fits").
"$bin" estimate -m llama3.1-70b -c dgx-h100 -g 64 --cp 4 --zero 3 --cpu-offloading-num-layers 79 \
  --gbs 64 --seq 131072 --json > host.json || fail "host-memory estimate exit $?"
python3 -c "
import json
j = json.load(open('host.json'))
h = j['host_memory']
assert j['fits'] is True and h['fits'] is False and h['capacity_gib'] == 2048, (j['fits'], h)
assert abs(h['per_node_gib'] - 8 * h['offloaded_gib_per_gpu']) < 1e-6 and h['per_node_gib'] > 2048, h
assert 'does-not-fit' in [w['code'] for w in j['warnings']], j['warnings']" || fail "host_memory JSON"
"$bin" estimate -m llama3.1-70b -c dgx-h100 -g 64 --cp 4 --zero 3 --cpu-offloading-num-layers 79 \
  --gbs 64 --seq 131072 | grep -q '^  host memory (offloaded activations, pinned): .* DOES NOT FIT$' ||
  fail "host memory line"
"$bin" estimate --model llama3-8b --cluster dgx-h100 --gpus 8 --json | python3 -c "
import json, sys
assert 'host_memory' not in json.load(sys.stdin)" || fail "host_memory without offload"
passed=$((passed + 1))
# With a pipeline the stages differ, so the communication rows name the stage they are (the
# busiest, whose time the breakdown shows; the data-parallel row the stage the step waits for),
# and the JSON says which (a new-user trial read a 6-layer stage's EP volume as the step's).
"$bin" estimate -m llama3-8b -c dgx-h100 -g 16 --tp 2 --pp 4 --gbs 64 --json > pp.json
"$bin" estimate -m llama3-8b -c dgx-h100 -g 16 --tp 2 --pp 4 --gbs 64 > pp.txt
python3 -c "
import json, re
j = json.load(open('pp.json'))
b, d = j['breakdown_stage'], j['dp_stage']
assert 0 <= b < 4 and 0 <= d < 4, (b, d)
t = open('pp.txt').read()
assert re.search(r'^  tp \(stage %d\) ' % b, t, re.M), t
assert re.search(r'^  dp \(stage %d\) ' % d, t, re.M), t" || fail "communication rows' stage"
passed=$((passed + 1))
# A search under DeepSpeed's rules says when `launch --format deepspeed` would refuse its best
# plan for the model itself (Llama 3.1's rope scaling, which Megatron-DeepSpeed has no argument
# for), not only for the layout (found by a new-user trial).
"$bin" search --model llama3.1-70b --cluster dgx-h100 --gpus 64 --gbs 256 --seq 4096 \
  --framework deepspeed --top 1 --json > ds70.json || fail "deepspeed search exit $?"
python3 -c "
import json
w = [x for x in json.load(open('ds70.json'))['warnings'] if x['code'] == 'launch-refused']
assert w and 'no llama3 rope scaling' in w[0]['message'], w" || fail "launch-refused warning"
passed=$((passed + 1))
# The checkpoint interval is checked against one synchronous save as the framework that runs
# the plan writes it: 150 s passes under Megatron's fully parallel save (123.7 s) and is refused
# under DeepSpeed's, where data-parallel rank 0 writes the 16-bit weights (176.7 s; Llama 3 70B
# TP8 PP2 ZeRO-1 on 64 H100, 2026-12-08). It was checked before the framework was known.
ck=(--model llama3-70b --cluster dgx-h100 --gpus 64 --tp 8 --pp 2 --zero 1 --gbs 256
    --checkpoint-interval-s 150)
"$bin" estimate "${ck[@]}" --framework megatron > ck_mg.txt || fail "megatron interval exit $?"
rc=0; "$bin" estimate "${ck[@]}" --framework deepspeed > ck_ds.txt 2> ck_ds.err || rc=$?
[ "$rc" = 2 ] || fail "deepspeed interval shorter than its save: exit $rc, want 2"
grep -q -- "--checkpoint-interval-s: 150 s is not longer than one synchronous checkpoint" ck_ds.err &&
  grep -q "DeepSpeed: data-parallel rank 0 writes" ck_ds.err || fail "interval message: $(cat ck_ds.err)"
[ ! -s ck_ds.txt ] || fail "refused estimate still printed"
rc=0; "$bin" launch "${ck[@]}" --format deepspeed --out ck_launch 2> ck_l.err || rc=$?
[ "$rc" = 2 ] && [ ! -e ck_launch ] || fail "launch --format deepspeed interval: exit $rc"
passed=$((passed + 1))
# The uneven-split note gives the layers per chunk as they are: Llama 3 70B's 80 layers on PP3
# are 27 / 27 / 26, DeepSeek-V3's 61 on PP2 31 / 30 (a new-user trial read "27 / 27 x 1 / 26"
# and "31 / 31 x 0 / 30", each with "first and last chunks take fewer").
"$bin" estimate --model llama3-70b --cluster dgx-h100 --gpus 24 --tp 8 --pp 3 --gbs 24 \
  > /dev/null 2> un3.err || fail "uneven PP3 exit $?"
grep -q "using the uneven split 27 / 27 / 26 layers per chunk, first to last" un3.err ||
  fail "uneven note: $(cat un3.err)"
"$bin" estimate --model deepseek-v3 --cluster dgx-h100 --gpus 1024 --pp 2 --ep 64 --gbs 1024 \
  > /dev/null 2> un2.err || fail "uneven PP2 exit $?"
grep -q "using the uneven split 31 / 30 layers per chunk" un2.err || fail "uneven note: $(cat un2.err)"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
