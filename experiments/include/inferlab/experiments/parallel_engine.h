#pragma once
// The parallel_engine scenario: one step of the GPU engine sharded over tp x pp GPUs (engine.h
// EngineParallel, Megatron-LM's layout), measured beside sim/parallel.h's prediction:
//   predicted = (m + pp - 1) x the slowest stage's slot + (pp - 1) sends, a slot = one micro-batch's
//               kernels on one device of the stage (sim/engine_step.h's launches of the engine, on
//               stage_model: 1/tp of the heads, KV heads, MLP width and vocabulary, its layers) plus its
//               tensor-parallel collectives (two all-reduces a layer, the embedding's all-reduce and the
//               logits' all-gather), with the alpha-beta of the hardware file (ceilings auto: the
//               fitted alpha-beta of data/hardware/<gpu>.measured.json where it exists).
// phase decode: `batch` sequences holding about `context` tokens bring one token each (CUDA graphs unless
// graphs is off); phase prefill: `batch` prompts of `context` tokens in one step. A pipeline's step is
// cut into `microbatches` groups of sequences, each stage stepping through them in order (GPipe).
// Measured: every rank a thread driving its own GPU (communicator nccl), or, for tests on one GPU, every
// rank on device rank % GPUs with host-synchronized collectives (communicator local: not timed for real).
// The step's time is the wall clock from a barrier of the rank threads to the last rank's end (host
// metadata and launches included), the median over `repeats` steps after `warmup`.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/spec.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/parallel.h"

namespace inferlab {

struct ParallelEngineConfig {
  std::string model, weights = "random";
  ModelConfig config;  // sim/'s view of the model (the engine's config file)
  Hardware hardware;
  Parallelism par;
  std::string phase = "decode";
  int64_t batch = 1, context = 1024;
  int64_t warmup = 3, repeats = 20;
  bool graphs = true;
  std::string communicator = "nccl";  // nccl or local
  uint64_t seed = 1;
  // The timed steps' shapes (one micro-batch each), as the engine sees them: decode steps at contexts
  // context - repeats + 1 .. context.
  Batch microbatch() const;
};

struct ParallelEngineMeasurement {
  double step_s = 0, p10_s = 0, p90_s = 0;  // wall clock of one whole step (every micro-batch, every stage)
  double gpu_s = 0;                         // the last stage's first rank: CUDA events summed over its micro-batches
  bool graphs = false;                      // the timed steps replayed CUDA graphs
  // tp > 1 over NCCL: one all-reduce of the step's activations (a micro-batch's tokens x hidden, bf16)
  // on the same communicators, per call of 32 back to back: replayed in a CUDA graph, and launched eagerly.
  double allreduce_graph_s = 0, allreduce_eager_s = 0;
  std::string device;
};

ParallelEngineConfig parallel_engine_config(const Params& p);
ParallelPrediction predict_parallel_engine(const ParallelEngineConfig& c);
std::vector<Row> parallel_engine_rows(const ParallelEngineConfig& c, const std::optional<ParallelEngineMeasurement>& m);
// CUDA builds (parallel_engine_cuda.cpp); others throw.
ParallelEngineMeasurement measure_parallel_engine(const ParallelEngineConfig& c);

}  // namespace inferlab
