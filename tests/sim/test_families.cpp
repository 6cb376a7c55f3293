// The operator graph, memory and parallel split of the model families whose layers differ from
// Llama's: Gemma-2 (sliding-window and global layers), Qwen-MoE (shared expert), DeepSeek (multi-head
// latent attention, dense first layers).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/parallel.h"

namespace inferlab {
namespace {

OpOptions bf16() { return OpOptions{Precision{DType::bf16, DType::bf16, DType::bf16}, AttentionVariant::flash, true, {}}; }

std::vector<const Op*> named(const std::vector<Op>& ops, const std::string& name) {
  std::vector<const Op*> out;
  for (const auto& op : ops)
    if (op.name == name) out.push_back(&op);
  return out;
}

const Op& one(const std::vector<Op>& ops, const std::string& name, const std::string& variant = "") {
  for (const auto& op : ops)
    if (op.name == name && op.variant == variant) return op;
  throw std::runtime_error("no op " + name + "/" + variant);
}

TEST(Families, Gemma2HasAWindowedAndAGlobalAttentionOp) {
  const auto m = load_model("gemma-2-9b");
  const auto ops = step_ops(m, decode_step(2, 8192), bf16());
  const Op& global = one(ops, "attention", "flash");
  const Op& local = one(ops, "attention_window", "flash");
  EXPECT_EQ(global.count, 21);
  EXPECT_EQ(local.count, 21);
  // Decode: a global layer reads the 8191 cached tokens, a windowed one the last 4095 of them.
  const double per_token = 2.0 * 8 * 256 * 2;  // K and V, 8 KV heads of 256, bf16
  EXPECT_DOUBLE_EQ(global.bytes(TensorRole::kv_cache), 2 * 8191 * per_token);
  EXPECT_DOUBLE_EQ(local.bytes(TensorRole::kv_cache), 2 * 4095 * per_token);
  // Under the window both are the same op.
  const auto short_ctx = step_ops(m, decode_step(2, 1000), bf16());
  EXPECT_EQ(one(short_ctx, "attention", "flash").bytes(), one(short_ctx, "attention_window", "flash").bytes());
  // The sandwich norms; a single attention op is an error to ask for.
  EXPECT_EQ(named(ops, "attn_post_norm").size(), 1u);
  EXPECT_EQ(named(ops, "ffn_post_norm").size(), 1u);
  EXPECT_THROW(attention_op(m, decode_step(1, 10), bf16()), Error);
  // KV memory: 21 layers keep all 8192 tokens, 21 the last 4096 (rolling), unless rolling is off.
  EXPECT_DOUBLE_EQ(kv_cache_bytes(m, 2, 8192, DType::bf16), 2.0 * (21 * 8192 + 21 * 4096) * 8 * 256 * 2 * 2);
  EXPECT_DOUBLE_EQ(kv_cache_bytes(m, 2, 8192, DType::bf16, false), 2.0 * 42 * 8192 * 8 * 256 * 2 * 2);
}

TEST(Families, QwenMoeRunsItsSharedExpertOnEveryToken) {
  const auto m = load_model("qwen1.5-moe-a2.7b");
  const auto ops = step_ops(m, decode_step(1, 512), bf16());
  const double H = 2048;
  // Batch 1: the top-4 routed experts' weights, the shared expert's, and its gate.
  EXPECT_NEAR(one(ops, "gate_up_proj", "moe").bytes(TensorRole::weight), 4 * 2 * 1408 * H * 2, 1e-6);
  EXPECT_DOUBLE_EQ(one(ops, "shared_gate_up_proj", "shared").bytes(TensorRole::weight), 2 * 5632 * H * 2);
  EXPECT_DOUBLE_EQ(one(ops, "shared_down_proj", "shared").bytes(TensorRole::weight), 5632 * H * 2);
  EXPECT_DOUBLE_EQ(one(ops, "shared_gate", "shared").bytes(TensorRole::weight), H * 2);
  EXPECT_EQ(one(ops, "shared_gate_up_proj", "shared").count, 24);
}

TEST(Families, DeepSeekRunsDenseMlpsInItsFirstLayers) {
  const auto m = load_model("deepseek-v3");
  const auto ops = step_ops(m, decode_step(1, 100), bf16());
  EXPECT_EQ(one(ops, "gate_up_proj").count, 3);
  EXPECT_EQ(one(ops, "gate_up_proj", "moe").count, 58);
  EXPECT_EQ(one(ops, "shared_gate_up_proj", "shared").count, 58);
  EXPECT_EQ(one(ops, "router").count, 58);
  EXPECT_EQ(one(ops, "ffn_residual").count, 3);
  EXPECT_EQ(one(ops, "ffn_residual", "moe").count, 58);
  EXPECT_EQ(one(ops, "q_a_proj").count, 61);
  EXPECT_TRUE(named(ops, "qkv_proj").empty());
  EXPECT_TRUE(named(step_ops(load_model("deepseek-v2-lite"), decode_step(1, 100), bf16()), "q_proj").size() == 1);
}

// MLA's cache per token and layer is the latent plus the RoPE key: 512 + 64 values (DeepSeek-V2
// §2.1.4: (d_c + d_h^R) l elements per token), against 2 x 128 heads x 128 for the MHA it replaces.
TEST(Families, MlaCachesTheLatentPerToken) {
  const auto v3 = load_model("deepseek-v3");
  EXPECT_EQ(kv_bytes_per_token(v3, DType::bf16), 61.0 * 576 * 2);
  EXPECT_EQ(kv_bytes_per_token(load_model("deepseek-v2"), DType::bf16), 60.0 * 576 * 2);
  EXPECT_EQ(kv_bytes_per_token(load_model("deepseek-v2-lite"), DType::bf16), 27.0 * 576 * 2);
  EXPECT_DOUBLE_EQ(kv_cache_bytes(v3, 4, 1000, DType::bf16), 4.0 * 1000 * 61 * 576 * 2);
  // The latent is replicated on every tensor-parallel rank: a rank caches all of it.
  EXPECT_EQ(kv_bytes_per_token(shard_model(v3, 8), DType::bf16), kv_bytes_per_token(v3, DType::bf16));
  // The cache write is the latent + RoPE key of each new token.
  const auto ops = step_ops(v3, decode_step(4, 1000), bf16());
  EXPECT_DOUBLE_EQ(one(ops, "kv_cache_write").bytes(TensorRole::kv_cache), 4.0 * 576 * 2);
}

TEST(Families, MlaDecodeIsAbsorbedAndReadsTheLatentOnce) {
  const auto m = load_model("deepseek-v3");
  const double h = 128, r = 512, rope = 64, nope = 128, v = 128;
  const int64_t b = 4, ctx = 4096;
  const Op att = attention_op(m, decode_step(b, ctx), bf16());
  EXPECT_EQ(att.variant, "mla-absorbed");
  EXPECT_EQ(att.count, 61);
  // Every query attends to its whole context (4096 pairs), over the latent: scores r + rope, values r;
  // plus folding W_UK into the query and applying W_UV to the output.
  const double pairs = double(b) * ctx, n = double(b);
  EXPECT_DOUBLE_EQ(att.flops, 2 * h * pairs * (2 * r + rope) + 2 * n * h * r * (nope + v));
  // The cache is read once for all 128 heads: 4095 cached tokens of 576 values per sequence.
  EXPECT_DOUBLE_EQ(att.bytes(TensorRole::kv_cache), double(b) * (ctx - 1) * 576 * 2);
  EXPECT_DOUBLE_EQ(att.bytes(TensorRole::weight), h * r * (nope + v) * 2);  // W_UK and W_UV
  // The same context in MHA of 128 heads x 128 would read 2 x 128 x 128 / 576 = 57x the bytes.
  EXPECT_NEAR(2.0 * 128 * 128 / 576, 56.9, 0.1);
}

TEST(Families, MlaPrefillIsExpandedAndAMixedBatchUsesBoth) {
  const auto m = load_model("deepseek-v2-lite");
  const double h = 16, r = 512, rope = 64, nope = 128, v = 128, s = 2048;
  const Op att = attention_op(m, prefill_step(1, int64_t(s)), bf16());
  EXPECT_EQ(att.variant, "mla-expanded");
  const double pairs = s * (s + 1) / 2;
  EXPECT_DOUBLE_EQ(att.flops, 2 * s * r * h * (nope + v) + 2 * h * pairs * (nope + rope + v));
  EXPECT_DOUBLE_EQ(att.bytes(TensorRole::kv_cache), 0.0);  // nothing cached before the prompt
  Batch mixed;
  mixed.sequences = {SequenceWork{512, 0, 1, 1}, SequenceWork{1, 3000, 8, 1}};
  const Op both = batch_attention_op(m, mixed, bf16());
  EXPECT_EQ(both.variant, "mla-absorbed+expanded");
  EXPECT_DOUBLE_EQ(both.bytes(TensorRole::kv_cache), 8.0 * 3000 * 576 * 2);
}

// The reservations of a batch in closed form equal the sum over its sequences, windowed or not, and
// with a rolling window hold what the KV cache holds (nothing more is reserved for a sliding layer).
TEST(Families, KvReservationsFollowTheWindow) {
  for (const char* name : {"mistral-7b", "gemma-2-2b", "llama-3-8b", "deepseek-v2-lite"}) {
    SCOPED_TRACE(name);
    const auto m = load_model(name);
    for (const int64_t tokens : {1, 17, 4096, 4097, 7000}) {
      for (const bool rolling : {false, true}) {
        const std::vector<int64_t> seqs(5, tokens);
        const auto paged = paged_kv(m, DType::bf16, 5, tokens, 16, rolling);
        EXPECT_EQ(paged.reserved, paged_kv(m, DType::bf16, seqs, 16, rolling).reserved);
        EXPECT_EQ(paged.blocks, paged_kv(m, DType::bf16, seqs, 16, rolling).blocks);
        EXPECT_DOUBLE_EQ(paged.used, kv_cache_bytes(m, 5, tokens, DType::bf16, rolling));
        const auto contiguous = contiguous_kv(m, DType::bf16, 5, tokens, 8192, rolling);
        EXPECT_EQ(contiguous.reserved, contiguous_kv(m, DType::bf16, seqs, 8192, rolling).reserved);
        EXPECT_DOUBLE_EQ(contiguous.used, paged.used);
      }
    }
  }
  // A rolling buffer reserves the window, not the maximum length.
  const auto mistral = load_model("mistral-7b");
  EXPECT_DOUBLE_EQ(contiguous_kv(mistral, DType::bf16, 1, 100, 32768, true).reserved,
                   kv_cache_bytes(mistral, 1, 4096, DType::bf16));
  // A billion sequences cost no memory to count.
  EXPECT_GT(paged_kv(mistral, DType::bf16, 1000000000, 4096, 16, true).blocks, 0);
}

// Pipeline stages cut the per-layer lists: DeepSeek-V3's dense layers all sit in the first stage,
// and the stages' parameters add up to the model's.
TEST(Families, PipelineStagesKeepTheirLayersKinds) {
  const auto m = load_model("deepseek-v3");
  const Parallelism par{1, 4, 1};
  double sum = 0;
  for (int64_t s = 0; s < par.pp; ++s) {
    const auto st = stage_model(m, par, s);
    EXPECT_EQ(st.dense_layer_count(), s == 0 ? 3 : 0) << s;
    sum += stage_params(m, par, s);
  }
  EXPECT_NEAR(sum, m.total_params(), 1e-6 * m.total_params());
  const auto g = load_model("gemma-2-27b");
  const auto first = stage_model(g, Parallelism{1, 2, 1}, 0);
  EXPECT_EQ(first.layers, 23);
  EXPECT_EQ(first.window_layer_count(), 12);  // layers 0, 2, ..., 22
}

}  // namespace
}  // namespace inferlab
