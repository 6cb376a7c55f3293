#pragma once
// Roofline prediction of an operator on a GPU:
//   compute = FLOPs / peak (tensor-core peak of the op's dtype, or the FP32 vector peak)
//   memory  = bytes / HBM bandwidth
//   time    = max(compute, memory) + launches * launch overhead
// bound = whichever of the three terms is largest. Attainable FLOP/s = min(peak, AI * bandwidth).
#include <string>
#include <vector>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

enum class Bound { compute, memory, launch };
std::string bound_name(Bound b);

struct Prediction {
  double peak_flops = 0;   // FLOP/s ceiling the op runs against
  double bandwidth = 0;    // bytes/s
  double compute_s = 0;    // per instance
  double memory_s = 0;
  double launch_s = 0;
  double time_s = 0;       // per instance
  double total_s = 0;      // time_s * count
  Bound bound = Bound::memory;
  double ridge() const { return peak_flops / bandwidth; }  // FLOP/byte where the op would turn compute-bound
};

Prediction predict(const Op& op, const Hardware& hw);

struct StepPrediction {
  std::vector<Op> ops;
  std::vector<Prediction> predictions;  // one per op
  double flops = 0, bytes = 0, time_s = 0;
  double compute_s = 0, memory_s = 0, launch_s = 0;  // sums of the per-op terms (x count)
  double ai() const { return bytes > 0 ? flops / bytes : 0; }
  // The step's bound: the term that dominates the sum over ops.
  Bound bound() const;
};

StepPrediction predict_step(const std::vector<Op>& ops, const Hardware& hw);

}  // namespace inferlab
