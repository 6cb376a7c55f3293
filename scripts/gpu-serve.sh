#!/usr/bin/env bash
# On a CUDA machine (scripts/pack-gpu.sh first): serving on the GPU engine, under OUTDIR (default
# data/results/<gpu slug>):
#   serve_tests.txt          the serving GPU tests (10,000 requests, preemption and recompute)
#   engine_step_cost.json    the engine's pass timings (inferlab calibrate-engine), the simulator's measured
#                            step cost for experiments/batching_engine.yaml (same model, slots, KV memory)
#   batching_engine.csv/.json + figures   experiments/batching_engine.yaml, measured
# usage: scripts/gpu-serve.sh [OUTDIR] [--no-tests] [--no-calibration]
set -uo pipefail
cd "$(dirname "$0")/.."
out=""; tests=1; calibrate=1
for a in "$@"; do
  case "$a" in
    --no-tests) tests=0 ;;
    --no-calibration) calibrate=0 ;;
    --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) out="$a" ;;
  esac
done
. scripts/gpu-env.sh
gpu_env "$out"
status=0
if [ $tests -eq 1 ]; then
  "$bin/inferlab_serve_gpu_tests" > "$dir/serve_tests.txt" 2>&1 || status=1
  tail -3 "$dir/serve_tests.txt"
fi
# The step cost goes where the spec reads it (the tree's data/results), and beside the results.
cost=data/results/nvidia-h100-80gb-hbm3/engine_step_cost.json
if [ $calibrate -eq 1 ]; then
  "$bin/inferlab" calibrate-engine --model llama-2-7b --max-batch 16 --max-len 1024 --kv-gib 4 --out "$cost" || status=1
fi
"$bin/inferlab" run experiments/batching_engine.yaml --out "$dir" --fresh || status=1
[ "$cost" -ef "$dir/engine_step_cost.json" ] || cp "$cost" "$dir/" 2>/dev/null
exit $status
