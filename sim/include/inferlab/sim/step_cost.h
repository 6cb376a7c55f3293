#pragma once
// How long one engine iteration takes: the seam between the serving simulator and whatever knows
// the time of a forward pass. The default predicts it from the sim/ roofline (one pass over the
// batch's mixed prefill chunks and decodes, ops.h batch_ops, on tp ranks through sim/parallel.h);
// a measured engine later plugs in its own StepCostModel (e.g. a table of timed iterations) and the
// scheduler, the KV accounting and the metrics stay as they are.
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/parallel.h"

namespace inferlab {

class StepCostModel {
 public:
  virtual ~StepCostModel() = default;
  // Seconds of one iteration over `batch` (must be positive).
  virtual double step_time(const Batch& batch) = 0;
  virtual std::string describe() const = 0;
};

// The roofline time of the pass: sum over its ops of max(FLOPs / peak, bytes / bandwidth) + launches,
// plus the tensor-parallel collectives (sim/parallel.h) when tp > 1. Pipeline parallelism is not a
// per-iteration cost (several batches would be in flight), so pp must be 1 here.
// Everything but attention depends only on (tokens, logit rows) and is computed once per such
// pair; attention, which depends on every sequence's context, is costed at every call.
class RooflineStepCost : public StepCostModel {
 public:
  RooflineStepCost(ModelConfig model, Hardware hw, OpOptions options, int64_t tp = 1);
  double step_time(const Batch& batch) override;
  std::string describe() const override;
  const ModelConfig& rank_model() const { return rank_; }

 private:
  ModelConfig model_, rank_;
  Hardware hw_;
  OpOptions options_;
  Parallelism par_;
  std::unordered_map<uint64_t, double> rest_;  // (tokens, logit rows) -> seconds of every op but attention
};

// A step time from any function: tests, and measured tables.
class FunctionStepCost : public StepCostModel {
 public:
  FunctionStepCost(std::function<double(const Batch&)> f, std::string what) : f_(std::move(f)), what_(std::move(what)) {}
  double step_time(const Batch& batch) override { return f_(batch); }
  std::string describe() const override { return what_; }

 private:
  std::function<double(const Batch&)> f_;
  std::string what_;
};

}  // namespace inferlab
