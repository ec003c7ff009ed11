#!/bin/bash
# shellcheck disable=SC2016
# Megatron-DeepSpeed launch for mixtral-8x7b on 64 x H100-SXM5-80GB (dgx-h100), written by dtplan.
# Plan: TP2 PP1 DP32 EP8 SP ZeRO-3 recompute=full mbs=1 gbs=256
# Job: dtplan
set -euo pipefail
cd "$(dirname "$0")"
MEGATRON_DS_DIR="${MEGATRON_DS_DIR:-.}"
ARGS=(
  '--num-layers' '32'
  '--hidden-size' '4096'
  '--ffn-hidden-size' '14336'
  '--num-attention-heads' '32'
  '--num-key-value-heads' '8'
  '--seq-length' '4096'
  '--max-position-embeddings' '32768'
  '--vocab-size' '32000'
  '--position-embedding-type' 'rope'
  '--swiglu'
  '--normalization' 'RMSNorm'
  '--untie-embeddings-and-output-weights'
  '--disable-bias-linear'
  '--num-experts' '8'
  '--topk' '2'
  '--tensor-model-parallel-size' '2'
  '--pipeline-model-parallel-size' '1'
  '--moe-expert-parallel-size' '8'
  '--sequence-parallel'
  '--recompute-granularity' 'full'
  '--recompute-method' 'uniform'
  '--recompute-num-layers' '1'
  '--micro-batch-size' '1'
  '--global-batch-size' '256'
  '--bf16'
  '--deepspeed'
  '--deepspeed_config' 'ds_config.json'
  '--zero-stage' '3'
  '--no-pipeline-parallel'
  '--deepspeed-activation-checkpointing'
)
TRAIN_ARGS=(--train-iters "${TRAIN_ITERS:-100}" --lr "${LR:-1.0e-4}" --log-interval 1)
deepspeed --num_nodes=8 --num_gpus=8 --hostfile=hostfile \
  "$MEGATRON_DS_DIR/pretrain_gpt.py" "${ARGS[@]}" "${TRAIN_ARGS[@]}" "$@"
