#pragma once
// `inferlab eval`: the perplexity and top-1 accuracy of a model folder on a text, teacher-forced on the
// GPU engine (Engine::step with the logits of every position), or on the CPU reference forward
// (kernels/engine reference.h, double precision: tiny models).
//
// Tokens. A text file is read as UTF-8 bytes (ids 0..255) with the model folder's byte_tokenizer.json
// (the lab's trained models, scripts/train/common.py: BOS id, window); a .json file holds token ids
// ([[ids...], ...] or [ids...]) for any model. Each id must be below the config's vocab_size.
// Windows. A byte text is cut into consecutive pieces of `window` bytes (the last one shorter); each
// piece is one sequence [BOS, b0 .. b(n-2)] whose n positions predict b0 .. b(n-1): every byte is
// predicted once. A JSON sequence [t0 .. t(n-1)] is cut the same way with no BOS (positions predict
// t1 .. t(n-1)). The same definition as scripts/train (common.windows), so PyTorch's numbers compare.
// Perplexity = exp(mean negative log-likelihood, natural log, over the predicted tokens); top-1 accuracy
// = share of positions whose argmax is the next token; agreement (with --agree-with another folder of
// the same vocabulary) = share of positions where the two models' argmax tokens are the same.
// Plain C++: the engine's side is in evaluate_engine.cpp (CUDA builds) and refuses in others.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/kernels/engine/arch.h"
#include "inferlab/kernels/engine/weights.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/linear.h"

namespace inferlab {

struct EvalConfig {
  std::string model;                          // a Hugging Face model folder (config.json + safetensors)
  std::string data;                           // a text file (bytes) or a .json file of token ids
  std::optional<WeightFormat> weight_format;  // the engine's layer weights (quantized at load)
  int64_t window = 0;                         // tokens per sequence (0: the tokenizer's, else 512)
  int64_t max_tokens = 0;                     // predicted tokens at most (0: the whole file)
  std::string agree_with;                     // another model folder: argmax agreement with it
  int64_t max_step_tokens = 8192;             // tokens of one engine step (several windows)
};

struct EvalWindow {
  std::vector<int32_t> input;   // what the model reads
  std::vector<int32_t> target;  // what each position predicts (same length)
};

struct EvalScore {
  double nll = 0;        // summed negative log-likelihood (nats)
  int64_t tokens = 0;    // predicted positions
  int64_t correct = 0;   // argmax == target
  double perplexity() const;
  double accuracy() const;
  double nll_per_token() const;
};

struct EvalRun {
  EvalConfig config;
  EngineModel model;
  std::string tokenizer;             // "bytes (FILE)" or "token ids"
  std::vector<EvalWindow> windows;
  EvalScore score;
  std::vector<int32_t> argmax;       // per predicted position, in window order (agreement)
  double agreement = -1;             // with config.agree_with; -1: not asked or not measured
  bool measured = false;
  std::string device;                // the GPU, or "CPU reference"
  double gpu_s = 0;                  // the engine's steps (CUDA events)
  int64_t steps = 0;
  double weight_bytes = 0;
};

// Reads and checks the model folder (config and weights present) and the data; cuts the windows.
// Errors (inferlab::Error) name the file: a missing or unreadable data file, a folder without weights, a
// text file for a model without byte_tokenizer.json, a token id outside the model's vocabulary.
EvalRun plan_eval(const EvalConfig& c);

// Adds `rows` positions: logits [rows, vocab] row-major against targets [rows]; appends each row's argmax.
template <class T>
void score_logits(const T* logits, int64_t rows, int64_t vocab, const int32_t* targets, EvalScore& s,
                  std::vector<int32_t>* argmax = nullptr);

// sim/'s prediction of the engine's steps (sim/engine_step.h, eager prefill steps of whole windows).
double predict_eval_seconds(const EvalRun& r, const Hardware& hw);
// The windows per engine step: as many as max_step_tokens holds.
int64_t eval_windows_per_step(const EvalRun& r);

// The CPU reference forward (double), window by window: tiny models only.
void reference_eval(EvalRun& r);
// The GPU engine: windows packed into steps of at most max_step_tokens, every position's logits.
// Throws in a build without CUDA.
void measure_eval(EvalRun& r);

}  // namespace inferlab

#include "inferlab/experiments/generate.h"
#include "inferlab/experiments/spec.h"

namespace inferlab {

// The `eval` scenario (experiments/compression_accuracy.yaml): one point = a model folder in one weight
// format: its perplexity, top-1 accuracy and (agree_with) argmax agreement on the data, beside the
// engine's decode tokens/s for the same weights (a generate run: batch, prompt_tokens, new_tokens;
// new_tokens 0: no speed).
EvalConfig eval_config(const Params& p);
std::optional<GenerateConfig> eval_speed_config(const Params& p);
// The point's row: predictions (the eval's steps, the decode) and, where given, the measured runs.
std::vector<Row> eval_rows(const EvalRun& e, const GenerateRun* speed, const Hardware& hw);

}  // namespace inferlab
