#!/usr/bin/env bash
# On the GPU machine, from the repository root: trains the model family and measures it, under OUTDIR.
#   1. scripts/train/train.py            target, distilled draft, plain draft → data/models/trained (+ logs, figure)
#   2. inferlab eval (bf16) of each      OUTDIR/engine_eval_<model>.json
#   3. scripts/train/torch_eval.py       PyTorch's perplexity of the same checkpoints beside the engine's,
#                                        fp8 (simulated), greedy agreement → OUTDIR/torch_eval.json
#   4. inferlab run experiments/compression_accuracy.yaml → OUTDIR/results (CSV, provenance, figures)
# BIN: the folder holding inferlab and inferlab-cuda (default build). Training seconds: TARGET_S, DRAFT_S.
# usage: scripts/train/gpu-trained.sh OUTDIR
set -uo pipefail
out="${1:?usage: $0 OUTDIR}"
bin="${BIN:-build}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
python3 scripts/train/train.py --corpus data/corpus/gcide --out data/models/trained \
  --target-seconds "${TARGET_S:-165}" --draft-seconds "${DRAFT_S:-55}" 2>&1 | tee "$out/train.log" || status=1
models=(gcide-target-20m gcide-draft-2m-distilled gcide-draft-2m)
for m in "${models[@]}"; do
  "$bin/inferlab" eval --model "data/models/trained/$m" --data data/corpus/gcide/test.txt --json \
    > "$out/engine_eval_$m.json" || status=1
done
python3 scripts/train/torch_eval.py --models data/models/trained --data data/corpus/gcide/test.txt \
  --out "$out/torch_eval.json" --engine-json "$out"/engine_eval_*.json 2>&1 | tee "$out/torch_eval.log" || status=1
"$bin/inferlab" run experiments/compression_accuracy.yaml --out "$out/results" --fresh 2>&1 | tee "$out/run.log" || status=1
exit $status
