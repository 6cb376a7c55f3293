#!/usr/bin/env bash
# Measures this GPU's ceilings, the per-pipe ones of the refined model included, in ~2-3 minutes,
# and writes everything under OUTDIR:
#   nvidia-smi.txt            the GPU, driver and clocks as found (nothing is changed on the card)
#   <id>.measured.json        `inferlab ceilings`: HBM copy/read/L2 bandwidth, FP32, cuBLAS tensor
#                             peaks, launch overhead, and "pipes": FP32/ALU/MUFU/conversion lanes per
#                             SM per clock, issue, mma.sync, the SM clock under FMA and tensor load,
#                             the dependent issue interval, DRAM latency (pointer chase, idle and
#                             loaded), the bandwidth 1..all SMs reach, the launch floor eager and graph
#   ceilings.log              its table
#   pipe_tests.log            the host-side checks of the pipe measurements (no GPU needed)
# Then, on any machine: copy OUTDIR/<id>.measured.json to data/hardware/ and run
# `build/inferlab fidelity --write` to re-predict the committed results with the measured pipes.
# Binaries come from .gpu/bin (scripts/pack-gpu.sh) or, failing that, build/.
# usage: scripts/gpu-ceilings.sh OUTDIR
set -uo pipefail
[ $# -ge 1 ] && [ "$1" != "--help" ] || { sed -n '2,17p' "$0"; exit 2; }
cd "$(dirname "$0")/.."
out="$1"
mkdir -p "$out"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64"
if [ -d .gpu/bin ]; then bin=.gpu/bin; export LD_LIBRARY_PATH="$PWD/.gpu/lib:$LD_LIBRARY_PATH"
else bin=build; fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi not available" > "$out/nvidia-smi.txt"
status=0
for t in "$bin"/inferlab_experiments_tests "$bin"/tests/inferlab_experiments_tests; do
  [ -x "$t" ] && { "$t" --gtest_filter='PipeCeilings.*' > "$out/pipe_tests.log" 2>&1 || status=1; break; }
done
# The measured file's name is the hardware id of this device (the CLI finds it from the device name).
timeout 540 "$bin/inferlab" ceilings --out "$out/measured.json" > "$out/ceilings.log" 2>&1 || status=1
if [ -f "$out/measured.json" ]; then
  id=$(python3 -c "import json; print(json.load(open('$out/measured.json'))['id'])")
  mv "$out/measured.json" "$out/$id.measured.json"
  echo "wrote $out/$id.measured.json: commit it as data/hardware/$id.measured.json" | tee -a "$out/ceilings.log"
fi
tail -30 "$out/ceilings.log"
exit $status
