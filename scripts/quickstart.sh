#!/usr/bin/env bash
# The main job: install what is missing, build, run the quickstart suite (experiments/quickstart_*.yaml).
# Without a GPU every point is predicted by the analytic model; with one, points whose scenario has a
# kernel are measured too. CSVs, provenance and figures land in out/quickstart/ (override: $1).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/quickstart}"
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
build/inferlab run experiments/quickstart_*.yaml --out "$out"
echo
echo "quickstart: results and figures in $out/ (figures in $out/figures/)"
ls -1 "$out"/figures/*.png
