# Sourced by the scripts/gpu-*.sh that run on a CUDA machine: `gpu_env [OUTDIR]` puts CUDA's libraries (and
# the carried ones of scripts/pack-gpu.sh) on LD_LIBRARY_PATH, with NCCL's (`nccl_lib_dir`: the toolkit's, or
# the nvidia-nccl wheel's, opened at run time by the parallel engine) where one is found, and sets
#   bin  .gpu/bin when the tree carries a packed build, else build
#   dir  OUTDIR, or data/results/<gpu slug> (the device name, lower case, runs of other characters as '-')
nccl_lib_dir() {
  local d
  for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do [ -e "$d/libnccl.so.2" ] && { echo "$d"; return; }; done
  python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true
}

gpu_env() {
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64"
  local nccl; nccl="$(nccl_lib_dir)"
  [ -n "$nccl" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
  if [ -d .gpu/bin ]; then bin=.gpu/bin; export LD_LIBRARY_PATH="$PWD/.gpu/lib:$LD_LIBRARY_PATH"; else bin=build; fi
  dir="${1:-data/results/$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g;s/-$//')}"
  mkdir -p "$dir"
}
