#!/usr/bin/env bash
# Times decode-attention kernel configurations side by side on this GPU (GQA 32/8, head dim 128, bf16,
# split-KV over paged-16 and contiguous caches at the four anchor shapes), with the read-kernel upper
# bound over the same bytes:
#   scripts/tune-decode.sh [BIN_DIR] [CONFIGS] [SPLITS]
# CONFIGS: INFERLAB_DECODE_KERNEL values (kernels/attention/src/decode.cu; "default" = unset);
# SPLITS: INFERLAB_DECODE_SPLITS values (0 = the kernel's plan). The table printed last (config,
# splits, benchmark, event-timed K+V GB/s, kernel-only K+V GB/s from CUPTI) is what NOTES.md records.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}"
configs="${2:-default}"
splits="${3:-0}"
[ -d .gpu/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
table() {  # $1 config, $2 splits; benchmark CSV on stdin
  awk -F, -v c="$1" -v s="$2" '
    NR==1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); h[$i] = i }; next }
    $1 ~ /decode/ { gsub(/"/, "", $1)
      printf "%-10s %-6s %-42s %8.0f %8.0f %6s\n", c, s, $1, $h["kv_GB/s"], (h["kernel_kv_GB/s"] ? $h["kernel_kv_GB/s"] : 0), (h["splits"] ? $h["splits"] : "-") }'
}
"$bin/inferlab_bench_decode" --benchmark_filter='upper_bound' --benchmark_format=csv 2>/dev/null | table read -
for c in $configs; do
  for s in $splits; do
    if [ "$c" = default ]; then unset INFERLAB_DECODE_KERNEL; else export INFERLAB_DECODE_KERNEL=$c; fi
    export INFERLAB_DECODE_SPLITS=$s
    "$bin/inferlab_bench_decode" --benchmark_filter='decode/split/(paged16|contiguous)/' --benchmark_format=csv 2>/dev/null |
      table "$c" "$s"
  done
done
"$bin/inferlab_bench_decode" --benchmark_filter='upper_bound' --benchmark_format=csv 2>/dev/null | table read -
