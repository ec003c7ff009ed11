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
gpipe=(--model llama3-8b --cluster dgx-h100 --gpus 32 --tp 8 --pp 4 --schedule gpipe)
zero3_pp=(--model llama3-8b --cluster dgx-h100 --gpus 32 --tp 8 --pp 2 --zero 3)

for cmd in check estimate simulate; do
  # GPipe: Megatron-LM's rules refuse it, so the default warns and names who can run it.
  "$bin" $cmd "${gpipe[@]}" --json > "$cmd.json" || fail "$cmd: exit $? without --framework"
  python3 - "$cmd.json" <<'PY' || fail "$cmd: JSON"
import json, sys
j = json.load(open(sys.argv[1]))
fw = j["framework"]
assert fw["name"] == "megatron" and fw["given"] is False, fw
assert len(fw["rules_applied"]) == 4 and all(r["rule"] for r in fw["rules_applied"]), fw
# The framework's warnings; estimate adds how sure its numbers are (reports/uncertainty.h).
number = {"profile-not-fitted", "regime-sparse", "no-error-band", "outside-calibration"}
codes = [w["code"] for w in j["warnings"] if w["code"] not in number]
assert codes == ["framework-cannot-run"], codes
assert "torchtitan can (--framework torchtitan)" in j["warnings"][0]["message"], j["warnings"]
PY
  "$bin" $cmd "${gpipe[@]}" > "$cmd.txt" || fail "$cmd: text exit $?"
  grep -q '^framework megatron (the default; --framework refuses what a framework cannot run): 4 rules applied, 1 warning(s)$' "$cmd.txt" ||
    fail "$cmd: no framework line: $(grep -i framework "$cmd.txt")"
  grep -q '^  warning \[framework-cannot-run\]: megatron cannot run this plan' "$cmd.txt" ||
    fail "$cmd: no warning line"
  # ZeRO-3 with PP: Megatron runs it, through Megatron-FSDP version 1 only.
  "$bin" $cmd "${zero3_pp[@]}" --json > "$cmd.z3.json" || fail "$cmd: ZeRO-3 PP exit $?"
  python3 -c "
import json, sys
number = {'profile-not-fitted', 'regime-sparse', 'no-error-band', 'outside-calibration'}
codes = [w['code'] for w in json.load(open('$cmd.z3.json'))['warnings'] if w['code'] not in number]
assert codes == ['megatron-fsdp', 'zero3-with-pp'], codes" || fail "$cmd: ZeRO-3 PP warnings"
  # Named, and the plan runs: that framework's rules, no warning.
  "$bin" $cmd "${zero3_pp[@]}" --framework torchtitan --json > "$cmd.tt.json" ||
    fail "$cmd: torchtitan exit $?"
  python3 -c "
import json
j = json.load(open('$cmd.tt.json'))
assert j['framework']['name'] == 'torchtitan' and j['framework']['given'] is True, j['framework']
number = {'profile-not-fitted', 'regime-sparse', 'no-error-band', 'outside-calibration'}
assert len(j['framework']['rules_applied']) == 4, j
assert [w for w in j['warnings'] if w['code'] not in number] == [], j" ||
    fail "$cmd: torchtitan JSON"
  passed=$((passed + 1))
done
echo "$passed passed, 0 failed"
