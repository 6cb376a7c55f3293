// `inferlab eval`'s host side (evaluate.h): data, windows, scoring, the CPU reference.
#include "inferlab/experiments/evaluate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "inferlab/kernels/engine/reference.h"
#include "inferlab/kernels/engine/safetensors.h"
#include "inferlab/sim/engine_step.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace fs = std::filesystem;

double EvalScore::perplexity() const { return tokens > 0 ? std::exp(nll / double(tokens)) : 0.0; }
double EvalScore::accuracy() const { return tokens > 0 ? double(correct) / double(tokens) : 0.0; }
double EvalScore::nll_per_token() const { return tokens > 0 ? nll / double(tokens) : 0.0; }

namespace {

constexpr int64_t kDefaultWindow = 512;

std::string read_bytes(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("eval: " + path + ": no such data file");
  if (!fs::is_regular_file(path, ec)) throw Error("eval: " + path + ": not a regular file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("eval: " + path + ": cannot be read");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error("eval: " + path + ": read error");
  return s;
}

// Cuts one token sequence into windows of at most `window` positions; each window's first input is
// `bos` (>= 0: every token predicted) or the token before it (bos < 0: the sequence's first token is
// context only).
void cut(const std::vector<int32_t>& seq, int64_t window, int32_t bos, int64_t& budget, std::vector<EvalWindow>& out) {
  for (int64_t start = bos >= 0 ? 0 : 1; start < int64_t(seq.size()) && budget != 0; start += window) {
    int64_t n = std::min<int64_t>(window, int64_t(seq.size()) - start);
    if (budget > 0) n = std::min(n, budget);
    EvalWindow w;
    w.target.assign(seq.begin() + start, seq.begin() + start + n);
    w.input.push_back(bos >= 0 ? bos : seq[std::size_t(start - 1)]);
    w.input.insert(w.input.end(), seq.begin() + start, seq.begin() + start + n - 1);
    out.push_back(std::move(w));
    if (budget > 0) budget -= n;
  }
}

}  // namespace

EvalRun plan_eval(const EvalConfig& c) {
  EvalRun r;
  r.config = c;
  if (c.model.empty()) throw Error("eval: --model (a model folder) is required");
  if (c.data.empty()) throw Error("eval: --data (a text or token-id JSON file) is required");
  std::error_code ec;
  if (!fs::is_directory(c.model, ec))
    throw Error("eval: " + c.model + ": not a folder (a Hugging Face model folder with config.json and weights)");
  r.model = load_engine_model(c.model);
  SafetensorsFolder weights(c.model);  // a folder without weights: an error naming it
  check_checkpoint(weights, r.model.model, r.model.arch);
  const int64_t vocab = r.model.model.vocab;
  int64_t window = c.window;
  int32_t bos = -1;
  std::vector<std::vector<int32_t>> seqs;
  const bool json = fs::path(c.data).extension() == ".json";
  if (json) {
    const std::string text = read_bytes(c.data);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
      if (j.is_array() && !j.empty() && j[0].is_number()) j = nlohmann::json::array({j});
      seqs = j.get<std::vector<std::vector<int32_t>>>();
    } catch (const std::exception& e) {
      throw Error("eval: " + c.data + ": not a JSON array of token ids ([[ids...], ...] or [ids...]): " + e.what());
    }
    r.tokenizer = "token ids";
  } else {
    const fs::path tok = fs::path(c.model) / "byte_tokenizer.json";
    if (!fs::is_regular_file(tok, ec))
      throw Error("eval: " + c.data + " is text, but " + c.model + " has no byte_tokenizer.json: text is read as " +
                  "UTF-8 bytes for the lab's byte-level models (scripts/train); give other models token ids as .json");
    const nlohmann::json t = read_json_file(tok);
    if (t.value("type", "") != "bytes") throw Error("eval: " + tok.string() + ": type must be \"bytes\"");
    bos = t.value("bos_token_id", -1);
    if (window <= 0) window = t.value("window", kDefaultWindow);
    const std::string bytes = read_bytes(c.data);
    std::vector<int32_t> ids(bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) ids[i] = int32_t(static_cast<unsigned char>(bytes[i]));
    seqs.push_back(std::move(ids));
    r.tokenizer = "bytes (" + tok.string() + ")";
    if (bos >= vocab || 256 > vocab)
      throw Error("eval: vocabulary mismatch: " + tok.string() + " needs ids up to " + std::to_string(std::max(bos, 255)) +
                  " but " + r.model.model.origin + " has vocab_size " + std::to_string(vocab));
  }
  if (window <= 0) {  // token ids: 512, or the model's whole context where that is shorter
    window = kDefaultWindow;
    if (r.model.model.max_positions > 0) window = std::min(window, r.model.model.max_positions);
  }
  if (window < 2) throw Error("eval: the window must hold at least 2 tokens");
  if (r.model.model.max_positions > 0 && window > r.model.model.max_positions)
    throw Error("eval: window " + std::to_string(window) + " exceeds " + r.model.model.origin +
                "'s max_position_embeddings " + std::to_string(r.model.model.max_positions));
  for (const auto& s : seqs)
    for (int32_t id : s)
      if (id < 0 || id >= vocab)
        throw Error("eval: vocabulary mismatch: " + c.data + " holds token id " + std::to_string(id) + ", outside " +
                    r.model.model.origin + "'s vocab_size " + std::to_string(vocab));
  r.config.window = window;
  int64_t budget = c.max_tokens > 0 ? c.max_tokens : -1;
  for (const auto& s : seqs) cut(s, window, bos, budget, r.windows);
  if (r.windows.empty()) throw Error("eval: " + c.data + ": no token to predict");
  if (!c.agree_with.empty()) {
    const EngineModel other = load_engine_model(c.agree_with);
    if (other.model.vocab != vocab)
      throw Error("eval: vocabulary mismatch: " + other.model.origin + " has vocab_size " + std::to_string(other.model.vocab) +
                  ", " + r.model.model.origin + " " + std::to_string(vocab));
    SafetensorsFolder w2(c.agree_with);
    check_checkpoint(w2, other.model, other.arch);
  }
  if (c.max_step_tokens < window) throw Error("eval: max step tokens must hold one window");
  return r;
}

template <class T>
void score_logits(const T* logits, int64_t rows, int64_t vocab, const int32_t* targets, EvalScore& s,
                  std::vector<int32_t>* argmax) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* row = logits + i * vocab;
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v)
      if (row[v] > row[best]) best = v;
    const double mx = double(row[best]);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
    s.nll += mx + std::log(sum) - double(row[targets[i]]);
    s.correct += best == targets[i];
    s.tokens += 1;
    if (argmax) argmax->push_back(int32_t(best));
  }
}
template void score_logits<float>(const float*, int64_t, int64_t, const int32_t*, EvalScore&, std::vector<int32_t>*);
template void score_logits<double>(const double*, int64_t, int64_t, const int32_t*, EvalScore&, std::vector<int32_t>*);

int64_t eval_windows_per_step(const EvalRun& r) {
  int64_t window = 1;
  for (const EvalWindow& w : r.windows) window = std::max<int64_t>(window, int64_t(w.input.size()));
  return std::max<int64_t>(1, r.config.max_step_tokens / window);
}

double predict_eval_seconds(const EvalRun& r, const Hardware& hw) {
  OpOptions o;
  o.precision = Precision{DType::bf16, DType::bf16, DType::bf16};
  o.weight_format = r.config.weight_format;
  const std::size_t per = std::size_t(eval_windows_per_step(r));
  double t = 0;
  for (std::size_t w0 = 0; w0 < r.windows.size(); w0 += per) {
    Batch b;
    b.kv_block_size = 16;  // the engine's KV block
    for (std::size_t i = w0; i < std::min(r.windows.size(), w0 + per); ++i) {
      const int64_t n = int64_t(r.windows[i].input.size());
      b.sequences.push_back(SequenceWork{n, 0, 1, n});
    }
    t += predict_step(engine_step_ops(r.model.model, b, o, hw, LaunchMode::eager), hw).time_s;
  }
  return t;
}

void reference_eval(EvalRun& r) {
  if (r.config.weight_format) throw Error("eval: the CPU reference runs the checkpoint's own weights (no --weight-format)");
  auto run = [&](const std::string& dir, const EngineModel& em, EvalScore& s, std::vector<int32_t>& argmax) {
    SafetensorsFolder folder(dir);
    const HostWeights w = load_host_weights(folder, em.model, em.arch);
    for (const EvalWindow& win : r.windows) {
      const std::vector<double> logits = reference_forward(em.model, em.arch, w, win.input);
      score_logits(logits.data(), int64_t(win.target.size()), em.model.vocab, win.target.data(), s, &argmax);
    }
  };
  r.score = {};
  r.argmax.clear();
  run(r.config.model, r.model, r.score, r.argmax);
  if (!r.config.agree_with.empty()) {
    EvalScore other;
    std::vector<int32_t> am;
    run(r.config.agree_with, load_engine_model(r.config.agree_with), other, am);
    int64_t same = 0;
    for (std::size_t i = 0; i < am.size(); ++i) same += am[i] == r.argmax[i];
    r.agreement = double(same) / double(am.size());
  }
  r.measured = true;
  r.device = "CPU reference (double)";
}

}  // namespace inferlab
