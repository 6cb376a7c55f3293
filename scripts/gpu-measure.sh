#!/usr/bin/env bash
# On a CUDA machine: runs an experiment with measured rows and figures, and the PyTorch peers
# of the same kind in the same session, under OUTDIR (default out/<gpu slug>; results to commit go
# to data/results/<gpu slug>, from a clean tree).
#   scripts/gpu-measure.sh attention|decode|compression[-h200] [OUTDIR]
#     attention(-h200)   experiments/attention_prefill(_h200).yaml + peers/sdpa_prefill.csv
#     decode(-h200)      experiments/decode_attention(_h200).yaml  + peers/sdpa_decode.csv
#     compression(-h200) experiments/compression(_h200).yaml + peers/compression.csv
#   (the -h200 specs hold the same points with the H200's measured ceilings; head dims 64, 96, 256:
#   inferlab run experiments/attention_prefill_dD[_h200].yaml, attention_peers.py --head-dim D)
# Then scripts/peers/compare_attention.py, compare_decode.py or compare_compression.py OUTDIR prints the ratios.
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  attention) spec=experiments/attention_prefill.yaml; mode=prefill ;;
  attention-h200) spec=experiments/attention_prefill_h200.yaml; mode=prefill ;;
  decode) spec=experiments/decode_attention.yaml; mode=decode ;;
  decode-h200) spec=experiments/decode_attention_h200.yaml; mode=decode ;;
  compression) spec=experiments/compression.yaml; mode=compression ;;
  compression-h200) spec=experiments/compression_h200.yaml; mode=compression ;;
  *) sed -n '2,11p' "$0"; exit 2 ;;
esac
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64"
if [ -d .gpu/bin ]; then bin=.gpu/bin; export LD_LIBRARY_PATH="$PWD/.gpu/lib:$LD_LIBRARY_PATH"; else bin=build; fi
out="${2:-}"
args=()
[ -n "$out" ] && args=(--out "$out")
"$bin/inferlab" run "$spec" "${args[@]}" --fresh || exit 1
dir="${out:-out/$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g;s/-$//')}"
mkdir -p "$dir/peers"
if [ "$mode" = compression ]; then
  PYTHONUNBUFFERED=1 python3 scripts/peers/compression_peers.py --out "$dir/peers/compression.csv"
else
  PYTHONUNBUFFERED=1 python3 scripts/peers/attention_peers.py --mode "$mode" --out "$dir/peers/sdpa_$mode.csv"
fi
