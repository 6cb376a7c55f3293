#!/usr/bin/env bash
# Installs the Python module `inferlab` (with the models, hardware, specs and plot scripts it reads) into an
# environment: the active virtualenv ($VIRTUAL_ENV), else the user's site-packages (~/.local), or --prefix DIR.
#   scripts/install-python.sh [--prefix DIR] [--build BUILD_DIR]      (default build folder: build)
# Then, from anywhere:  python3 -c 'import inferlab; print(inferlab.step("llama-2-7b", "h100-sxm-80gb", 4096))'
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
prefix="${VIRTUAL_ENV:-$HOME/.local}"
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    *) echo "usage: $0 [--prefix DIR] [--build BUILD_DIR]" >&2; exit 2 ;;
  esac
done
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
if ! grep -q '^INFERLAB_PYTHON_MODULE_BUILT:INTERNAL=ON' "$build/CMakeCache.txt"; then
  echo "install-python: the Python module is not configured in $build: install python3-dev pybind11-dev python3-pybind11 (scripts/install-deps.sh), then reconfigure" >&2
  exit 1
fi
cmake --build "$build" --target inferlab_python_core
cmake --install "$build" --component python --prefix "$prefix"
echo "install-python: installed into $prefix"
