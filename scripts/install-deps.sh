#!/usr/bin/env bash
# Installs the Debian packages inferlab builds with, skipping those already present.
# The CUDA toolkit (nvcc, cuBLAS, CUPTI, NVTX) is optional and never installed here:
# without it the model, the CLI (predict-only), the plots and the CPU tests still build.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config
          libeigen3-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          python3 python3-matplotlib python3-numpy git)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
