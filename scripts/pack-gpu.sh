#!/usr/bin/env bash
# Builds here (for sm_90 unless CMAKE_CUDA_ARCHITECTURES is set) and packs what a GPU machine without
# our build dependencies needs into .gpu/ (git-ignored):
#   .gpu/bin/   the CLI (inferlab and inferlab-cuda, which it hands measuring verbs to) and every test binary
#   .gpu/lib/   the shared libraries they link from this system (fmt, yaml-cpp, benchmark, ...),
#               leaving out glibc/libstdc++ and CUDA's own libraries, which the GPU machine has.
# Then, on the GPU machine, in a copy of this tree: scripts/gpu-check.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${CMAKE_CUDA_ARCHITECTURES:-90}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build build -j"$(nproc)"
rm -rf .gpu/bin .gpu/lib
mkdir -p .gpu/bin .gpu/lib
cp build/inferlab .gpu/bin/
[ -x build/inferlab_engine_logits ] && cp build/inferlab_engine_logits .gpu/bin/
[ -x build/inferlab-cuda ] && cp build/inferlab-cuda .gpu/bin/  # what `inferlab` hands measuring verbs to
[ -x build/inferlab_collectives ] && cp build/inferlab_collectives .gpu/bin/  # NCCL sweeps (scripts/gpu-parallel.sh)
for b in build/inferlab_bench_*; do [ -x "$b" ] && cp "$b" .gpu/bin/; done
find build/tests -maxdepth 1 -type f -perm -u+x -name 'inferlab_*_tests' -exec cp {} .gpu/bin/ \;
for bin in .gpu/bin/*; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}' |
    { grep -v -E '/(libc|libm|libdl|librt|libutil|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so|/cuda[^/]*/|libcuda\.so|libnvidia' || true; } |
    while read -r lib; do cp -n "$lib" .gpu/lib/ 2>/dev/null || true; done
done
echo "pack-gpu: $(ls .gpu/bin | wc -l) binaries, $(ls .gpu/lib | wc -l) libraries, $(du -sh .gpu | cut -f1) in .gpu/"
