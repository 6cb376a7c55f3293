#!/usr/bin/env bash
# Times the flash ladder's rungs side by side on this GPU in one process: the mma.sync kernel with its
# planned head-dim-128 tile and the candidates it was chosen from, and the wgmma kernel, each forced
# through AttentionParams::flash (kernels/attention/attention.h), by inferlab_bench_attention:
#   scripts/tune-flash.sh [BIN_DIR] [FILTER]
# The table printed (rung, shape, TFLOP/s) is what kernels/attention/NOTES.md records.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}"
filter="${2:-attention/flash_(mma|wgmma)[^/]*/(full|causal)/MHA/seq:(1024|4096|16384)/}"
[ -d .gpu/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$bin/inferlab_bench_attention" --benchmark_filter="$filter" --benchmark_format=csv 2>/dev/null |
  awk -F, 'NR==1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); h[$i] = i }; next }
    $1 ~ /attention/ { gsub(/"/, "", $1); n = split($1, part, "/")
      printf "%-22s %-32s %8.1f TFLOP/s\n", part[2], part[3] "/" part[4] "/" part[5], $h["TFLOP/s"] }'
