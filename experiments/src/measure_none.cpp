// Built without CUDA: no scenario can measure; every point is predicted only.
#include "inferlab/experiments/evaluate.h"
#include "inferlab/experiments/generate.h"
#include "inferlab/sim/error.h"
#include "measurers.h"

namespace inferlab {

std::function<void(const Params&)> attention_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> attention_measure() { return {}; }
std::function<void(const Params&)> decode_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> decode_measure() { return {}; }
std::function<void(const Params&)> linear_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> linear_measure() { return {}; }

std::function<void(const Params&)> engine_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> engine_measure() { return {}; }

void measure_generate(GenerateRun&) {
  throw Error("running the engine needs a CUDA build and a GPU (this binary was built without CUDA)");
}

std::function<void(const Params&)> eval_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> eval_measure() { return {}; }

void measure_eval(EvalRun&) {
  throw Error("eval: the engine computes the perplexity on a GPU: this binary was built without CUDA "
              "(--reference computes it with the CPU reference forward, for tiny models)");
}

}  // namespace inferlab
