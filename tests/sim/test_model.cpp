#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/model.h"

#include "error_of.h"

namespace inferlab {
namespace {

nlohmann::json llama_like() {
  return {{"model_type", "llama"},        {"hidden_size", 512}, {"intermediate_size", 1024},
          {"num_hidden_layers", 2},       {"num_attention_heads", 8}, {"num_key_value_heads", 2},
          {"vocab_size", 1000},           {"torch_dtype", "bfloat16"}};
}


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

// Published counts of the other shipped families (papers and model cards, cited in each config's
// _source). The totals are published rounded to three digits (8.54 B, 236 B): the count must round to
// them, |count - published| <= half a unit of the last digit. The activated counts are published to
// two digits, and vendors differ on whether the embedding is in (Mixtral's 12.9 B and Qwen's 2.7 B
// include it, DeepSeek's 2.4 / 21 / 37 B leave the input embedding out, which is what makes all
// three of them agree): those must be within one unit of the last published digit.
TEST(Model, PublishedParameterCountsOfGemmaQwenMoeAndDeepSeek) {
  struct Published {
    const char* name;
    double total, total_tolerance;
    double active, active_tolerance;
    bool active_without_embedding;
  };
  const Published published[] = {
      {"gemma-7b", 8.54e9, 0.005e9, 8.54e9, 0.005e9, false},
      {"gemma-2-2b", 2.61e9, 0.005e9, 2.61e9, 0.005e9, false},
      {"gemma-2-9b", 9.24e9, 0.005e9, 9.24e9, 0.005e9, false},
      {"gemma-2-27b", 27.2e9, 0.05e9, 27.2e9, 0.05e9, false},
      {"qwen1.5-moe-a2.7b", 14.3e9, 0.05e9, 2.7e9, 0.1e9, false},
      {"deepseek-v2-lite", 15.7e9, 0.05e9, 2.4e9, 0.1e9, true},
      {"deepseek-v2", 236e9, 0.5e9, 21e9, 1e9, true},
      {"deepseek-v3", 671e9, 0.5e9, 37e9, 1e9, true},
      {"mixtral-8x7b", 46.7e9, 0.05e9, 12.9e9, 0.1e9, false},
  };
  for (const auto& p : published) {
    SCOPED_TRACE(p.name);
    const auto m = load_model(p.name);
    EXPECT_NEAR(m.total_params(), p.total, p.total_tolerance);
    const double active = m.active_params_per_token() - (p.active_without_embedding ? m.embedding_params() : 0.0);
    EXPECT_NEAR(active, p.active, p.active_tolerance);
  }
}

// The Gemma papers list the non-embedding parameters to the unit (Gemma Table 2, Gemma 2 Table 2):
// exact, which checks the sandwich norms of Gemma-2 too (4 per layer).
TEST(Model, GemmaNonEmbeddingCountsAreExact) {
  EXPECT_EQ(load_model("gemma-7b").total_params() - load_model("gemma-7b").embedding_params(), 7751248896.0);
  for (const auto& [name, non_embedding] : std::vector<std::pair<const char*, double>>{
           {"gemma-2-2b", 2024517888.0}, {"gemma-2-9b", 8324201984.0}, {"gemma-2-27b", 26047480320.0}}) {
    const auto m = load_model(name);
    EXPECT_EQ(m.total_params() - m.embedding_params(), non_embedding) << name;
  }
}

TEST(Model, TypeDefaultsApplyToFieldsAConfigLeavesOut) {
  // Gemma-7B's config has no tie_word_embeddings: GemmaConfig ties them (8.54 B, not 9.32 B).
  const auto g = load_model("gemma-7b");
  EXPECT_TRUE(g.tied_embeddings);
  auto j = read_json_file(g.origin);
  j["tie_word_embeddings"] = false;
  EXPECT_NEAR(model_from_hf_json(j, "g", "g.json").total_params() / 1e9, 9.32, 0.005);
  // Gemma: head_dim 256 when absent; Mistral: a 4096 window when absent, none when null.
  j = read_json_file(g.origin);
  j.erase("head_dim");
  EXPECT_EQ(model_from_hf_json(j, "g", "g.json").head_dim, 256);
  auto mistral = read_json_file(load_model("mistral-7b").origin);
  mistral.erase("sliding_window");
  EXPECT_EQ(model_from_hf_json(mistral, "m", "m.json").sliding_window.value_or(0), 4096);
  mistral["sliding_window"] = nullptr;
  EXPECT_FALSE(model_from_hf_json(mistral, "m", "m.json").sliding_window.has_value());
  // An unknown model_type is read with Llama's defaults, and says so.
  auto other = llama_like();
  other["model_type"] = "frobnicator";
  const auto f = model_from_hf_json(other, "f", "f.json");
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find("model_type 'frobnicator'"), std::string::npos) << f.warnings[0];
  EXPECT_TRUE(model_from_hf_json(llama_like(), "l", "l.json").warnings.empty());
}

TEST(Model, Gemma2AlternatesSlidingWindowAndGlobalLayers) {
  const auto m = load_model("gemma-2-9b");
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.q_dim(), 4096);  // 16 heads x 256, beside a hidden size of 3584
  ASSERT_EQ(m.window_layers.size(), 42u);
  for (int i = 0; i < 42; ++i) EXPECT_EQ(m.window_layers[std::size_t(i)], i % 2 == 0) << i;
  EXPECT_EQ(m.window_layer_count(), 21);
  EXPECT_EQ(m.global_layer_count(), 21);
  EXPECT_EQ(m.attn_logit_softcap.value_or(0), 50.0);
  EXPECT_EQ(m.final_logit_softcap.value_or(0), 30.0);
  EXPECT_EQ(m.norms_per_layer, 4);
  // Mistral's window is on every layer.
  const auto mistral = load_model("mistral-7b");
  EXPECT_TRUE(mistral.window_layers.empty());
  EXPECT_EQ(mistral.window_layer_count(), 32);
  // layer_types (newer configs) and Gemma-3's sliding_window_pattern give the same per-layer list;
  // Qwen2 with use_sliding_window windows the layers from max_window_layers on.
  auto j = llama_like();
  j["num_hidden_layers"] = 4;
  j["sliding_window"] = 64;
  j["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "sliding_attention"};
  EXPECT_EQ(model_from_hf_json(j, "x", "x.json").window_layers, (std::vector<bool>{true, false, false, true}));
  j["layer_types"] = {"sliding_attention", "linear_attention", "full_attention", "sliding_attention"};
  EXPECT_NE(error_of([&] { model_from_hf_json(j, "x", "x.json"); }).find("'linear_attention' is not modelled"),
            std::string::npos);
  j.erase("layer_types");
  j["model_type"] = "gemma3_text";
  j["num_hidden_layers"] = 12;
  const auto g3 = model_from_hf_json(j, "x", "x.json");
  EXPECT_EQ(g3.window_layer_count(), 10);  // every 6th layer global
  EXPECT_FALSE(g3.window_layers[5]);
  j["model_type"] = "qwen2";
  j["max_window_layers"] = 8;
  EXPECT_FALSE(model_from_hf_json(j, "x", "x.json").sliding_window.has_value());  // use_sliding_window false
  j["use_sliding_window"] = true;
  EXPECT_EQ(model_from_hf_json(j, "x", "x.json").window_layer_count(), 4);
}

TEST(Model, QwenMoeHasFineGrainedAndSharedExperts) {
  const auto m = load_model("qwen1.5-moe-a2.7b");
  EXPECT_EQ(m.experts, 60);
  EXPECT_EQ(m.experts_per_token, 4);
  EXPECT_EQ(m.expert_intermediate(), 1408);
  EXPECT_EQ(m.intermediate, 5632);
  EXPECT_EQ(m.shared_intermediate, 5632);
  EXPECT_TRUE(m.shared_expert_gate);
  EXPECT_EQ(m.moe_layer_count(), 24);
  // One layer's MLP: 60 routed experts, the shared one and its gate, the router.
  EXPECT_EQ(m.moe_mlp_params(), 60.0 * 3 * 2048 * 1408 + 3.0 * 2048 * 5632 + 2048 + 2048.0 * 60);
  // decoder_sparse_step 2 and mlp_only_layers make layers dense.
  auto j = read_json_file(m.origin);
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {1, 2};
  const auto s = model_from_hf_json(j, "q", "q.json");
  EXPECT_EQ(s.moe_layer_count(), 11);  // layers 3, 5, ..., 23
  EXPECT_FALSE(s.moe_layers[0]);
  EXPECT_TRUE(s.moe_layers[3]);
}

TEST(Model, DeepSeekHasLatentAttentionAndDenseFirstLayers) {
  const auto v3 = load_model("deepseek-v3");
  ASSERT_TRUE(v3.is_mla());
  EXPECT_EQ(v3.attention_kind(), "MLA");
  EXPECT_EQ(v3.mla->kv_lora_rank, 512);
  EXPECT_EQ(v3.mla->q_lora_rank, 1536);
  EXPECT_EQ(v3.kv_elements_per_token_per_layer(), 512 + 64);
  EXPECT_EQ(v3.dense_layer_count(), 3);
  EXPECT_EQ(v3.moe_layer_count(), 58);
  EXPECT_EQ(v3.shared_intermediate, 2048);  // 1 shared expert of the experts' width
  EXPECT_EQ(v3.warnings.size(), 2u);        // the MTP layer, the fp8 checkpoint
  const auto lite = load_model("deepseek-v2-lite");
  EXPECT_EQ(lite.mla->q_lora_rank, 0);  // "q_lora_rank": null: a plain q_proj
  EXPECT_EQ(lite.shared_intermediate, 2 * 1408);
  EXPECT_EQ(lite.dense_layer_count(), 1);
  // One layer's attention: q_proj, kv_a_proj (+ its norm), kv_b_proj, o_proj.
  EXPECT_EQ(lite.attention_params_per_layer(),
            2048.0 * 16 * 192 + 2048.0 * 576 + 512 + 512.0 * 16 * (128 + 128) + 16.0 * 128 * 2048);
  // The KV-heads override has no meaning for a latent cache.
  EXPECT_NE(error_of([&] { with_kv_heads(v3, "mqa"); }).find("latent"), std::string::npos);
  EXPECT_EQ(with_kv_heads(v3, "config").kv_heads, v3.kv_heads);
}

TEST(Model, ArchitecturesThatAreNotModelledAreRefused) {
  auto j = llama_like();
  j["model_type"] = "jamba";
  EXPECT_NE(error_of([&] { model_from_hf_json(j, "x", "x.json"); }).find("does not model"), std::string::npos);
  j = llama_like();
  j["hybrid_override_pattern"] = "M-M-*";
  EXPECT_NE(error_of([&] { model_from_hf_json(j, "x", "x.json"); }).find("'hybrid_override_pattern'"),
            std::string::npos);
  j = llama_like();
  j["attention_chunk_size"] = 8192;
  const auto m = model_from_hf_json(j, "x", "x.json");
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("attention_chunk_size"), std::string::npos);
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
  // The literature's GQA-G has G KV-head groups (Ainslie et al. 2023): Llama-2-70B and Llama-3-8B
  // both have 8 KV heads, GQA-8, whatever their query heads.
  EXPECT_EQ(l70.attention_kind(), "GQA-8");
  EXPECT_EQ(load_model("llama-3-8b").attention_kind(), "GQA-8");
  EXPECT_EQ(load_model("gemma-2-9b").attention_kind(), "GQA-8");
  EXPECT_EQ(with_kv_heads(l70, "mqa").attention_kind(), "MQA");
  EXPECT_EQ(with_kv_heads(l70, "mha").kv_heads, 64);
  const auto l7 = with_kv_heads(load_model("llama-2-7b"), "8");
  EXPECT_EQ(l7.kv_heads, 8);
  EXPECT_EQ(l7.attention_kind(), "GQA-8");
  EXPECT_EQ(with_kv_heads(l70, "16").attention_kind(), "GQA-16");
  EXPECT_EQ(with_kv_heads(l70, "config").kv_heads, 8);
  EXPECT_EQ(attention_kind_of(16, 2), "GQA-2");
  EXPECT_NE(error_of([&] { with_kv_heads(l70, "48"); }).find("does not divide"), std::string::npos);
  EXPECT_NE(error_of([&] { with_kv_heads(l70, "lots"); }).find("kv_heads"), std::string::npos);
  // The spelling gqa-N meant N query heads per KV head in earlier versions: refused, with the convention.
  for (const char* old : {"gqa-8", "GQA-4", "gqa8"}) {
    const std::string msg = error_of([&] { with_kv_heads(l70, old); });
    EXPECT_NE(msg.find("ambiguous"), std::string::npos) << old;
    EXPECT_NE(msg.find("GQA-8 = 8"), std::string::npos) << msg;
  }
}

TEST(Model, MistralHasSlidingWindow) {
  const auto m = load_model("mistral-7b");
  ASSERT_TRUE(m.sliding_window.has_value());
  EXPECT_EQ(*m.sliding_window, 4096);
  EXPECT_FALSE(load_model("mixtral-8x7b").sliding_window.has_value());  // "sliding_window": null
}

TEST(Model, EveryShippedConfigLoads) {
  const auto names = known_models();
  ASSERT_GE(names.size(), 15u);
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const auto m = load_model(n);
    EXPECT_EQ(m.heads % m.kv_heads, 0);
    EXPECT_GT(m.total_params(), 1e9);
    EXPECT_GT(m.active_params_per_token(), 0.05 * m.total_params());
    EXPECT_LE(m.active_params_per_token(), m.total_params());
  }
}

TEST(Model, UnknownNameListsKnownModels) {
  const std::string msg = error_of([] { load_model("llama-9-1t"); });
  EXPECT_NE(msg.find("unknown model 'llama-9-1t'"), std::string::npos);
  EXPECT_NE(msg.find("llama-2-7b"), std::string::npos);
  EXPECT_NE(msg.find("mixtral-8x7b"), std::string::npos);
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
