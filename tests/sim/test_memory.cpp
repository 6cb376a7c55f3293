#include <gtest/gtest.h>

#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"

namespace inferlab {
namespace {

MemoryOptions fp16() {
  MemoryOptions o;
  o.precision = Precision{DType::fp16, DType::fp16, DType::fp16};
  return o;
}

TEST(Memory, Llama2_7bWeightsAndKvMatchTheWorkedNumbers) {
  const auto m = load_model("llama-2-7b");
  // 6.74 B parameters x 2 bytes = 13.5 GB.
  EXPECT_NEAR(weight_bytes(m, DType::fp16) / 1e9, 13.48, 0.01);
  // batch * seq * 2 * layers * kv_heads * head_dim * bytes = 1 * 4096 * 2 * 32 * 32 * 128 * 2.
  EXPECT_EQ(kv_cache_bytes(m, 1, 4096, DType::fp16), 2147483648.0);
  EXPECT_EQ(kv_bytes_per_token(m, DType::fp16), 524288.0);
  const auto b = memory_breakdown(m, 1, 4096, fp16());
  EXPECT_EQ(b.kv_cache, 2147483648.0);
  EXPECT_GT(b.activations, 0.0);
  EXPECT_LT(b.activations, 2e9);
}

TEST(Memory, GqaCutsKvEightfold) {
  const auto gqa = load_model("llama-2-70b");
  const auto mha = with_kv_heads(gqa, "mha");
  EXPECT_DOUBLE_EQ(kv_cache_bytes(mha, 8, 4096, DType::fp16) / kv_cache_bytes(gqa, 8, 4096, DType::fp16), 8.0);
}

TEST(Memory, RollingWindowCapsKv) {
  const auto m = load_model("mistral-7b");
  EXPECT_DOUBLE_EQ(kv_cache_bytes(m, 1, 32768, DType::bf16), kv_cache_bytes(m, 1, 4096, DType::bf16));
  EXPECT_DOUBLE_EQ(kv_cache_bytes(m, 1, 32768, DType::bf16, false), 8.0 * kv_cache_bytes(m, 1, 4096, DType::bf16));
}

TEST(Memory, NaiveAttentionActivationsGrowWithTheSquareOfTheChunk) {
  const auto m = load_model("llama-2-7b");
  MemoryOptions naive = fp16();
  naive.attention = AttentionVariant::naive;
  naive.prefill_chunk = 0;
  const double a2k = memory_breakdown(m, 1, 2048, naive).activations;
  const double a4k = memory_breakdown(m, 1, 4096, naive).activations;
  // Scores dominate: 32 heads x s^2 x 2 bytes, so doubling s roughly quadruples the peak.
  EXPECT_GT(a4k / a2k, 3.5);
  MemoryOptions flash = fp16();
  flash.prefill_chunk = 0;
  EXPECT_LT(memory_breakdown(m, 1, 4096, flash).activations, a4k / 4);
}

TEST(Memory, MaxBatchIsTheLargestThatFits) {
  const auto m = load_model("llama-2-13b");
  const auto hw = load_hardware("a100-sxm-80gb");
  const auto o = fp16();
  const int64_t b = max_batch(m, 4096, o, hw.memory_bytes);
  ASSERT_GT(b, 0);
  EXPECT_LE(memory_breakdown(m, b, 4096, o).total(), hw.memory_bytes);
  EXPECT_GT(memory_breakdown(m, b + 1, 4096, o).total(), hw.memory_bytes);
  // 70B in fp16 (138 GB of weights) does not fit one 80 GB GPU at all.
  EXPECT_EQ(max_batch(load_model("llama-2-70b"), 4096, o, hw.memory_bytes), 0);
  const int64_t c = max_context(m, 4, o, hw.memory_bytes);
  EXPECT_LE(memory_breakdown(m, 4, c, o).total(), hw.memory_bytes);
  EXPECT_GT(memory_breakdown(m, 4, c + 1, o).total(), hw.memory_bytes);
}

TEST(Memory, ContiguousVsPagedReservation) {
  const auto m = load_model("llama-2-7b");
  const std::vector<int64_t> seqs = {100, 17, 4096, 1};
  const double per_token = kv_bytes_per_token(m, DType::fp16);
  const auto c = contiguous_kv(m, DType::fp16, seqs, 4096);
  EXPECT_DOUBLE_EQ(c.reserved, 4.0 * 4096 * per_token);
  EXPECT_DOUBLE_EQ(c.used, double(100 + 17 + 4096 + 1) * per_token);
  const auto p = paged_kv(m, DType::fp16, seqs, 16);
  EXPECT_EQ(p.blocks, 7 + 2 + 256 + 1);
  EXPECT_DOUBLE_EQ(p.reserved, double(p.blocks * 16) * per_token);
  EXPECT_DOUBLE_EQ(p.used, c.used);
  EXPECT_LT(p.waste_fraction(), 0.01);
  EXPECT_GT(c.waste_fraction(), 0.7);
  EXPECT_THROW(contiguous_kv(m, DType::fp16, {5000}, 4096), Error);
  EXPECT_THROW(paged_kv(m, DType::fp16, seqs, 0), Error);
}

TEST(Memory, RejectsNonPositiveSizes) {
  const auto m = load_model("llama-2-7b");
  EXPECT_THROW(memory_breakdown(m, 0, 4096, fp16()), Error);
  EXPECT_THROW(memory_breakdown(m, 1, -1, fp16()), Error);
}

}  // namespace
}  // namespace inferlab

#include "inferlab/sim/trace.h"

namespace inferlab {
namespace {

TEST(Trace, IsDeterministicAndHasTheRequestedShape) {
  TraceSpec s;
  s.requests = 4000;
  const auto a = generate_trace(s), b = generate_trace(s);
  ASSERT_EQ(a.size(), 4000u);
  double prompt = 0, output = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].output, b[i].output);
    EXPECT_GE(a[i].prompt, s.min_tokens);
    EXPECT_LE(a[i].prompt + a[i].output, s.max_tokens);
    if (i) {
      EXPECT_GE(a[i].arrival, a[i - 1].arrival);
    }
    prompt += double(a[i].prompt);
    output += double(a[i].output);
  }
  // Means near the requested ones (clipping at 2048 trims the tail a little).
  EXPECT_NEAR(prompt / 4000, 161, 12);
  EXPECT_NEAR(output / 4000, 338, 30);
  EXPECT_NEAR(a.back().arrival / 4000, 1 / s.rate, 0.05);
  s.seed = 2;
  EXPECT_NE(generate_trace(s)[0].prompt + generate_trace(s)[1].prompt, a[0].prompt + a[1].prompt);
  s.rate = 0;
  EXPECT_THROW(generate_trace(s), Error);
}

}  // namespace
}  // namespace inferlab
