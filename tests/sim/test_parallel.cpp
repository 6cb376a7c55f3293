// Tensor and pipeline parallelism: closed forms, the plain model at degree 1, bad degrees.
#include <gtest/gtest.h>

#include <cmath>

#include "inferlab/sim/alpha_beta.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/parallel.h"

#include "error_of.h"

namespace inferlab {
namespace {

OpOptions fp16() { return OpOptions{Precision{DType::fp16, DType::fp16, DType::fp16}, AttentionVariant::flash, true, std::nullopt}; }
MemoryOptions mem16() {
  MemoryOptions o;
  o.precision = fp16().precision;
  return o;
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Parallel, DegreeOneIsThePlainModel) {
  const auto hw = load_hardware("h100-sxm-80gb");
  for (const char* name : {"llama-2-7b", "llama-2-70b", "mixtral-8x7b"}) {
    const auto m = load_model(name);
    for (const Step& s : {decode_step(16, 2048), prefill_step(2, 1000)}) {
      const auto plain = predict_step(step_ops(m, s, fp16()), hw);
      const auto par = predict_parallel(m, s, fp16(), hw, Parallelism{});
      EXPECT_EQ(par.time_s, plain.time_s) << name;
      EXPECT_EQ(par.stages.at(0).compute.flops, plain.flops);
      EXPECT_EQ(par.stages.at(0).compute.bytes, plain.bytes);
      EXPECT_EQ(par.tp_comm_s + par.send_s + par.bubble_s, 0.0);
    }
    const auto plain = memory_breakdown(m, 8, 4096, mem16());
    const auto dev = device_memory(m, 8, 4096, mem16(), Parallelism{});
    EXPECT_EQ(dev.breakdown.weights, plain.weights) << name;
    EXPECT_EQ(dev.breakdown.kv_cache, plain.kv_cache);
    EXPECT_EQ(dev.breakdown.total(), plain.total());
    EXPECT_EQ(stage_params(m, Parallelism{}, 0), m.total_params());
  }
}

TEST(Parallel, RanksAndStagesPartitionTheWeights) {
  const auto m = load_model("llama-2-70b");
  // Across tp ranks: every weight once, except the replicated norms (2 per layer + the final one).
  for (int64_t tp : {2, 4, 8}) {
    const double replicated = double(m.layers) * m.norm_params_per_layer() + double(m.hidden);
    EXPECT_NEAR(double(tp) * stage_params(m, {tp, 1, 1}, 0), m.total_params() + double(tp - 1) * replicated, 1.0) << tp;
  }
  // Across pipeline stages: every weight exactly once.
  for (int64_t pp : {2, 3, 8}) {
    double sum = 0;
    for (int64_t s = 0; s < pp; ++s) sum += stage_params(m, {1, pp, 1}, s);
    EXPECT_NEAR(sum, m.total_params(), 1.0) << pp;
  }
  EXPECT_EQ(stage_layers(80, 3), (std::vector<int64_t>{27, 27, 26}));
}

TEST(Parallel, KvHeadsAreReplicatedBeyondTheirCount) {
  const auto m = load_model("llama-2-70b");  // 64 query heads, 8 KV heads
  EXPECT_EQ(kv_heads_per_rank(m, 4), 2);
  EXPECT_EQ(kv_heads_per_rank(m, 16), 1);
  const auto s16 = shard_model(m, 16);
  EXPECT_EQ(s16.heads, 4);
  EXPECT_EQ(s16.kv_heads, 1);
  // At tp 16 each rank still holds a whole KV head: the per-device KV cache stops shrinking at tp 8.
  const double kv8 = device_memory(m, 4, 4096, mem16(), {8, 1, 1}).breakdown.kv_cache;
  const double kv16 = device_memory(m, 4, 4096, mem16(), {16, 1, 1}).breakdown.kv_cache;
  EXPECT_DOUBLE_EQ(kv16, kv8);
  EXPECT_DOUBLE_EQ(kv8 * 8, memory_breakdown(m, 4, 4096, mem16()).kv_cache);
}

TEST(Parallel, RingAllReduceIsTheAlphaBetaFormula) {
  const Link l{"test", 100e9, 2e-6};
  const double n = 64e6;
  for (int64_t p : {2, 4, 8}) {
    const double pd = double(p);
    EXPECT_DOUBLE_EQ(collective_time(Collective::all_reduce, n, p, l), 2 * (pd - 1) / pd * n / 100e9 + 2 * (pd - 1) * 2e-6);
    EXPECT_DOUBLE_EQ(collective_time(Collective::all_gather, n, p, l), (pd - 1) / pd * n / 100e9 + (pd - 1) * 2e-6);
  }
  EXPECT_EQ(collective_time(Collective::all_reduce, n, 1, l), 0.0);
  EXPECT_DOUBLE_EQ(collective_time(Collective::send, n, 2, l), n / 100e9 + 2e-6);
  // The H100's NVLink: 900 GB/s both ways = 450 GB/s a direction.
  const Link nv = interconnect(load_hardware("h100-sxm-80gb"));
  EXPECT_EQ(nv.name, "NVLink");
  EXPECT_DOUBLE_EQ(nv.bandwidth, 450e9);
  EXPECT_EQ(interconnect(load_hardware("l4")).name, "PCIe");
}

TEST(Parallel, TensorParallelDecodeSplitsWorkAndAddsTwoAllReducesPerLayer) {
  const auto m = load_model("llama-2-70b");
  const auto hw = load_hardware("h100-sxm-80gb");
  const Step s = decode_step(8, 2048);
  const auto one = predict_parallel(m, s, fp16(), hw, {1, 1, 1});
  double prev_share = 0;
  for (int64_t tp : {2, 4, 8}) {
    const auto r = predict_parallel(m, s, fp16(), hw, {tp, 1, 1});
    const auto& st = r.stages.at(0);
    int64_t allreduces = 0;
    for (const auto& c : st.comm)
      if (c.kind == Collective::all_reduce) allreduces += c.count;
    EXPECT_EQ(allreduces, 2 * m.layers + 1);  // + the embedding's
    // Memory-bound decode: one rank moves about 1/tp of the bytes.
    EXPECT_NEAR(st.compute.bytes * double(tp) / one.stages[0].compute.bytes, 1.0, 0.02) << tp;
    EXPECT_LT(r.time_s, one.time_s);
    EXPECT_GT(r.comm_share(), prev_share);  // the share of communication grows with the degree
    prev_share = r.comm_share();
    EXPECT_DOUBLE_EQ(r.time_s, r.compute_s + r.tp_comm_s);
  }
}

TEST(Parallel, PipelineBubbleAndSchedule) {
  const auto m = load_model("llama-2-70b");
  const auto hw = load_hardware("h100-sxm-80gb");
  const Step s = decode_step(16, 2048);
  for (int64_t pp : {2, 4}) {
    for (int64_t mb : {1, 4, 16}) {
      const auto r = predict_parallel(m, s, fp16(), hw, {1, pp, mb});
      EXPECT_DOUBLE_EQ(r.bubble_fraction, double(pp - 1) / double(mb + pp - 1));
      EXPECT_DOUBLE_EQ(r.time_s, double(mb + pp - 1) * r.stage_s + double(pp - 1) * r.send.time_s);
      EXPECT_NEAR(r.compute_s + r.tp_comm_s + r.send_s + r.bubble_s, r.time_s, 1e-12 * r.time_s);
      EXPECT_EQ(r.send.count, pp - 1);
    }
    // One micro-batch: the stages run one after the other, no faster than on one device.
    EXPECT_GE(predict_parallel(m, s, fp16(), hw, {1, pp, 1}).time_s, predict_parallel(m, s, fp16(), hw, {}).time_s);
  }
}

TEST(Parallel, BadDegreesAreClearErrors) {
  const auto m7 = load_model("llama-2-7b");  // 32 heads
  expect_error([&] { check_parallelism(m7, {3, 1, 1}); }, "does not divide the 32 attention heads");
  expect_error([&] { check_parallelism(m7, {1, 33, 1}); }, "exceeds the 32 layers");
  expect_error([&] { check_parallelism(m7, {0, 1, 1}); }, "at least 1");
  ModelConfig odd = m7;  // 24 query heads sharing 8 KV heads: tp 6 divides the heads, not the KV heads
  odd.heads = 24;
  odd.kv_heads = 8;
  odd.name = "odd";
  expect_error([&] { check_parallelism(odd, {6, 1, 1}); }, "8 KV heads");
  expect_error([&] { check_parallelism(odd, {12, 1, 1}); }, "multiple of them");
  const auto hw = load_hardware("h100-sxm-80gb");
  expect_error([&] { predict_parallel(m7, decode_step(6, 100), fp16(), hw, {1, 2, 4}); }, "do not divide the batch");
  Hardware no_latency = hw;
  no_latency.nvlink_latency_s = 0;
  expect_error([&] { predict_parallel(m7, decode_step(1, 100), fp16(), no_latency, {2, 1, 1}); }, "nvlink_latency_us");
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// The alpha-beta fit recovers the link it was given (sim/alpha_beta.h), from the very formulas
// sim/parallel.h charges, with noise; and refuses a sweep no link could produce.
TEST(AlphaBetaFit, RecoversTheLinkFromItsOwnFormulas) {
  const double alpha = 3.1e-6, B = 160e9;
  std::vector<std::pair<double, double>> ar, sd;
  int k = 0;
  for (double n = 4096; n <= 268435456; n *= 4, ++k) {
    const double noise = 1 + 0.02 * ((k % 3) - 1);  // +-2%
    ar.push_back({n, (2 * alpha + n / B) * noise});  // 2 ranks: 2(p-1) alpha + 2(p-1)/p n / B
    sd.push_back({n, (alpha + n / B) * noise});
  }
  const AlphaBetaFit a = fit_all_reduce(ar, 2), s = fit_send(sd);
  EXPECT_NEAR(a.alpha_s / alpha, 1, 0.05);
  EXPECT_NEAR(a.bandwidth / B, 1, 0.05);
  EXPECT_NEAR(s.alpha_s / alpha, 1, 0.05);
  EXPECT_NEAR(s.bandwidth / B, 1, 0.05);
  EXPECT_LT(a.worst_residual, 0.05);
  // Four ranks: the same link, the ring's longer path.
  std::vector<std::pair<double, double>> ar4;
  for (double n = 4096; n <= 268435456; n *= 4) ar4.push_back({n, 6 * alpha + 1.5 * n / B});
  const AlphaBetaFit a4 = fit_all_reduce(ar4, 4);
  EXPECT_NEAR(a4.alpha_s / alpha, 1, 1e-6);
  EXPECT_NEAR(a4.bandwidth / B, 1, 1e-6);
  EXPECT_NE(error_of([] { fit_send({{4096, 1e-5}, {4096, 2e-5}}); }).find("two message sizes"), std::string::npos);
  EXPECT_NE(error_of([] { fit_send({{4096, 2e-5}, {1 << 20, 1e-5}}); }).find("does not grow"), std::string::npos);
  EXPECT_NE(error_of([&] { fit_all_reduce(ar, 1); }).find("at least 2"), std::string::npos);
}

}  // namespace
}  // namespace inferlab
