// Built without CUDA: no scenario can measure; every point is predicted only.
#include "inferlab/experiments/evaluate.h"
#include "inferlab/experiments/generate.h"
#include "inferlab/experiments/serve_engine.h"
#include "inferlab/experiments/parallel_engine.h"
#include "inferlab/experiments/speculative_engine.h"
#include "inferlab/sim/error.h"
#include "measurers.h"

namespace inferlab {

std::function<void(const Params&)> attention_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> attention_measure() { return {}; }
std::function<void(const Params&)> decode_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> decode_measure() { return {}; }
std::function<void(const Params&)> linear_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> linear_measure() { return {}; }

std::function<void(const Params&)> serving_engine_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> serving_engine_measure() { return {}; }
std::function<void(const Params&)> engine_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> engine_measure() { return {}; }

void measure_generate(GenerateRun&) {
  throw Error("running the engine needs a CUDA build and a GPU (this binary was built without CUDA)");
}

namespace {
[[noreturn]] void no_engine() {
  throw Error("serving on the engine needs a CUDA build and a GPU (this binary was built without CUDA)");
}
}  // namespace

EngineServeResult serve_on_engine(const std::vector<Request>&, ServingConfig, const EngineServeOptions&) { no_engine(); }
EngineKvGeometry engine_kv_geometry(const ServingConfig&, const EngineServeOptions&) { no_engine(); }
StepTimingTable calibrate_engine(const ServingConfig&, const EngineServeOptions&, const std::vector<int64_t>&,
                                 const std::vector<int64_t>&, int64_t, int64_t, int) {
  no_engine();
}

std::function<void(const Params&)> parallel_engine_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> parallel_engine_measure() { return {}; }
ParallelEngineMeasurement measure_parallel_engine(const ParallelEngineConfig&) {
  throw Error("the parallel engine needs a CUDA build and GPUs (this binary was built without CUDA)");
}

std::function<void(const Params&)> speculative_engine_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> speculative_engine_measure() { return {}; }
SpecEngineMeasurement measure_speculative_engine(const SpecEngineConfig&) {
  throw Error("speculative decoding on the engine needs a CUDA build and a GPU (this binary was built without CUDA)");
}

std::function<void(const Params&)> eval_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> eval_measure() { return {}; }

void measure_eval(EvalRun&) {
  throw Error("eval: the engine computes the perplexity on a GPU: this binary was built without CUDA "
              "(--reference computes it with the CPU reference forward, for tiny models)");
}

}  // namespace inferlab
