#!/usr/bin/env bash
# GPU check: builds dtplan with CUDA and MPI, runs a short calibration on the GPUs of this
# machine and prints what it measured: TFLOP/s per precision against the datasheet peak, the
# fitted GEMM efficiency parameters and the collective fits. Meant to finish in under five
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
echo "gpu_check: done in $(( $(date +%s) - start )) s; profile at $out/calibrated.yaml"
