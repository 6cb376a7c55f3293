#!/usr/bin/env bash
# On a CUDA machine (scripts/pack-gpu.sh first): speculative decoding on the GPU engine, under OUTDIR
# (default data/results/<gpu slug>):
#   speculative_tests.txt      the engine's GPU tests (greedy speculative = plain greedy for every drafter,
#                              gamma 1..8, batch 1 and 3; rollback; multi-token graphs; bad input)
#   speculative_engine.csv/.json + figures   experiments/speculative_engine.yaml, measured
# usage: scripts/gpu-speculative.sh [OUTDIR] [--no-tests]
set -uo pipefail
cd "$(dirname "$0")/.."
out=""; tests=1
for a in "$@"; do
  case "$a" in
    --no-tests) tests=0 ;;
    --help) sed -n '2,7p' "$0"; exit 0 ;;
    *) out="$a" ;;
  esac
done
. scripts/gpu-env.sh
gpu_env "$out"
status=0
if [ $tests -eq 1 ]; then
  "$bin/inferlab_engine_tests" > "$dir/speculative_tests.txt" 2>&1 || status=1
  tail -3 "$dir/speculative_tests.txt"
fi
"$bin/inferlab" run experiments/speculative_engine.yaml --out "$dir" --fresh || status=1
exit $status
