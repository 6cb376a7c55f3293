#!/usr/bin/env bash
# On a host with two or more GPUs (scripts/pack-gpu.sh first; NCCL's library found by gpu-env.sh; keep
# NCCL_NVLS_ENABLE as the machine sets it): the parallel engine, under OUTDIR (default
# data/results/<gpu slug>):
#   parallel_tests.txt                 the engine's GPU tests (every layout sharded on one GPU, NCCL of one rank)
#   collectives.csv, collectives_fit.json   inferlab_collectives: NCCL all-reduce and send, the alpha-beta fit
#   parallel_engine.csv/.json + figures     experiments/parallel_engine.yaml, measured (TP 1, TP 2, PP 2)
# The fit goes into data/hardware/<gpu>.measured.json's "interconnect" by hand (it is checked before it is
# trusted); the experiment predicts with the one already there.
# usage: scripts/gpu-parallel.sh [OUTDIR] [--no-tests] [--no-collectives]
set -uo pipefail
cd "$(dirname "$0")/.."
out=""; tests=1; coll=1
for a in "$@"; do
  case "$a" in
    --no-tests) tests=0 ;;
    --no-collectives) coll=0 ;;
    --help) sed -n '2,10p' "$0"; exit 0 ;;
    *) out="$a" ;;
  esac
done
. scripts/gpu-env.sh
gpu_env "$out"
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
[ "$gpus" -ge 2 ] || { echo "gpu-parallel: $gpus GPU(s) here; the parallel layouts need 2" >&2; exit 1; }
[ -n "$(nccl_lib_dir)" ] || { echo "gpu-parallel: no libnccl.so.2 (toolkit, system or nvidia-nccl wheel)" >&2; exit 1; }
status=0
if [ $tests -eq 1 ]; then
  "$bin/inferlab_engine_tests" --gtest_filter='*Sharded*:*Nccl*' > "$dir/parallel_tests.txt" 2>&1 || status=1
  tail -3 "$dir/parallel_tests.txt"
fi
if [ $coll -eq 1 ] && [ -x "$bin/inferlab_collectives" ]; then
  "$bin/inferlab_collectives" --out "$dir" || status=1
fi
"$bin/inferlab" run experiments/parallel_engine.yaml --out "$dir" --fresh || status=1
exit $status
