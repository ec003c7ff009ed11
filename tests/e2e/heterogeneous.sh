#!/usr/bin/env bash
# A heterogeneous cluster (docs/heterogeneous.md) as a user runs it: the example cluster YAML
# through check, estimate --json, simulate --json --trace and search --json. Stage groups as the
# ranks fill the groups, each memory entry against its own GPU, the warning on every estimate,
# and the simulated step beside the closed form.
set -euo pipefail
bin=$(realpath "$1")
cluster=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
plan=(-m gpt3-175b -c "$cluster" --tp 8 --pp 8 --sp --recompute selective --zero 1 --gbs 1536)
"$bin" check "${plan[@]}" > check.txt 2>&1 || fail "check: $(cat check.txt)"
"$bin" estimate "${plan[@]}" --json > est.json 2> est.err || fail "estimate: $(cat est.err)"
"$bin" simulate "${plan[@]}" --json --trace t.json > sim.json 2> sim.err || fail "simulate: $(cat sim.err)"
"$bin" search -m gpt3-175b -c "$cluster" --gbs 1536 --top 3 --json > search.json 2> search.err ||
  fail "search: $(cat search.err)"
python3 - <<'PY' || fail "bad output"
import json
e = json.load(open("est.json"))
g = e["cluster"]["groups"]
# 8 DGX H100 nodes then 8 DGX A100 nodes; PP8 on 128 GPUs: 16 GPUs per stage.
assert [x["profile"] for x in g] == ["dgx-h100", "dgx-a100-80g"], g
assert [x["stages"] for x in g] == [[0, 3], [4, 7]], g
assert [x["first_rank"] for x in g] == [0, 64] and [x["gpus"] for x in g] == [64, 64], g
assert len(e["memory"]) == 8 and all(m["fits"] for m in e["memory"])
assert any(w["code"] == "heterogeneous-cluster" for w in e["warnings"]), e["warnings"]
s = json.load(open("sim.json"))
assert abs(s["step_time_s"] - e["step_time_s"]) / e["step_time_s"] < 0.05, (s["step_time_s"], e["step_time_s"])
json.load(open("t.json"))
r = json.load(open("search.json"))
assert r["cluster"]["groups"][1]["first_rank"] == 64
assert r["top"], "no plan"
# The H100 group's stages take more layers than the A100 group's (--stage-split K:A).
best = r["top"][0]
assert best["plan"]["stage_split"], best["plan"]
layers = [m["layers"] for m in best["memory"]]
k = int(best["plan"]["stage_split"].split(":")[0])
assert k == best["plan"]["pp"] // 2 and layers[0] > layers[-1], (best["plan"], layers)
names = [x["reason"] for x in r["rejected"]]
assert any("spans two device groups" in n for n in names), names
PY
echo "heterogeneous: all passed"
