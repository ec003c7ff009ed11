#!/usr/bin/env bash
# simulate --trace FILE.pftrace decoded with Perfetto's own protos (perfetto_trace_pb2 of the
# `perfetto` PyPI package, pinned below, in a venv under the build directory): every packet
# parses, the tracks are a process per shown timeline with its threads, every slice begins and
# ends on its track, every flow has both ends, and the slices equal the JSON trace's of the
# same run (an independent writer). Skips (77) only when the packages cannot be installed.
set -euo pipefail
bin=$(realpath "$1")
venv=$(realpath -m "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! "$venv/bin/python" -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2" 2>/dev/null; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" > "$work/venv.log" 2>&1 ||
     ! "$venv/bin/pip" install -q perfetto==0.59.1 protobuf==7.36.2 >> "$work/venv.log" 2>&1; then
    echo "SKIP: cannot install perfetto and protobuf from PyPI: $(tail -3 "$work/venv.log")"
    rm -rf "$venv"
    exit 77
  fi
fi
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
base=(-m gpt3-175b -c dgx-a100-80g -g 256 --tp 8 --pp 8 --vpp 3 --sp --gbs 64 --seq 2048
      --ranks all --trace-ranks 0,32,64,96,128,160,192,224,225,37)
"$bin" simulate "${base[@]}" --trace t.pftrace > /dev/null 2> pf.err || fail "$(cat pf.err)"
"$bin" simulate "${base[@]}" --trace t.json > /dev/null 2> js.err || fail "$(cat js.err)"
grep -q "wrote t.pftrace (.*; 10 GPU(s) in 8 process(es))" pf.err || fail "size line: $(cat pf.err)"
"$venv/bin/python" - <<'PY' || fail "decode"
import json
from collections import Counter, defaultdict
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
trace.ParseFromString(open("t.pftrace", "rb").read())
procs, threads, parent = {}, {}, {}
for p in trace.packet:
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        if d.HasField("process"):
            procs[d.uuid] = d.process.process_name
        elif d.HasField("thread"):
            threads[d.uuid] = d.thread.thread_name
            parent[d.uuid] = d.parent_uuid
assert len(procs) == 8, procs
assert all(parent[t] in procs for t in threads), parent
assert any("and 1 alike: 225" in n for n in procs.values()), procs  # GPU 224 and 225: TP peers
open_ = defaultdict(list)
slices, flow_out, flow_in = Counter(), Counter(), Counter()
last_ts = 0
for p in trace.packet:
    if not p.HasField("track_event"):
        continue
    e = p.track_event
    assert p.timestamp >= last_ts, "events out of order"
    last_ts = p.timestamp
    assert e.track_uuid in threads, e.track_uuid
    if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
        open_[e.track_uuid].append((p.timestamp, e.name))
        flow_out.update(e.flow_ids)
        flow_in.update(e.terminating_flow_ids)
    else:
        assert e.type == pb.TrackEvent.TYPE_SLICE_END
        ts, name = open_[e.track_uuid].pop()
        slices[(procs[parent[e.track_uuid]], threads[e.track_uuid], name, ts // 1000,
                (p.timestamp - ts) // 1000)] += 1
assert not any(open_.values()), "unclosed slices"
assert flow_out and set(flow_out) == set(flow_in) and all(v == 1 for v in flow_out.values())
# The JSON trace of the same run: the same slices (microseconds, rounded down).
events = json.load(open("t.json"))["traceEvents"]
pname = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
js = Counter()
for e in events:
    if e["ph"] == "X":
        ts = round(e["ts"] * 1000)
        js[(pname[e["pid"]], tname[(e["pid"], e["tid"])], e["name"], ts // 1000,
            (round((e["ts"] + e["dur"]) * 1000) - ts) // 1000)] += 1
assert sum(slices.values()) == sum(js.values()), (sum(slices.values()), sum(js.values()))
diff = (slices - js) + (js - slices)
# Rounding to nanoseconds can move a boundary by one microsecond in a few slices.
assert sum(diff.values()) <= 0.01 * sum(js.values()), list(diff.items())[:5]
print(f"perfetto_proto: {len(trace.packet)} packets, {sum(slices.values())} slices, "
      f"{len(flow_out)} flows")
PY
echo "perfetto_proto: all passed"
