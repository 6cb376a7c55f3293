#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/model.h"

#include "error_of.h"

namespace inferlab {
namespace {

// Parameter counts published with the checkpoints (Hugging Face model cards / safetensors index):
// exact, because the count is a pure function of the config (biases: none in these models).
TEST(Model, ParameterCountsMatchPublishedCheckpoints) {
  EXPECT_EQ(load_model("llama-2-7b").total_params(), 6738415616.0);
  EXPECT_EQ(load_model("llama-2-13b").total_params(), 13015864320.0);
  EXPECT_EQ(load_model("llama-2-70b").total_params(), 68976648192.0);
  EXPECT_EQ(load_model("llama-3-8b").total_params(), 8030261248.0);
  EXPECT_EQ(load_model("llama-3-70b").total_params(), 70553706496.0);
  EXPECT_EQ(load_model("mistral-7b").total_params(), 7241732096.0);
  EXPECT_EQ(load_model("mixtral-8x7b").total_params(), 46702792704.0);
}

TEST(Model, MixtralActiveParamsUseTopTwoExperts) {
  const auto m = load_model("mixtral-8x7b");
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  // 6 of 8 experts idle per token: 46.7 B total, about 12.9 B active.
  EXPECT_NEAR(m.active_params_per_token() / 1e9, 12.9, 0.1);
}

TEST(Model, AttentionKinds) {
  EXPECT_EQ(load_model("llama-2-7b").attention_kind(), "MHA");
  const auto l70 = load_model("llama-2-70b");
  EXPECT_EQ(l70.heads, 64);
  EXPECT_EQ(l70.kv_heads, 8);
  EXPECT_EQ(l70.attention_kind(), "GQA-8");
  EXPECT_EQ(with_kv_heads(l70, "mqa").attention_kind(), "MQA");
  EXPECT_EQ(with_kv_heads(l70, "mha").kv_heads, 64);
  EXPECT_EQ(with_kv_heads(load_model("llama-2-7b"), "gqa-8").kv_heads, 4);
  EXPECT_EQ(with_kv_heads(l70, "16").kv_heads, 16);
  EXPECT_EQ(with_kv_heads(l70, "config").kv_heads, 8);
  EXPECT_NE(error_of([&] { with_kv_heads(l70, "48"); }).find("does not divide"), std::string::npos);
  EXPECT_NE(error_of([&] { with_kv_heads(l70, "gqa-3"); }).find("must divide"), std::string::npos);
  EXPECT_NE(error_of([&] { with_kv_heads(l70, "lots"); }).find("kv_heads"), std::string::npos);
}

TEST(Model, MistralHasSlidingWindow) {
  const auto m = load_model("mistral-7b");
  ASSERT_TRUE(m.sliding_window.has_value());
  EXPECT_EQ(*m.sliding_window, 4096);
  EXPECT_FALSE(load_model("mixtral-8x7b").sliding_window.has_value());  // "sliding_window": null
}

TEST(Model, EveryShippedConfigLoads) {
  const auto names = known_models();
  ASSERT_GE(names.size(), 7u);
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const auto m = load_model(n);
    EXPECT_EQ(m.heads % m.kv_heads, 0);
    EXPECT_GT(m.total_params(), 1e9);
    EXPECT_EQ(m.hidden, m.heads * m.head_dim);
  }
}

TEST(Model, UnknownNameListsKnownModels) {
  const std::string msg = error_of([] { load_model("llama-9-1t"); });
  EXPECT_NE(msg.find("unknown model 'llama-9-1t'"), std::string::npos);
  EXPECT_NE(msg.find("llama-2-7b"), std::string::npos);
  EXPECT_NE(msg.find("mixtral-8x7b"), std::string::npos);
}

nlohmann::json llama_like() {
  return {{"model_type", "llama"},        {"hidden_size", 512}, {"intermediate_size", 1024},
          {"num_hidden_layers", 2},       {"num_attention_heads", 8}, {"num_key_value_heads", 2},
          {"vocab_size", 1000},           {"torch_dtype", "bfloat16"}};
}

TEST(Model, RejectsBadConfigs) {
  auto bad = llama_like();
  bad["num_key_value_heads"] = 3;
  EXPECT_NE(error_of([&] { model_from_hf_json(bad, "x", "x.json"); }).find("does not divide"), std::string::npos);
  bad = llama_like();
  bad.erase("hidden_size");
  EXPECT_NE(error_of([&] { model_from_hf_json(bad, "x", "x.json"); }).find("missing field 'hidden_size'"),
            std::string::npos);
  bad = llama_like();
  bad["num_hidden_layers"] = 0;
  EXPECT_NE(error_of([&] { model_from_hf_json(bad, "x", "x.json"); }).find("must be positive"), std::string::npos);
  bad = llama_like();
  bad["num_hidden_layers"] = -4;
  EXPECT_NE(error_of([&] { model_from_hf_json(bad, "x", "x.json"); }).find("must be positive"), std::string::npos);
  bad = llama_like();
  bad["hidden_size"] = "512";
  EXPECT_NE(error_of([&] { model_from_hf_json(bad, "x", "x.json"); }).find("must be an integer"), std::string::npos);
  bad = llama_like();
  bad["torch_dtype"] = "float13";
  EXPECT_NE(error_of([&] { model_from_hf_json(bad, "x", "x.json"); }).find("unknown dtype"), std::string::npos);
  bad = llama_like();
  bad["num_local_experts"] = 2;
  bad["num_experts_per_tok"] = 4;
  EXPECT_NE(error_of([&] { model_from_hf_json(bad, "x", "x.json"); }).find("exceeds"), std::string::npos);
  EXPECT_NE(error_of([&] { model_from_hf_json(nlohmann::json::array(), "x", "x.json"); }).find("JSON object"),
            std::string::npos);
}

TEST(Model, MalformedJsonNamesFileAndLine) {
  const auto path = std::filesystem::temp_directory_path() / "inferlab_bad_config.json";
  {
    std::ofstream f(path);
    f << "{\n  \"hidden_size\": 4096,\n  \"num_hidden_layers\": 32\n  \"vocab_size\": 32000\n}\n";
  }
  const std::string msg = error_of([&] { load_model(path.string()); });
  std::filesystem::remove(path);
  EXPECT_NE(msg.find("inferlab_bad_config.json:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;
}

TEST(Model, OtherHuggingFaceSpellingsLoad) {
  // GPT-2: n_embd / n_layer / n_head, two-matrix MLP of 4x hidden, tied embeddings.
  const nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"n_embd", 768}, {"n_layer", 12}, {"n_head", 12},
                               {"n_positions", 1024},  {"vocab_size", 50257}};
  const auto g = model_from_hf_json(gpt2, "gpt2", "gpt2.json");
  EXPECT_EQ(g.hidden, 768);
  EXPECT_EQ(g.intermediate, 3072);
  EXPECT_FALSE(g.gated_mlp);
  EXPECT_TRUE(g.tied_embeddings);
  EXPECT_EQ(g.kv_heads, 12);
  // Falcon-style multi_query, and a multimodal config with the LM under text_config.
  const nlohmann::json falcon = {{"model_type", "falcon"}, {"hidden_size", 4544}, {"num_hidden_layers", 32},
                                 {"num_attention_heads", 71}, {"multi_query", true}, {"vocab_size", 65024}};
  EXPECT_EQ(model_from_hf_json(falcon, "falcon", "f.json").kv_heads, 1);
  const nlohmann::json mm = {{"model_type", "llava"}, {"text_config", llama_like()}};
  EXPECT_EQ(model_from_hf_json(mm, "llava", "l.json").kv_heads, 2);
  // Explicit head_dim (Gemma-style: heads x head_dim != hidden).
  auto gemma = llama_like();
  gemma["head_dim"] = 256;
  EXPECT_EQ(model_from_hf_json(gemma, "g", "g.json").q_dim(), 8 * 256);
}

TEST(Model, LoadsFromAFolderWithConfigJson) {
  const auto dir = std::filesystem::temp_directory_path() / "inferlab_model_dir";
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "config.json", llama_like().dump());
  const auto m = load_model(dir.string());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(m.name, "inferlab_model_dir");
  EXPECT_EQ(m.layers, 2);
}

}  // namespace
}  // namespace inferlab
