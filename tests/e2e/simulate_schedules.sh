#!/usr/bin/env bash
# dtplan simulate as a user runs it, for every schedule the simulator orders: the --json summary
# and the --trace file parse as JSON, the trace has a process per stage with its compute and
# pp send threads, complete slices and one flow arrow per pipeline send, and the V schedules ask for --vpp 2 in plain words.
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
base=(-m gpt3-175b -c dgx-a100-80g -g 256 --tp 8 --pp 8 --sp --gbs 64 --seq 2048)
for sv in gpipe:1 1f1b:1 interleaved:3 zb-h1:1 zb-v:2 dualpipe-v:2; do
  s=${sv%%:*} v=${sv##*:}
  "$bin" simulate "${base[@]}" --vpp "$v" --schedule "$s" --json --trace "$s.trace.json" \
    > "$s.json" 2> "$s.err" || fail "$s: $(cat "$s.err")"
  python3 - "$s" "$v" <<'PY' || fail "$s: bad JSON"
import json, sys
s, v = sys.argv[1], int(sys.argv[2])
summary = json.load(open(f"{s}.json"))
assert summary["evaluator"] == "des", summary.get("evaluator")
assert summary["step_time_s"] > 0
assert len(summary["simulated_memory"]) == 8
events = json.load(open(f"{s}.trace.json"))["traceEvents"]
meta = [e for e in events if e["ph"] == "M"]
procs = [e for e in meta if e["name"] == "process_name"]
threads = {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"}
slices = [e for e in events if e["ph"] == "X"]
flows = [e for e in events if e["ph"] in ("s", "f")]
assert len(procs) == 8 and {e["name"] for e in meta} == {"process_name", "thread_name"}
assert all((p, "compute") in threads and (p, "pp send") in threads for p in range(1, 7)), threads
assert all(e["dur"] >= 0 and 0 <= e["pid"] < 8 for e in slices)
compute = [e for e in slices if e["tid"] == 0]
assert {e["cat"] for e in compute} <= {"fwd", "bwd", "fwd+bwd"}
assert ("fwd+bwd" in {e["cat"] for e in compute}) == (s == "dualpipe-v")
# Every pipeline send has its arrow: one "s" and one "f" per id.
ids = {}
for e in flows:
    ids.setdefault(e["id"], []).append(e["ph"])
assert ids and all(sorted(v) == ["f", "s"] for v in ids.values())
assert len(ids) == sum(1 for e in slices if e["cat"] == "pp") // 2
PY
done
# --ranks all with a gzip'd trace of every GPU: alike replicas share one process (the 32 data-
# and tensor-parallel replicas of each stage), the file is gzip (RFC 1952) of the same JSON, and
# the size is printed. A slow GPU breaks the symmetry: its replica gets processes of its own.
"$bin" simulate "${base[@]}" --ranks all --trace-ranks all --trace all.json.gz > /dev/null \
  2> all.err || fail "--ranks all: $(cat all.err)"
grep -q "wrote all.json.gz (.*of JSON; 256 GPU(s) in 8 process(es))" all.err \
  || fail "trace size line: $(cat all.err)"
"$bin" simulate "${base[@]}" --ranks all --trace-ranks all --slow-gpu 37:1.5 \
  --trace slow.json.gz > /dev/null 2> slow.err || fail "slow: $(cat slow.err)"
"$bin" simulate "${base[@]}" --ranks all --trace-ranks 0-7,32,200 --trace some.json \
  > /dev/null 2> some.err || fail "--trace-ranks: $(cat some.err)"
python3 - <<'PY' || fail "gzip'd traces"
import gzip, json
def procs(path):
    opener = gzip.open if path.endswith(".gz") else open
    with open(path, "rb") as f:
        head = f.read(2)
    assert (head == b"\x1f\x8b") == path.endswith(".gz"), (path, head)  # the gzip magic
    events = json.load(opener(path, "rt"))["traceEvents"]
    return [e["args"]["name"] for e in events if e.get("name") == "process_name"]
all_ = procs("all.json.gz")
assert len(all_) == 8 and all("and 31 alike" in n for n in all_), all_
slow = procs("slow.json.gz")
# GPU 37 is stage 1 of the first data-parallel replica (TP group 32-39): that replica's 8 GPUs of
# each stage are a group apart from the other 24 (four replicas of 8 TP ranks; pp outermost).
assert len(slow) > 8, slow
some = procs("some.json")
# GPUs 0-7 are TP peers of stage 0 (one process), 32 is stage 1, 200 stage 6.
assert len(some) == 3 and "and 7 alike" in some[0], some
PY
"$bin" simulate "${base[@]}" --trace-ranks 5 --trace x.json > /dev/null 2> r5.err \
  && fail "--trace-ranks 5 with --ranks stage"
grep -q -- "--trace-ranks: GPU 5 is not simulated" r5.err || fail "$(cat r5.err)"
"$bin" simulate "${base[@]}" --schedule zb-v > /dev/null 2> vpp.err && fail "zb-v ran with vpp 1"
grep -q -- "--vpp.*vpp must be 2" vpp.err || fail "zb-v without --vpp 2: $(cat vpp.err)"
echo "simulate_schedules: all passed"
