#!/usr/bin/env bash
# Runs this process's shard of a spec: the shard index and count come from the launcher's environment,
# so one line starts every shard under Slurm (a job array) or MPI (mpirun), and `inferlab merge` joins them.
#   run-shard.sh SPEC.yaml OUT_DIR [more `inferlab run` options]
# Index and count, first found:  $INFERLAB_SHARD ("I/N");  Slurm job array: $SLURM_ARRAY_TASK_ID (from 0)
# of $SLURM_ARRAY_TASK_COUNT;  Open MPI: $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE;  MPICH/Hydra:
# $PMI_RANK of $PMI_SIZE.  $INFERLAB (default: build/inferlab of this checkout) names the CLI.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 SPEC.yaml OUT_DIR [inferlab run options]" >&2
  exit 2
fi
spec="$1" out="$2"
shift 2
here="$(cd "$(dirname "$0")/../.." && pwd)"
inferlab="${INFERLAB:-$here/build/inferlab}"
if [ -n "${INFERLAB_SHARD:-}" ]; then
  shard="$INFERLAB_SHARD"
elif [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
  # A job array numbered from 0 (--array=0-(N-1)); SLURM_ARRAY_TASK_MIN says where it starts.
  shard="$((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-0}))/${SLURM_ARRAY_TASK_COUNT:?SLURM_ARRAY_TASK_COUNT unset}"
elif [ -n "${OMPI_COMM_WORLD_RANK:-}" ]; then
  shard="$OMPI_COMM_WORLD_RANK/${OMPI_COMM_WORLD_SIZE:?OMPI_COMM_WORLD_SIZE unset}"
elif [ -n "${PMI_RANK:-}" ]; then
  shard="$PMI_RANK/${PMI_SIZE:?PMI_SIZE unset}"
else
  echo "$0: no shard in the environment (INFERLAB_SHARD, SLURM_ARRAY_TASK_ID, OMPI_COMM_WORLD_RANK or PMI_RANK)" >&2
  exit 2
fi
mkdir -p "$out"
exec "$inferlab" run "$spec" --out "$out" --shard "$shard" "$@"
