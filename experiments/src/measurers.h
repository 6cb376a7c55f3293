#pragma once
// The measured side of the scenarios that have kernels. Built from measure_cuda.cpp when the
// binary has CUDA, from measure_none.cpp (empty functions: predictions only) when it does not.
#include <functional>
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
std::function<void(const Params&)> engine_preflight();
std::function<void(const Params&, std::vector<Row>&)> engine_measure();
std::function<void(const Params&)> eval_preflight();
std::function<void(const Params&, std::vector<Row>&)> eval_measure();

}  // namespace inferlab
