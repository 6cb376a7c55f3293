// Built without CUDA: no scenario can measure; every point is predicted only.
#include "measurers.h"

namespace inferlab {

std::function<void(const Params&)> attention_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> attention_measure() { return {}; }
std::function<void(const Params&)> decode_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> decode_measure() { return {}; }
std::function<void(const Params&)> linear_preflight() { return {}; }
std::function<void(const Params&, std::vector<Row>&)> linear_measure() { return {}; }

}  // namespace inferlab
