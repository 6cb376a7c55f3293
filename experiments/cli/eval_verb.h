#pragma once
// `inferlab eval`: perplexity and top-1 accuracy of a model folder on a text (experiments/evaluate.h).
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace inferlab::cli {

struct EvalArgs {
  std::string model, data, weight_format, agree_with, hardware;
  int64_t window = 0, max_tokens = 0, max_step_tokens = 8192;
  bool reference = false;
};

CLI::App* add_eval_command(CLI::App& app, EvalArgs& a, bool& json);
int cmd_eval(const EvalArgs& a, bool json);

}  // namespace inferlab::cli
