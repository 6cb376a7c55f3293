#!/usr/bin/env bash
# Times the weight-only linear kernels (kernels/gemm/src/weight_only.cu) on this GPU with the plan's
# split-k and with forced ones (INFERLAB_LINEAR_SPLITK), beside cuBLAS bf16 in the same run:
#   scripts/tune-gemm.sh [BIN_DIR] [FILTER] [SPLITS]
# FILTER: an inferlab_bench_gemm filter (default: int4/int8/sparse24 at m = 1 and 16); SPLITS: forced
# split-k values to try after the plan's (each must divide k/128, else that row is skipped).
# The table printed last (split, benchmark, us, weight GB/s, speedup over bf16, model error) is what
# kernels/gemm/NOTES.md records.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}"
filter="${2:-linear/(int4|int8|sparse24)/.*/m(1|16)/}"
splits="${3:-}"
[ -d .gpu/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
table() {  # $1 split; benchmark CSV on stdin
  awk -F, -v s="$1" '
    NR==1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); h[$i] = i }; next }
    $1 ~ /linear/ && $h["real_time"] != "" { gsub(/"/, "", $1); sub(/\/iterations:1\/manual_time/, "", $1)
      printf "%-6s %-36s %9.1f us %7.0f GB/s  x%5.2f  model %+6.1f%%\n", s, $1, $h["real_time"], $h["weight_GB/s"],
             $h["speedup"], $h["error_pct"] }'
}
unset INFERLAB_LINEAR_SPLITK
"$bin/inferlab_bench_gemm" --benchmark_filter="$filter" --benchmark_format=csv 2>/dev/null | table plan
for s in $splits; do
  INFERLAB_LINEAR_SPLITK=$s "$bin/inferlab_bench_gemm" --benchmark_filter="$filter" --benchmark_format=csv 2>/dev/null |
    table "$s"
done
