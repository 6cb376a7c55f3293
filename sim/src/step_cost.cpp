#include "inferlab/sim/step_cost.h"

#include "inferlab/sim/error.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {

RooflineStepCost::RooflineStepCost(ModelConfig model, Hardware hw, OpOptions options, int64_t tp)
    : model_(std::move(model)), hw_(std::move(hw)), options_(options), par_{tp, 1, 1} {
  check_parallelism(model_, par_);
  rank_ = stage_model(model_, par_, 0);
  if (tp > 1) interconnect(hw_);  // a missing link figure fails here, not in the middle of a run
}

double RooflineStepCost::step_time(const Batch& batch) {
  const int64_t tokens = batch.tokens(), logits = batch.logit_rows();
  const uint64_t key = (uint64_t(tokens) << 32) | uint64_t(logits);
  auto it = rest_.find(key);
  if (it == rest_.end()) {
    const ParallelPrediction p = predict_parallel(model_, batch, options_, hw_, par_);
    const StagePrediction& st = p.stages.at(0);
    double rest = 0;
    for (std::size_t i = 0; i < st.compute.ops.size(); ++i)
      if (st.compute.ops[i].op_class != OpClass::attention) rest += st.compute.predictions[i].total_s;
    it = rest_.emplace(key, rest + st.comm_s).first;
  }
  double attention = 0;
  for (const Op& op : batch_attention_ops(rank_, batch, options_)) attention += predict(op, hw_).total_s;
  return it->second + attention;
}

std::string RooflineStepCost::describe() const {
  return "roofline of " + model_.name + " on " + hw_.id + (par_.tp > 1 ? " x" + std::to_string(par_.tp) + " (TP)" : "") +
         " (" + hw_.ceilings_source + ")";
}

}  // namespace inferlab
