#!/usr/bin/env bash
# On a CUDA machine: runs the decode-attention experiment (measured rows + figures) and the PyTorch
# SDPA decode peers in the same session, under OUTDIR (default data/results/<gpu slug>).
#   scripts/gpu-measure-decode.sh [OUTDIR]
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64"
if [ -d .gpu/bin ]; then bin=.gpu/bin; export LD_LIBRARY_PATH="$PWD/.gpu/lib:$LD_LIBRARY_PATH"; else bin=build; fi
out="${1:-}"
args=()
[ -n "$out" ] && args=(--out "$out")
"$bin/inferlab" run experiments/decode_attention.yaml "${args[@]}" --fresh || exit 1
dir="${out:-data/results/$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g;s/-$//')}"
mkdir -p "$dir/peers"
PYTHONUNBUFFERED=1 python3 scripts/peers/attention_peers.py --mode decode --out "$dir/peers/sdpa_decode.csv"
