// `inferlab eval` (eval_verb.h): the engine's perplexity, or the CPU reference's, beside the predicted
// time of the engine's steps; without a GPU the inputs are checked and the time predicted.
#include "eval_verb.h"

#include <cmath>

#include <fmt/core.h>

#include "describe.h"
#include "inferlab/experiments/evaluate.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/sim/hardware.h"

namespace inferlab::cli {

CLI::App* add_eval_command(CLI::App& app, EvalArgs& a, bool& json) {
  auto* c = app.add_subcommand("eval", "perplexity and top-1 accuracy of a model folder on a text, teacher-forced "
                                       "on the GPU engine (or the CPU reference forward)");
  c->add_option("--model", a.model, "Hugging Face model folder (config.json + model.safetensors)")->required();
  c->add_option("--data", a.data, "text file (UTF-8 bytes; the folder's byte_tokenizer.json) or .json token ids")
      ->required();
  c->add_option("--weight-format", a.weight_format, "layer GEMM weights: none (bf16, default), int8, int4, sparse24");
  c->add_option("--window", a.window, "tokens per sequence (default: the tokenizer's, else 512)");
  c->add_option("--max-tokens", a.max_tokens, "predict at most this many tokens (default: the whole file)");
  c->add_option("--agree-with", a.agree_with, "another model folder: share of positions with the same argmax");
  c->add_option("--max-step-tokens", a.max_step_tokens, "tokens of one engine step (default 8192)");
  c->add_option("--hardware", a.hardware, "hardware to predict for (default: this GPU, else h100-sxm-80gb)");
  c->add_flag("--reference", a.reference, "the CPU reference forward in double precision (tiny models; no GPU)");
  c->add_flag("--json", json, "machine-readable output");
  return c;
}

int cmd_eval(const EvalArgs& a, bool json) {
  EvalConfig c;
  c.model = a.model, c.data = a.data, c.window = a.window, c.max_tokens = a.max_tokens;
  c.agree_with = a.agree_with, c.max_step_tokens = a.max_step_tokens;
  if (!a.weight_format.empty() && a.weight_format != "none") {
    const WeightFormat f = parse_weight_format(a.weight_format);
    if (f != WeightFormat::bf16) c.weight_format = f;
  }
  EvalRun r = plan_eval(c);
  const GpuInfo gpu = detect_gpu();
  std::string hw = a.hardware.empty() && gpu.present ? hardware_for_device(gpu.name) : a.hardware;
  const Hardware hardware = load_hardware(hw.empty() ? "h100-sxm-80gb" : hw, CeilingsMode::automatic);
  const double predicted_s = predict_eval_seconds(r, hardware);
  std::string why_not;
  if (a.reference) {
    reference_eval(r);
  } else {
#ifdef INFERLAB_HAVE_CUDA
    if (!gpu.present) why_not = "no GPU: " + gpu.reason;
#else
    why_not = "built without CUDA";
#endif
    if (why_not.empty()) measure_eval(r);
  }
  const std::string format = c.weight_format ? weight_format_name(*c.weight_format) : "bf16";
  int64_t tokens = 0;
  for (const auto& w : r.windows) tokens += int64_t(w.target.size());
  if (json) {
    nlohmann::json j = {{"model", c.model}, {"data", c.data}, {"tokenizer", r.tokenizer}, {"weight_format", format},
                        {"window", r.config.window}, {"windows", r.windows.size()}, {"tokens", tokens},
                        {"measured", r.measured}, {"not_measured_because", why_not}, {"device", r.device},
                        {"hardware", hardware.id}, {"predicted_s", predicted_s}};
    if (r.measured) {
      j["perplexity"] = r.score.perplexity();
      j["top1_accuracy"] = r.score.accuracy();
      j["nll_per_token"] = r.score.nll_per_token();
      j["bits_per_token"] = r.score.nll_per_token() / std::log(2.0);
      j["gpu_s"] = r.gpu_s, j["steps"] = r.steps, j["engine_weight_bytes"] = r.weight_bytes;
      if (r.agreement >= 0) j["agree_with"] = c.agree_with, j["agreement"] = r.agreement;
    }
    print_json(j);
    return 0;
  }
  fmt::print("model {} ({}), data {}: {} tokens in {} windows of up to {}; tokenizer {}\n", c.model, format, c.data,
             tokens, r.windows.size(), r.config.window, r.tokenizer);
  fmt::print("predicted engine time on {}: {}\n", hardware.id, seconds(predicted_s));
  if (!r.measured) {
    fmt::print("not measured ({}): --reference computes it with the CPU reference forward (tiny models)\n", why_not);
    return 0;
  }
  fmt::print("on {}: perplexity {:.4f}, {:.4f} nats ({:.4f} bits) per token, top-1 accuracy {:.2f}%\n", r.device,
             r.score.perplexity(), r.score.nll_per_token(), r.score.nll_per_token() / std::log(2.0),
             100 * r.score.accuracy());
  if (r.gpu_s > 0) fmt::print("engine: {} steps, {} GPU time\n", r.steps, seconds(r.gpu_s));
  if (r.agreement >= 0) fmt::print("argmax agreement with {}: {:.2f}%\n", c.agree_with, 100 * r.agreement);
  return 0;
}

}  // namespace inferlab::cli
