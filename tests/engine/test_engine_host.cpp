// The engine's host side, without a GPU: configs accepted and refused with the field named, RoPE
// frequencies as transformers computes them, safetensors read/write and its malformed files, the weight
// list of a checkpoint, and properties of the CPU reference forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "inferlab/kernels/engine/arch.h"
#include "inferlab/kernels/engine/reference.h"
#include "inferlab/kernels/engine/safetensors.h"
#include "inferlab/kernels/engine/weights.h"
#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"

#include "error_of.h"

namespace inferlab {
namespace {
namespace fs = std::filesystem;

nlohmann::json tiny_config(const std::string& type = "llama") {
  nlohmann::json j = {{"architectures", {type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
                      {"model_type", type},
                      {"hidden_size", 128},
                      {"intermediate_size", 256},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 64},
                      {"vocab_size", 300},
                      {"max_position_embeddings", 512},
                      {"rms_norm_eps", 1e-5},
                      {"rope_theta", 10000.0},
                      {"hidden_act", "silu"},
                      {"tie_word_embeddings", false},
                      {"torch_dtype", "bfloat16"}};
  return j;
}

EngineModel engine_model(const nlohmann::json& j) {
  EngineModel em;
  em.model = model_from_hf_json(j, "tiny", "tiny.json");
  em.arch = arch_from_hf_json(j, em.model, "tiny.json");
  return em;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("inferlab_engine_host_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(EngineArch, ShippedLlamaConfigsLoad) {
  for (const char* name : {"llama-2-7b", "llama-3-8b", "mistral-7b"}) {
    const EngineModel em = load_engine_model(name);
    EXPECT_EQ(em.model.head_dim, 128) << name;
    EXPECT_FALSE(em.arch.qkv_bias) << name;
  }
  const EngineModel l3 = load_engine_model("llama-3-8b");
  EXPECT_DOUBLE_EQ(l3.arch.rope.theta, 500000.0);
  EXPECT_EQ(engine_model(tiny_config("qwen2")).arch.qkv_bias, true);
  // transformers >= 5 writes RoPE as one rope_parameters object.
  auto j = tiny_config();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const EngineModel v5 = engine_model(j);
  EXPECT_DOUBLE_EQ(v5.arch.rope.theta, 500000.0);
  EXPECT_EQ(v5.arch.rope.type, "llama3");
  EXPECT_EQ(v5.arch.rope.original_max_positions, 8192);
}

TEST(EngineArch, RefusesWhatItDoesNotRunNamingTheField) {
  auto refuse = [](nlohmann::json j, const std::string& field) {
    const std::string e = error_of([&] { engine_model(j); });
    EXPECT_NE(e.find(field), std::string::npos) << "expected '" << field << "' in: " << e;
  };
  auto j = tiny_config();
  j["model_type"] = "gpt2";
  refuse(j, "model_type");
  j = tiny_config();
  j["architectures"] = {"LlamaForSequenceClassification"};
  refuse(j, "architectures");
  j = tiny_config();
  j["hidden_act"] = "gelu";
  refuse(j, "hidden_act");
  j = tiny_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  refuse(j, "rope_scaling");
  j = tiny_config();
  j["head_dim"] = 96;
  refuse(j, "head_dim");
  j = tiny_config();
  j["attention_bias"] = true;
  refuse(j, "attention_bias");
  j = tiny_config();
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  refuse(j, "experts");
  j = tiny_config();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  refuse(j, "low_freq_factor");
}

TEST(EngineArch, RopeFrequenciesAsTransformersComputesThem) {
  // Values computed independently in double precision (Python) from the formulas of transformers'
  // modeling_rope_utils; the engine's fp32 values agree to fp32 rounding.
  RopeConfig r;
  auto f = rope_inv_freq(128, r);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[1], 0.8659643233600653, 1e-6 * 0.866);
  EXPECT_NEAR(f[63], 0.00011547819846894582, 2e-6 * 1.15e-4);
  // Llama-3.1: theta 500000, llama3 scaling (factor 8, low 1, high 4, original 8192): high frequencies
  // kept, low ones divided by 8, the band between smoothed.
  r.theta = 500000;
  r.type = "llama3";
  r.factor = 8;
  r.low_freq_factor = 1;
  r.high_freq_factor = 4;
  r.original_max_positions = 8192;
  f = rope_inv_freq(128, r);
  const std::pair<int, double> expected[] = {{0, 1.0},
                                             {1, 0.8146172338565447},
                                             {20, 0.016560440080994446},
                                             {31, 0.0008567514129196321},
                                             {32, 0.0005248461609929547},
                                             {40, 3.428102195952591e-05},
                                             {63, 3.068925988914511e-07}};
  for (auto [i, v] : expected) EXPECT_NEAR(f[i], v, 3e-6 * v) << "index " << i;
  r.type = "linear";
  r.factor = 4;
  EXPECT_NEAR(rope_inv_freq(128, r)[1], 0.8146172338565447 / 4, 1e-6);
}

TensorData floats_as(const std::string& dtype, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  TensorData t{dtype, shape, {}};
  for (float x : v) {
    if (dtype == "F32") {
      uint8_t b[4];
      std::memcpy(b, &x, 4);
      t.bytes.insert(t.bytes.end(), b, b + 4);
    } else {
      const uint16_t bits = dtype == "BF16" ? bf16_bits(x) : fp16_bits(x);
      t.bytes.push_back(uint8_t(bits & 0xff));
      t.bytes.push_back(uint8_t(bits >> 8));
    }
  }
  return t;
}

TEST(Safetensors, RoundTripOfEveryFloatDtype) {
  const fs::path d = temp_dir("roundtrip");
  std::map<std::string, TensorData> t;
  t["a"] = floats_as("F32", {2, 3}, {1.5f, -2.f, 3.25f, 0.f, 1e-8f, 7.f});
  t["b"] = floats_as("BF16", {3}, {1.f, -0.5f, 256.f});
  t["c"] = floats_as("F16", {1, 2}, {0.125f, -3.f});
  write_safetensors(d / "model.safetensors", t, {{"format", "pt"}});
  SafetensorsFolder f(d);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(to_floats(f.get("a")), (std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 1e-8f, 7.f}));
  EXPECT_EQ(to_floats(f.get("b")), (std::vector<float>{1.f, -0.5f, 256.f}));
  EXPECT_EQ(to_floats(f.get("c")), (std::vector<float>{0.125f, -3.f}));
  EXPECT_EQ(f.get("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(to_bf16_bits(f.get("b"))[2], bf16_bits(256.f));
  EXPECT_NE(error_of([&] { f.get("zz"); }).find("missing tensor 'zz'"), std::string::npos);
  fs::remove_all(d);
}

TEST(Safetensors, MalformedFilesNameTheProblem) {
  const fs::path d = temp_dir("malformed");
  auto write_raw = [&](const std::string& header, std::size_t data_bytes) {
    std::ofstream o(d / "model.safetensors", std::ios::binary);
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) o.put(char((n >> (8 * i)) & 0xff));
    o << header << std::string(data_bytes, '\0');
  };
  write_raw("{not json", 0);
  EXPECT_NE(error_of([&] { SafetensorsFolder f(d); }).find("malformed safetensors header"), std::string::npos);
  write_raw(R"({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})", 4);
  EXPECT_NE(error_of([&] { SafetensorsFolder f(d); }).find("'w': data_offsets"), std::string::npos);
  write_raw(R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", 8);
  EXPECT_NE(error_of([&] { SafetensorsFolder f(d); }).find("do not hold shape"), std::string::npos);
  write_raw(R"({"w": {"dtype": "Q4", "shape": [3], "data_offsets": [0, 8]}})", 8);
  EXPECT_NE(error_of([&] { SafetensorsFolder f(d); }).find("unknown dtype 'Q4'"), std::string::npos);
  {
    std::ofstream o(d / "model.safetensors", std::ios::binary);
    o << "abc";
  }
  EXPECT_NE(error_of([&] { SafetensorsFolder f(d); }).find("not a safetensors file"), std::string::npos);
  fs::remove(d / "model.safetensors");
  EXPECT_NE(error_of([&] { SafetensorsFolder f(d); }).find("no model.safetensors"), std::string::npos);
  fs::remove_all(d);
}

TEST(Safetensors, ShardsThroughTheIndex) {
  const fs::path d = temp_dir("shards");
  write_safetensors(d / "part-1.safetensors", {{"x", floats_as("F32", {1}, {2.f})}});
  write_safetensors(d / "part-2.safetensors", {{"y", floats_as("F32", {1}, {3.f})}});
  std::ofstream(d / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"x": "part-1.safetensors", "y": "part-2.safetensors"}})";
  SafetensorsFolder f(d);
  EXPECT_EQ(to_floats(f.get("y"))[0], 3.f);
  EXPECT_EQ(to_floats(f.get("x"))[0], 2.f);
  fs::remove_all(d);
}

TEST(EngineWeights, CheckpointErrorsNameTheTensor) {
  const EngineModel em = engine_model(tiny_config());
  HostWeights w = random_host_weights(em.model, em.arch, 1);
  EXPECT_EQ(w.size(), weight_specs(em.model, em.arch).size());
  const fs::path d = temp_dir("checkpoint");
  write_model_folder(d, tiny_config(), em.model, em.arch, w);
  {
    SafetensorsFolder f(d);
    EXPECT_NO_THROW(check_checkpoint(f, em.model, em.arch));
    const HostWeights back = load_host_weights(f, em.model, em.arch);
    EXPECT_EQ(back, w);  // bf16 values round-trip exactly
  }
  // A missing tensor, a wrong shape, an integer dtype.
  std::map<std::string, TensorData> t;
  for (const auto& s : weight_specs(em.model, em.arch))
    if (s.name != "model.layers.1.mlp.up_proj.weight") t[s.name] = floats_as("BF16", s.shape, w.at(s.name));
  write_safetensors(d / "model.safetensors", t);
  EXPECT_NE(error_of([&] { check_checkpoint(SafetensorsFolder(d), em.model, em.arch); })
                .find("missing tensor 'model.layers.1.mlp.up_proj.weight'"),
            std::string::npos);
  t["model.layers.1.mlp.up_proj.weight"] = floats_as("BF16", {128, 256}, std::vector<float>(128 * 256));
  write_safetensors(d / "model.safetensors", t);
  EXPECT_NE(error_of([&] { check_checkpoint(SafetensorsFolder(d), em.model, em.arch); })
                .find("'model.layers.1.mlp.up_proj.weight' has shape [128, 256], the config needs [256, 128]"),
            std::string::npos);
  t["model.layers.1.mlp.up_proj.weight"] = TensorData{"I8", {256, 128}, std::vector<uint8_t>(256 * 128)};
  write_safetensors(d / "model.safetensors", t);
  EXPECT_NE(error_of([&] { check_checkpoint(SafetensorsFolder(d), em.model, em.arch); })
                .find("'model.layers.1.mlp.up_proj.weight' has dtype I8"),
            std::string::npos);
  fs::remove_all(d);
}

TEST(EngineReference, CausalAndCloseToItsBf16Emulation) {
  for (const char* type : {"llama", "qwen2"}) {
    const EngineModel em = engine_model(tiny_config(type));
    const HostWeights w = random_host_weights(em.model, em.arch, 7, true);
    std::vector<int32_t> tokens = {5, 17, 299, 0, 42, 42, 128, 3, 77, 250};
    const auto full = reference_forward(em.model, em.arch, w, tokens);
    ASSERT_EQ(full.size(), tokens.size() * 300);
    // Causal: the logits of a prefix do not depend on what follows it.
    std::vector<int32_t> changed = tokens;
    changed[7] = 9;
    changed[9] = 1;
    const auto other = reference_forward(em.model, em.arch, w, changed);
    for (std::size_t i = 0; i < 7 * 300; ++i) ASSERT_EQ(full[i], other[i]) << type << " element " << i;
    bool differs_after = false;
    for (std::size_t i = 7 * 300; i < full.size(); ++i) differs_after |= full[i] != other[i];
    EXPECT_TRUE(differs_after) << type;
    // The bf16 emulation is close to the double forward but not equal to it (it must round somewhere).
    const auto bf = reference_forward(em.model, em.arch, w, tokens, true);
    double max_diff = 0, max_abs = 0;
    for (std::size_t i = 0; i < full.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(bf[i] - full[i]));
      max_abs = std::max(max_abs, std::abs(full[i]));
    }
    EXPECT_GT(max_diff, 0.0) << type;
    EXPECT_LT(max_diff, 0.05 * max_abs) << type;
  }
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// Sharding (weights.h WeightShard): every shard's tensors put back together give the whole checkpoint
// exactly — q/k/v/gate/up rows and o/down columns side by side over the ranks, a replicated KV head the
// same on every rank holding it, the vocabulary slices with zero padding — and each shard's shapes are
// its config's (shard_host_weights checks them against weight_specs(shard_config)).
TEST(EngineSharding, ShardsPutBackTogetherGiveTheWholeCheckpoint) {
  for (const char* type : {"llama", "qwen2"}) {
    nlohmann::json j = tiny_config(type);
    j["vocab_size"] = 301;  // not a multiple of tp: the last slice is padded
    j["num_hidden_layers"] = 3;
    const EngineModel em = engine_model(j);
    const ModelConfig& m = em.model;
    const HostWeights full = random_host_weights(m, em.arch, 7, true);
    for (int64_t tp : {1, 2, 4})
      for (int64_t pp : {1, 2, 3}) {
        SCOPED_TRACE(std::string(type) + " tp " + std::to_string(tp) + " pp " + std::to_string(pp));
        std::map<std::string, std::vector<float>> rebuilt;
        std::map<std::string, int> holders;
        for (int64_t stage = 0; stage < pp; ++stage)
          for (int64_t r = 0; r < tp; ++r) {
            const WeightShard s{tp, r, pp, stage};
            const ModelConfig sc = shard_config(m, s);
            EXPECT_EQ(sc.heads, m.heads / tp);
            EXPECT_EQ(sc.kv_heads, std::max<int64_t>(1, m.kv_heads / tp));
            EXPECT_EQ(sc.intermediate, m.intermediate / tp);
            EXPECT_EQ(sc.vocab, (m.vocab + tp - 1) / tp);
            const HostWeights part = shard_host_weights(full, m, em.arch, s);
            for (const auto& [local, values] : part) {
              const std::string name = full_tensor_name(local, m, s);
              const std::vector<float>& whole = full.at(name);
              ++holders[name];
              auto ends = [&](const std::string& x) {
                return name.size() >= x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0;
              };
              auto& out = rebuilt[name];
              if (out.empty()) out.assign(whole.size(), NAN);
              const bool kv = ends("k_proj.weight") || ends("v_proj.weight") || ends("k_proj.bias") || ends("v_proj.bias");
              const bool rows = ends("q_proj.weight") || ends("q_proj.bias") || kv || ends("gate_proj.weight") ||
                                ends("up_proj.weight") || name == "model.embed_tokens.weight" || name == "lm_head.weight";
              const bool columns = ends("o_proj.weight") || ends("down_proj.weight");
              if (tp == 1 || (!rows && !columns)) {  // whole: norms (replicated), or no tensor parallelism
                ASSERT_EQ(values, whole) << name;
                out = values;
                continue;
              }
              const int64_t width = ends(".bias") ? 1 : sc.hidden;  // columns of a row-sliced tensor
              if (rows) {
                const int64_t held_rows = int64_t(values.size()) / width;
                int64_t first = r * held_rows;
                if (kv && tp > m.kv_heads) first = r / (tp / m.kv_heads) * held_rows;  // replicated KV head
                for (int64_t i = 0; i < held_rows; ++i)
                  for (int64_t c = 0; c < width; ++c) {
                    const float v = values[std::size_t(i * width + c)];
                    const int64_t at = (first + i) * width + c;
                    if (at >= int64_t(whole.size())) {
                      ASSERT_EQ(v, 0.f) << name << ": padding row";
                      continue;
                    }
                    float& slot = out[std::size_t(at)];
                    if (!std::isnan(slot)) {
                      ASSERT_EQ(slot, v) << name << ": a replicated KV head differs";
                    }
                    slot = v;
                  }
              } else {
                const int64_t held_cols = int64_t(values.size()) / m.hidden;
                const int64_t whole_cols = int64_t(whole.size()) / m.hidden;
                for (int64_t i = 0; i < m.hidden; ++i)
                  for (int64_t c = 0; c < held_cols; ++c)
                    out[std::size_t(i * whole_cols + r * held_cols + c)] = values[std::size_t(i * held_cols + c)];
              }
            }
          }
        for (const auto& [name, whole] : full) {
          ASSERT_TRUE(rebuilt.count(name)) << name << " is held by no shard";
          for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(rebuilt[name][i], whole[i]) << name << " element " << i;
        }
        // Layers on one stage only; the embedding on the first stage (the lm_head is untied here), norms of a
        // layer on every rank of its stage.
        EXPECT_EQ(holders.at("model.embed_tokens.weight"), tp);
        EXPECT_EQ(holders.at("lm_head.weight"), tp);
        EXPECT_EQ(holders.at("model.layers.0.input_layernorm.weight"), tp);
      }
  }
}

TEST(EngineSharding, RefusesShardsThatDoNotDivideTheModel) {
  const EngineModel em = engine_model(tiny_config());  // 4 heads, 2 KV heads, width 256, 2 layers
  EXPECT_NE(error_of([&] { shard_config(em.model, WeightShard{3, 0, 1, 0}); }).find("does not divide the 4 attention heads"),
            std::string::npos);
  EXPECT_NE(error_of([&] { shard_config(em.model, WeightShard{1, 0, 3, 0}); }).find("exceeds the 2 layers"),
            std::string::npos);
  EXPECT_NE(error_of([&] { shard_config(em.model, WeightShard{2, 2, 1, 0}); }).find("tensor-parallel rank 2 outside 0..1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { shard_config(em.model, WeightShard{1, 0, 2, -1}); }).find("pipeline stage -1 outside 0..1"),
            std::string::npos);
}

}  // namespace
}  // namespace inferlab
