#!/usr/bin/env bash
# Runs the GPU checks on any CUDA machine and writes everything under OUTDIR:
#   nvidia-smi.txt        the GPU, driver and clocks as found (nothing is changed on the card)
#   <suite>.log / .xml    every GoogleTest binary (GPU tests included: they must pass, not skip)
#   quickstart/           the quickstart suite (measured where a scenario has a kernel)
#   summary.txt           one line per suite
# Binaries come from .gpu/bin (scripts/pack-gpu.sh) or, failing that, build/.
# usage: scripts/gpu-check.sh OUTDIR
set -uo pipefail
[ $# -ge 1 ] && [ "$1" != "--help" ] || { sed -n '2,9p' "$0"; exit 2; }
cd "$(dirname "$0")/.."
out="$1"
mkdir -p "$out"
. scripts/gpu-env.sh
gpu_env "$out"  # CUDA's, the packed and NCCL's libraries on LD_LIBRARY_PATH; bin
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi not available" > "$out/nvidia-smi.txt"
status=0
: > "$out/summary.txt"
for t in "$bin"/inferlab_*_tests "$bin"/tests/inferlab_*_tests; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  "$t" --gtest_output="xml:$out/$name.xml" > "$out/$name.log" 2>&1
  rc=$?
  skipped=$(grep -c '^\[  SKIPPED \]' "$out/$name.log" || true)
  passed=$(grep -E '^\[  PASSED  \]' "$out/$name.log" | head -1)
  echo "$name: exit $rc; $passed; skipped lines: $skipped" | tee -a "$out/summary.txt"
  [ $rc -eq 0 ] || status=1
  # On a GPU machine a skipped GPU test is a failure of this check.
  if [ "$skipped" -gt 0 ] && nvidia-smi >/dev/null 2>&1; then
    echo "  $name skipped tests on a machine with a GPU:" | tee -a "$out/summary.txt"
    grep '^\[  SKIPPED \]' "$out/$name.log" | tee -a "$out/summary.txt"
    status=1
  fi
done
"$bin/inferlab" run experiments/quickstart_*.yaml --out "$out/quickstart" > "$out/quickstart.log" 2>&1
rc=$?
echo "quickstart: exit $rc" | tee -a "$out/summary.txt"
[ $rc -eq 0 ] || status=1
exit $status
