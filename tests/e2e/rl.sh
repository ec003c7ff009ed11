#!/usr/bin/env bash
# dtplan rl through the CLI (issue #19): the JSON interface scripts rely on, --search over the
# architectures, the reports (HTML and Markdown with the timeline, the arithmetic and the
# what-ifs), and --validate's case table. Expected relations are recomputed here from the JSON.
# usage: rl.sh DTPLAN_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { if [[ $2 -ne 0 ]]; then echo "FAIL $1"; fail=1; else echo "ok   $1"; fi; }

"$bin" rl --config "$src/examples/rl/grpo-70b-colocated.yaml" --json >"$tmp/c.json" 2>/dev/null
ok "rl --json (colocated example): exit 0" $?
python3 - "$tmp/c.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for k in ["step_time_s", "architecture", "phases_s", "idle_share", "weight_sync",
          "staleness_steps", "generation_tokens_per_s", "gpus"]:
    assert k in j, k
for k in ["generation", "reward", "logprob", "training", "weight_sync"]:
    assert k in j["phases_s"], k
for k in ["bytes", "time_s", "interval_steps"]:
    assert k in j["weight_sync"], k
assert j["architecture"] == "colocated"
assert j["gpus"] == {"rollout": 256, "training": 256}
assert j["staleness_steps"] == 0
# 512 x 8 responses, GPU-seconds = seconds x the pool's 256 GPUs for every phase (colocated).
assert j["rollout"]["response_tokens"] > 512 * 8
for k, v in j["phases_s"].items():
    assert abs(j["gpu_seconds"][k] - 256 * v) <= 1e-9 * (1 + 256 * v), k
# The timeline (two steps): spans of one pool never overlap, and it ends at twice the step.
spans = sorted((s["start_s"], s["end_s"]) for s in j["timeline"] if s["pool"] == "all")
assert spans, j["timeline"]
for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
    assert a1 <= b0 + 1e-9, (a0, a1, b0, b1)
assert abs(spans[-1][1] - 2 * j["step_time_s"]) < 1e-6 * j["step_time_s"]
assert len(j["whatif"]) == 4 and all(w["found"] for w in j["whatif"])
PY
ok "rl --json: the interface keys and their arithmetic" $?

"$bin" rl --config "$src/examples/rl/grpo-70b-disaggregated.yaml" --search --json \
  >"$tmp/s.json" 2>/dev/null
ok "rl --search --json (disaggregated example): exit 0" $?
python3 - "$tmp/s.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
archs = {a["architecture"]: a for a in j["architectures"]}
assert set(archs) == {"colocated", "disaggregated", "one-step-off", "fully-async"}, archs.keys()
assert j["step_time_s"] == min(a["step_time_s"] for a in archs.values())
for a in archs.values():
    if a["architecture"] != "colocated":
        assert a["gpus"]["rollout"] + a["gpus"]["training"] == 256
        assert a["gpus"]["rollout"] % 8 == 0
assert archs["disaggregated"]["staleness_steps"] == 0
assert archs["one-step-off"]["staleness_steps"] == 1
# Separate pools: the rollout pool idles while the trainer works in the synchronous one, and
# each pool's busy time never exceeds the step.
d = archs["disaggregated"]
assert 0 < d["idle_share"]["rollout"] < 1 and 0 < d["idle_share"]["training"] < 1
for tl in d["timeline"]:
    assert tl["end_s"] <= 2 * d["step_time_s"] * (1 + 1e-9)
feasible = [c for c in j["considered"] if c["feasible"]]
assert len(feasible) > 50
PY
ok "rl --search: every architecture, the best one first, pools on node boundaries" $?

for ext in html md; do
  "$bin" rl --config "$src/examples/rl/grpo-70b-disaggregated.yaml" --out "$tmp/r.$ext" \
    >/dev/null 2>&1
  ok "rl --out r.$ext: exit 0" $?
  for s in "Phases of one step" "How the numbers were derived" "What if" "weight sync" \
           "dtplan-source\|Source data"; do
    grep -q "$s" "$tmp/r.$ext"
    ok "rl report .$ext has '$s'" $?
  done
done
grep -q '<svg' "$tmp/r.html"
ok "rl report .html draws the timeline" $?

"$bin" rl --validate "$src/examples/rl/published.yaml" --json >"$tmp/v.json" 2>/dev/null
ok "rl --validate --json: exit 0" $?
python3 - "$tmp/v.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["total"] >= 5, j["total"]
for c in j["cases"]:
    assert c["source"] and c["quantity"] in (
        "step_time_s", "generation_s", "generation_share", "speedup", "sync_time_s")
    if c["predicted"]:
        assert abs((c["value"] - c["measured"]) / c["measured"] - c["error"]) < 1e-12
PY
ok "rl --validate: every case sourced, errors as (predicted - measured) / measured" $?

# The accuracy note every rl plan carries states --validate's figures (a new-user trial found
# it claimed "colocated dense steps within 16%" beside a +72% colocated row): its count within
# 20% and its range for the others are recomputed from the validation here.
python3 - "$tmp/v.json" "$tmp/c.json" <<'PY'
import json, re, sys
v = json.load(open(sys.argv[1]))
note = next(n for n in json.load(open(sys.argv[2]))["notes"] if n.startswith("validation against"))
m = re.search(r"(\d+) of (\d+) figures within 20%", note)
assert m, note
errs = [100 * c["error"] for c in v["cases"] if c["predicted"]]
inside = [e for e in errs if abs(e) <= 20]
assert (int(m.group(1)), int(m.group(2))) == (len(inside), v["total"]), (m.groups(), len(inside), v["total"])
named = sorted(round(e) for e in inside)
stated = sorted(int(x) for x in re.findall(r"([+-]\d+)%", note.split("; the same recipe")[0]))
assert named == stated, (named, stated)
lo, hi = (int(x) for x in re.search(r"off by (\d+)-(\d+)%", note).groups())
others = [abs(e) for e in errs if abs(e) > 20]
assert all(lo - 0.5 <= e <= hi + 0.5 for e in others), (others, lo, hi)
assert int(re.search(r"32 GPUs \+(\d+)%", note).group(1)) in [round(e) for e in errs]
PY
ok "rl: the accuracy note states --validate's figures" $?

# `architecture: search` in the file compares the architectures without --search (docs/rl.md;
# a new-user trial found it ran the colocated plan), keeping the file's other settings.
sed 's/^architecture: colocated.*/architecture: search/' "$src/examples/rl/grpo-70b-colocated.yaml" \
  >"$tmp/search.yaml"
grep -q '^architecture: search$' "$tmp/search.yaml"
ok "rl: the colocated example with architecture: search" $?
"$bin" rl --config "$tmp/search.yaml" --json >"$tmp/fs.json" 2>"$tmp/fs.err"
ok "rl --config (architecture: search): exit 0" $?
python3 - "$tmp/fs.json" "$tmp/fs.err" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
archs = {a["architecture"] for a in j["architectures"]}
assert archs == {"colocated", "disaggregated", "one-step-off", "fully-async"}, archs
assert j["step_time_s"] == min(a["step_time_s"] for a in j["architectures"])
assert "no architecture fixed" not in open(sys.argv[2]).read()
PY
ok "rl: architecture: search compares every architecture" $?
exit $fail
