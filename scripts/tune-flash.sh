#!/usr/bin/env bash
# Times the candidate tiles of the mma.sync flash kernel (head dim 128) side by side on this GPU
# (forced with INFERLAB_FLASH_IMPL=mma: on compute capability 9.0 the wgmma kernel runs otherwise):
#   scripts/tune-flash.sh [BIN_DIR] [FILTER]
# Each candidate is selected with INFERLAB_FLASH_TILE (kernels/attention/src/flash_fwd.cu) and timed
# by inferlab_bench_attention; the table printed last is what NOTES.md records.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}"
filter="${2:-attention/flash/(full|causal)/MHA/seq:(1024|4096|16384)/}"
export INFERLAB_FLASH_IMPL=mma
[ -d .gpu/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for tile in default 128x32x4 64x64x4 128x64x8; do
  if [ "$tile" = default ]; then unset INFERLAB_FLASH_TILE; else export INFERLAB_FLASH_TILE=$tile; fi
  "$bin/inferlab_bench_attention" --benchmark_filter="$filter" --benchmark_format=csv 2>/dev/null |
    awk -F, -v t="$tile" 'NR>1 && $1 ~ /attention/ {
      for (i = 1; i <= NF; i++) if (h[i] == "\"TFLOP/s\"" || h[i] == "TFLOP/s") c = i;
      printf "%-10s %-45s %8.1f TFLOP/s\n", t, $1, $c } NR==1 { for (i = 1; i <= NF; i++) h[i] = $i }'
done
