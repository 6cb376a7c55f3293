#!/usr/bin/env bash
# Times the weight-only linear kernels (kernels/gemm/src/weight_only.cu) on this GPU with the plan's
# split-k and with the candidates beside it (LinearParams::split_k: benchmarks .../m<m>/split:<s>, all in
# one process), beside cuBLAS bf16 in the same run:
#   scripts/tune-gemm.sh [BIN_DIR] [FILTER]
# FILTER: an inferlab_bench_gemm filter (default: int4/int8/sparse24 at m = 1 and 16, plan and splits; a
# split that does not divide k/128 is a skipped row).
# The table printed last (split, benchmark, us, weight GB/s, speedup over bf16, model error) is what
# kernels/gemm/NOTES.md records.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}"
filter="${2:-linear/(int4|int8|sparse24)/.*/m(1|16)/}"
[ -d .gpu/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
table() {  # benchmark CSV on stdin
  awk -F, '
    NR==1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); h[$i] = i }; next }
    $1 ~ /linear/ && $h["real_time"] != "" { gsub(/"/, "", $1); sub(/\/iterations:1\/manual_time/, "", $1)
      s = "plan"; if (match($1, /split:[0-9]+/)) { s = substr($1, RSTART + 6, RLENGTH - 6); sub(/\/split:[0-9]+/, "", $1) }
      printf "%-6s %-36s %9.1f us %7.0f GB/s  x%5.2f  model %+6.1f%%\n", s, $1, $h["real_time"], $h["weight_GB/s"],
             $h["speedup"], $h["error_pct"] }'
}
"$bin/inferlab_bench_gemm" --benchmark_filter="$filter" --benchmark_format=csv 2>/dev/null | table
