#!/bin/bash
# shellcheck disable=SC2016
# Megatron-DeepSpeed launch for llama3-70b on 64 x H100-SXM5-80GB (dgx-h100), written by dtplan.
# Plan: TP8 PP2 DP4 SP ZeRO-1 recompute=full mbs=1 gbs=512 schedule=1f1b
# For DeepSpeed 0.19.8 with deepspeedai/Megatron-DeepSpeed @ f4157bea69f3df8c6cb66f2ebcda66ba03d1288e (2024-12-24)
# Job: dtplan
set -euo pipefail
cd "$(dirname "$0")"
MEGATRON_DS_DIR="${MEGATRON_DS_DIR:-.}"
export CUDA_DEVICE_MAX_CONNECTIONS=1
ARGS=(
  '--num-layers' '80'
  '--hidden-size' '8192'
  '--ffn-hidden-size' '28672'
  '--num-attention-heads' '64'
  '--num-key-value-heads' '8'
  '--seq-length' '8192'
  '--max-position-embeddings' '8192'
  '--use-rotary-position-embeddings'
  '--rotary-position-embeddings-theta' '500000'
  '--swiglu'
  '--normalization' 'rmsnorm'
  '--layernorm-epsilon' '1e-05'
  '--untie-embeddings-and-output-weights'
  '--disable-bias-linear'
  '--attention-dropout' '0'
  '--hidden-dropout' '0'
  '--tensor-model-parallel-size' '8'
  '--pipeline-model-parallel-size' '2'
  '--sequence-parallel'
  '--recompute-granularity' 'full'
  '--recompute-method' 'uniform'
  '--recompute-num-layers' '1'
  '--deepspeed-activation-checkpointing'
  '--use-flash-attn-v2'
  '--micro-batch-size' '1'
  '--global-batch-size' '512'
  '--bf16'
  '--deepspeed'
  '--deepspeed_config' 'ds_config.json'
  '--zero-stage' '1'
)
DATA_ARGS=(--data-path "${DATA_PATH:?set DATA_PATH to a Megatron .bin/.idx prefix; Megatron-DeepSpeed has no mock data}" --tokenizer-type HFTokenizer --tokenizer-model "${TOKENIZER_MODEL:?set TOKENIZER_MODEL to a Hugging Face tokenizer name or path}")
TRAIN_ARGS=(--train-iters "${TRAIN_ITERS:-100}" --lr "${LR:-1.0e-4}" --log-interval 1)
# SAVE_INTERVAL defaults to 1000 iterations.
CKPT_ARGS=()
if [[ -n "${SAVE_DIR:-}" ]]; then
  CKPT_ARGS=(--save "$SAVE_DIR" --load "$SAVE_DIR" --save-interval "${SAVE_INTERVAL:-1000}")
fi
deepspeed --num_nodes=8 --num_gpus=8 --hostfile=hostfile \
  "$MEGATRON_DS_DIR/pretrain_gpt.py" "${ARGS[@]}" "${DATA_ARGS[@]}" "${TRAIN_ARGS[@]}" "${CKPT_ARGS[@]}" "$@"
