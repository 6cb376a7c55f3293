#pragma once
// The measured side of the scenarios that have kernels. Built from measure_cuda.cpp when the
// binary has CUDA, from measure_none.cpp (empty functions: predictions only) when it does not.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/spec.h"

namespace inferlab {

std::function<void(const Params&)> attention_preflight();
std::function<void(const Params&, std::vector<Row>&)> attention_measure();
std::function<void(const Params&)> decode_preflight();
std::function<void(const Params&, std::vector<Row>&)> decode_measure();
std::function<void(const Params&)> linear_preflight();
std::function<void(const Params&, std::vector<Row>&)> linear_measure();
struct Hardware;
// CUDA builds: the GPU this process measures must be the hardware the row is predicted for.
void check_same_gpu(const Hardware& hw);
class Engine;
// CUDA builds: the one engine kept on the GPU across points (measure_cuda.cpp), rebuilt by `build` when
// the key changes or `fits` says the cached one cannot run the point.
Engine& shared_engine(const std::string& key, const std::function<bool(const Engine&)>& fits,
                      const std::function<std::unique_ptr<Engine>()>& build);

std::function<void(const Params&)> serving_engine_preflight();
std::function<void(const Params&, std::vector<Row>&)> serving_engine_measure();
std::function<void(const Params&)> engine_preflight();
std::function<void(const Params&, std::vector<Row>&)> engine_measure();
std::function<void(const Params&)> eval_preflight();
std::function<void(const Params&, std::vector<Row>&)> eval_measure();
std::function<void(const Params&)> parallel_engine_preflight();
std::function<void(const Params&, std::vector<Row>&)> parallel_engine_measure();
std::function<void(const Params&)> speculative_engine_preflight();
std::function<void(const Params&, std::vector<Row>&)> speculative_engine_measure();

}  // namespace inferlab
