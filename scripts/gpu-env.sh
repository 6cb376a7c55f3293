# Sourced by the scripts/gpu-*.sh that run on a CUDA machine: `gpu_env [OUTDIR]` puts CUDA's libraries (and
# the carried ones of scripts/pack-gpu.sh) on LD_LIBRARY_PATH and sets
#   bin  .gpu/bin when the tree carries a packed build, else build
#   dir  OUTDIR, or data/results/<gpu slug> (the device name, lower case, runs of other characters as '-')
gpu_env() {
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64"
  if [ -d .gpu/bin ]; then bin=.gpu/bin; export LD_LIBRARY_PATH="$PWD/.gpu/lib:$LD_LIBRARY_PATH"; else bin=build; fi
  dir="${1:-data/results/$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g;s/-$//')}"
  mkdir -p "$dir"
}
