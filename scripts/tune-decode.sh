#!/usr/bin/env bash
# Times the decode kernel's block shapes and split counts side by side on this GPU in one process (GQA 32/8,
# head dim 128, bf16, split-KV over a paged-16 cache at the four anchor shapes): the plan's choice and the
# candidates it was measured against (DecodeParams::block, kernels/attention/decode.h; DecodeShape::splits), with
# the read-kernel upper bound over the same bytes:
#   scripts/tune-decode.sh [BIN_DIR]
# The table (benchmark, event-timed K+V GB/s, kernel-only K+V GB/s from CUPTI, splits used) is what NOTES.md
# records.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}"
[ -d .gpu/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$bin/inferlab_bench_decode" --benchmark_filter='upper_bound|decode/split/paged16/' --benchmark_format=csv 2>/dev/null |
  awk -F, '
    NR==1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); h[$i] = i }; next }
    $1 ~ /decode/ { gsub(/"/, "", $1)
      printf "%-56s %8.0f %8.0f %6s\n", $1, $h["kv_GB/s"], (h["kernel_kv_GB/s"] ? $h["kernel_kv_GB/s"] : 0), (h["splits"] ? $h["splits"] : "-") }'
