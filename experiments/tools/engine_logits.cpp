// inferlab_engine_logits: the engine's side of the comparison with Hugging Face transformers
// (scripts/peers/hf_engine_peer.py). For a model folder and token sequences:
//   - teacher-forced logits: each sequence in one prefill step with the logits of every position,
//     written as raw float32 [sequences, tokens, vocab] (little-endian) to --logits;
//   - free-running greedy continuations of the first --prompt tokens of each sequence, --greedy tokens,
//     with the top-5 log-probabilities of every step, written as JSON to --out.
// usage: inferlab_engine_logits --model-dir DIR --tokens tokens.json --prompt P --greedy N --logits F --out F.json
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inferlab/kernels/engine/engine.h"
#include "inferlab_build_commit.h"  // INFERLAB_BUILD_COMMIT
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"

using namespace inferlab;

namespace {

std::vector<std::pair<int32_t, double>> top_logprobs(const float* row, int64_t vocab, int k) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, double(row[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(row[i]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<int32_t> idx(static_cast<std::size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  std::vector<std::pair<int32_t, double>> out;
  for (int i = 0; i < k; ++i) out.push_back({idx[std::size_t(i)], double(row[idx[std::size_t(i)]]) - lse});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, tokens_path, logits_path, out_path;
  int64_t prompt = 32, greedy = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model-dir") dir = v;
    else if (a == "--tokens") tokens_path = v;
    else if (a == "--logits") logits_path = v;
    else if (a == "--out") out_path = v;
    else if (a == "--prompt") prompt = std::stoll(v);
    else if (a == "--greedy") greedy = std::stoll(v);
    else {
      std::fprintf(stderr, "inferlab_engine_logits: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty() || tokens_path.empty() || logits_path.empty() || out_path.empty()) {
    std::fprintf(stderr, "usage: inferlab_engine_logits --model-dir DIR --tokens tokens.json --prompt P --greedy N "
                         "--logits logits.f32 --out out.json\n");
    return 2;
  }
  try {
    const auto seqs = read_json_file(tokens_path).get<std::vector<std::vector<int32_t>>>();
    const EngineModel em = load_engine_model(dir);
    EngineOptions o;
    o.weights = dir;
    o.max_sequences = 8;
    o.max_logit_rows = 0;
    int64_t longest = 0;
    for (const auto& s : seqs) longest = std::max<int64_t>(longest, int64_t(s.size()));
    o.max_logit_rows = std::max<int64_t>(longest, 8);
    o.max_step_tokens = std::max<int64_t>(longest, prompt);
    Engine e(em, o);
    const int64_t vocab = em.model.vocab;
    std::ofstream logits(logits_path, std::ios::binary);
    nlohmann::json out = {{"model_dir", dir}, {"vocab", vocab}, {"commit", INFERLAB_BUILD_COMMIT},
                          {"sequences", nlohmann::json::array()}};
    for (const auto& s : seqs) {
      SequenceInput in;
      in.slot = 0, in.tokens = s, in.logits = int64_t(s.size());
      const StepOutput tf = e.step({in}, true);
      logits.write(reinterpret_cast<const char*>(tf.logits.data()), std::streamsize(tf.logits.size() * 4));
      e.release(0);
      // Greedy: the prompt, then one token at a time.
      in.tokens.assign(s.begin(), s.begin() + std::min<int64_t>(prompt, int64_t(s.size())));
      in.logits = 1;
      nlohmann::json steps = nlohmann::json::array();
      std::vector<int32_t> generated;
      for (int64_t t = 0; t < greedy; ++t) {
        const StepOutput so = e.step({in}, true);
        const int32_t tok = so.tokens[0][0];
        nlohmann::json top = nlohmann::json::array();
        for (auto [id, lp] : top_logprobs(so.logits.data(), vocab, 5)) top.push_back({id, lp});
        steps.push_back(top);
        generated.push_back(tok);
        in.tokens = {tok};
      }
      e.release(0);
      out["sequences"].push_back({{"greedy", generated}, {"top_logprobs", steps}});
    }
    write_file_atomic(out_path, out.dump() + "\n");
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "inferlab_engine_logits: error: %s\n", ex.what());
    return 1;
  }
  return 0;
}
