#!/usr/bin/env bash
# Installs the Debian packages inferlab builds with, skipping those already present.
# The CUDA toolkit (nvcc, cuBLAS, CUPTI, NVTX) is optional and never installed here:
# without it the model, the CLI (predict-only), the plots and the CPU tests still build.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config
          libeigen3-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          python3 python3-matplotlib python3-numpy git
          python3-dev pybind11-dev python3-pybind11)
# Wanted, not needed: pandas (DataFrames from the Python module) and Chromium (the HTML report's test loads
# the page in it). A failure to install them is reported and the rest goes on; their tests skip without them.
optional=(python3-pandas chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
missing_optional=()
for p in "${optional[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_optional+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present (and ${optional[*]})"
  exit 0
fi
echo "install-deps: installing ${missing[*]} ${missing_optional[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    if [ ${#missing[@]} -eq 0 ]; then
      echo "install-deps: not installing ${missing_optional[*]} (no root or sudo): the tests that need them skip" >&2
      exit 0
    fi
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ] && ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
if [ ${#missing_optional[@]} -gt 0 ] && ! $sudo apt-get install -y --no-install-recommends "${missing_optional[@]}"; then
  $sudo apt-get update || true
  $sudo apt-get install -y --no-install-recommends "${missing_optional[@]}" ||
    echo "install-deps: could not install ${missing_optional[*]}: the tests that need them skip" >&2
fi
