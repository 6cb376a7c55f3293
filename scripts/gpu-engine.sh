#!/usr/bin/env bash
# On a CUDA machine: the engine's measurements, under OUTDIR (default data/results/<gpu slug>):
#   engine_decode.csv/.json + figures   experiments/engine_decode.yaml, measured (scripts/pack-gpu.sh first)
#   engine_vs_hf.json                    the engine against Hugging Face transformers (Llama, GQA; fp32 reference,
#                                        bf16 peer), scripts/peers/hf_engine_peer.py
#   engine_vs_hf_qwen2.json              the same for Qwen2 (q/k/v biases)
#   peers/hf_static_cache.csv            with --perf: HF generate with a static cache (compiled), Llama-2-7B shape
# usage: scripts/gpu-engine.sh [OUTDIR] [--perf] [--no-experiment]
set -uo pipefail
cd "$(dirname "$0")/.."
out=""; perf=0; experiment=1
for a in "$@"; do
  case "$a" in
    --perf) perf=1 ;;
    --no-experiment) experiment=0 ;;
    --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) out="$a" ;;
  esac
done
. scripts/gpu-env.sh
gpu_env "$out"
mkdir -p "$dir/peers"
status=0
export PYTHONUNBUFFERED=1
python3 scripts/peers/hf_engine_peer.py --bin "$bin" --out "$dir/engine_vs_hf.json" || status=1
python3 scripts/peers/hf_engine_peer.py --bin "$bin" --arch qwen2 --out "$dir/engine_vs_hf_qwen2.json" || status=1
if [ $experiment -eq 1 ]; then
  "$bin/inferlab" run experiments/engine_decode.yaml --out "$dir" --fresh || status=1
fi
if [ $perf -eq 1 ]; then
  python3 scripts/peers/hf_engine_peer.py --perf --perf-out "$dir/peers/hf_static_cache.csv" || status=1
fi
exit $status
