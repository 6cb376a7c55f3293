#pragma once
// Serving on the GPU engine: the one scheduler (sim/scheduler.h) drives kernels/engine through the
// engine loop (sim/serving.h serve_iterations). Each request's prompt is random tokens from its own
// seed; every pass feeds, per scheduled sequence, the tokens at its positions (prompt, then the tokens it
// emitted: a request readmitted after a preemption prefills both again) and samples greedily on the GPU.
// Arrivals follow the wall clock from the start of the run (or all at time 0, offline). The scheduler
// reserves its blocks in the engine's own block manager: the block tables the kernels read are the
// scheduler's. Contiguous KV on the engine reserves max_len tokens a request in the engine's pages (the
// memory it sets aside is a contiguous cache's; the kernels still read pages, within 3% of a contiguous
// read, data/results decode_attention).
//
// The calibration sweep times engine passes on the grid of sim/measured_step_cost.h.
// Built with CUDA (experiments/src/serve_engine_cuda.cpp); without it every call throws, naming why.
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/sim/measured_step_cost.h"
#include "inferlab/sim/serving.h"
#include "inferlab/sim/trace.h"

namespace inferlab {

struct EngineServeOptions {
  std::string model;               // a name (data/models) or a config path
  std::string weights = "random";  // "random" or a Hugging Face folder
  uint64_t seed = 1;               // random weights, and the prompts' tokens
  bool offline = false;            // every request arrives at time 0
  bool graphs = true;              // CUDA graphs for decode-only passes
  double kv_gib = 0;               // KV memory (0: what the engine's memory plan leaves)
  bool keep_outputs = false;       // keep every request's emitted tokens (tests)
};

struct EngineServeResult {
  ServingResult result;            // its iterations are the real passes, timed by the host clock
  ServingSummary summary;
  std::vector<std::vector<int32_t>> outputs;  // keep_outputs: per request, the tokens it emitted
  int64_t kv_blocks = 0, block_size = 0;      // the engine's block manager
  double kv_bytes_per_token = 0;
  double gpu_free_before = 0, gpu_free_after = 0;  // device memory free around the run (engine built)
  double gpu_seconds = 0;                     // summed GPU time of the passes (CUDA events)
  std::string device;
};

// Replays `trace` (checked first: a malformed or unservable configuration throws before anything runs)
// through `config` on the engine built for `options` (kept across calls with the same model, weights and
// sizes). config.kv_capacity_bytes and kv_bytes_per_token are set from the engine.
EngineServeResult serve_on_engine(const std::vector<Request>& trace, ServingConfig config, const EngineServeOptions& options);

// The KV geometry serve_on_engine will use for `options` and `config` (building the engine if needed):
// blocks, block size, bytes per token; so that the simulator can run with the engine's exact memory.
struct EngineKvGeometry {
  int64_t blocks = 0, block_size = 0, table_width = 0;
  double bytes_per_token = 0;
};
EngineKvGeometry engine_kv_geometry(const ServingConfig& config, const EngineServeOptions& options);

// Times engine passes on the grid (decode sequences x prefill tokens at `base_context`, and each decode
// count at a long context for the per-token slope): `repeats` timed runs after warm-ups, median.
StepTimingTable calibrate_engine(const ServingConfig& config, const EngineServeOptions& options,
                                 const std::vector<int64_t>& decode, const std::vector<int64_t>& prefill,
                                 int64_t base_context, int64_t long_context, int repeats);

}  // namespace inferlab
