// A heterogeneous batch (batch_ops): one forward pass, weights read once, attention per sequence.
#include <gtest/gtest.h>

#include "inferlab/sim/error.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace {

OpOptions fp16() { return OpOptions{Precision{DType::fp16, DType::fp16, DType::fp16}, AttentionVariant::flash, true, std::nullopt}; }

const Op& find_op(const std::vector<Op>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

double total(const std::vector<Op>& ops, TensorRole role) {
  double b = 0;
  for (const auto& op : ops) b += op.bytes(role) * double(op.count);
  return b;
}

TEST(Batch, UniformBatchIsTheStep) {
  const auto m = load_model("llama-2-7b");
  for (const Step& s : {decode_step(7, 1000), prefill_step(3, 513)}) {
    const auto a = step_ops(m, s, fp16());
    const auto b = batch_ops(m, Batch::of(s), fp16());
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].flops, b[i].flops) << a[i].name;
      EXPECT_EQ(a[i].bytes(), b[i].bytes()) << a[i].name;
    }
  }
}

TEST(Batch, MixedPassReadsWeightsOnceAndSumsAttentionPerSequence) {
  const auto m = load_model("llama-2-7b");
  // A chunk of 300 prompt tokens after 200 done (not the last chunk), two decodes at 90 and 4000.
  Batch mixed{{SequenceWork{300, 200, 1, 0}, SequenceWork{1, 89, 1, 1}, SequenceWork{1, 3999, 1, 1}}, 0};
  const auto ops = batch_ops(m, mixed, fp16());
  EXPECT_EQ(mixed.tokens(), 302);
  EXPECT_EQ(mixed.logit_rows(), 2);
  // Weights: exactly those of a single decode step (every matrix once) plus the extra embedding rows.
  const auto one = step_ops(m, decode_step(1, 10), fp16());
  const double embed_row = double(m.hidden) * 2.0;
  EXPECT_DOUBLE_EQ(total(ops, TensorRole::weight), total(one, TensorRole::weight) + 301 * embed_row);
  // Attention: FLOPs and KV bytes are the sums over the three sequences' own attention.
  double flops = 0, kv = 0;
  for (const Step& s : {Step{Phase::prefill, 1, 300, 200}, Step{Phase::decode, 1, 1, 89}, Step{Phase::decode, 1, 1, 3999}}) {
    const Op a = attention_op(m, s, fp16());
    flops += a.flops;
    kv += a.bytes(TensorRole::kv_cache);
  }
  const Op& att = find_op(ops, "attention");
  EXPECT_DOUBLE_EQ(att.flops, flops);
  EXPECT_DOUBLE_EQ(att.bytes(TensorRole::kv_cache), kv);
  EXPECT_EQ(att.launches, 1);
  // GEMM FLOPs follow the 302 tokens; logits only for the two sampling sequences.
  EXPECT_DOUBLE_EQ(find_op(ops, "qkv_proj").flops, 302.0 / 1.0 * find_op(one, "qkv_proj").flops);
  EXPECT_DOUBLE_EQ(find_op(ops, "lm_head").flops, 2.0 * find_op(one, "lm_head").flops);
  EXPECT_EQ(find_op(ops, "embedding").scope, OpScope::before_layers);
  EXPECT_EQ(find_op(ops, "lm_head").scope, OpScope::after_layers);
  EXPECT_EQ(find_op(ops, "qkv_proj").scope, OpScope::layer);
}

TEST(Batch, MixedPassIsCheaperThanSeparateSteps) {
  // One pass over decodes and a prefill chunk reads the weights once: cheaper than the two steps apart.
  const auto m = load_model("llama-2-7b");
  const auto hw = load_hardware("h100-sxm-80gb");
  Batch mixed{{SequenceWork{1, 500, 32, 1}, SequenceWork{256, 0, 1, 0}}, 0};
  const double together = predict_step(batch_ops(m, mixed, fp16()), hw).time_s;
  const double apart = predict_step(step_ops(m, decode_step(32, 501), fp16()), hw).time_s +
                       predict_step(batch_ops(m, Batch{{SequenceWork{256, 0, 1, 0}}, 0}, fp16()), hw).time_s;
  EXPECT_LT(together, apart);
}

TEST(Batch, PagedCacheReadsTheBlockTable) {
  const auto m = load_model("llama-2-7b");
  Batch b{{SequenceWork{1, 99, 4, 1}}, 0};
  const double contiguous = batch_attention_op(m, b, fp16()).bytes(TensorRole::activation);
  b.kv_block_size = 16;
  // 4 sequences x ceil(100 / 16) = 7 entries x 4 bytes.
  EXPECT_DOUBLE_EQ(batch_attention_op(m, b, fp16()).bytes(TensorRole::activation) - contiguous, 4 * 7 * 4.0);
}

TEST(Batch, NoSamplingSequenceMeansNoLogits) {
  const auto m = load_model("llama-2-7b");
  const auto ops = batch_ops(m, Batch{{SequenceWork{512, 0, 1, 0}}, 0}, fp16());
  for (const auto& op : ops) EXPECT_NE(op.name, "lm_head");
}

TEST(Batch, VerificationComputesLogitsForEveryNewToken) {
  const auto m = load_model("llama-2-7b");
  const auto one = batch_ops(m, Batch{{SequenceWork{5, 100, 2, 1}}, 0}, fp16());
  const auto all = batch_ops(m, Batch{{SequenceWork{5, 100, 2, 5}}, 0}, fp16());
  EXPECT_DOUBLE_EQ(find_op(all, "lm_head").flops, 5.0 * find_op(one, "lm_head").flops);
  EXPECT_THROW(batch_ops(m, Batch{{SequenceWork{5, 100, 2, 6}}, 0}, fp16()), Error);
}

TEST(Batch, MedusaHeadsAreAResidualBlockAndAnLmHeadEach) {
  const auto m = load_model("llama-2-7b");
  const auto ops = medusa_head_ops(m, 4, 3, fp16());
  double weights = 0;
  for (const auto& op : ops) weights += op.bytes(TensorRole::weight) * double(op.count);
  EXPECT_DOUBLE_EQ(weights, 4 * medusa_head_params(m) * 2);
  EXPECT_DOUBLE_EQ(find_op(ops, "medusa_lm_head").flops, 2.0 * 3 * 4096 * 32000);
}

TEST(Batch, BadBatchesAreRejected) {
  const auto m = load_model("llama-2-7b");
  EXPECT_THROW(batch_ops(m, Batch{}, fp16()), Error);
  EXPECT_THROW(batch_ops(m, Batch{{SequenceWork{0, 5, 1, 1}}, 0}, fp16()), Error);
  EXPECT_THROW(batch_ops(m, Batch{{SequenceWork{1, -1, 1, 1}}, 0}, fp16()), Error);
  EXPECT_THROW(batch_ops(m, Batch{{SequenceWork{1, 5, 0, 1}}, 0}, fp16()), Error);
}

}  // namespace
}  // namespace inferlab
