#pragma once
// Generation on the GPU engine (kernels/engine) beside its prediction: B sequences of P random prompt
// tokens are prefilled (in steps of at most max_step_tokens), then decoded N - 1 times, greedily. Every
// step is planned here first, as the engine will run it, and predicted by sim/ from the same Batch
// (sim/engine_step.h: the refined model of the engine's own launches, graph or eager); on a GPU the engine then runs exactly those steps,
// timed by CUDA events (GPU time) and by the host clock (wall time: the host's share of a step, metadata
// and launches, included). A warm-up run of the same steps precedes the timed one (clocks up, CUDA graphs
// captured). The limit of a step is its bytes (sim/) over the measured copy bandwidth: the time a step
// cannot beat while it streams its weights and KV cache once.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/spec.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/linear.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

struct GenerateConfig {
  std::string model;               // a name (data/models) or a path; a weights folder's own config when weights is a folder
  std::string weights = "random";  // "random" or a Hugging Face folder
  std::string hardware;            // predicted for; measuring needs this GPU
  std::string ceilings = "auto";
  int64_t batch = 1, prompt_tokens = 128, new_tokens = 128;
  std::optional<WeightFormat> weight_format;  // the layer GEMMs, quantized at load
  bool graphs = true;
  uint64_t seed = 1;
  int64_t max_step_tokens = 8192;
  bool profile = false;  // CUPTI kernel times of one decode step (the middle one), by kernel
};

struct KernelShare {
  std::string kernel;
  int64_t launches = 0;
  double seconds = 0;  // summed GPU time in the profiled step
};

struct PlannedSequence {
  int slot = 0;
  int64_t new_tokens = 1, past = 0, logits = 1;
};

struct GenerateStep {
  std::string phase;  // "prefill" or "decode"
  std::vector<PlannedSequence> sequences;
  Batch batch;        // the same step as sim/ sees it
  double predicted_s = 0, limit_s = 0, bytes = 0, weight_bytes = 0, flops = 0;  // sim/'s cost of the step
  double measured_s = -1, wall_s = -1;  // -1: not measured
  bool graph = false;
};

struct GenerateRun {
  GenerateConfig config;
  ModelConfig model;
  Hardware hardware;
  OpOptions options;
  std::vector<GenerateStep> steps;
  bool measured = false;
  std::string device;                  // the GPU, when measured
  std::vector<int32_t> first_sequence;  // its generated tokens, when measured
  double weight_bytes = 0;             // as the engine holds them
  std::vector<KernelShare> profile;    // config.profile: the profiled step's kernels, longest first
  double profile_span_s = 0;           // first kernel start to last kernel end in that step
};

struct GenerateSummary {
  int64_t prefill_tokens = 0, decode_tokens = 0, decode_steps = 0;
  double prefill_predicted_s = 0, prefill_measured_s = 0, prefill_wall_s = 0;
  double decode_predicted_s = 0, decode_measured_s = 0, decode_wall_s = 0, decode_limit_s = 0;
  double median_decode_predicted_s = 0, median_decode_measured_s = 0;
  // tokens per second: decode by the wall clock (the headline), by GPU time, predicted, and the limit.
  double tokens_per_s = 0, gpu_tokens_per_s = 0, predicted_tokens_per_s = 0, limit_tokens_per_s = 0;
  double prefill_tokens_per_s = 0, predicted_prefill_tokens_per_s = 0;
  double share_of_limit() const { return limit_tokens_per_s > 0 ? tokens_per_s / limit_tokens_per_s : 0; }
};

// Checks the configuration (sizes, the model the engine runs: inferlab::Error naming the problem) and
// plans and predicts every step.
GenerateRun plan_generate(const GenerateConfig& config);
GenerateSummary summarize(const GenerateRun& run);
// Runs the planned steps on the GPU engine; throws inferlab::Error without a GPU or a CUDA build.
void measure_generate(GenerateRun& run);

// The engine scenario's parameters as a GenerateConfig, and its one row per point.
GenerateConfig generate_config(const Params& p);
std::vector<Row> generate_rows(const GenerateRun& run);

}  // namespace inferlab
