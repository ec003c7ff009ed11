#!/usr/bin/env bash
# dtplan execute under MPI on this host (cpu backend, 4 ranks), issue #20:
#  1. a TP2 PP2 plan of megatron-1.7b (scaled 1/16) completes, prints measured beside predicted
#     (step time, peak memory, op classes) for 4 ranks, and each rank's op log follows 1F1B's
#     order, written out here independently (Narayanan et al. 2021 §2.2: p - s - 1 warm-up
#     forwards, then alternate, then the remaining backwards), with every pipeline send
#     matched by a receive on the peer named;
#  2. a PP2 DP2 EP2 plan of Mixtral 8x7B (scaled 1/32) completes with expert all-to-alls;
#  3. a rank that stops mid-step (DTPLAN_EXEC_STALL) ends the run within the watchdog timeout,
#     the op, its group and the group's ranks named; a rank that dies is named by the launcher.
# Skips (77) when dtplan was built without MPI or mpirun is missing.
set -euo pipefail
dtplan=$1
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
mpi=(mpirun -np 4 --oversubscribe --mca mpi_yield_when_idle 1)
if ! "${mpi[@]}" "$dtplan" list backends >/dev/null 2>&1; then
  echo "mpirun cannot start dtplan here: skipped"; exit 77
fi
help=$("$dtplan" execute --help)
grep -q -- "--backend" <<< "$help" || { echo "FAIL: no execute command"; exit 1; }

echo "== 0. the cuda backend without a GPU"
if "$dtplan" list executors | grep -q '^cuda'; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "   a GPU is visible: scripts/gpu_check.sh runs the cuda backend; skipped here"
  else
    set +e
    "$dtplan" execute --backend cuda --model megatron-1.7b --cluster dgx-h100 --gpus 1 --gbs 1 \
      --steps 1 > "$work/cuda.out" 2> "$work/cuda.err"
    rc=$?
    set -e
    [[ $rc -eq 2 ]] && grep -q "no CUDA device is visible" "$work/cuda.err" ||
      { echo "FAIL: --backend cuda without a GPU: exit $rc"; cat "$work/cuda.err"; exit 1; }
    echo "   ok: refused with exit 2: $(cat "$work/cuda.err")"
  fi
else
  echo "   not built here (no CUDA toolkit): skipped"
fi

echo "== 1. TP2 PP2 dense plan"
"${mpi[@]}" "$dtplan" execute --backend cpu --model megatron-1.7b --cluster cpu-host --gpus 4 \
  --tp 2 --pp 2 --mbs 1 --gbs 6 --seq 256 --steps 1 --json --op-log "$work/log" \
  --update-profile "$work/updated.yaml" \
  > "$work/dense.json" 2> "$work/dense.err" || { cat "$work/dense.err"; exit 1; }
# The updated profile loads and estimates, and its GEMM table is the run's per-shape times.
"$dtplan" estimate --cluster "$work/updated.yaml" --gpus 4 --model megatron-1.7b --tp 2 --pp 2 \
  --gbs 6 --seq 256 > /dev/null || { echo "FAIL: the updated profile does not estimate"; exit 1; }
python3 - "$work/dense.json" "$work/log" "$work/updated.yaml" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
logdir = sys.argv[2]
table = {}
for line in open(sys.argv[3]):
    mg = re.search(r"\{precision: fp32, m: (\d+), n: (\d+), k: (\d+), tflops: ([0-9.e+-]+)\}", line)
    if mg: table[tuple(int(x) for x in mg.groups()[:3])] = float(mg.group(4))
assert j["gemm_shapes"], "no GEMM shapes"
for g in j["gemm_shapes"]:
    want = 2 * g["m"] * g["n"] * g["k"] / (g["measured_s_per_call"] / g["copies"]) / 1e12
    got = table[(g["m"], g["n"], g["k"])]
    assert abs(got - want) <= 1e-4 * want, (g, got, want)
assert j["ranks"] == 4, j["ranks"]
for side in ("measured", "predicted"):
    for k in ("step_time_s", "peak_memory_bytes"):
        assert j[side][k] > 0, (side, k, j[side][k])
names = {c["name"] for c in j["op_classes"]}
for want in ("gemm", "attention", "elementwise", "tp", "pp"):
    assert want in names, (want, names)
for c in j["op_classes"]:
    assert c["measured_s"] > 0 and c["predicted_s"] > 0, c
# Memory: what each rank held at its peak, from the schedule's real order of allocations and
# frees, against the memory model's figure for its stage (in-flight micro-batches by the
# schedule's formula): equal, as both count the same blocks.
for r in j["per_rank"]:
    ratio = r["peak_memory_bytes"] / r["predicted_peak_memory_bytes"]
    assert abs(ratio - 1) < 1e-6, (r["rank"], ratio)
# Order: Megatron's tp-cp-ep-dp-pp numbering puts ranks 0,1 on stage 0 and 2,3 on stage 1.
p, m = 2, 6
def one_f_one_b(s):
    out, warm = [], min(p - s - 1, m)
    f = b = 0
    while f < warm: out.append(("F", f)); f += 1
    while f < m: out += [("F", f), ("B", b)]; f += 1; b += 1
    while b < m: out.append(("B", b)); b += 1
    return out
sends, recvs = [], []
for rank in range(4):
    lines = open(f"{logdir}/rank-{rank}.log").read().splitlines()
    tasks = []
    for line in lines:
        mt = re.match(r"(F|B|BW) mb(\d+) c(\d+)", line)
        if mt and (not tasks or tasks[-1] != (mt.group(1)[0], int(mt.group(2)))):
            tasks.append((mt.group(1)[0], int(mt.group(2))))
        ms = re.search(r"send to (\d+)", line)
        if ms: sends.append((rank, int(ms.group(1)), line.split(" send")[0]))
        mr = re.search(r"recv from (\d+)", line)
        if mr: recvs.append((int(mr.group(1)), rank, line.split(" recv")[0]))
    stage = rank // 2
    assert tasks == one_f_one_b(stage), (rank, tasks)
# Each send from stage 0 to 1 (and back) has exactly one receive on the named peer.
assert len(sends) == len(recvs) == 4 * m, (len(sends), len(recvs))
assert sorted((a, b) for a, b, _ in sends) == sorted((a, b) for a, b, _ in recvs)
print("   ok: 4 ranks, 1F1B order on both stages, %d sends each matched" % len(sends))
PY

echo "== 2. PP2 DP2 EP2 MoE plan"
# Scaled 1/32, not the default 1/16: 1.3 GB resident per rank instead of 3.0 GB (measured with
# /usr/bin/time), so that four ranks beside another job's build or tests are not OOM-killed
# (a 24 GiB host running ci-local's ASan pass at the same time lost a rank, 2026-12-04).
"${mpi[@]}" "$dtplan" execute --backend cpu --model mixtral-8x7b --scale 32 --cluster cpu-host \
  --gpus 4 --pp 2 --ep 2 --mbs 1 --gbs 4 --seq 128 --steps 1 --json \
  > "$work/moe.json" 2> "$work/moe.err" || { cat "$work/moe.err"; exit 1; }
python3 - "$work/moe.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ranks"] == 4
names = {c["name"]: c for c in j["op_classes"]}
assert "ep" in names and names["ep"]["ops"] > 0, names.keys()
assert "dp" in names, names.keys()
print("   ok: %d expert all-to-alls, measured %.3f s / predicted %.3f s" %
      (names["ep"]["ops"], names["ep"]["measured_s"], names["ep"]["predicted_s"]))
PY

echo "== 4. a subset of a larger plan (--ranks)"
# One process runs plan rank 4 (stage 1) of an 8-GPU TP2 PP2 DP2 plan; two run the TP group
# {0, 1} of stage 0: the TP all-reduces run between them, the rest is modelled.
"$dtplan" execute --backend cpu --model megatron-1.7b --cluster cpu-host --gpus 8 --tp 2 --pp 2 \
  --gbs 8 --seq 256 --steps 1 --ranks 4 --json --out "$work/one.html" > "$work/one.json" \
  2> "$work/one.err" || { cat "$work/one.err"; exit 1; }
# The validation report: self-contained HTML, its source JSON the same as --json's.
python3 "$(dirname "$0")/check_report.py" html "$work/one.html" execute
python3 - "$work/one.html" "$work/one.json" <<'PY'
import html, json, re, sys
page = open(sys.argv[1]).read()
src = re.search(r'<script type="application/json" id="dtplan-source">(.*?)</script>', page, re.S)
embedded = json.loads(src.group(1))
printed = json.load(open(sys.argv[2]))
assert embedded["per_rank"][0]["rank"] == printed["per_rank"][0]["rank"] == 4
assert embedded["plan"] == printed["plan"]
PY
mpirun -np 2 --oversubscribe --mca mpi_yield_when_idle 1 "$dtplan" execute --backend cpu \
  --model megatron-1.7b --cluster cpu-host --gpus 8 --tp 2 --pp 2 --gbs 8 --seq 256 --steps 1 \
  --ranks 0-1 --json > "$work/two.json" 2> "$work/two.err" || { cat "$work/two.err"; exit 1; }
python3 - "$work/one.json" "$work/two.json" <<'PY'
import json, sys
one, two = (json.load(open(f)) for f in sys.argv[1:3])
assert one["ranks"] == 1 and one["plan_ranks"] == 8, (one["ranks"], one["plan_ranks"])
r = one["per_rank"][0]
assert (r["rank"], r["stage"]) == (4, 1), r  # tp-cp-ep-dp-pp: rank 4 = tp 0, dp 0, pp 1
assert r["modelled_ops"] > 0, r
assert 0.9 < r["peak_memory_bytes"] / r["predicted_peak_memory_bytes"] <= 1.0, r
assert any("--ranks" in n for n in one["notes"]), one["notes"]
assert [q["rank"] for q in two["per_rank"]] == [0, 1]
classes = {c["name"]: c for c in two["op_classes"]}
# Rank 0's TP group {0, 1} ran for real: its all-reduces are counted; its DP and PP peers are
# outside, so only those are modelled.
tp_modelled = sum(q["modelled_ops"] for q in two["per_rank"])
assert classes["tp"]["ops"] > 0 and tp_modelled > 0
print("   ok: rank 4 alone (%d modelled ops); ranks 0-1 with real TP all-reduces" % r["modelled_ops"])
PY

echo "== 3. a stopped rank, a dead rank"
start=$(date +%s)
set +e
DTPLAN_EXEC_STALL=3:40 "${mpi[@]}" "$dtplan" execute --backend cpu --model megatron-1.7b \
  --cluster cpu-host --gpus 4 --tp 2 --pp 2 --gbs 4 --seq 256 --steps 1 --timeout-s 5 \
  > "$work/stall.out" 2> "$work/stall.err"
rc=$?
set -e
took=$(( $(date +%s) - start ))
[[ $rc -eq 4 ]] || { echo "FAIL: a stopped rank ended the run with exit $rc, not 4 (watchdog)"; exit 1; }
grep -q "did not complete within 5 s (watchdog" "$work/stall.err" ||
  { echo "FAIL: no watchdog message"; cat "$work/stall.err"; exit 1; }
grep -Eq "group of ranks [0-9,]*3|pipeline peer rank 3" "$work/stall.err" ||
  { echo "FAIL: the stopped rank 3 is not named"; cat "$work/stall.err"; exit 1; }
[[ $took -le 60 ]] || { echo "FAIL: took $took s to end"; exit 1; }
echo "   ok: ended in $took s: $(grep -m1 'watchdog' "$work/stall.err" | cut -c1-200)"
set +e
DTPLAN_EXEC_STALL=3:40:exit "${mpi[@]}" "$dtplan" execute --backend cpu --model megatron-1.7b \
  --cluster cpu-host --gpus 4 --tp 2 --pp 2 --gbs 4 --seq 256 --steps 1 --timeout-s 5 \
  > "$work/die.out" 2> "$work/die.err"
rc=$?
set -e
[[ $rc -ne 0 ]] || { echo "FAIL: a dead rank did not end the run"; exit 1; }
grep -Eiq "rank 3|\[\[[0-9]+,[0-9]+\],3\]|process rank 3" "$work/die.err" ||
  { echo "FAIL: the dead rank is not named"; cat "$work/die.err"; exit 1; }
echo "   ok: a dead rank ends the run (exit $rc), named"
echo "PASS"
