#!/usr/bin/env bash
# GPU check: builds dtplan with CUDA and MPI, runs a short calibration on the GPUs of this
# machine and prints what it measured: TFLOP/s per precision against the datasheet peak, the
# fitted GEMM efficiency parameters and the collective fits. Then the executor (dtplan execute
# --backend cuda, docs/executor.md) on one GPU: a small dense plan and a small MoE plan, measured
# beside predicted (step, peak memory, GEMM time per shape), and a plan the memory model says
# does not fit, which must end with a real out-of-memory; with two GPUs or more, a two-stage
# pipeline (1F1B and interleaved) over NCCL send/recv. Meant to finish in under five
# minutes on one H200. A single GPU still exercises NCCL initialization and send/recv to self;
# with several GPUs, one MPI rank drives each and the collectives run across them.
#
#   bash scripts/gpu_check.sh [base-profile]      (default: dgx-h200)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-dgx-h200}
start=$(date +%s)
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
bash scripts/setup-debian.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTPLAN_CUDA=ON -DDTPLAN_MPI=ON \
  -DDTPLAN_BUILD_TESTS=OFF -DDTPLAN_BUILD_BENCH=OFF
cmake --build build-gpu --target dtplan
echo "gpu_check: built in $(( $(date +%s) - start )) s"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[[ "$gpus" -ge 1 ]] || { echo "gpu_check: no GPU visible"; exit 1; }
out=$(mktemp -d)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launcher=()
[[ "$gpus" -gt 1 ]] && launcher=(mpirun -np "$gpus" --bind-to none)
# Quick sweep: the zoo's Llama-3-8B layer shapes at TP 8 and a 3x3x3 grid per precision, and
# collectives from 1 KiB to 64 MiB (send/recv to self on one GPU).
"${launcher[@]}" ./build-gpu/cli/dtplan calibrate --backend cuda --profile "$profile" --quick \
  --timeout-s 120 --out "$out/calibrated.yaml"
echo
cat "$out/calibrated.md"
# The executor, one GPU, one-stage plans.
prof_gib=$(awk '/memory_gib/ {print $2; exit}' "hardware_profiles/$profile.yaml")
echo "== executor: megatron-1.7b, one GPU, mbs 2, gbs 8, seq 2048 (fits)"
./build-gpu/cli/dtplan execute --backend cuda --model megatron-1.7b --cluster "$profile" --gpus 1 \
  --mbs 2 --gbs 8 --seq 2048 --steps 3 --timeout-s 120 || echo "gpu_check: the dense executor run FAILED"
echo "== executor: Mixtral 8x7B scaled 1/4, one GPU, mbs 1, gbs 4, seq 2048 (MoE)"
./build-gpu/cli/dtplan execute --backend cuda --model mixtral-8x7b --scale 4 --cluster "$profile" \
  --gpus 1 --mbs 1 --gbs 4 --seq 2048 --steps 3 --timeout-s 120 || echo "gpu_check: the MoE executor run FAILED"
echo "== executor: Llama-3-8B, one GPU, no ZeRO (the memory model says it does not fit in $prof_gib GiB)"
set +e
./build-gpu/cli/dtplan execute --backend cuda --model llama3-8b --cluster "$profile" --gpus 1 \
  --mbs 1 --gbs 1 --seq 2048 --steps 1 --timeout-s 120 2>&1 | tail -3
echo "gpu_check: exit ${PIPESTATUS[0]} (2 with 'out of memory' expected)"
set -e
if [[ "$gpus" -ge 2 ]]; then
  # Pipeline transfers (ncclSend / ncclRecv per stage pair): two stages, 1F1B and interleaved.
  for sched in "1f1b --vpp 1" "interleaved --vpp 2"; do
    echo "== executor: megatron-1.7b, PP2 on 2 GPUs, schedule $sched"
    mpirun -np 2 --bind-to none ./build-gpu/cli/dtplan execute --backend cuda --model megatron-1.7b \
      --cluster "$profile" --gpus 2 --pp 2 --schedule $sched --mbs 1 --gbs 8 --seq 2048 --steps 3 \
      --timeout-s 120 || echo "gpu_check: the PP2 executor run ($sched) FAILED"
  done
fi
echo "gpu_check: done in $(( $(date +%s) - start )) s; profile at $out/calibrated.yaml"
