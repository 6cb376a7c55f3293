// `inferlab eval` (experiments/evaluate.h) on a tiny random model folder: the windows, the perplexity
// against one computed here from the CPU reference's logits, agreement, the bad inputs with the file
// named, the CLI; on a GPU, the engine's perplexity against the reference's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "inferlab/experiments/evaluate.h"
#include "inferlab/kernels/engine/reference.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

#include "cli_path.h"
#include "error_of.h"

namespace inferlab {
namespace {
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("inferlab_eval_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A byte-level model folder like scripts/train's, tiny: vocab 264, BOS 256, windows of `window` bytes.
fs::path tiny_model(const fs::path& dir, uint64_t seed, int64_t vocab = 264, int64_t window = 16) {
  const nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                            {"hidden_size", 128}, {"intermediate_size", 256}, {"num_hidden_layers", 2},
                            {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 64},
                            {"vocab_size", vocab}, {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5},
                            {"rope_theta", 10000.0}, {"hidden_act", "silu"}, {"tie_word_embeddings", false},
                            {"torch_dtype", "bfloat16"}};
  fs::create_directories(dir);
  write_file_atomic(dir / "config.json", j.dump(2));
  const EngineModel em = load_engine_model((dir / "config.json").string());
  write_model_folder(dir, j, em.model, em.arch, random_host_weights(em.model, em.arch, seed, true));
  const nlohmann::json tok = {{"type", "bytes"}, {"vocab_size", vocab}, {"bos_token_id", 256}, {"window", window}};
  write_file_atomic(dir / "byte_tokenizer.json", tok.dump(2));
  return dir;
}

fs::path text_file(const fs::path& path, std::size_t n, uint32_t seed = 1) {
  std::mt19937 g(seed);
  const std::string words[] = {"the ", "abdication ", "of ", "a ", "throne", ", ", "dictionary ", "\n"};
  std::string s;
  while (s.size() < n) s += words[g() % 8];
  s.resize(n);
  std::ofstream(path, std::ios::binary) << s;
  return path;
}

EvalConfig cfg(const std::string& model, const std::string& data) {
  EvalConfig c;
  c.model = model, c.data = data;
  return c;
}

TEST(Eval, WindowsPredictEveryByteOnceAfterBos) {
  const fs::path d = temp_dir("windows");
  const fs::path model = tiny_model(d / "m", 1);
  EvalConfig c;
  c.model = model.string(), c.data = text_file(d / "t.txt", 100).string();
  const EvalRun r = plan_eval(c);
  ASSERT_EQ(r.windows.size(), 7u);  // ceil(100 / 16)
  std::string seen;
  for (const EvalWindow& w : r.windows) {
    ASSERT_EQ(w.input.size(), w.target.size());
    EXPECT_EQ(w.input[0], 256);
    for (std::size_t i = 1; i < w.input.size(); ++i) EXPECT_EQ(w.input[i], w.target[i - 1]);
    for (int32_t t : w.target) seen += char(t);
  }
  EXPECT_EQ(seen, read_text_file(d / "t.txt"));
  c.max_tokens = 20;
  const EvalRun cut = plan_eval(c);
  ASSERT_EQ(cut.windows.size(), 2u);
  EXPECT_EQ(cut.windows[1].target.size(), 4u);
  fs::remove_all(d);
}

TEST(Eval, ReferencePerplexityIsTheMeanNllOfTheReferenceLogits) {
  const fs::path d = temp_dir("reference");
  EvalConfig c;
  c.model = tiny_model(d / "m", 2).string();
  c.data = text_file(d / "t.txt", 40, 7).string();
  EvalRun r = plan_eval(c);
  reference_eval(r);
  // Here: the logits of each window from the reference forward, log-softmax written out.
  const EngineModel em = load_engine_model(c.model);
  const HostWeights w = load_host_weights(SafetensorsFolder(c.model), em.model, em.arch);
  double nll = 0;
  int64_t n = 0, correct = 0;
  for (const EvalWindow& win : r.windows) {
    const std::vector<double> l = reference_forward(em.model, em.arch, w, win.input);
    for (std::size_t p = 0; p < win.target.size(); ++p) {
      const double* row = &l[p * std::size_t(em.model.vocab)];
      double z = 0;
      int64_t best = 0;
      for (int64_t v = 0; v < em.model.vocab; ++v) {
        z += std::exp(row[v]);
        if (row[v] > row[best]) best = v;
      }
      nll -= row[win.target[p]] - std::log(z);
      correct += best == win.target[p];
      ++n;
    }
  }
  EXPECT_EQ(r.score.tokens, 40);
  EXPECT_NEAR(r.score.perplexity(), std::exp(nll / double(n)), 1e-9 * std::exp(nll / double(n)));
  EXPECT_EQ(r.score.correct, correct);
  EXPECT_GT(r.score.perplexity(), 1.0);
  // Agreement: a model with itself agrees everywhere, with another seed's not.
  c.agree_with = c.model;
  EvalRun self = plan_eval(c);
  reference_eval(self);
  EXPECT_DOUBLE_EQ(self.agreement, 1.0);
  c.agree_with = tiny_model(d / "other", 3).string();
  EvalRun other = plan_eval(c);
  reference_eval(other);
  EXPECT_LT(other.agreement, 1.0);
  EXPECT_GE(other.agreement, 0.0);
  fs::remove_all(d);
}

TEST(Eval, BadInputIsAnErrorNamingTheFile) {
  const fs::path d = temp_dir("bad");
  const std::string model = tiny_model(d / "m", 1).string();
  const std::string text = text_file(d / "t.txt", 50).string();
  auto refused = [](const EvalConfig& c, const std::vector<std::string>& needles) {
    const std::string e = error_of([&] { plan_eval(c); });
    for (const auto& s : needles) EXPECT_NE(e.find(s), std::string::npos) << "expected '" << s << "' in: " << e;
  };
  refused(cfg(model, (d / "missing.txt").string()), {"missing.txt", "no such data file"});
  refused(cfg(model, d.string()), {d.string(), "not a regular file"});
  fs::create_directories(d / "noweights");
  fs::copy_file(d / "m" / "config.json", d / "noweights" / "config.json");
  refused(cfg((d / "noweights").string(), text), {"noweights", "model.safetensors"});
  fs::remove(d / "m" / "byte_tokenizer.json");
  refused(cfg(model, text), {"byte_tokenizer.json", "t.txt"});
  std::ofstream(d / "ids.json") << "[[1, 2, 300]]";
  refused(cfg(model, (d / "ids.json").string()), {"vocabulary mismatch", "ids.json", "300", "264"});
  std::ofstream(d / "bad.json") << "{\"not\": \"ids\"}";
  refused(cfg(model, (d / "bad.json").string()), {"bad.json", "token ids"});
  // A byte tokenizer beside a model whose vocabulary cannot hold bytes.
  const std::string small = tiny_model(d / "small", 1, 200).string();
  refused(cfg(small, text), {"vocabulary mismatch", "200"});
  // Token ids work for any model: no BOS, the first id is context only.
  std::ofstream(d / "ok.json") << "[[5, 6, 7, 8]]";
  const EvalConfig c = cfg(model, (d / "ok.json").string());
  const EvalRun r = plan_eval(c);
  ASSERT_EQ(r.windows.size(), 1u);
  EXPECT_EQ(r.windows[0].input, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.windows[0].target, (std::vector<int32_t>{6, 7, 8}));
  fs::remove_all(d);
}

TEST(Eval, CliReportsTheReferenceAndRefusesBadInputWithNonZeroExit) {
  const fs::path d = temp_dir("cli");
  const std::string model = tiny_model(d / "m", 4).string();
  const std::string text = text_file(d / "t.txt", 24).string();
  const std::string cli = shell_quote(cli_path());
  std::string out;
  ASSERT_EQ(run_command(cli + " eval --model " + shell_quote(model) + " --data " + shell_quote(text) +
                            " --reference --json 2>&1", &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["measured"].get<bool>());
  EXPECT_EQ(j["tokens"], 24);
  EvalRun r = plan_eval(cfg(model, text));
  reference_eval(r);
  EXPECT_NEAR(j["perplexity"].get<double>(), r.score.perplexity(), 1e-9 * r.score.perplexity());
  EXPECT_GT(j["predicted_s"].get<double>(), 0.0);
  out.clear();
  EXPECT_NE(run_command(cli + " eval --model " + shell_quote(model) + " --data " + shell_quote((d / "none.txt").string()) +
                            " 2>&1", &out), 0);
  EXPECT_NE(out.find("none.txt"), std::string::npos) << out;
  fs::remove_all(d);
}

TEST(EvalGpu, EnginePerplexityMatchesTheReference) {
  if (!detect_gpu().present) GTEST_SKIP() << "no GPU";
  const fs::path d = temp_dir("gpu");
  EvalConfig c;
  c.model = tiny_model(d / "m", 5).string();
  c.data = text_file(d / "t.txt", 100, 3).string();
  c.max_step_tokens = 32;  // two windows a step: several steps
  EvalRun ref = plan_eval(c), gpu = plan_eval(c);
  reference_eval(ref);
  measure_eval(gpu);
  EXPECT_EQ(gpu.score.tokens, ref.score.tokens);
  EXPECT_GT(gpu.steps, 1);
  // bf16 weights and activations against double: within the 1% the trained models are held to.
  EXPECT_NEAR(gpu.score.perplexity() / ref.score.perplexity(), 1.0, 0.01);
  int64_t same = 0;
  for (std::size_t i = 0; i < ref.argmax.size(); ++i) same += ref.argmax[i] == gpu.argmax[i];
  EXPECT_GE(double(same) / double(ref.argmax.size()), 0.9);
  fs::remove_all(d);
}

}  // namespace
}  // namespace inferlab
