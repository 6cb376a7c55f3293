// The GPU engine on tiny Llama and Qwen2 configs (random weights, norms and biases perturbed):
//   - teacher-forced logits of one prefill step against the CPU reference forward (double), every weight
//     format (the reference multiplies with exactly the values the packed weights encode);
//   - incremental decode against one prefill of the same tokens, a sequence alone against the same
//     sequence inside a batch (the share bit-identical is printed; the rest held to the tolerance);
//   - graph replay bit-identical to eager; blocks shuffled in the pool bit-identical to blocks in order;
//     rollback (truncate) then the same tokens again bit-identical; a folder written from the engine's
//     weights loads into an engine that gives the same logits;
//   - bad input: a model that does not fit, a step the KV memory cannot hold (the engine unchanged after).
// Tolerance (derived, as FlashAttention's tests): max |logit - reference| <= 2x the max error of the
// reference's own bf16 emulation (reference.h) against the double reference, + 1e-3 for fp32 sums.
#include <gtest/gtest.h>

#include "../kernels/gpu_test.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "inferlab/kernels/engine/engine.h"
#ifdef INFERLAB_HAVE_NCCL
#include "inferlab/kernels/engine/nccl_communicator.h"
#endif
#include "inferlab/kernels/engine/reference.h"
#include "inferlab/kernels/engine/speculative.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/rng.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/gemm/quant.h"

#include "error_of.h"

namespace inferlab {
namespace {

nlohmann::json tiny_config(const std::string& type) {
  return {{"architectures", {type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
          {"model_type", type},
          {"hidden_size", 256},
          {"intermediate_size", 640},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 64},
          {"vocab_size", 600},
          {"max_position_embeddings", 1024},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"rope_scaling", type == "qwen2" ? nlohmann::json(nullptr)
                                           : nlohmann::json{{"rope_type", "llama3"}, {"factor", 8.0},
                                                            {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                                            {"original_max_position_embeddings", 128}}},
          {"hidden_act", "silu"},
          {"initializer_range", 0.05},
          {"tie_word_embeddings", type == "qwen2"},
          {"torch_dtype", "bfloat16"}};
}

EngineModel tiny(const std::string& type) {
  const nlohmann::json j = tiny_config(type);
  EngineModel em;
  em.model = model_from_hf_json(j, "tiny-" + type, "tiny.json");
  em.arch = arch_from_hf_json(j, em.model, "tiny.json");
  return em;
}

EngineOptions tiny_options(uint64_t seed) {
  EngineOptions o;
  o.seed = seed;
  o.perturb = true;
  o.max_sequences = 16;
  o.max_step_tokens = 1024;
  o.max_logit_rows = 512;
  o.kv_blocks = 400;
  return o;
}

std::vector<int32_t> random_tokens(Rng& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = int32_t(rng.next() % uint64_t(vocab));
  return t;
}

struct Tolerance {
  double tol = 0;
  std::vector<double> ref;
};
// The reference logits of `tokens` and the tolerance derived from the bf16 emulation's error.
Tolerance reference(const EngineModel& em, const HostWeights& w, const std::vector<int32_t>& tokens) {
  Tolerance t;
  t.ref = reference_forward(em.model, em.arch, w, tokens);
  const auto bf = reference_forward(em.model, em.arch, w, tokens, true);
  double e = 0;
  for (std::size_t i = 0; i < bf.size(); ++i) e = std::max(e, std::abs(bf[i] - t.ref[i]));
  t.tol = 2 * e + 1e-3;
  return t;
}

double max_diff(const std::vector<float>& a, const std::vector<double>& b, std::size_t offset = 0) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    d = std::max(d, std::abs(double(a[i]) - b[offset + i]));
  }
  return d;
}

// One prefill step of `tokens` in `slot`, logits of every position.
std::vector<float> prefill_logits(Engine& e, int slot, const std::vector<int32_t>& tokens) {
  SequenceInput s;
  s.slot = slot, s.tokens = tokens, s.logits = int64_t(tokens.size());
  return e.step({s}, true).logits;
}

std::vector<float> decode_logits(Engine& e, const std::vector<std::pair<int, int32_t>>& rows) {
  std::vector<SequenceInput> in;
  for (auto [slot, tok] : rows) {
    SequenceInput s;
    s.slot = slot, s.tokens = {tok};
    in.push_back(s);
  }
  return e.step(in, true).logits;
}

TEST(EngineGpu, PrefillLogitsMatchTheReferenceInEveryWeightFormat) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 11};
  for (const char* type : {"llama", "qwen2"})
    for (auto f : {WeightFormat::bf16, WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24}) {
      if (std::string(type) == "qwen2" && f != WeightFormat::bf16) continue;
      SCOPED_TRACE(std::string(type) + " " + weight_format_name(f));
      const EngineModel em = tiny(type);
      EngineOptions o = tiny_options(rng.next());
      o.weight_format = f;
      Engine e(em, o);
      const auto tokens = random_tokens(rng, 37 + int64_t(rng.next() % 200), em.model.vocab);
      const Tolerance t = reference(em, e.download_weights(), tokens);
      const std::vector<float> got = prefill_logits(e, 3, tokens);
      ASSERT_EQ(got.size(), t.ref.size());
      EXPECT_LE(max_diff(got, t.ref), t.tol);
      int agree = 0;
      for (std::size_t p = 0; p < tokens.size(); ++p) {
        auto row = [&](auto& v) { return std::max_element(v.begin() + long(p * 600), v.begin() + long((p + 1) * 600)) - v.begin(); };
        agree += row(got) == row(t.ref);
      }
      EXPECT_GE(double(agree) / double(tokens.size()), 0.9);
    }
}

TEST(EngineGpu, IncrementalDecodeEqualsOnePrefillAndBatchesDoNotChangeASequence) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 12};
  const EngineModel em = tiny("llama");
  Engine e(em, tiny_options(rng.next()));
  const auto tokens = random_tokens(rng, 300, em.model.vocab);
  const Tolerance t = reference(em, e.download_weights(), tokens);
  const std::vector<float> whole = prefill_logits(e, 0, tokens);
  // The same tokens: a prefill of 100, then decodes of one token, in slot 1 alone; slot 2 runs the same
  // sequence inside batches of 1..7 other sequences (decoding their own random tokens).
  const int64_t head = 100;
  std::vector<float> alone = prefill_logits(e, 1, std::vector<int32_t>(tokens.begin(), tokens.begin() + head));
  prefill_logits(e, 2, std::vector<int32_t>(tokens.begin(), tokens.begin() + head));
  for (int s = 3; s < 10; ++s) prefill_logits(e, s, random_tokens(rng, 1 + int64_t(rng.next() % 400), em.model.vocab));
  int64_t identical = 0, compared = 0;
  double worst_batch = 0, worst_decode = 0;
  for (int64_t p = head; p < int64_t(tokens.size()); ++p) {
    const std::vector<float> a = decode_logits(e, {{1, tokens[std::size_t(p)]}});
    std::vector<std::pair<int, int32_t>> rows = {{2, tokens[std::size_t(p)]}};
    const int others = int(rng.next() % 8);
    for (int s = 3; s < 3 + others; ++s) rows.push_back({s, int32_t(rng.next() % 600)});
    std::rotate(rows.begin(), rows.begin() + long(rng.next() % rows.size()), rows.end());  // anywhere in the batch
    const std::vector<float> b = decode_logits(e, rows);
    const auto at = std::find_if(rows.begin(), rows.end(), [](auto r) { return r.first == 2; }) - rows.begin();
    const std::vector<float> bseq(b.begin() + at * 600, b.begin() + (at + 1) * 600);
    identical += bseq == a;
    ++compared;
    worst_batch = std::max(worst_batch, max_diff(bseq, t.ref, std::size_t(p * 600)));
    worst_decode = std::max(worst_decode, max_diff(a, t.ref, std::size_t(p * 600)));
    alone.insert(alone.end(), a.begin(), a.end());
  }
  std::printf("[ engine   ] a sequence inside batches of 1-8: %lld of %lld decode steps bit-identical to it alone\n",
              (long long)identical, (long long)compared);
  EXPECT_LE(worst_decode, t.tol);
  EXPECT_LE(worst_batch, t.tol);
  EXPECT_LE(max_diff(whole, t.ref), t.tol);
  double between = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) between = std::max(between, double(std::abs(whole[i] - alone[i])));
  EXPECT_LE(between, t.tol) << "incremental decode vs one prefill";
}

TEST(EngineGpu, GraphsShuffledBlocksAndRollbackAreBitIdentical) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 13};
  const EngineModel em = tiny("llama");
  const uint64_t seed = rng.next();
  EngineOptions eager_opt = tiny_options(seed);
  eager_opt.graphs = false;
  Engine graph(em, tiny_options(seed)), eager(em, eager_opt);
  // Fragment the eager engine's pool: its sequence's blocks land scattered, out of order.
  for (int s = 4; s < 12; ++s) prefill_logits(eager, s, random_tokens(rng, 40, em.model.vocab));
  for (int s = 4; s < 12; s += 2) eager.release(s);
  const int64_t B = 3;  // padded to 4 in the graph: both engines on the GEMV (row results independent of the batch)
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < B; ++b) prompts.push_back(random_tokens(rng, 20 + 13 * b, em.model.vocab));
  for (int b = 0; b < B; ++b) {
    const auto from_graph_engine = prefill_logits(graph, b, prompts[std::size_t(b)]);
    ASSERT_EQ(from_graph_engine, prefill_logits(eager, b, prompts[std::size_t(b)]));
  }
  std::vector<std::vector<float>> history;
  for (int step = 0; step < 24; ++step) {
    std::vector<std::pair<int, int32_t>> rows;
    for (int b = 0; b < B; ++b) rows.push_back({b, int32_t((step * 31 + b * 7) % 600)});
    const StepOutput go = [&] {
      std::vector<SequenceInput> in;
      for (auto [slot, tok] : rows) {
        SequenceInput s;
        s.slot = slot, s.tokens = {tok};
        in.push_back(s);
      }
      return graph.step(in, true);
    }();
    const std::vector<float> el = decode_logits(eager, rows);
    ASSERT_EQ(go.logits, el) << "step " << step << (go.graph ? " (graph replay)" : " (eager, before capture)");
    if (step > 0) {
      EXPECT_TRUE(go.graph) << "step " << step;
    }
    history.push_back(el);
  }
  EXPECT_GE(graph.graphs_captured(), 1);
  // Rollback: drop the last 10 tokens of every sequence and decode the same tokens again.
  for (int b = 0; b < B; ++b) eager.truncate(b, eager.held_tokens(b) - 10);
  for (int step = 14; step < 24; ++step) {
    std::vector<std::pair<int, int32_t>> rows;
    for (int b = 0; b < B; ++b) rows.push_back({b, int32_t((step * 31 + b * 7) % 600)});
    ASSERT_EQ(decode_logits(eager, rows), history[std::size_t(step)]) << "after rollback, step " << step;
  }
}

TEST(EngineGpu, AFolderOfItsWeightsLoadsBackToTheSameLogits) {
  REQUIRE_GPU();
  const EngineModel em = tiny("qwen2");
  Engine a(em, tiny_options(5));
  const auto dir = std::filesystem::temp_directory_path() / ("inferlab_engine_folder_" + std::to_string(::getpid()));
  write_model_folder(dir, tiny_config("qwen2"), em.model, em.arch, a.download_weights());
  EngineOptions o = tiny_options(0);
  o.weights = dir.string();
  Engine b(load_engine_model(dir.string()), o);
  const std::vector<int32_t> tokens = {1, 2, 3, 500, 17, 42, 99, 0};
  EXPECT_EQ(prefill_logits(a, 0, tokens), prefill_logits(b, 0, tokens));
  std::filesystem::remove_all(dir);
}

TEST(EngineGpu, RefusesWhatDoesNotFitAndStaysUnchanged) {
  REQUIRE_GPU();
  nlohmann::json j = tiny_config("llama");
  j["hidden_size"] = 8192, j["intermediate_size"] = 28672, j["num_hidden_layers"] = 2000;
  j["num_attention_heads"] = 64, j["num_key_value_heads"] = 8, j["head_dim"] = 128, j["vocab_size"] = 32000;
  EngineModel huge;
  huge.model = model_from_hf_json(j, "huge", "huge.json");
  huge.arch = arch_from_hf_json(j, huge.model, "huge.json");
  const std::string e = error_of([&] { Engine x(huge, tiny_options(1)); });
  EXPECT_NE(e.find("does not fit"), std::string::npos) << e;
  EXPECT_NE(e.find("needs"), std::string::npos) << e;
  EXPECT_NE(e.find("free"), std::string::npos) << e;

  const EngineModel em = tiny("llama");
  EngineOptions o = tiny_options(2);
  o.kv_blocks = 70;  // 1120 tokens of KV (one full sequence is 64 blocks)
  Engine small(em, o);
  Rng rng{3};
  {
    SequenceInput s0;
    s0.slot = 0, s0.tokens = random_tokens(rng, 900, em.model.vocab);
    small.step({s0});
  }
  const int64_t free_before = small.kv().allocator().free_blocks();
  SequenceInput s;
  s.slot = 1, s.tokens = random_tokens(rng, 300, em.model.vocab);
  EXPECT_NE(error_of([&] { small.step({s}); }).find("KV cache is full"), std::string::npos);
  EXPECT_EQ(small.kv().allocator().free_blocks(), free_before);
  EXPECT_EQ(small.held_tokens(1), 0);
  s.slot = 0, s.tokens = random_tokens(rng, 200, em.model.vocab);
  EXPECT_NE(error_of([&] { small.step({s}); }).find("exceed the engine's max context of 1024"), std::string::npos);
  EXPECT_EQ(small.held_tokens(0), 900);
  s.tokens = {600};
  EXPECT_NE(error_of([&] { small.step({s}); }).find("outside the vocabulary"), std::string::npos);
}

// ---------------------------------------------------------------- speculative decoding (speculative.h)

// Uniform multi-token steps (verification: k = gamma + 1 tokens, k logit rows; a draft's catch-up: k = 2,
// 1 row) replay as CUDA graphs bit-identical to eager steps, with the batch padded (3 -> 4).
TEST(EngineGpu, MultiTokenGraphsAreBitIdenticalToEager) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 21};
  const EngineModel em = tiny("llama");
  const uint64_t seed = rng.next();
  EngineOptions eager_opt = tiny_options(seed);
  eager_opt.graphs = false;
  Engine graph(em, tiny_options(seed)), eager(em, eager_opt);
  const int B = 3;
  for (int b = 0; b < B; ++b) {
    const auto prompt = random_tokens(rng, 30 + 11 * b, em.model.vocab);
    ASSERT_EQ(prefill_logits(graph, b, prompt), prefill_logits(eager, b, prompt));
  }
  int replays = 0;
  for (int round = 0; round < 12; ++round) {
    const int64_t k = round % 3 == 2 ? 2 : 5, l = k == 2 ? 1 : k;
    std::vector<SequenceInput> in(B);
    for (int b = 0; b < B; ++b) in[b].slot = b, in[b].tokens = random_tokens(rng, k, em.model.vocab), in[b].logits = l;
    const StepOutput go = graph.step(in, true), eo = eager.step(in, true);
    ASSERT_EQ(go.logits, eo.logits) << "round " << round << (go.graph ? " (graph replay)" : " (eager, before capture)");
    ASSERT_EQ(go.tokens, eo.tokens);
    replays += go.graph;
    // Roll back part of the pass, as a rejected draft does.
    for (int b = 0; b < B; ++b) {
      const int64_t keep = graph.held_tokens(b) - int64_t(rng.next() % uint64_t(k));
      graph.truncate(b, keep), eager.truncate(b, keep);
    }
  }
  EXPECT_GE(replays, 8) << "uniform multi-token steps should replay graphs after their first run";
}

// Where greedy speculative and plain decoding part, the two tokens must be a near-tie of the target: the
// verification pass (the prefill kernel, cuBLAS above 4 tokens) and a decode step (split-KV, the GEMV) round
// differently in bf16, and a tie within that rounding may go either way. Checked against the CPU reference
// (double) of the common text: |ref(a) - ref(b)| within twice the engine's derived tolerance.
struct Parting {
  int64_t at = -1;       // first differing generated token, -1: none within the compared length
  double gap = 0, tol = 0;
};
Parting parting(const EngineModel& em, const HostWeights& w, const std::vector<int32_t>& prompt,
                const std::vector<int32_t>& plain, const std::vector<int32_t>& spec) {
  Parting p;
  for (std::size_t j = 0; j < plain.size(); ++j)
    if (plain[j] != spec[j]) {
      p.at = int64_t(j);
      break;
    }
  if (p.at < 0) return p;
  std::vector<int32_t> text = prompt;
  text.insert(text.end(), plain.begin(), plain.begin() + p.at);
  const Tolerance t = reference(em, w, text);
  const std::size_t row = (text.size() - 1) * std::size_t(em.model.vocab);
  p.gap = std::abs(t.ref[row + std::size_t(plain[std::size_t(p.at)])] - t.ref[row + std::size_t(spec[std::size_t(p.at)])]);
  p.tol = 2 * t.tol;
  return p;
}

// Greedy speculative decoding emits plain greedy decoding's tokens, for every drafter, gamma 1..8, batch 1
// and 3: the drafter only changes how many target passes it takes. Every speculative token is a greedy
// choice of the CPU reference within rounding; where the two runs part, it is at a near-tie (Parting).
TEST(EngineGpu, GreedySpeculativeEqualsPlainGreedyForEveryDrafter) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 22};
  const EngineModel em = tiny("llama");
  const uint64_t seed = rng.next();
  Engine target(em, tiny_options(seed));
  EngineOptions q8 = tiny_options(seed), q4 = tiny_options(seed), other = tiny_options(seed + 1);
  q8.weight_format = WeightFormat::int8, q4.weight_format = WeightFormat::int4;
  Engine self8(em, q8), self4(em, q4), small(em, other);
  std::vector<std::unique_ptr<SpeculativeDrafter>> drafters;
  drafters.push_back(make_ngram_drafter(1, 3));
  drafters.push_back(make_model_drafter(self8, "int8 self-draft"));
  drafters.push_back(make_model_drafter(self4, "int4 self-draft"));
  drafters.push_back(make_model_drafter(small, "another model"));
  const int64_t new_tokens = 48;
  const HostWeights weights = target.download_weights();
  int runs = 0, parted = 0;
  std::map<std::string, int> exact;
  for (int B : {1, 3}) {
    std::vector<std::vector<int32_t>> prompts;
    for (int b = 0; b < B; ++b) {
      // Repetitive prompts give the n-gram drafter matches.
      auto piece = random_tokens(rng, 6, em.model.vocab), p = random_tokens(rng, 5 + b, em.model.vocab);
      for (int r = 0; r < 4; ++r) p.insert(p.end(), piece.begin(), piece.end());
      prompts.push_back(p);
    }
    const GenerationResult plain = plain_generate(target, prompts, new_tokens, SamplingParams{});
    for (auto& d : drafters)
      for (int64_t gamma = 1; gamma <= 8; ++gamma) {
        SCOPED_TRACE(d->name() + ", gamma " + std::to_string(gamma) + ", batch " + std::to_string(B));
        const GenerationResult spec = speculative_generate(target, *d, prompts, new_tokens, gamma, SamplingParams{});
        for (int b = 0; b < B; ++b) {
          ASSERT_GE(spec.tokens[b].size(), std::size_t(new_tokens));
          const std::vector<int32_t> head(spec.tokens[b].begin(), spec.tokens[b].begin() + new_tokens);
          ++runs;
          // Every speculative token is the target's greedy choice up to rounding: within twice the derived
          // tolerance of the reference's largest logit at its position (the text is the speculative one's).
          std::vector<int32_t> text = prompts[b];
          text.insert(text.end(), head.begin(), head.end() - 1);
          const Tolerance t = reference(em, weights, text);
          const std::size_t V = std::size_t(em.model.vocab);
          for (std::size_t j = 0; j < head.size(); ++j) {
            const std::size_t row = (prompts[b].size() - 1 + j) * V;
            const double best = *std::max_element(t.ref.begin() + long(row), t.ref.begin() + long(row + V));
            ASSERT_LE(best - t.ref[row + std::size_t(head[j])], 2 * t.tol)
                << "sequence " << b << " token " << j << " is not the target's greedy choice";
          }
          if (head == plain.tokens[b]) {
            ++exact[d->name()];
            continue;
          }
          const Parting p = parting(em, weights, prompts[b], plain.tokens[b], head);
          ++parted;
          std::printf("[ engine   ] %s gamma %lld batch %d sequence %d: parts from plain at token %lld, a tie within "
                      "%.2g (tolerance %.2g)\n", d->name().c_str(), (long long)gamma, B, b, (long long)p.at, p.gap, p.tol);
          EXPECT_LE(p.gap, p.tol) << "sequence " << b << " parts from plain greedy at token " << p.at
                                  << " where the target's two tokens are not a near-tie";
        }
        EXPECT_EQ(spec.spec.emitted, spec.spec.accepted + spec.spec.sequence_rounds);
        EXPECT_LE(spec.spec.tokens_per_pass(), double(gamma + 1));
        if (d->name() == "int8 self-draft") {
          EXPECT_GT(spec.spec.alpha(), 0.5) << "int8 of the same weights drafts well";
        }
        EXPECT_EQ(target.kv().allocator().free_blocks(), target.kv().allocator().num_blocks()) << "blocks leaked";
      }
  }
  // How many match exactly varies from run to run (the tiny random model meets near-ties often, and which
  // way one falls depends on rounding): printed, not asserted; the checks above are the test.
  std::printf("[ engine   ] %d of %d speculative runs emit plain greedy's tokens exactly\n", runs - parted, runs);
  for (const auto& d : drafters) std::printf("[ engine   ]   %s: %d exact\n", d->name().c_str(), exact[d->name()]);
}

// After rounds with rejections, the target holds exactly the committed text's KV: as many free blocks as an
// engine that prefilled the same text, and the next logits equal the CPU reference's for the whole text.
TEST(EngineGpu, SpeculativeRollbackLeavesThePlainRunsBlocksAndKv) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 23};
  const EngineModel em = tiny("llama");
  const uint64_t seed = rng.next();
  Engine target(em, tiny_options(seed)), plain(em, tiny_options(seed)), draft(em, tiny_options(seed + 7));
  auto drafter = make_model_drafter(draft);
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(rng, 21, em.model.vocab)};
  const GenerationResult spec = speculative_generate(target, *drafter, prompts, 40, 6, SamplingParams{}, false);
  ASSERT_GT(spec.spec.rejections, 0) << "an unrelated draft model should be rejected sometimes";
  std::vector<int32_t> text = prompts[0];
  text.insert(text.end(), spec.tokens[0].begin(), spec.tokens[0].end());
  ASSERT_EQ(target.held_tokens(0), int64_t(text.size()) - 1);
  prefill_logits(plain, 0, std::vector<int32_t>(text.begin(), text.end() - 1));
  EXPECT_EQ(target.kv().allocator().free_blocks(), plain.kv().allocator().free_blocks());
  const Tolerance t = reference(em, target.download_weights(), text);
  const std::vector<float> next = decode_logits(target, {{0, text.back()}});
  EXPECT_LE(max_diff(next, t.ref, (text.size() - 1) * std::size_t(em.model.vocab)), t.tol);
  EXPECT_LE(max_diff(decode_logits(plain, {{0, text.back()}}), t.ref, (text.size() - 1) * std::size_t(em.model.vocab)), t.tol);
}

// Bad input: gamma < 1, a draft of another vocabulary, a context beyond the engines'.
TEST(EngineGpu, SpeculativeRefusesBadInput) {
  REQUIRE_GPU();
  const EngineModel em = tiny("llama");
  Engine target(em, tiny_options(1));
  nlohmann::json j = tiny_config("llama");
  j["vocab_size"] = 500;
  EngineModel other;
  other.model = model_from_hf_json(j, "tiny-500", "tiny.json");
  other.arch = arch_from_hf_json(j, other.model, "tiny.json");
  Engine draft(other, tiny_options(2));
  auto md = make_model_drafter(draft), ng = make_ngram_drafter();
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4}};
  EXPECT_NE(error_of([&] { speculative_generate(target, *ng, prompts, 8, 0, SamplingParams{}); }).find("gamma must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { speculative_generate(target, *md, prompts, 8, 2, SamplingParams{}); }).find("vocabulary of 500 tokens differs"),
            std::string::npos);
  EXPECT_NE(error_of([&] { speculative_generate(target, *ng, prompts, 1020, 4, SamplingParams{}); }).find("needs a context of"),
            std::string::npos);
  EXPECT_EQ(target.kv().allocator().free_blocks(), target.kv().allocator().num_blocks());
}

// ---------------------------------------------------------------- the sharded engine (EngineParallel)
// Every layout of tensor x pipeline parallelism, ranks as threads on this GPU with host-synchronized
// collectives (communicator.h local_group): the last stage's logits of a prefill and of the decode steps
// after it against the CPU reference of the whole model, to the same derived tolerance as the whole engine
// (the partial sums of o_proj and down_proj are rounded to bf16 before the all-reduce sums them: the
// bf16 emulation's error, not a new one), for random weights cut on the device (RandomSource), perturbed
// host weights (norms, biases), a tied lm_head (Qwen2: the last stage holds the embedding too) and
// replicated KV heads (tp 4 > 2 KV heads). Micro-batches: the two sequences prefilled in separate steps.
struct ShardedRun {
  std::vector<float> prefill_a, prefill_b, decode;  // the last stage's first rank
  std::vector<int> empty_tokens;                    // per rank: 1 when its decode output had no tokens
};

ShardedRun run_sharded(const EngineModel& em, EngineOptions o, int64_t tp, int64_t pp, const std::vector<int32_t>& a,
                       const std::vector<int32_t>& b, const std::vector<std::pair<int32_t, int32_t>>& decode) {
  const int n = int(tp * pp);
  std::vector<std::vector<std::unique_ptr<Communicator>>> tp_groups, pp_groups;
  for (int64_t s = 0; s < pp; ++s) tp_groups.push_back(local_group(int(tp)));
  for (int64_t t = 0; t < tp; ++t) pp_groups.push_back(local_group(int(pp)));
  ShardedRun out;
  out.empty_tokens.assign(std::size_t(n), 0);
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        const int64_t stage = r / tp, t = r % tp;
        EngineOptions ro = o;
        ro.parallel.shard = WeightShard{tp, t, pp, stage};
        ro.parallel.tp = tp > 1 ? tp_groups[std::size_t(stage)][std::size_t(t)].get() : nullptr;
        ro.parallel.pp = pp > 1 ? pp_groups[std::size_t(t)][std::size_t(stage)].get() : nullptr;
        Engine e(em, ro);
        const std::vector<float> la = prefill_logits(e, 1, a), lb = prefill_logits(e, 2, b);
        std::vector<float> dec;
        bool no_tokens = false;
        for (const auto& [ta, tb] : decode) {
          SequenceInput sa, sb;
          sa.slot = 1, sa.tokens = {ta};
          sb.slot = 2, sb.tokens = {tb};
          const StepOutput so = e.step({sa, sb}, true);
          dec.insert(dec.end(), so.logits.begin(), so.logits.end());
          no_tokens = no_tokens || so.tokens[0].empty();
        }
        out.empty_tokens[std::size_t(r)] = no_tokens;
        if (stage == pp - 1 && t == 0) out.prefill_a = la, out.prefill_b = lb, out.decode = dec;
      } catch (const std::exception& ex) {
        errors[std::size_t(r)] = ex.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[std::size_t(r)], "") << "rank " << r;
  return out;
}

TEST(EngineGpu, ShardedEngineMatchesTheReferenceInEveryLayout) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 21};
  struct Case {
    const char* type;
    bool perturb;
    int64_t tp, pp;
  };
  for (const Case& c : {Case{"llama", false, 2, 1}, Case{"llama", true, 4, 1}, Case{"llama", false, 1, 2},
                        Case{"llama", true, 1, 3}, Case{"llama", true, 2, 2}, Case{"qwen2", true, 2, 2},
                        Case{"qwen2", false, 4, 1}}) {
    SCOPED_TRACE(std::string(c.type) + (c.perturb ? " perturbed" : " random") + " tp " + std::to_string(c.tp) + " pp " +
                 std::to_string(c.pp));
    const EngineModel em = tiny(c.type);
    EngineOptions o = tiny_options(rng.next());
    o.perturb = c.perturb;
    o.kv_blocks = 100;
    const auto a = random_tokens(rng, 50 + int64_t(rng.next() % 100), em.model.vocab);
    const auto b = random_tokens(rng, 30 + int64_t(rng.next() % 60), em.model.vocab);
    std::vector<std::pair<int32_t, int32_t>> dec;
    for (int i = 0; i < 3; ++i) dec.push_back({int32_t(rng.next() % 600), int32_t(rng.next() % 600)});
    HostWeights w;
    {
      Engine whole(em, o);
      w = whole.download_weights();
    }
    std::vector<int32_t> fa = a, fb = b;
    for (auto [x, y] : dec) fa.push_back(x), fb.push_back(y);
    const Tolerance ta = reference(em, w, fa), tb = reference(em, w, fb);
    const ShardedRun got = run_sharded(em, o, c.tp, c.pp, a, b, dec);
    const std::size_t V = 600;
    ASSERT_EQ(got.prefill_a.size(), a.size() * V);
    ASSERT_EQ(got.prefill_b.size(), b.size() * V);
    ASSERT_EQ(got.decode.size(), dec.size() * 2 * V);
    EXPECT_LE(max_diff(got.prefill_a, ta.ref), ta.tol);
    EXPECT_LE(max_diff(got.prefill_b, tb.ref), tb.tol);
    double worst = 0;
    for (std::size_t i = 0; i < dec.size(); ++i) {
      const std::vector<float> ra(got.decode.begin() + long(2 * i * V), got.decode.begin() + long((2 * i + 1) * V));
      const std::vector<float> rb(got.decode.begin() + long((2 * i + 1) * V), got.decode.begin() + long((2 * i + 2) * V));
      worst = std::max(worst, max_diff(ra, ta.ref, (a.size() + i) * V) / ta.tol);
      worst = std::max(worst, max_diff(rb, tb.ref, (b.size() + i) * V) / tb.tol);
    }
    EXPECT_LE(worst, 1.0) << "decode logits over the tolerance";
    for (int64_t r = 0; r < c.tp * c.pp; ++r)  // tokens from the last stage only
      EXPECT_EQ(got.empty_tokens[std::size_t(r)], r / c.tp == c.pp - 1 ? 0 : 1) << "rank " << r;
  }
}

TEST(EngineGpu, ShardedEngineRefusesAMissingOrMismatchedCommunicator) {
  REQUIRE_GPU();
  const EngineModel em = tiny("llama");
  EngineOptions o = tiny_options(3);
  o.parallel.shard = WeightShard{2, 0, 1, 0};
  EXPECT_NE(error_of([&] { Engine e(em, o); }).find("tensor-parallel degree 2 needs a communicator"), std::string::npos);
  auto group = local_group(2);
  o.parallel.tp = group[1].get();
  EXPECT_NE(error_of([&] { Engine e(em, o); }).find("the tensor-parallel communicator has rank 1 of 2, the shard says 0 of 2"),
            std::string::npos);
  o.parallel.shard = WeightShard{3, 0, 1, 0};
  EXPECT_NE(error_of([&] { Engine e(em, o); }).find("does not divide the 4 attention heads"), std::string::npos);
}

#ifdef INFERLAB_HAVE_NCCL
// The NCCL communicator on this GPU alone (a group of one rank: NCCL refuses two ranks on one device): libnccl
// opened at run time, every call enqueued on the stream and captured into a CUDA graph, the results exact (an
// all-reduce of one rank and an all-gather of one are copies). Two-GPU layouts run in experiments/parallel_engine.
TEST(EngineGpu, NcclCommunicatorOfOneRankRunsInsideAGraph) {
  REQUIRE_GPU();
  std::unique_ptr<Communicator> comm;
  try {
    comm = nccl_communicator(nccl_unique_id(), 0, 1);
  } catch (const Error& e) {
    const std::string why = e.what();
    if (why.find("libnccl.so.2") != std::string::npos) GTEST_SKIP() << why;  // NCCL not installed here
    throw;
  }
  EXPECT_EQ(comm->size(), 1);
  EXPECT_TRUE(comm->capturable());
  std::printf("[ engine   ] NCCL %s\n", nccl_version().c_str());
  const int64_t n = 5120;
  std::vector<uint16_t> host(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[std::size_t(i)] = bf16_bits(float(i % 97) - 48.f);
  DeviceBuffer<uint16_t> x(host), gathered(static_cast<std::size_t>(n));
  cudaStream_t st = nullptr;
  INFERLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  INFERLAB_CUDA_CHECK(cudaMemsetAsync(gathered.get(), 0xff, std::size_t(n) * 2, st));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  INFERLAB_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  comm->all_reduce_sum_bf16(x.get(), n, st);
  comm->all_gather(x.get(), gathered.get(), n * 2, st);
  INFERLAB_CUDA_CHECK(cudaStreamEndCapture(st, &g));
  INFERLAB_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
  INFERLAB_CUDA_CHECK(cudaGraphLaunch(exec, st));
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(st));
  EXPECT_EQ(x.download(), host);
  EXPECT_EQ(gathered.download(), host);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  EXPECT_NE(error_of([&] { nccl_communicator(nccl_unique_id(), 1, 1); }).find("rank 1 of 1"), std::string::npos);
}
#endif

}  // namespace
}  // namespace inferlab
