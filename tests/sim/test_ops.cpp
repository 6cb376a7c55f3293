#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "inferlab/sim/error.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/kernels.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace {

OpOptions fp16(AttentionVariant v = AttentionVariant::flash, bool causal = true) {
  return OpOptions{Precision{DType::fp16, DType::fp16, DType::fp16}, v, causal, std::nullopt};
}

const Op& find_op(const std::vector<Op>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

double sum_flops(const std::vector<Op>& ops, OpClass c) {
  double f = 0;
  for (const auto& op : ops)
    if (op.op_class == c) f += op.total_flops();
  return f;
}

TEST(Ops, DecodeBatch1IsMemoryBoundOnA100) {
  const auto m = load_model("llama-2-7b");
  const auto hw = load_hardware("a100-sxm-80gb");
  const auto s = predict_step(step_ops(m, decode_step(1, 4096), fp16()), hw);
  EXPECT_EQ(s.bound(), Bound::memory);
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].op_class == OpClass::gemm) {
      EXPECT_EQ(s.predictions[i].bound, Bound::memory) << s.ops[i].name;
      EXPECT_LT(s.ops[i].ai(), 2.0) << s.ops[i].name;  // one token: ~1 FLOP per weight byte
    }
  // Weights dominate the bytes: all 13.5 GB of fp16 weights but the embedding table (one row of it
  // is gathered), plus 2 GiB of KV cache at 4096 tokens (4095 cached, one new).
  double weight = 0, kv = 0;
  for (const auto& op : s.ops) {
    weight += op.bytes(TensorRole::weight) * double(op.count);
    kv += op.bytes(TensorRole::kv_cache) * double(op.count);
  }
  EXPECT_DOUBLE_EQ(weight, (m.total_params() - m.embedding_params() + double(m.hidden)) * 2.0);
  EXPECT_NEAR(kv, 2147483648.0 * 4095.0 / 4096.0 + 524288.0 /* the new token's K, V written */, 1.0);
  EXPECT_GT((weight + kv) / s.bytes, 0.999);
  // So the step is about (bytes / bandwidth), ~7.7 ms, plus launch overheads.
  EXPECT_NEAR(s.memory_s, s.bytes / 2.039e12, 1e-4);
}

TEST(Ops, Prefill2kIsComputeBoundOnA100) {
  const auto m = load_model("llama-2-7b");
  const auto hw = load_hardware("a100-sxm-80gb");
  const auto s = predict_step(step_ops(m, prefill_step(1, 2048), fp16()), hw);
  EXPECT_EQ(s.bound(), Bound::compute);
  for (const char* name : {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "attention"}) {
    for (std::size_t i = 0; i < s.ops.size(); ++i)
      if (s.ops[i].name == name) {
        EXPECT_EQ(s.predictions[i].bound, Bound::compute) << name;
        EXPECT_GT(s.ops[i].ai(), hw.ridge(DType::fp16)) << name;
      }
  }
}

TEST(Ops, GemmFlopsAreTwoTimesParamsTimesTokens) {
  // Every shipped model but the MLA ones (whose latent up-projections run inside the attention op):
  // the layer GEMMs do 2 FLOPs per active weight and token. With a batch large enough to reach every
  // expert, the active weights are those of the top-k experts of each MoE layer.
  for (const auto& name : known_models()) {
    SCOPED_TRACE(name);
    const auto m = load_model(name);
    if (m.is_mla()) continue;
    for (const Step& st : {prefill_step(2, 1024), decode_step(8, 3000)}) {
      const auto ops = step_ops(m, st, fp16());
      const double T = double(st.tokens());
      const double layer_matmul_params = m.active_params_per_token() - m.embedding_params() -
                                         (m.tied_embeddings ? 0.0 : m.lm_head_params()) -
                                         double(m.layers) * m.norm_params_per_layer() - double(m.hidden);
      const double expected = 2.0 * layer_matmul_params * T + 2.0 * m.lm_head_params() * double(st.batch);
      EXPECT_DOUBLE_EQ(sum_flops(ops, OpClass::gemm), expected);
      // Whole step: 2 x non-embedding params x tokens, plus the attention and elementwise terms.
      double total = 0;
      for (const auto& op : ops) total += op.total_flops();
      const double rest = sum_flops(ops, OpClass::attention) + sum_flops(ops, OpClass::elementwise);
      EXPECT_NEAR(total, expected + rest, 1e-6 * total);
      EXPECT_LT(sum_flops(ops, OpClass::elementwise), 0.01 * total);
    }
  }
}

TEST(Ops, MoeGemmFlopsFollowActiveExperts) {
  const auto m = load_model("mixtral-8x7b");
  const auto ops = step_ops(m, prefill_step(1, 512), fp16());
  const double T = 512;
  const double expected = 2.0 * T * double(m.layers) *
                              (m.attention_params_per_layer() + double(m.experts_per_token) * m.expert_params() +
                               double(m.hidden * m.experts)) +
                          2.0 * m.lm_head_params();
  EXPECT_DOUBLE_EQ(sum_flops(ops, OpClass::gemm), expected);
  // Decode batch 1 reads the weights of exactly top-k = 2 experts per layer.
  const auto d = step_ops(m, decode_step(1, 100), fp16());
  EXPECT_DOUBLE_EQ(find_op(d, "down_proj").bytes(TensorRole::weight), 2.0 * double(m.intermediate * m.hidden) * 2.0);
  // A large batch reaches all 8.
  EXPECT_NEAR(expected_experts_touched(8, 2, 256), 8.0, 1e-9);
  EXPECT_DOUBLE_EQ(expected_experts_touched(8, 2, 1), 2.0);
}

TEST(Ops, AttentionPairsMatchBruteForce) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> len(1, 300), win(1, 200);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = len(rng), past = len(rng) - 1;
    const bool causal = trial % 3 != 0;
    const std::optional<int64_t> window = trial % 2 ? std::optional<int64_t>(win(rng)) : std::nullopt;
    double brute = 0;
    int64_t lowest_key = past + n;
    for (int i = 0; i < n; ++i) {
      const int64_t q = past + i;  // position of query i
      int64_t lo = 0, hi = causal ? q : past + n - 1;
      if (window) lo = std::max<int64_t>(0, hi - *window + 1);
      brute += double(hi - lo + 1);
      lowest_key = std::min(lowest_key, lo);
    }
    SCOPED_TRACE(testing::Message() << "n=" << n << " past=" << past << " causal=" << causal
                                    << " window=" << (window ? *window : -1));
    EXPECT_DOUBLE_EQ(attention_pairs(n, past, causal, window), brute);
    if (causal) {
      EXPECT_EQ(attention_keys(n, past, window), past + n - lowest_key);
    }
  }
}

TEST(Ops, NaiveAndFlashDifferInScoreBytes) {
  const auto m = load_model("llama-2-7b");
  const int64_t s = 2048, b = 2;
  const auto st = prefill_step(b, s);
  const Op flash = attention_op(m, st, fp16(AttentionVariant::flash, false));
  const Op naive = attention_op(m, st, fp16(AttentionVariant::naive, false));
  const double bhs2 = double(b) * double(m.heads) * double(s) * double(s) * 2.0;  // fp16 scores
  EXPECT_DOUBLE_EQ(naive.bytes(TensorRole::scores), 4.0 * bhs2);  // S written, read; P written, read
  EXPECT_DOUBLE_EQ(flash.bytes(TensorRole::scores), 0.0);
  // Q, K, V, O and the fp32 log-sum-exp are the same bytes for both.
  EXPECT_DOUBLE_EQ(naive.bytes(TensorRole::activation), flash.bytes(TensorRole::activation));
  const double qkvo = 4.0 * double(b) * double(s) * double(m.heads * m.head_dim) * 2.0;
  const double lse = double(b) * double(m.heads) * double(s) * 4.0;
  EXPECT_DOUBLE_EQ(flash.bytes(), qkvo + lse);
  // Non-causal: same FLOPs, 4 b h s^2 d.
  EXPECT_DOUBLE_EQ(flash.flops, 4.0 * double(b) * double(m.heads) * double(s) * double(s) * double(m.head_dim));
  EXPECT_DOUBLE_EQ(naive.flops, flash.flops);
  // Causal: flash computes the kept pairs, s(s+1)/2; naive the whole rectangle.
  const Op flash_c = attention_op(m, st, fp16(AttentionVariant::flash, true));
  const Op naive_c = attention_op(m, st, fp16(AttentionVariant::naive, true));
  EXPECT_DOUBLE_EQ(flash_c.flops, flash.flops * double(s + 1) / double(2 * s));
  EXPECT_DOUBLE_EQ(naive_c.flops, naive.flops);
  EXPECT_EQ(naive.launches, 3);
}

TEST(Ops, KvBytesFollowKvHeads) {
  const auto gqa = load_model("llama-2-70b");
  const auto mha = with_kv_heads(gqa, "mha");
  const auto mqa = with_kv_heads(gqa, "mqa");
  const auto st = decode_step(16, 4096);
  const double kv_gqa = attention_op(gqa, st, fp16()).bytes(TensorRole::kv_cache);
  EXPECT_DOUBLE_EQ(attention_op(mha, st, fp16()).bytes(TensorRole::kv_cache), 8.0 * kv_gqa);
  EXPECT_DOUBLE_EQ(attention_op(mqa, st, fp16()).bytes(TensorRole::kv_cache), kv_gqa / 8.0);
  // FLOPs follow the query heads: unchanged.
  EXPECT_DOUBLE_EQ(attention_op(mha, st, fp16()).flops, attention_op(gqa, st, fp16()).flops);
  // Decode reads (context - 1) cached tokens for K and V: 16 x 4095 x 2 x 8 x 128 x 2 bytes.
  EXPECT_DOUBLE_EQ(kv_gqa, 16.0 * 4095 * 2 * 8 * 128 * 2);
}

TEST(Ops, SlidingWindowLimitsKeysRead) {
  const auto m = load_model("mistral-7b");
  const auto far = attention_op(m, decode_step(1, 16384), fp16());
  const auto near = attention_op(m, decode_step(1, 4096), fp16());
  EXPECT_DOUBLE_EQ(far.bytes(TensorRole::kv_cache), near.bytes(TensorRole::kv_cache));
  EXPECT_DOUBLE_EQ(far.flops, near.flops);
}

TEST(Ops, DecodeAttentionStaysMemoryBoundAtAnyBatch) {
  const auto m = load_model("llama-2-7b");
  const auto hw = load_hardware("h100-sxm-80gb");
  for (int64_t b : {1, 64, 512}) {
    const Op att = attention_op(m, decode_step(b, 2048), fp16());
    EXPECT_LT(att.ai(), 2.0) << b;  // each KV byte is used by one query: AI ~ 1 for MHA
    EXPECT_EQ(predict(att, hw).bound, Bound::memory);
  }
  // The weight GEMMs cross the ridge (~295 FLOP/B on H100) once the batch is large enough.
  const auto small = step_ops(m, decode_step(8, 2048), fp16());
  const auto large = step_ops(m, decode_step(512, 2048), fp16());
  EXPECT_EQ(predict(find_op(small, "gate_up_proj"), hw).bound, Bound::memory);
  EXPECT_EQ(predict(find_op(large, "gate_up_proj"), hw).bound, Bound::compute);
}

TEST(Ops, RejectsNonPositiveSizes) {
  EXPECT_THROW(prefill_step(0, 10), Error);
  EXPECT_THROW(decode_step(1, 0), Error);
  EXPECT_THROW(decode_step(-3, 10), Error);
  EXPECT_THROW(parse_phase("training"), Error);
  EXPECT_THROW(parse_attention_variant("paged"), Error);
}

TEST(Roofline, TimeIsMaxOfTermsPlusLaunch) {
  const auto hw = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  Op op;
  op.flops = 1e12;
  op.tensor_core = true;
  op.compute_dtype = DType::bf16;
  op.traffic.push_back({"x", TensorRole::activation, false, 1e9});
  const Prediction p = predict(op, hw);
  EXPECT_DOUBLE_EQ(p.compute_s, 1e12 / 989.4e12);
  EXPECT_DOUBLE_EQ(p.memory_s, 1e9 / 3350e9);
  EXPECT_DOUBLE_EQ(p.time_s, p.compute_s + hw.launch_overhead_s);
  EXPECT_EQ(p.bound, Bound::compute);
  op.flops = 1;
  op.traffic[0].bytes = 1;
  EXPECT_EQ(predict(op, hw).bound, Bound::launch);
}

// The clock a launch runs at (sim/src/roofline.cpp): the tensor clock wherever tensor-core instructions are issued at
// least once per 2500 other warp instructions, whatever the busiest pipe; the SM clock where they are rarer or absent.
// scripts/probes/tensor_clock.cu on the H200: integer work with one mma.sync per 40-2500 warp instructions ran at
// 1.79-1.82 GHz, per 40 000 or none at 1.97-1.98; the int4 weight-only kernels, integer-bound with one mma per 10-20,
// at 1.77-1.81 (kernels/gemm/NOTES.md r19). Here the integer pipe is the busiest at every rate, so the rule before
// (the tensor clock only where the tensor pipe was the busiest) gave the SM clock throughout.
TEST(Roofline, ALaunchIssuingTensorInstructionsRunsAtTheTensorClock) {
  const Hardware hw = load_hardware("h200-sxm", CeilingsMode::measured);
  const PipeCeilings& c = hw.pipes;
  ASSERT_LT(c.tensor_clock_hz, 0.95 * c.sm_clock_hz);
  const double alu = 32.0 * 1e6 * hw.sm_count;  // a million warp instructions of integer work an SM
  // useful: the share of each m16n8k16's FLOPs the launch declares (a padded mma's less than 1)
  auto predicted_alu_s = [&](double mma_per_instruction, bool from_sass, double useful = 1.0) {
    KernelLaunch k;
    k.kernel = "integer_work";
    k.tensor = TensorPath::sm;
    k.ctas = hw.sm_count;
    k.work.alu = alu;
    const double mmas = alu / 32.0 * mma_per_instruction;
    if (from_sass) k.work.tensor_ops = 32.0 * mmas;
    k.work.tensor_flops = 4096.0 * mmas * useful;
    Op op;
    op.kernels = {k};
    const Prediction p = predict(op, hw);
    EXPECT_GT(p.alu_s, p.tensor_s) << mma_per_instruction;  // the integer pipe the busiest
    return p.alu_s;
  };
  const double at_sm = alu / (c.alu_lanes * hw.sm_count * c.sm_clock_hz);
  const double at_tensor = alu / (c.alu_lanes * hw.sm_count * c.tensor_clock_hz);
  for (bool from_sass : {true, false}) {
    EXPECT_NEAR(predicted_alu_s(1.0 / 15, from_sass), at_tensor, 1e-9 * at_tensor);  // the int4 kernels' rate
    EXPECT_NEAR(predicted_alu_s(1.0 / 2500, from_sass), at_tensor, 1e-9 * at_tensor);
    EXPECT_NEAR(predicted_alu_s(1.0 / 40000, from_sass), at_sm, 1e-9 * at_sm);
  }
  EXPECT_NEAR(predicted_alu_s(0.0, true), at_sm, 1e-9 * at_sm);
  // The SASS count wins over the FLOPs: padded mma (a decode kernel's single query head, 1/16 of each mma useful)
  // issue 16 times the instructions their useful FLOPs would say (one per 1000 instructions; by FLOPs one per 16 000).
  EXPECT_NEAR(predicted_alu_s(1.0 / 1000, true, 1.0 / 16), at_tensor, 1e-9 * at_tensor);
}

// wgmma's products run at the SM's wgmma rate (4096 FLOP a clock on Hopper), mma.sync's at its measured rate (2727 on
// the H100 and the H200); a launch declared wgmma-clocked runs at the clock of sustained wgmma, whatever it issues.
TEST(Roofline, WgmmaRunsAtItsOwnRateAndAWgmmaClockedLaunchAtItsClock) {
  Hardware hw = load_hardware("h200-sxm", CeilingsMode::measured);
  hw.pipes.wgmma_clock_hz = 1.6e9;
  const PipeCeilings& c = hw.pipes;
  ASSERT_GT(c.wgmma_flops_per_clk, 1.4 * c.tensor_flops_per_clk);
  KernelLaunch k;
  k.kernel = "products";
  k.ctas = hw.sm_count;
  k.work.tensor_flops = 1e12;
  k.work.alu = 32.0 * 1e3 * hw.sm_count;  // a little other work: tensor-clocked by the instruction rule
  auto tensor_s = [&](TensorPath path, bool wgmma_clocked) {
    k.tensor = path;
    k.wgmma_clocked = wgmma_clocked;
    Op op;
    op.kernels = {k};
    return predict(op, hw).tensor_s;
  };
  const double sms = hw.sm_count;
  EXPECT_NEAR(tensor_s(TensorPath::sm, false), 1e12 / (sms * c.tensor_flops_per_clk * c.tensor_clock_hz), 1e-15);
  EXPECT_NEAR(tensor_s(TensorPath::wgmma, false), 1e12 / (sms * c.wgmma_flops_per_clk * c.tensor_clock_hz), 1e-15);
  EXPECT_NEAR(tensor_s(TensorPath::wgmma, true), 1e12 / (sms * c.wgmma_flops_per_clk * 1.6e9), 1e-15);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

TEST(Ops, DecodeCostOfLayoutsAndSplits) {
  AttentionShape a;
  a.batch = 8;
  a.heads = 32;
  a.kv_heads = 8;
  a.head_dim = 128;
  a.new_tokens = 1;
  a.past_tokens = 8191;
  const Op plain = attention_cost(a, AttentionVariant::flash, DType::bf16, DType::bf16);
  // K and V of 8191 cached tokens + the new one: 2 x 8 x 8192 x 8 x 128 x 2 bytes.
  EXPECT_DOUBLE_EQ(plain.bytes(TensorRole::kv_cache) + 2.0 * 8 * 8 * 128 * 2, 2.0 * 8 * 8192 * 8 * 128 * 2);
  a.block_size = 16;
  const Op paged = attention_cost(a, AttentionVariant::flash, DType::bf16, DType::bf16);
  EXPECT_DOUBLE_EQ(paged.bytes() - plain.bytes(), 8.0 * 512 * 4);  // the block table
  a.splits = 4;
  const Op split = attention_cost(a, AttentionVariant::flash, DType::bf16, DType::bf16);
  EXPECT_DOUBLE_EQ(split.bytes() - paged.bytes(), 2.0 * 8 * 32 * 4 * 130 * 4);
  EXPECT_DOUBLE_EQ(split.flops, plain.flops);
  // Each KV element (2 bytes) serves 4 query heads x 2 FLOPs x (QK and PV) / 2 tensors: ~4 FLOP/B,
  // far left of any ridge.
  EXPECT_NEAR(split.ai(), 4.0, 0.05);
  a.splits = 0;
  EXPECT_THROW(attention_cost(a, AttentionVariant::flash, DType::bf16, DType::bf16), Error);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// The naive path's softmax_rows at short rows: every thread of a row's block runs a fixed count of instructions
// (indices, the block reductions, the log-sum-exp) beside its elements' loops, 353 a warp against the loops' ~64 at 512
// keys (ncu on the H200, sim/src/kernels.cpp kSoftmaxRow); with them the launch is issue-bound there (ncu: issue slots
// 90% busy), and its issue term is those warp instructions at the SMs' issue rate.
TEST(Ops, NaiveSoftmaxAtShortRowsIsIssueBound) {
  const Hardware hw = load_hardware("h200-sxm", CeilingsMode::measured);
  AttentionShape a;
  a.batch = 32;
  a.heads = 16;
  a.kv_heads = 16;
  a.head_dim = 128;
  a.new_tokens = 512;
  const auto ks = attention_prefill_kernels(a, AttentionVariant::naive, DType::bf16, hw);
  ASSERT_EQ(ks.size(), 4u);
  const KernelLaunch& sm = ks[2];
  ASSERT_EQ(sm.kernel, "softmax_rows");
  const double rows = 32.0 * 16 * 512, warps = rows * 8;
  EXPECT_GT(sm.work.warp_instructions(), warps * 353);  // the fixed part alone
  EXPECT_LT(sm.work.warp_instructions(), warps * 460);  // ncu's 460 a warp in all
  Op op;
  op.kernels = {sm};
  const Prediction p = predict(op, hw);
  EXPECT_EQ(p.dominant, "issue");
  const double issue = sm.work.warp_instructions() / (hw.pipes.issue_per_clk * hw.sm_count * hw.pipes.sm_clock_hz);
  EXPECT_NEAR(p.issue_s, issue, 1e-9 * issue);
  EXPECT_GT(p.issue_s, 0.8e-3);  // ncu: 1.02 ms at 1.98 GHz, issue slots 90% busy
}

// The overlapped flash kernel's tiles by head dim (sim/kernels.h, the kernel builds from the same table): the
// tensor work counts padded key tiles of 128 keys, 64 at head dim 256, so a 40-key sequence pads to 128 keys
// at 64, 96 and 128 and to 64 at 256; one Q buffer (256) exposes each item's Q load; a head dim the kernel does
// not have is charged as the next it has.
TEST(Ops, OverlappedFlashTilesFollowTheTileTable) {
  static_assert(flash_overlap_block_n(256) == 64 && flash_overlap_block_n(128) == 128 && flash_overlap_block_n(96) == 128);
  static_assert(flash_overlap_stored_columns(96) == 128 && flash_overlap_q_buffers(256) == 1);
  const Hardware hw = load_hardware("h100-sxm-80gb");
  AttentionShape a;
  a.batch = 1;
  a.heads = 4;
  a.kv_heads = 4;
  a.new_tokens = 40;
  for (int64_t d : {64, 96, 128, 256}) {
    a.head_dim = d;
    const auto ks = attention_prefill_kernels(a, AttentionVariant::flash, DType::bf16, hw);
    ASSERT_EQ(ks.size(), 1u);
    EXPECT_EQ(ks[0].kernel, "flash_fwd_overlap_kernel");
    const double keys = d == 256 ? 64 : 128;  // one padded tile, two consumer warpgroups of 64 rows
    EXPECT_DOUBLE_EQ(ks[0].work.tensor_flops, 4.0 * 2 * 4.0 * 64 * keys * double(d)) << "head dim " << d;
    // 4 items, one an SM: one exposed round trip each, and with one Q buffer (256) its Q load's one more
    EXPECT_DOUBLE_EQ(ks[0].sm_round_trips, d == 256 ? 2.0 : 1.0) << "head dim " << d;
  }
  a.head_dim = 80;  // charged as 96's loop: the same per-tile instruction counts
  const double fp32_80 = attention_prefill_kernels(a, AttentionVariant::flash, DType::bf16, hw)[0].work.fp32;
  a.head_dim = 96;
  EXPECT_DOUBLE_EQ(fp32_80, attention_prefill_kernels(a, AttentionVariant::flash, DType::bf16, hw)[0].work.fp32);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// The overlapped flash kernel's tile pair (sim/src/kernels.cpp flash_sm90_overlapped): the chain, or the tensor
// cores' and the SFU's work one after the other where that is longer, as at head dim 64 (66 exponentials a thread a
// tile against 128-key products of 64 columns): a long sequence's CTA time is its tile pairs at tensor + SFU, the
// products at the SM's wgmma rate, all in cycles of the clock of sustained wgmma. The library GEMM's rate
// (matmul_peak, cuBLAS at 8192^3: 685 TFLOP/s on the H200 against 789 on the H100, whose SMs are the same) does not
// enter it.
TEST(Ops, OverlappedFlashTilePairSerializesTensorAndSfuWhereLonger) {
  Hardware hw = load_hardware("h200-sxm", CeilingsMode::measured);
  AttentionShape a;
  a.batch = 1;
  a.heads = 16;
  a.kv_heads = 16;
  a.head_dim = 64;
  a.new_tokens = 16384;
  a.causal = false;
  const KernelLaunch k = attention_prefill_kernels(a, AttentionVariant::flash, DType::bf16, hw)[0];
  EXPECT_EQ(k.tensor, TensorPath::wgmma);
  EXPECT_TRUE(k.wgmma_clocked);
  const double pairs = 16.0 * 128 * 128 / double(k.ctas);  // 128 query blocks x 128 key tiles x 16 heads
  const double tensor = 2.0 * 4 * 64 * 128 * 64 / hw.pipes.wgmma_flops_per_clk;
  const double sfu = 2.0 * 128 * 66 / hw.pipes.mufu_lanes;
  const double items = std::ceil(16.0 * 128 / hw.sm_count);
  constexpr double kChain = 1509;  // kOverlapChainD64
  const double per_pair = (k.cta_cycles - items * kChain) / pairs;
  EXPECT_NEAR(per_pair, tensor + sfu, 1e-6 * (tensor + sfu));
  EXPECT_GT(per_pair, kChain);
  // The prediction: those cycles at the clock of sustained wgmma, whatever the library GEMM's rate.
  Op op = attention_cost(a, AttentionVariant::flash, DType::bf16, DType::bf16);
  op.kernels = attention_prefill_kernels(a, AttentionVariant::flash, DType::bf16, hw);
  const double t = predict(op, hw).latency_s;
  EXPECT_NEAR(t, k.cta_cycles / hw.pipes.wgmma_clock_hz, 1e-9 * t);
  Hardware halved = hw;
  halved.tensor_dense["bf16"] /= 2;
  EXPECT_DOUBLE_EQ(predict(op, halved).latency_s, t);
  halved.pipes.wgmma_clock_hz /= 2;
  EXPECT_NEAR(predict(op, halved).latency_s, 2 * t, 1e-9 * t);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// The engine's varlen prefill is the wgmma rung over each sequence's tiles and work items: one shape alone is the
// dense rung's launch; a staggered batch costs the sum of its sequences, less than charging each the longest's past.
TEST(Ops, TheVarlenPrefillSumsItsSequences) {
  const Hardware hw = load_hardware("h200-sxm", CeilingsMode::measured);
  const AttentionShape one{4, 32, 8, 128, 512, 1024, true, std::nullopt, 0, 1};
  const KernelLaunch dense = attention_prefill_kernels(one, AttentionVariant::flash, DType::bf16, hw, FlashRung::wgmma)[0];
  const KernelLaunch varlen = varlen_prefill_kernels({one}, DType::bf16, hw)[0];
  EXPECT_EQ(varlen.kernel, dense.kernel);
  EXPECT_DOUBLE_EQ(varlen.work.tensor_flops, dense.work.tensor_flops);
  EXPECT_DOUBLE_EQ(varlen.sm_round_trips, dense.sm_round_trips);
  EXPECT_DOUBLE_EQ(varlen.bytes, dense.bytes);
  EXPECT_EQ(varlen.ctas, dense.ctas);
  EXPECT_DOUBLE_EQ(varlen.cta_cycles, dense.cta_cycles);  // the longest item's floor
  std::vector<AttentionShape> staggered;
  for (int64_t i = 0; i < 16; ++i) staggered.push_back(AttentionShape{1, 32, 8, 128, 128, i * 4096 / 15, true, std::nullopt, 0, 1});
  const KernelLaunch sum = varlen_prefill_kernels(staggered, DType::bf16, hw)[0];
  double flops = 0;
  for (const auto& s : staggered)
    flops += attention_prefill_kernels(s, AttentionVariant::flash, DType::bf16, hw, FlashRung::wgmma)[0].work.tensor_flops;
  EXPECT_DOUBLE_EQ(sum.work.tensor_flops, flops);
  const AttentionShape longest{16, 32, 8, 128, 128, 4096, true, std::nullopt, 0, 1};
  const double longest_flops =
      attention_prefill_kernels(longest, AttentionVariant::flash, DType::bf16, hw, FlashRung::wgmma)[0].work.tensor_flops;
  EXPECT_LT(sum.work.tensor_flops, 0.6 * longest_flops);
  // its floor is its longest sequence's item (4096 past + 128 new: 33 tiles), not the first's nor a sum
  const AttentionShape last{1, 32, 8, 128, 128, 4096, true, std::nullopt, 0, 1};
  EXPECT_DOUBLE_EQ(sum.cta_cycles,
                   attention_prefill_kernels(last, AttentionVariant::flash, DType::bf16, hw, FlashRung::wgmma)[0].cta_cycles);
  staggered[3].head_dim = 64;
  EXPECT_THROW(varlen_prefill_kernels(staggered, DType::bf16, hw), Error);
  EXPECT_THROW(varlen_prefill_kernels({}, DType::bf16, hw), Error);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// The wgmma rung lasts at least its longest item (a CTA takes its items whole): with few items (1 x 2048, causal,
// 8 heads at head dim 64: 128 items of 1-16 tiles) the longest item binds, where the work spread over the SMs is the
// average one; with many (the ladder's 16k tokens over 16 heads) the spread work binds and the floor changes nothing.
TEST(Ops, TheWgmmaRungLastsAtLeastItsLongestItem) {
  const Hardware hw = load_hardware("h200-sxm", CeilingsMode::measured);
  auto predicted = [&](const AttentionShape& s) {
    Op op = attention_cost(s, AttentionVariant::flash, DType::bf16, DType::bf16);
    op.kernels = attention_prefill_kernels(s, AttentionVariant::flash, DType::bf16, hw, FlashRung::wgmma);
    return predict(op, hw);
  };
  const AttentionShape few{1, 8, 8, 64, 2048, 0, true, std::nullopt, 0, 1};
  const KernelLaunch k = attention_prefill_kernels(few, AttentionVariant::flash, DType::bf16, hw, FlashRung::wgmma)[0];
  EXPECT_EQ(k.ctas, 128);
  const Prediction p = predicted(few);
  const double per_tile = k.cta_cycles / 16.0;  // the last query block's 16 tiles of 128 keys
  // a tile: both warpgroups' S = Q K^T and P V (4 x 64 rows x 128 keys x 64 FLOP each) and their 128 x 128
  // exponentials, one after another, and more
  const double products = 2.0 * 4 * 64 * 128 * 64 / hw.pipes.wgmma_flops_per_clk;
  const double exps = 128.0 * 128 / hw.pipes.mufu_lanes;
  EXPECT_GT(per_tile, products + exps);
  EXPECT_NEAR(p.latency_s, k.cta_cycles / hw.pipes.wgmma_clock_hz, 1e-12);
  EXPECT_GT(p.latency_s, 1.5 * p.pipes_s);  // 16 tiles against the average item's 8.5
  const AttentionShape many{1, 16, 16, 128, 16384, 0, false, std::nullopt, 0, 1};
  const Prediction q = predicted(many);
  EXPECT_LT(q.latency_s, 0.2 * q.pipes_s);
}

}  // namespace
}  // namespace inferlab
