// `inferlab eval` on the GPU engine (evaluate.h): windows packed into steps, each window one sequence
// (its own KV slot, past 0) with the logits of every position, scored on the host.
#include <algorithm>

#include "inferlab/experiments/evaluate.h"
#include "inferlab/experiments/generate.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/kernels/engine/engine.h"
#include "inferlab/sim/error.h"
#include "measurers.h"

namespace inferlab {
namespace {

// One model over every window: the score and the argmax of every position.
void engine_pass(const std::string& dir, const EngineModel& em, const EvalRun& r, EvalScore& s,
                 std::vector<int32_t>& argmax, double& gpu_s, int64_t& steps, double& weight_bytes) {
  int64_t window = 0;
  for (const EvalWindow& w : r.windows) window = std::max<int64_t>(window, int64_t(w.input.size()));
  const int64_t per_step = eval_windows_per_step(r);
  EngineOptions o;
  o.weights = dir;
  o.weight_format = r.config.weight_format;
  o.max_sequences = per_step;
  o.max_step_tokens = per_step * window;
  o.max_logit_rows = per_step * window;
  o.max_context = window;
  o.kv_blocks = per_step * ((window + o.block_size - 1) / o.block_size);
  o.graphs = false;  // prefill steps run eagerly anyway
  Engine e(em, o);
  weight_bytes = e.memory().weight_bytes;
  for (std::size_t w0 = 0; w0 < r.windows.size(); w0 += std::size_t(per_step)) {
    const std::size_t w1 = std::min(r.windows.size(), w0 + std::size_t(per_step));
    std::vector<SequenceInput> in;
    for (std::size_t i = w0; i < w1; ++i) {
      SequenceInput q;
      q.slot = int(i - w0);
      q.tokens = r.windows[i].input;
      q.logits = int64_t(q.tokens.size());
      in.push_back(std::move(q));
    }
    const StepOutput out = e.step(in, true);
    gpu_s += out.gpu_s;
    ++steps;
    const float* row = out.logits.data();
    for (std::size_t i = w0; i < w1; ++i) {
      const EvalWindow& w = r.windows[i];
      score_logits(row, int64_t(w.target.size()), em.model.vocab, w.target.data(), s, &argmax);
      row += int64_t(w.target.size()) * em.model.vocab;
      e.release(int(i - w0));
    }
  }
}

}  // namespace

void measure_eval(EvalRun& r) {
  const GpuInfo gpu = detect_gpu();
  if (!gpu.present) throw Error("eval: no GPU (" + gpu.reason + "): the engine computes the perplexity on a GPU");
  r.score = {};
  r.argmax.clear();
  r.gpu_s = 0, r.steps = 0;
  engine_pass(r.config.model, r.model, r, r.score, r.argmax, r.gpu_s, r.steps, r.weight_bytes);
  if (!r.config.agree_with.empty()) {
    EvalScore other;
    std::vector<int32_t> am;
    double gpu_s = 0, bytes = 0;
    int64_t steps = 0;
    engine_pass(r.config.agree_with, load_engine_model(r.config.agree_with), r, other, am, gpu_s, steps, bytes);
    int64_t same = 0;
    for (std::size_t i = 0; i < am.size(); ++i) same += am[i] == r.argmax[i];
    r.agreement = double(same) / double(am.size());
  }
  r.measured = true;
  r.device = gpu.name;
}

std::function<void(const Params&)> eval_preflight() {
  return [](const Params& p) {
    plan_eval(eval_config(p));
    if (const auto g = eval_speed_config(p)) plan_generate(*g);
  };
}

std::function<void(const Params&, std::vector<Row>&)> eval_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    EvalRun e = plan_eval(eval_config(p));
    measure_eval(e);
    const Hardware hw = load_hardware(p.at("hardware"), parse_ceilings_mode(p.at("ceilings")));
    if (const auto g = eval_speed_config(p)) {
      GenerateRun run = plan_generate(*g);
      measure_generate(run);
      rows = eval_rows(e, &run, hw);
    } else {
      rows = eval_rows(e, nullptr, hw);
    }
  };
}

}  // namespace inferlab
