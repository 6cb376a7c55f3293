// Planning and predicting a generation (generate.h); the engine scenario's rows.
#include "inferlab/experiments/generate.h"

#include <algorithm>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/kernels/engine/arch.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/roofline.h"
#include "inferlab/sim/engine_step.h"

namespace inferlab {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

GenerateRun plan_generate(const GenerateConfig& c) {
  if (c.batch <= 0 || c.prompt_tokens <= 0 || c.new_tokens <= 0 || c.max_step_tokens <= 0)
    throw Error("generate: batch, prompt tokens, new tokens and max step tokens must be positive");
  GenerateRun r;
  r.config = c;
  // The engine's view of the config: an architecture it does not run is refused here, predicted or not.
  r.model = load_engine_model(c.weights == "random" ? c.model : c.weights).model;
  if (r.model.max_positions > 0 && c.prompt_tokens + c.new_tokens > r.model.max_positions)
    throw Error("generate: " + std::to_string(c.prompt_tokens + c.new_tokens) + " tokens per sequence exceed " +
                r.model.name + "'s max_position_embeddings of " + std::to_string(r.model.max_positions));
  r.hardware = load_hardware(c.hardware, parse_ceilings_mode(c.ceilings));
  r.options.precision = Precision{DType::bf16, DType::bf16, DType::bf16};
  r.options.weight_format = c.weight_format;
  constexpr int64_t kBlock = 16;  // the engine's KV block size

  // Prefill: whole prompts packed into steps of at most max_step_tokens; a longer prompt in chunks.
  std::vector<int64_t> done(std::size_t(c.batch), 0);
  int next = 0;
  while (next < c.batch) {
    GenerateStep s;
    s.phase = "prefill";
    int64_t budget = c.max_step_tokens;
    while (next < c.batch && budget > 0) {
      const int64_t left = c.prompt_tokens - done[std::size_t(next)], take = std::min(left, budget);
      s.sequences.push_back({next, take, done[std::size_t(next)], take == left ? 1 : 0});
      done[std::size_t(next)] += take;
      budget -= take;
      if (take == left) ++next;
      else break;  // the rest of this prompt in the next step
    }
    r.steps.push_back(std::move(s));
  }
  for (int64_t i = 1; i < c.new_tokens; ++i) {
    GenerateStep s;
    s.phase = "decode";
    for (int b = 0; b < int(c.batch); ++b) s.sequences.push_back({b, 1, c.prompt_tokens + i - 1, 1});
    r.steps.push_back(std::move(s));
  }
  for (GenerateStep& s : r.steps) {
    s.batch.kv_block_size = kBlock;
    for (const auto& q : s.sequences) s.batch.sequences.push_back(SequenceWork{q.new_tokens, q.past, 1, q.logits});
    // The refined model of the engine's own launches (sim/engine_step.h): decode steps replay a CUDA graph
    // unless graphs are off; prefill steps run eagerly.
    const LaunchMode launch = s.phase == "decode" && c.graphs ? LaunchMode::graph : LaunchMode::eager;
    s.predicted_s = predict_step(engine_step_ops(r.model, s.batch, r.options, r.hardware, launch), r.hardware).time_s;
    for (const Op& op : batch_ops(r.model, s.batch, r.options)) {
      s.bytes += op.total_bytes();
      s.weight_bytes += op.bytes(TensorRole::weight) * double(op.count);
      s.flops += op.total_flops();
    }
    s.limit_s = s.bytes / r.hardware.memory_bandwidth;
  }
  return r;
}

GenerateSummary summarize(const GenerateRun& r) {
  GenerateSummary s;
  std::vector<double> pred, meas;
  for (const GenerateStep& st : r.steps) {
    int64_t tokens = 0;
    for (const auto& q : st.sequences) tokens += q.new_tokens;
    if (st.phase == "prefill") {
      s.prefill_tokens += tokens;
      s.prefill_predicted_s += st.predicted_s;
      s.prefill_measured_s += std::max(0.0, st.measured_s);
      s.prefill_wall_s += std::max(0.0, st.wall_s);
    } else {
      s.decode_tokens += tokens;
      ++s.decode_steps;
      s.decode_predicted_s += st.predicted_s;
      s.decode_measured_s += std::max(0.0, st.measured_s);
      s.decode_wall_s += std::max(0.0, st.wall_s);
      s.decode_limit_s += st.limit_s;
      pred.push_back(st.predicted_s);
      meas.push_back(st.measured_s);
    }
  }
  s.median_decode_predicted_s = median(pred);
  auto rate = [](double tokens, double secs) { return secs > 0 ? tokens / secs : 0.0; };
  s.predicted_tokens_per_s = rate(double(s.decode_tokens), s.decode_predicted_s);
  s.limit_tokens_per_s = rate(double(s.decode_tokens), s.decode_limit_s);
  s.predicted_prefill_tokens_per_s = rate(double(s.prefill_tokens), s.prefill_predicted_s);
  if (r.measured) {
    s.median_decode_measured_s = median(meas);
    s.tokens_per_s = rate(double(s.decode_tokens), s.decode_wall_s);
    s.gpu_tokens_per_s = rate(double(s.decode_tokens), s.decode_measured_s);
    s.prefill_tokens_per_s = rate(double(s.prefill_tokens), s.prefill_measured_s);
  }
  return s;
}

GenerateConfig generate_config(const Params& p) {
  GenerateConfig c;
  c.model = p.at("model");
  c.weights = p.at("weights");
  c.hardware = p.at("hardware");
  c.ceilings = p.at("ceilings");
  c.batch = param_int(p, "batch");
  c.prompt_tokens = param_int(p, "prompt_tokens");
  c.new_tokens = param_int(p, "new_tokens");
  c.weight_format = param_weight_format(p);
  c.graphs = param_bool(p, "graphs");
  c.seed = uint64_t(param_int(p, "seed", 0));
  c.max_step_tokens = param_int(p, "max_step_tokens");
  return c;
}

// One row per point: decode (tokens/s, per-step times) and prefill (tokens/s of the prompt steps).
std::vector<Row> generate_rows(const GenerateRun& r) {
  const GenerateSummary s = summarize(r);
  const bool decode = s.decode_steps > 0;
  const double predicted = decode ? s.median_decode_predicted_s : s.prefill_predicted_s;
  const double measured = decode ? s.median_decode_measured_s : s.prefill_measured_s;
  Row row{{"context", num(r.config.prompt_tokens + (decode ? r.config.new_tokens / 2 : 0))},
          {"phase", decode ? "decode" : "prefill"},
          {"predicted_s", num(predicted)},
          {"measured_s", r.measured ? num(measured) : ""},
          {"model_error", r.measured && measured > 0 ? num((predicted - measured) / measured) : ""},
          {"predicted_tokens_per_s", num(decode ? s.predicted_tokens_per_s : s.predicted_prefill_tokens_per_s)},
          {"tokens_per_s", r.measured ? num(decode ? s.tokens_per_s : s.prefill_tokens_per_s) : ""},
          {"gpu_tokens_per_s", r.measured ? num(decode ? s.gpu_tokens_per_s : s.prefill_tokens_per_s) : ""},
          {"limit_tokens_per_s", num(s.limit_tokens_per_s)},
          {"share_of_limit", r.measured && decode ? num(s.share_of_limit()) : ""},
          {"decode_steps", num(s.decode_steps)},
          {"step_bytes", num(decode ? s.decode_limit_s * r.hardware.memory_bandwidth / double(s.decode_steps) : 0.0)},
          {"step_weight_bytes", num(r.steps.back().weight_bytes)},
          {"engine_weight_bytes", r.measured ? num(r.weight_bytes) : ""},
          {"ceilings", r.hardware.ceilings_source},
          {"device", r.device}};
  return {row};
}

}  // namespace inferlab
