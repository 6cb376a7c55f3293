#include "inferlab/sim/roofline.h"

#include <algorithm>

namespace inferlab {

std::string bound_name(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::launch: return "launch";
  }
  return "?";
}

Prediction predict(const Op& op, const Hardware& hw) {
  Prediction p;
  p.peak_flops = op.tensor_core ? hw.matmul_peak(op.compute_dtype) : hw.vector_peak();
  p.bandwidth = hw.memory_bandwidth;
  p.compute_s = op.flops / p.peak_flops;
  p.memory_s = op.bytes() / p.bandwidth;
  p.launch_s = double(op.launches) * hw.launch_overhead_s;
  p.time_s = std::max(p.compute_s, p.memory_s) + p.launch_s;
  p.total_s = p.time_s * double(op.count);
  if (p.launch_s > std::max(p.compute_s, p.memory_s))
    p.bound = Bound::launch;
  else
    p.bound = p.compute_s > p.memory_s ? Bound::compute : Bound::memory;
  return p;
}

Bound StepPrediction::bound() const {
  // Attribute each op's time to its own bound and see which kind of time dominates the step.
  double c = 0, m = 0, l = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& p = predictions[i];
    (p.bound == Bound::compute ? c : p.bound == Bound::memory ? m : l) += p.total_s;
  }
  if (c >= m && c >= l) return Bound::compute;
  return m >= l ? Bound::memory : Bound::launch;
}

StepPrediction predict_step(const std::vector<Op>& ops, const Hardware& hw) {
  StepPrediction s;
  s.ops = ops;
  for (const auto& op : ops) {
    const Prediction p = predict(op, hw);
    s.predictions.push_back(p);
    const double n = double(op.count);
    s.flops += op.total_flops();
    s.bytes += op.total_bytes();
    s.time_s += p.total_s;
    s.compute_s += p.compute_s * n;
    s.memory_s += p.memory_s * n;
    s.launch_s += p.launch_s * n;
  }
  return s;
}

}  // namespace inferlab
