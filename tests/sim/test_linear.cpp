// The cost of a linear layer per weight format (sim/linear.h): bytes by hand, FLOPs, dtypes, the
// predicted speedup over bf16 and the shapes a format cannot store.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "inferlab/sim/error.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/kernels.h"
#include "inferlab/sim/linear.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/roofline.h"

#include "error_of.h"

namespace inferlab {
namespace {

const std::vector<WeightFormat> kAll = {WeightFormat::bf16, WeightFormat::fp16, WeightFormat::int8,
                                        WeightFormat::int4, WeightFormat::fp8,  WeightFormat::sparse24};
const std::vector<WeightFormat> kWeightOnly = {WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24};

double traffic(const Op& op, const std::string& tensor) {
  double b = 0;
  int found = 0;
  for (const auto& t : op.traffic)
    if (t.tensor == tensor) {
      b += t.bytes;
      ++found;
    }
  EXPECT_EQ(found, 1) << op.variant << ": tensor " << tensor;
  return b;
}

TEST(Linear, FormatNamesRoundTripAndUnknownNamesListTheKnownOnes) {
  EXPECT_EQ(known_weight_formats(), (std::vector<std::string>{"bf16", "fp16", "int8", "int4", "fp8", "sparse24"}));
  for (WeightFormat f : kAll) EXPECT_EQ(parse_weight_format(weight_format_name(f)), f);
  const std::string msg = error_of([] { parse_weight_format("int3"); });
  EXPECT_NE(msg.find("unknown weight format 'int3'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16, fp16, int8, int4, fp8, sparse24"), std::string::npos) << msg;
  EXPECT_TRUE(is_dense(WeightFormat::bf16));
  EXPECT_TRUE(is_dense(WeightFormat::fp16));
  for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4, WeightFormat::fp8, WeightFormat::sparse24})
    EXPECT_FALSE(is_dense(f)) << weight_format_name(f);
}

TEST(Linear, WeightBytesByHand) {
  // 4096 x 4096 = 16 Mi values.
  const WeightBytes bf = weight_format_bytes(WeightFormat::bf16, 4096, 4096);
  EXPECT_EQ(bf.values, 33554432.0);
  EXPECT_EQ(bf.scales + bf.metadata, 0.0);
  EXPECT_EQ(weight_format_bytes(WeightFormat::fp16, 4096, 4096).total(), 33554432.0);
  const WeightBytes i8 = weight_format_bytes(WeightFormat::int8, 4096, 4096);
  EXPECT_EQ(i8.values, 16777216.0);
  EXPECT_EQ(i8.scales, 4096.0 * 4);  // fp32 per output channel
  const WeightBytes i4 = weight_format_bytes(WeightFormat::int4, 4096, 4096);
  EXPECT_EQ(i4.values, 8388608.0);   // 8 MiB exactly: two values per byte
  EXPECT_EQ(i4.scales, 524288.0);    // 4096 channels x 32 groups x (bf16 scale + bf16 zero)
  EXPECT_EQ(i4.metadata, 0.0);
  const WeightBytes f8 = weight_format_bytes(WeightFormat::fp8, 4096, 4096);
  EXPECT_EQ(f8.values, 16777216.0);
  EXPECT_EQ(f8.scales, 4.0);         // one fp32 per tensor
  const WeightBytes sp = weight_format_bytes(WeightFormat::sparse24, 4096, 4096);
  EXPECT_EQ(sp.values, 16777216.0);  // half the bf16 values kept
  EXPECT_EQ(sp.metadata, 4096.0 * 4096 / 8);  // 2 bits per kept value
  EXPECT_EQ(sp.scales, 0.0);
  // Not square: the scales follow n (channels) and k / 128 (groups).
  EXPECT_EQ(weight_format_bytes(WeightFormat::int4, 1024, 14336).scales, 1024.0 * 112 * 4);
  EXPECT_EQ(weight_format_bytes(WeightFormat::int8, 14336, 4096).scales, 14336.0 * 4);
}

TEST(Linear, CostListsEveryTensorAndCountsDenseFlops) {
  const LinearShape s{16, 14336, 4096};
  for (WeightFormat f : kAll) {
    const Op op = linear_cost(s, f);
    const std::string name = weight_format_name(f);
    EXPECT_EQ(op.name, "linear");
    EXPECT_EQ(op.variant, name);
    EXPECT_EQ(op.op_class, OpClass::gemm);
    EXPECT_EQ(op.count, 1);
    EXPECT_EQ(op.launches, 1);
    EXPECT_TRUE(op.tensor_core);
    EXPECT_EQ(op.flops, 2.0 * 16 * 14336 * 4096) << name;  // dense-equivalent for every format
    EXPECT_EQ(op.compute_dtype, activation_dtype(f)) << name;
    // The weight role carries exactly the format's storage, the activations X and Y.
    const WeightBytes w = weight_format_bytes(f, s.n, s.k);
    EXPECT_EQ(op.bytes(TensorRole::weight), w.total()) << name;
    EXPECT_EQ(traffic(op, "W"), w.values) << name;
    const double act = dtype_bytes(activation_dtype(f)), out = dtype_bytes(output_dtype(f));
    EXPECT_EQ(traffic(op, "x"), 16.0 * 4096 * act) << name;
    EXPECT_EQ(traffic(op, "y"), 16.0 * 14336 * out) << name;
    EXPECT_EQ(op.bytes(TensorRole::kv_cache) + op.bytes(TensorRole::scores), 0.0);
    for (const auto& t : op.traffic) EXPECT_EQ(t.write, t.tensor == "y") << name << " " << t.tensor;
  }
  EXPECT_EQ(traffic(linear_cost(s, WeightFormat::int4), "W_scales_zeros"), 14336.0 * 32 * 4);
  EXPECT_EQ(traffic(linear_cost(s, WeightFormat::int8), "W_scales"), 14336.0 * 4);
  EXPECT_EQ(traffic(linear_cost(s, WeightFormat::sparse24), "W_meta"), 14336.0 * 4096 / 8);
  const Op f8 = linear_cost(s, WeightFormat::fp8);
  EXPECT_EQ(traffic(f8, "W_scales"), 4.0);
  EXPECT_EQ(traffic(f8, "x_scale"), 4.0);
  EXPECT_EQ(f8.bytes(TensorRole::activation), 16.0 * 4096 + 4 + 16.0 * 14336 * 2);
}

TEST(Linear, Dtypes) {
  EXPECT_EQ(activation_dtype(WeightFormat::bf16), DType::bf16);
  EXPECT_EQ(activation_dtype(WeightFormat::fp16), DType::fp16);
  EXPECT_EQ(activation_dtype(WeightFormat::int8), DType::bf16);
  EXPECT_EQ(activation_dtype(WeightFormat::int4), DType::bf16);
  EXPECT_EQ(activation_dtype(WeightFormat::sparse24), DType::bf16);
  EXPECT_EQ(activation_dtype(WeightFormat::fp8), DType::fp8_e4m3);
  EXPECT_EQ(output_dtype(WeightFormat::fp16), DType::fp16);
  for (WeightFormat f : {WeightFormat::bf16, WeightFormat::int8, WeightFormat::int4, WeightFormat::fp8,
                         WeightFormat::sparse24})
    EXPECT_EQ(output_dtype(f), DType::bf16) << weight_format_name(f);
}

TEST(Linear, Fp8RunsAtTheFp8TensorPeak) {
  for (const char* mode : {"datasheet", "measured"}) {
    const Hardware hw = load_hardware("h100-sxm-80gb", parse_ceilings_mode(mode));
    const LinearShape big{8192, 8192, 8192};
    const Prediction p8 = predict(linear_cost(big, WeightFormat::fp8), hw);
    const Prediction pb = predict(linear_cost(big, WeightFormat::bf16), hw);
    EXPECT_EQ(p8.peak_flops, hw.tensor_dense.at("fp8")) << mode;
    EXPECT_EQ(pb.peak_flops, hw.tensor_dense.at("bf16")) << mode;
    EXPECT_EQ(p8.bound, Bound::compute);
    EXPECT_EQ(pb.bound, Bound::compute);
    // 8192^3 is compute-bound in both: the speedup is the ratio of the peaks (the launch term aside).
    EXPECT_NEAR((pb.time_s - pb.launch_s) / (p8.time_s - p8.launch_s),
                hw.tensor_dense.at("fp8") / hw.tensor_dense.at("bf16"), 1e-9);
  }
  // A GPU without fp8 tensor cores has no rate to predict with: the error names it.
  const std::string msg =
      error_of([] { predict(linear_cost({1, 4096, 4096}, WeightFormat::fp8), load_hardware("a100-sxm-80gb")); });
  EXPECT_NE(msg.find("fp8"), std::string::npos) << msg;
}

double speedup(const Hardware& hw, const LinearShape& s, WeightFormat f) {
  return predict(linear_cost(s, WeightFormat::bf16), hw).time_s / predict(linear_cost(s, f), hw).time_s;
}

TEST(Linear, PredictedSpeedupAtBatch1OnTheH100) {
  // 14336 x 4096 (gate/up) at m = 1 is memory-bound for every format: the speedup is the ratio of
  // bytes, each side plus one launch.
  const LinearShape s{1, 14336, 4096};
  for (const char* mode : {"datasheet", "measured"}) {
    const Hardware hw = load_hardware("h100-sxm-80gb", parse_ceilings_mode(mode));
    for (WeightFormat f : kAll) EXPECT_EQ(predict(linear_cost(s, f), hw).bound, Bound::memory) << mode;
    auto memory_ratio = [&](WeightFormat f) {
      return predict(linear_cost(s, WeightFormat::bf16), hw).memory_s / predict(linear_cost(s, f), hw).memory_s;
    };
    // Bytes alone: 2 / (1/2 + 4/128) = 3.76 for int4, 2 / (1 + 4/4096) ~ 2 for int8, 2 / (1 + 1/8) for 2:4.
    EXPECT_NEAR(memory_ratio(WeightFormat::int4), 3.76, 0.02) << mode;
    EXPECT_NEAR(memory_ratio(WeightFormat::int8), 2.0, 0.01) << mode;
    EXPECT_NEAR(memory_ratio(WeightFormat::sparse24), 1.78, 0.01) << mode;
    EXPECT_NEAR(memory_ratio(WeightFormat::fp8), 2.0, 0.01) << mode;  // X in fp8 too, but X is 8 KB
    // The launch overhead, paid once by either kernel, pulls the time ratio below the bytes ratio.
    const double L = hw.launch_overhead_s;
    for (WeightFormat f : kAll) {
      const Op b = linear_cost(s, WeightFormat::bf16), q = linear_cost(s, f);
      const double want = (b.bytes() / hw.memory_bandwidth + L) / (q.bytes() / hw.memory_bandwidth + L);
      EXPECT_NEAR(speedup(hw, s, f), want, 1e-12) << mode << " " << weight_format_name(f);
      EXPECT_LT(speedup(hw, s, f), memory_ratio(f) + 1e-12);
    }
  }
  // With the measured H100 ceilings (2.98 TB/s copy bandwidth, 4.3 us launch): int4 ~2.96x.
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  EXPECT_NEAR(speedup(hw, s, WeightFormat::int4), 2.96, 0.01);
  EXPECT_NEAR(speedup(hw, s, WeightFormat::int8), 1.82, 0.01);
  EXPECT_NEAR(speedup(hw, s, WeightFormat::sparse24), 1.65, 0.01);
}

TEST(Linear, WeightOnlyAdvantageFadesAsTheGemmTurnsComputeBound) {
  for (const char* mode : {"datasheet", "measured"}) {
    const Hardware hw = load_hardware("h100-sxm-80gb", parse_ceilings_mode(mode));
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}})
      for (WeightFormat f : kWeightOnly) {
        double last = speedup(hw, {1, n, k}, f);
        EXPECT_GT(last, 1.0);
        for (int64_t m = 2; m <= 16384; m *= 2) {
          const double now = speedup(hw, {m, n, k}, f);
          EXPECT_LE(now, last + 1e-12) << mode << " " << weight_format_name(f) << " " << n << "x" << k << " m=" << m;
          EXPECT_GE(now, 1.0 - 1e-12);
          last = now;
        }
        // Far past the ridge both run at the same tensor peak: no advantage left.
        EXPECT_NEAR(last, 1.0, 0.01) << mode << " " << weight_format_name(f);
        EXPECT_EQ(predict(linear_cost({16384, n, k}, f), hw).bound, Bound::compute);
      }
  }
}

TEST(Linear, ShapesAFormatCannotStoreNameTheConstraint) {
  EXPECT_EQ(error_of([] { weight_format_bytes(WeightFormat::int4, 4096, 100); }),
            "int4 needs k a multiple of the group size 128, got k=100");
  EXPECT_EQ(error_of([] { linear_cost({1, 4096, 4000}, WeightFormat::int4); }),
            "int4 needs k a multiple of the group size 128, got k=4000");
  EXPECT_NE(error_of([] { linear_cost({1, 4096, 4098}, WeightFormat::sparse24); }).find("multiple of 4, got k=4098"),
            std::string::npos);
  // Other formats store any k.
  EXPECT_NO_THROW(linear_cost({3, 5, 100}, WeightFormat::int8));
  EXPECT_NO_THROW(linear_cost({3, 5, 100}, WeightFormat::sparse24));
  EXPECT_NO_THROW(linear_cost({3, 5, 99}, WeightFormat::fp8));
  for (WeightFormat f : kAll) {
    EXPECT_NE(error_of([&] { linear_cost({0, 4096, 4096}, f); }).find("m (tokens) must be positive, got 0"),
              std::string::npos);
    EXPECT_NE(error_of([&] { linear_cost({1, -1, 4096}, f); }).find("n (output features) must be positive, got -1"),
              std::string::npos);
    EXPECT_NE(error_of([&] { weight_format_bytes(f, 4096, 0); }).find("k (input features) must be positive"),
              std::string::npos);
  }
}

// A decode step whose layer GEMMs hold their weights in a format: those four ops are costed as
// linear_cost counts the format, everything else is the dense step's.
OpOptions bf16_step(std::optional<WeightFormat> f) {
  OpOptions o;
  o.precision = Precision{DType::bf16, DType::bf16, DType::bf16};
  o.weight_format = f;
  return o;
}

const Op& op_named(const std::vector<Op>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

TEST(LinearInStep, LayerGemmsCarryTheFormatsBytesAndNothingElseChanges) {
  const ModelConfig m = load_model("llama-3-8b");
  const Step s = decode_step(4, 1024);
  const auto dense = step_ops(m, s, bf16_step(std::nullopt));
  // W[n, k] of Llama-3-8B's layer GEMMs (q, k, v fused; gate and up fused).
  const std::map<std::string, std::pair<int64_t, int64_t>> layer = {
      {"qkv_proj", {4096 + 2 * 1024, 4096}}, {"o_proj", {4096, 4096}}, {"gate_up_proj", {2 * 14336, 4096}},
      {"down_proj", {4096, 14336}}};
  // Dense bf16 as a format is the dense step exactly.
  const auto as_bf16 = step_ops(m, s, bf16_step(WeightFormat::bf16));
  ASSERT_EQ(as_bf16.size(), dense.size());
  for (std::size_t i = 0; i < dense.size(); ++i) EXPECT_EQ(as_bf16[i].bytes(), dense[i].bytes()) << dense[i].name;
  for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24, WeightFormat::fp8}) {
    const std::string name = weight_format_name(f);
    const auto ops = step_ops(m, s, bf16_step(f));
    ASSERT_EQ(ops.size(), dense.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      EXPECT_EQ(op.name, dense[i].name);
      EXPECT_EQ(op.flops, dense[i].flops) << name << " " << op.name;
      EXPECT_EQ(op.count, dense[i].count);
      auto it = layer.find(op.name);
      if (it == layer.end()) {  // embedding, norms, attention, lm_head, ...: untouched
        EXPECT_EQ(op.bytes(), dense[i].bytes()) << name << " " << op.name;
        EXPECT_EQ(op.compute_dtype, dense[i].compute_dtype) << name << " " << op.name;
        continue;
      }
      const auto [n, k] = it->second;
      const Op one = linear_cost({s.tokens(), n, k}, f);  // the same layer on its own
      EXPECT_EQ(op.bytes(TensorRole::weight), weight_format_bytes(f, n, k).total()) << name << " " << op.name;
      EXPECT_EQ(op.bytes(), one.bytes()) << name << " " << op.name;
      EXPECT_EQ(op.compute_dtype, one.compute_dtype) << name << " " << op.name;
      EXPECT_LT(op.bytes(TensorRole::weight), dense[i].bytes(TensorRole::weight)) << name << " " << op.name;
    }
  }
}

TEST(LinearInStep, MoeExpertsReachedCarryTheFormat) {
  const ModelConfig m = load_model("mixtral-8x7b");
  const Step s = decode_step(1, 512);
  const auto ops = step_ops(m, s, bf16_step(WeightFormat::int4));
  const double touched = expected_experts_touched(m.experts, m.experts_per_token, s.tokens());
  EXPECT_DOUBLE_EQ(op_named(ops, "gate_up_proj").bytes(TensorRole::weight),
                   touched * weight_format_bytes(WeightFormat::int4, 2 * m.intermediate, m.hidden).total());
  EXPECT_DOUBLE_EQ(op_named(ops, "down_proj").bytes(TensorRole::weight),
                   touched * weight_format_bytes(WeightFormat::int4, m.hidden, m.intermediate).total());
  EXPECT_EQ(op_named(ops, "gate_up_proj").variant, "moe");
  // The router stays dense.
  EXPECT_EQ(op_named(ops, "router").bytes(TensorRole::weight), double(m.experts) * double(m.hidden) * 2);
}

TEST(LinearInStep, AModelTheFormatCannotStoreNamesTheConstraint) {
  ModelConfig m = load_model("llama-3-8b");
  m.intermediate = 11000;  // down_proj k = 11000, not a multiple of 128
  EXPECT_EQ(error_of([&] { step_ops(m, decode_step(1, 16), bf16_step(WeightFormat::int4)); }),
            "int4 needs k a multiple of the group size 128, got k=11000");
  EXPECT_NO_THROW(step_ops(m, decode_step(1, 16), bf16_step(WeightFormat::int8)));
}

// The mma kernel's grid (sim/kernels.h weight_only_k_warps): at m = 1 the warps of a 16-row tile share one
// block's whole k range (no split-k atomics) with as many warps a tile as keep the grid within one wave
// (4 blocks an SM); a grid under half the block slots only for warps of at most three rounds of loads; m > 1
// keeps split-k with every warp its own rows.
TEST(WeightOnlyPlan, MmaTilesShareTheirRangeAtOneToken) {
  auto plan = [](WeightFormat f, int64_t m, int64_t n, int64_t k) {
    return plan_weight_only(f, m, n, k, 132, WeightOnlyKernel::mma);
  };
  const WeightOnlyPlan gate = plan(WeightFormat::int4, 1, 14336, 4096);  // 8 warps a tile: 896 blocks > 528
  EXPECT_EQ(gate.k_warps, 4);
  EXPECT_EQ(gate.split_k, 1);
  EXPECT_EQ(gate.ctas, 14336 / 32);
  const WeightOnlyPlan down = plan(WeightFormat::int8, 1, 14336, 4096);
  EXPECT_EQ(down.k_warps, 4);
  EXPECT_EQ(down.split_k, 1);
  EXPECT_EQ(down.ctas, 14336 / 32);
  const WeightOnlyPlan kv = plan(WeightFormat::int4, 1, 1024, 4096);  // 64 blocks of 8-chunk warps
  EXPECT_EQ(kv.k_warps, 8);
  EXPECT_EQ(kv.ctas, 64);
  const WeightOnlyPlan two = plan(WeightFormat::int4, 2, 14336, 4096);
  EXPECT_EQ(two.k_warps, 1);
  EXPECT_GT(two.split_k, 1);
  EXPECT_EQ(two.ctas, 14336 / 128 * two.split_k);
  EXPECT_EQ(weight_only_k_warps(1, 4096, 384, 528), 1);  // 3 groups: no power of two divides them
  EXPECT_EQ(weight_only_k_warps(1, 4096, 512, 528), 4);
  EXPECT_EQ(weight_only_k_warps(2, 4096, 4096, 528), 1);
  // int8 on shared tiles: X's row, the warps' |X| maxima (8 words), the slices' sums; on the plain kernel X's rows.
  EXPECT_EQ(weight_only_smem_bytes(WeightFormat::int8, 1, 1, 4096, 8), (4096 + 8) * 2 + 8 * 4 + 8 * 32 * 4 * 4);
  EXPECT_EQ(weight_only_smem_bytes(WeightFormat::int8, 3, 1, 1024, 1), 8 * (1024 + 8) * 2);
  EXPECT_EQ(weight_only_smem_bytes(WeightFormat::int4, 3, 1, 1024, 1), 8 * (1024 + 8) * 2 + 8 * (128 + 8) * 4);
  // 4096 x 14336 int4: 256 blocks of 28-chunk warps would fill under half the 528 slots: split-k.
  EXPECT_EQ(plan(WeightFormat::int4, 1, 4096, 14336).k_warps, 1);
  EXPECT_EQ(plan(WeightFormat::int4, 1, 4096, 4096).k_warps, 8);  // 256 blocks of 8-chunk warps
  EXPECT_EQ(plan(WeightFormat::int8, 1, 4096, 4096).k_warps, 8);  // 256 blocks of 16-chunk warps
  // int8 where the plain kernel splits k 16 ways: 4 warps a tile over 4 splits, the same 512 blocks of 28 chunks a warp.
  const WeightOnlyPlan int8_down = plan(WeightFormat::int8, 1, 4096, 14336);
  EXPECT_EQ(int8_down.k_warps, 4);
  EXPECT_EQ(int8_down.split_k, 4);
  EXPECT_EQ(int8_down.ctas, 512);
  EXPECT_EQ(plan(WeightFormat::int4, 1, 4096, 14336).split_k, 16);  // int4 and 2:4 keep the plain kernel there
  EXPECT_EQ(plan(WeightFormat::sparse24, 1, 4096, 14336).k_warps, 1);
  // A named split with the automatic kernel is the mma kernel's candidate at every m: at 16 and 64 tokens, where the
  // plan's own kernel is wgmma_tma (which plans its own grid), it ran wgmma_tma and ignored the split.
  for (int64_t m : {1, 16, 64}) {
    const WeightOnlyPlan named = plan_weight_only(WeightFormat::int4, m, 1024, 1024, 132, WeightOnlyKernel::automatic,
                                                  true, SplitReduce::automatic, 8);
    EXPECT_EQ(named.kernel, WeightOnlyKernel::mma) << m;
    EXPECT_EQ(named.split_k, 8) << m;
  }
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 16, 1024, 1024, 132).kernel, WeightOnlyKernel::wgmma_tma);
}

// Split-k summed in a cluster (SplitReduce::cluster): the split_k blocks of a row tile form the cluster, each receiving
// m x its share of the block's rows in fp32 beside X; refused by name where it cannot run; atomics and a plan of one
// split need none.
TEST(WeightOnlyPlan, SplitKInAClusterIsTheSplitsBlocksOrANamedRefusal) {
  auto plan = [](WeightFormat f, int64_t m, int64_t n, int64_t k, SplitReduce r, bool hopper = true) {
    return plan_weight_only(f, m, n, k, 132, WeightOnlyKernel::mma, hopper, r);
  };
  const WeightOnlyPlan down = plan(WeightFormat::int8, 1, 4096, 14336, SplitReduce::cluster);
  EXPECT_EQ(down.split_k, 4);
  EXPECT_EQ(down.cluster, 4);
  EXPECT_EQ(plan(WeightFormat::int8, 1, 4096, 14336, SplitReduce::atomics).cluster, 1);
  EXPECT_EQ(plan(WeightFormat::int8, 1, 4096, 4096, SplitReduce::cluster).cluster, 1);  // one split: nothing to sum
  const WeightOnlyPlan eight = plan(WeightFormat::int8, 8, 4096, 4096, SplitReduce::cluster);  // 32 row tiles
  EXPECT_EQ(eight.split_k, 16);
  EXPECT_EQ(eight.cluster, 16);
  // The received sums: m x the block's rows in fp32 (int8 on shared tiles: 32 rows; the plain kernel: 128).
  EXPECT_EQ(weight_only_smem_bytes(WeightFormat::int8, 1, 1, 3584, 4, 4) - weight_only_smem_bytes(WeightFormat::int8, 1, 1, 3584, 4),
            1 * 32 * 4);
  EXPECT_EQ(weight_only_smem_bytes(WeightFormat::int4, 8, 1, 1024, 1, 2) - weight_only_smem_bytes(WeightFormat::int4, 8, 1, 1024, 1),
            8 * 128 * 4);
  EXPECT_NE(error_of([&] { plan(WeightFormat::int8, 1, 4096, 14336, SplitReduce::cluster, false); }).find("needs a Hopper GPU"),
            std::string::npos);
  EXPECT_EQ(plan(WeightFormat::int4, 1, 4096, 14336, SplitReduce::cluster).cluster, 16);  // the plain kernel's 16 splits
  EXPECT_NE(error_of([&] { plan(WeightFormat::int4, 1, 1024, 14336, SplitReduce::cluster); }).find("at most 16 blocks"),
            std::string::npos);  // 8 row tiles: 56 splits
  EXPECT_NE(error_of([&] { plan(WeightFormat::int8, 32, 1024, 4096, SplitReduce::cluster); }).find("up to 16 tokens"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan_weight_only(WeightFormat::int4, 64, 4096, 4096, 132, WeightOnlyKernel::wgmma_tma, true,
                                            SplitReduce::cluster); })
                .find("applies to the mma weight-only kernel"),
            std::string::npos);
}

// automatic sums split-k in a cluster of 8 or 16 blocks on Hopper at 2-8 tokens, the fewest that give blocks of at most
// kAutoClusterColumns columns, where the row tiles x those blocks fit one an SM (1024 x 4096: 8 row tiles, 64 blocks),
// else by the plan's atomics; a named split keeps atomics unless the cluster is named. The model charges the cluster one
// hop after the loop instead of the counter's round trips, the atomics and the read-back.
TEST(WeightOnlyPlan, AutomaticSumsInAClusterWhereTheBlocksFitOneAnSm) {
  auto plan = [](WeightFormat f, int64_t m, int64_t n, int64_t k, bool hopper = true, int64_t split = 0) {
    return plan_weight_only(f, m, n, k, 132, WeightOnlyKernel::automatic, hopper, SplitReduce::automatic, split);
  };
  for (int64_t m : {2, 4, 8})  // int4 there: the ring kernel (weight_only_mma_tma_automatic)
    EXPECT_EQ(plan(WeightFormat::int4, m, 1024, 4096).kernel, WeightOnlyKernel::mma_tma);
  for (WeightFormat f : {WeightFormat::int8, WeightFormat::sparse24})
    for (int64_t m : {2, 4, 8}) {
      const WeightOnlyPlan p = plan(f, m, 1024, 4096);
      EXPECT_EQ(p.split_k, 8);
      EXPECT_EQ(p.cluster, 8);
      EXPECT_EQ(p.ctas, 64);
      EXPECT_LE(p.k_per_block, kAutoClusterColumns);
    }
  const WeightOnlyPlan off_hopper = plan(WeightFormat::int8, 8, 1024, 4096, false);
  EXPECT_EQ(off_hopper.split_k, 32);  // one wave of 256 blocks, by atomics
  EXPECT_EQ(off_hopper.cluster, 1);
  EXPECT_EQ(plan(WeightFormat::int8, 1, 1024, 4096).split_k, 1);        // shared tiles: nothing to sum
  EXPECT_EQ(plan(WeightFormat::int8, 16, 1024, 4096).cluster, 1);       // two n8 tiles: atomics (NOTES.md c2)
  EXPECT_EQ(plan(WeightFormat::int8, 8, 4096, 4096).cluster, 1);        // 32 row tiles x 8 = 256 blocks
  EXPECT_EQ(plan(WeightFormat::int8, 8, 2048, 2048).cluster, 8);        // 16 x 8 = 128 blocks of 256 columns
  const WeightOnlyPlan long_k = plan(WeightFormat::int8, 8, 1024, 8192);  // 8 splits: 1024 columns a block
  EXPECT_EQ(long_k.split_k, 16);
  EXPECT_EQ(long_k.cluster, 16);
  EXPECT_EQ(plan(WeightFormat::int8, 8, 2048, 8192).cluster, 1);        // 16 splits: 256 blocks
  EXPECT_EQ(plan(WeightFormat::int8, 8, 1024, 4096, true, 8).cluster, 1);  // a named split: atomics
  EXPECT_EQ(plan_weight_only(WeightFormat::int8, 8, 1024, 4096, 132, WeightOnlyKernel::automatic, true,
                             SplitReduce::atomics)
                .split_k,
            32);

  const Hardware hw = load_hardware("h100-sxm-80gb");
  auto predicted = [&](SplitReduce r) {
    Op op = linear_cost(LinearShape{8, 1024, 4096}, WeightFormat::int8);
    op.kernels = linear_kernels(8, 1024, 4096, WeightFormat::int8, hw, WeightOnlyKernel::mma, 8, r);
    return predict(op, hw);
  };
  const Prediction atomics = predicted(SplitReduce::atomics), cluster = predicted(SplitReduce::cluster);
  EXPECT_GT(atomics.atomics_s, 0);
  EXPECT_GT(atomics.tail_s, 0);
  EXPECT_EQ(cluster.atomics_s, 0);
  EXPECT_EQ(cluster.tail_s, 0);
  EXPECT_LT(cluster.time_s, atomics.time_s);
}

// At one token automatic takes the mma_tma kernel where it can run with at least 64 tiles (sim/kernels.h
// weight_only_mma_tma_automatic): one block an SM over whole 16-row tiles; a named split, a named reduce, a shape off
// its stages, two tokens, 2:4, too few tiles or no Hopper keep the mma kernel; named where it cannot run, it refuses
// with the reason.
TEST(WeightOnlyPlan, OneTokenTakesTheRingKernelWhereItRuns) {
  auto pick = [](WeightFormat f, int64_t m, int64_t n, int64_t k, bool hopper = true, int64_t split = 0,
                 SplitReduce r = SplitReduce::automatic) {
    return plan_weight_only(f, m, n, k, 132, WeightOnlyKernel::automatic, hopper, r, split).kernel;
  };
  for (WeightFormat f : {WeightFormat::int4, WeightFormat::int8}) {
    EXPECT_EQ(pick(f, 1, 14336, 4096), WeightOnlyKernel::mma_tma);
    EXPECT_EQ(pick(f, 1, 4096, 14336), WeightOnlyKernel::mma_tma);
    EXPECT_EQ(pick(f, 1, 1024, 4096), WeightOnlyKernel::mma_tma);  // 64 tiles: the fewest measured
    EXPECT_EQ(pick(f, 1, 1008, 4096), WeightOnlyKernel::mma);      // 63
    EXPECT_EQ(pick(f, 2, 14336, 4096), f == WeightFormat::int4 ? WeightOnlyKernel::mma_tma : WeightOnlyKernel::mma);
    EXPECT_EQ(pick(f, 1, 14336, 4096, false), WeightOnlyKernel::mma);
    EXPECT_EQ(pick(f, 1, 14336, 4096, true, 4), WeightOnlyKernel::mma);
    EXPECT_EQ(pick(f, 1, 14336, 4096, true, 0, SplitReduce::atomics), WeightOnlyKernel::mma);
    EXPECT_EQ(pick(f, 1, 4096, 11008), WeightOnlyKernel::mma);  // k off the stages (int4 2048, int8 1024 columns)
    EXPECT_EQ(pick(f, 1, 4096, 32768), WeightOnlyKernel::mma);  // X's row beyond its shared memory
  }
  EXPECT_EQ(pick(WeightFormat::int4, 1, 4096, 5120), WeightOnlyKernel::mma);
  EXPECT_EQ(pick(WeightFormat::int8, 1, 4096, 5120), WeightOnlyKernel::mma_tma);
  EXPECT_EQ(pick(WeightFormat::sparse24, 1, 14336, 4096), WeightOnlyKernel::mma);
  // The plan: whole tiles in equal contiguous shares over one block an SM, no split.
  const WeightOnlyPlan p = plan_weight_only(WeightFormat::int4, 1, 14336, 4096, 132);
  EXPECT_EQ(p.row_tiles, 896);
  EXPECT_EQ(p.ctas, 132);
  EXPECT_EQ(p.blocks_per_sm, 1);
  EXPECT_EQ(p.split_k, 1);
  EXPECT_EQ(p.units, 896 * 2);  // stages of 2048 columns
  EXPECT_EQ(plan_weight_only(WeightFormat::int8, 1, 1024, 4096, 132).ctas, 64);
  // Its shared memory fits a Hopper block at the largest k it takes.
  EXPECT_LE(weight_only_mma_tma_smem_bytes(WeightFormat::int4, kMmaTmaMaxK, 1), 227 << 10);
  EXPECT_LE(weight_only_mma_tma_smem_bytes(WeightFormat::int8, kMmaTmaMaxK, 64), 227 << 10);
  auto refusal = [](WeightFormat f, int64_t m, int64_t n, int64_t k, bool hopper = true) {
    return error_of([&] { plan_weight_only(f, m, n, k, 132, WeightOnlyKernel::mma_tma, hopper); });
  };
  EXPECT_NE(refusal(WeightFormat::int4, 17, 4096, 4096).find("1 to 16 tokens"), std::string::npos);
  EXPECT_NE(refusal(WeightFormat::int4, 0, 4096, 4096).find("1 to 16 tokens"), std::string::npos);
  EXPECT_NE(refusal(WeightFormat::int8, 2, 4096, 4096).find("int8 at one token"), std::string::npos);
  // 2 to 16 tokens (int4): X's fragments in registers, groups x n8 tiles at most 2 a block, k split over a cluster of
  // 1, 2, 4 or 8 blocks beyond, then 3, 5, 6 or 7.
  EXPECT_EQ(refusal(WeightFormat::int4, 2, 4096, 8192), "");
  EXPECT_EQ(refusal(WeightFormat::int4, 16, 14336, 4096), "");
  EXPECT_EQ(refusal(WeightFormat::int4, 16, 4096, 16384), "");
  EXPECT_EQ(refusal(WeightFormat::int4, 8, 4096, 6144), "");    // a cluster of 3
  EXPECT_EQ(refusal(WeightFormat::int4, 16, 4096, 14336), "");  // a cluster of 7
  EXPECT_EQ(weight_only_mma_tma_split(8, 4096), 1);
  EXPECT_EQ(weight_only_mma_tma_split(8, 8192), 2);
  EXPECT_EQ(weight_only_mma_tma_split(16, 4096), 2);
  EXPECT_EQ(weight_only_mma_tma_split(16, 16384), 8);
  // ... then 3, 5, 6, 7 where no power of two divides the stages (k = 14336: 7 stages a tile)
  EXPECT_EQ(weight_only_mma_tma_split(16, 14336), 7);
  EXPECT_EQ(weight_only_mma_tma_split(4, 14336), 7);
  EXPECT_EQ(weight_only_mma_tma_split(16, 6144), 3);
  EXPECT_EQ(weight_only_mma_tma_split(4, 12288), 3);
  EXPECT_EQ(weight_only_mma_tma_split(16, 12288), 6);
  EXPECT_EQ(weight_only_mma_tma_split(16, 10240), 5);
  // 9-16 tokens at k = 4096 where a block takes at least 4 tiles: the wide kernel, unsplit (14336 x 4096: 6.8 a
  // block); fewer (4096 x 4096: 1.9), a cluster of 2.
  const WeightOnlyPlan t16 = plan_weight_only(WeightFormat::int4, 16, 14336, 4096, 132, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(t16.m_tiles, 2);
  EXPECT_EQ(t16.cluster, 1);
  EXPECT_EQ(t16.ctas, 132);
  EXPECT_EQ(t16.k_per_block, 4096);
  EXPECT_TRUE(weight_only_mma_tma_wide(16, 4096, t16.cluster));
  EXPECT_EQ(weight_only_mma_tma_plan_split(9, 14336, 4096, 132), 1);
  EXPECT_EQ(weight_only_mma_tma_plan_split(16, 16 * 528, 4096, 132), 1);
  EXPECT_EQ(weight_only_mma_tma_plan_split(16, 16 * 527, 4096, 132), 2);
  EXPECT_EQ(weight_only_mma_tma_plan_split(16, 4096, 4096, 132), 2);
  EXPECT_EQ(weight_only_mma_tma_plan_split(16, 14336, 4096, 114), 1);  // an H100 PCIe's 114 SMs: 7.9 tiles a block
  EXPECT_EQ(weight_only_mma_tma_plan_split(8, 14336, 4096, 132), 1);   // one n8 tile: two stages a warp as before
  EXPECT_FALSE(weight_only_mma_tma_wide(8, 4096, 1));
  EXPECT_FALSE(weight_only_mma_tma_wide(17, 4096, 1));  // the ring kernel serves 16 tokens at most
  EXPECT_EQ(weight_only_mma_tma_plan_split(16, 16 * 4000, 8192, 132), 4);  // k = 8192: not the wide kernel's
  // k = 14336 at 9-16 tokens: the narrow kernel (stages of 14 groups, two a block a tile) over clusters of 4 where
  // every cluster takes a tile (30 on 132 SMs), else clusters of 7; at 2-8 tokens clusters of 7
  EXPECT_EQ(weight_only_mma_tma_plan_split(16, 4096, 14336, 132), 4);
  EXPECT_EQ(weight_only_mma_tma_plan_split(9, 16 * 30, 14336, 132), 4);
  EXPECT_EQ(weight_only_mma_tma_plan_split(9, 16 * 29, 14336, 132), 7);
  EXPECT_EQ(weight_only_mma_tma_plan_split(8, 4096, 14336, 132), 7);
  EXPECT_TRUE(weight_only_mma_tma_narrow(16, 14336, 4));
  EXPECT_FALSE(weight_only_mma_tma_narrow(8, 14336, 4));
  EXPECT_FALSE(weight_only_mma_tma_narrow(16, 14336, 7));
  EXPECT_FALSE(weight_only_mma_tma_narrow(16, 4096, 1));
  EXPECT_FALSE(weight_only_mma_tma_narrow(16, 7168, 2));  // 4 narrow stages, but not whole 2048-column ones: not measured
  const WeightOnlyPlan auto11 = plan_weight_only(WeightFormat::int4, 11, 16 * 300, 14336, 132);
  EXPECT_EQ(auto11.kernel, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(auto11.cluster, 4);
  const WeightOnlyPlan down = plan_weight_only(WeightFormat::int4, 16, 4096, 14336, 132, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(down.cluster, 4);
  EXPECT_EQ(down.ctas, 120);
  EXPECT_EQ(down.k_warps, kMmaTmaNarrowWarps);
  EXPECT_EQ(down.units, 256 * 8);  // stages of 1792 columns
  EXPECT_EQ(down.stages, 4);        // two stages a tile: a pair of tiles fills the ring (NOTES.md r21)
  EXPECT_EQ(t16.k_warps, kMmaTmaConsumerWarps);
  EXPECT_EQ(t16.stages, 3);  // the wide kernel keeps the int4 ring's 3
  // its shared memory: the ring of four 14 KB stages and 1 KB of scales, the 14 warps' sums and group sums, 9 tiles' sums
  // of the cluster's split, X's second group, the mbarriers
  EXPECT_EQ(weight_only_mma_tma_smem_bytes(WeightFormat::int4, 14336, 9, 16, 4),
            4 * (14336 + 1024) + 14 * (2 * 16 * 16 + 4 * 16) * 4 + 9 * 16 * 16 * 4 + 14 * 16 * 128 * 2 + 8 * 8);
  const WeightOnlyPlan t16s = plan_weight_only(WeightFormat::int4, 16, 4096, 4096, 132, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(t16s.cluster, 2);
  EXPECT_EQ(t16s.k_per_block, 2048);
  // ... the split kernel by name (LinearParams::split_k at 2 to 16 tokens), and the wide one on a short grid
  const WeightOnlyPlan named2 =
      plan_weight_only(WeightFormat::int4, 16, 14336, 4096, 132, WeightOnlyKernel::mma_tma, true, SplitReduce::automatic,
                       2);
  EXPECT_EQ(named2.cluster, 2);
  EXPECT_EQ(named2.ctas, 132);
  const WeightOnlyPlan named1 =
      plan_weight_only(WeightFormat::int4, 12, 1024, 4096, 132, WeightOnlyKernel::mma_tma, true, SplitReduce::automatic,
                       1);
  EXPECT_EQ(named1.cluster, 1);
  EXPECT_EQ(named1.ctas, 64);
  for (int64_t bad : {3, 16, -1})
    EXPECT_NE(error_of([&] {
                plan_weight_only(WeightFormat::int4, 16, 4096, 4096, 132, WeightOnlyKernel::mma_tma, true,
                                 SplitReduce::automatic, bad);
              }).find("split_k " + std::to_string(bad) + " is not one"),
              std::string::npos)
        << bad;
  // four groups a warp at 8 tokens (k = 8192 unsplit), or two groups of two n8 tiles at k = 8192 split over 1: no
  for (int64_t m : {8, 16})
    EXPECT_NE(error_of([&] {
                plan_weight_only(WeightFormat::int4, m, 4096, 8192, 132, WeightOnlyKernel::mma_tma, true,
                                 SplitReduce::automatic, 1);
              }).find("is not one"),
              std::string::npos)
        << m;
  const WeightOnlyPlan t8 = plan_weight_only(WeightFormat::int4, 8, 14336, 4096, 132, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(t8.m_tiles, 1);
  EXPECT_EQ(t8.cluster, 1);
  EXPECT_LE(weight_only_mma_tma_smem_bytes(WeightFormat::int4, 4096, 14, 16, 2), 227 << 10);
  // the wide kernel's second group of X: 16 warps x 16 tokens x 128 columns of bf16 beside the ring, which is one stage
  // (16 warps x two chunks, the scales' 1 KB) and its two mbarriers shorter than the 8-token kernel's ring of 4
  EXPECT_EQ(weight_only_mma_tma_smem_bytes(WeightFormat::int4, 4096, 7, 16, 1) -
                weight_only_mma_tma_smem_bytes(WeightFormat::int4, 4096, 7, 8, 1),
            16 * 16 * 128 * 2 - (16 * 2 * 512 + 1024) - 2 * 8);
  EXPECT_NE(error_of([&] {
              plan_weight_only(WeightFormat::int4, 16, 16 * 20000, 4096, 132, WeightOnlyKernel::mma_tma, true,
                               SplitReduce::automatic, 2);
            }).find("do not fit"),
            std::string::npos);
  EXPECT_NE(refusal(WeightFormat::int4, 1, 4096, 4096, false).find("Hopper"), std::string::npos);
  EXPECT_NE(refusal(WeightFormat::int4, 1, 4104, 4096).find("multiple of 16"), std::string::npos);
  EXPECT_NE(refusal(WeightFormat::int4, 1, 4096, 5120).find("multiple of it"), std::string::npos);
  EXPECT_NE(refusal(WeightFormat::int8, 1, 4096, 32768).find("at most 16384"), std::string::npos);
  EXPECT_NE(refusal(WeightFormat::sparse24, 1, 4096, 4096).find("int8 and int4"), std::string::npos);
  EXPECT_NE(error_of([&] {
              plan_weight_only(WeightFormat::int4, 1, 4096, 4096, 132, WeightOnlyKernel::mma_tma, true, SplitReduce::automatic, 4);
            }).find("split_k"),
            std::string::npos);
  // The model charges its one wave of blocks, the stream beside the fill.
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  const std::vector<KernelLaunch> kl = linear_kernels(1, 14336, 4096, WeightFormat::int4, hw);
  ASSERT_EQ(kl.size(), 1u);
  EXPECT_EQ(kl[0].kernel, "weight_only_mma_tma_kernel");
  EXPECT_EQ(kl[0].ctas, 132);
  EXPECT_EQ(kl[0].atomics, 0);
}

// automatic picks the weight-only kernel by format and tokens where the measurements put each ahead
// (sim/kernels.h wgmma_from_tokens): int4 on mma_tma to 16 tokens where it runs, on wgmma_tma from 9 where it does not
// and from 17, int8 and 2:4 on wgmma_tma from 17, and mma wherever
// the Hopper kernels are not built or the GPU lacks them; the wgmma rung only when named.
TEST(WeightOnlyPlan, AutomaticChoosesTheKernelMeasuredAhead) {
  auto pick = [](WeightFormat f, int64_t m, bool wgmma = true) {
    return plan_weight_only(f, m, 14336, 4096, 132, WeightOnlyKernel::automatic, wgmma).kernel;
  };
  EXPECT_EQ(pick(WeightFormat::int4, 8), WeightOnlyKernel::mma_tma);  // where the ring kernel runs (k / 2048 splits)
  EXPECT_EQ(pick(WeightFormat::int4, 9), WeightOnlyKernel::mma_tma);
  EXPECT_EQ(pick(WeightFormat::int4, 16), WeightOnlyKernel::mma_tma);
  EXPECT_EQ(pick(WeightFormat::int4, 17), WeightOnlyKernel::wgmma_tma);
  // ... and where a cluster's sums fit beside the ring: Llama-3-70B's 28672 x 8192 at 16 tokens (30 clusters of 4, 60
  // tiles each, 60 KB of sums) fits beside the 3-stage ring (not beside the 8 stages before); automatic takes
  // wgmma_tma there (clusters of 4). A 131072 x 8192 head (274 tiles a cluster) does not fit: the kernel refuses it.
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 16, 28672, 8192, 132).kernel, WeightOnlyKernel::wgmma_tma);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 16, 28672, 8192, 132, WeightOnlyKernel::mma_tma).ctas, 120);
  EXPECT_THROW(plan_weight_only(WeightFormat::int4, 16, 131072, 8192, 132, WeightOnlyKernel::mma_tma), Error);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 8, 28672, 8192, 132).kernel, WeightOnlyKernel::mma_tma);
  // ... and in clusters of at most 2 (4 and 8 leave SMs out): k = 8192 at 16 tokens splits 4 ways, k = 16384 at 8
  // tokens 4 ways; both run when named.
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 16, 4096, 8192, 132).kernel, WeightOnlyKernel::wgmma_tma);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 8, 4096, 16384, 132).kernel, WeightOnlyKernel::mma);
  const WeightOnlyPlan four = plan_weight_only(WeightFormat::int4, 16, 4096, 8192, 132, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(four.cluster, 4);
  EXPECT_EQ(four.ctas, 120);  // 30 clusters of 4 fit at once (the probe), not 33
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 12, 4096, 16384, 132, WeightOnlyKernel::mma_tma).ctas, 120);  // 15 x 8
  EXPECT_EQ(weight_only_mma_tma_clusters(2, 132), 66);
  EXPECT_EQ(weight_only_mma_tma_clusters(7, 132), 15);  // 105 SMs
  EXPECT_EQ(weight_only_mma_tma_clusters(3, 132), 39);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 8, 4096, 14336, 132, WeightOnlyKernel::mma_tma).ctas, 105);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 8, 4096, 14336, 132).kernel, WeightOnlyKernel::mma);
  // ... and the down projection (k = 14336) at 9-16 tokens: the narrow kernel over clusters of 4 (NOTES.md r15), or
  // clusters of 7 where the tiles are fewer than its clusters (NOTES.md r10)
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 9, 4096, 14336, 132).kernel, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 16, 4096, 14336, 132).cluster, 4);
  const WeightOnlyPlan short7 = plan_weight_only(WeightFormat::int4, 16, 16 * 64, 14336, 132);
  EXPECT_EQ(short7.kernel, WeightOnlyKernel::mma_tma);
  EXPECT_EQ(short7.cluster, 4);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 16, 16 * 20, 14336, 132, WeightOnlyKernel::mma_tma).cluster, 7);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 16, 4096, 6144, 132).kernel, WeightOnlyKernel::wgmma_tma);  // 3: not measured
  EXPECT_EQ(pick(WeightFormat::int8, 16), WeightOnlyKernel::mma);
  EXPECT_EQ(pick(WeightFormat::int8, 17), WeightOnlyKernel::wgmma_tma);
  EXPECT_EQ(pick(WeightFormat::int8, 64), WeightOnlyKernel::wgmma_tma);
  EXPECT_EQ(pick(WeightFormat::sparse24, 16), WeightOnlyKernel::mma);
  EXPECT_EQ(pick(WeightFormat::sparse24, 17), WeightOnlyKernel::wgmma_tma);
  EXPECT_EQ(pick(WeightFormat::sparse24, 64, false), WeightOnlyKernel::mma);
  EXPECT_EQ(pick(WeightFormat::int4, 64, false), WeightOnlyKernel::mma);
  // The TMA rung's plan: two blocks an SM up to 32 tokens (the registers allow it), one at 64.
  const WeightOnlyPlan p16 = plan_weight_only(WeightFormat::int4, 16, 14336, 4096, 132, WeightOnlyKernel::wgmma_tma);
  EXPECT_EQ(p16.tokens, 16);
  EXPECT_EQ(p16.blocks_per_sm, 2);
  EXPECT_EQ(p16.ctas, 264);
  EXPECT_EQ(p16.stages, weight_only_tma_stages(WeightFormat::int4, 16));
  // 2:4's stage: X, 16 KB of kept values and 2 KB of metadata; 6 fit one block at 64 tokens.
  EXPECT_EQ(weight_only_stage_bytes(WeightFormat::sparse24, 64), 64 * 256 + 16384 + 2048);
  EXPECT_EQ(plan_weight_only(WeightFormat::sparse24, 64, 14336, 4096, 132, WeightOnlyKernel::wgmma_tma).stages, 6);
  EXPECT_EQ(plan_weight_only(WeightFormat::int8, 64, 14336, 4096, 132, WeightOnlyKernel::wgmma_tma).blocks_per_sm, 1);
  // Few units (1024 x 4096: 8 tiles x 32 groups): a block takes at least weight_only_tma_min_units of them.
  const WeightOnlyPlan few = plan_weight_only(WeightFormat::int4, 32, 1024, 4096, 132, WeightOnlyKernel::wgmma_tma);
  EXPECT_EQ(few.units, 256);
  EXPECT_EQ(few.ctas, 256 / weight_only_tma_min_units);
  EXPECT_EQ(plan_weight_only(WeightFormat::int4, 32, 16, 128, 132, WeightOnlyKernel::wgmma_tma).ctas, 1);
  // The wgmma rung dequantizes (int8, int4); 2:4 has only the TMA rung's port; dense formats neither.
  EXPECT_NE(error_of([] { plan_weight_only(WeightFormat::sparse24, 16, 4096, 4096, 132, WeightOnlyKernel::wgmma); })
                .find("wgmma_tma"),
            std::string::npos);
  EXPECT_THROW(plan_weight_only(WeightFormat::bf16, 16, 4096, 4096, 132, WeightOnlyKernel::wgmma_tma), Error);
}

// The weight-only kernels as the refined model times them (sim/src/kernels.cpp): one launch, the H100's measured
// ceilings.
Prediction weight_only_prediction(const Hardware& hw, int64_t m, int64_t n, int64_t k, WeightFormat f,
                                  KernelLaunch* launch = nullptr, WeightOnlyKernel kernel = WeightOnlyKernel::automatic) {
  Op op = linear_cost({m, n, k}, f);
  op.kernels = linear_kernels(m, n, k, f, hw, kernel);
  EXPECT_EQ(op.kernels.size(), 1u);
  if (launch) *launch = op.kernels.at(0);
  return predict(op, hw);
}

// A library launch (cuBLAS bf16, cuBLASLt fp8) costs at least the library's measured floor, each format its own; the
// project's kernels keep the eager floor.
TEST(Linear, TheLibrarysFloorIsChargedOnItsLaunchesOnly) {
  Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  const double eager = hw.pipes.launch_floor_eager_s;
  const Prediction bf16 = weight_only_prediction(hw, 1, 14336, 4096, WeightFormat::bf16);
  const Prediction fp8 = weight_only_prediction(hw, 1, 14336, 4096, WeightFormat::fp8);
  const Prediction int4 = weight_only_prediction(hw, 1, 14336, 4096, WeightFormat::int4);
  Hardware slow = hw;
  slow.pipes.launch_floor_library_s = eager + 3e-6;
  slow.pipes.launch_floor_library_fp8_s = eager + 1e-6;
  EXPECT_NEAR(weight_only_prediction(slow, 1, 14336, 4096, WeightFormat::bf16).time_s, bf16.time_s + 3e-6, 1e-12);
  EXPECT_NEAR(weight_only_prediction(slow, 1, 14336, 4096, WeightFormat::fp8).time_s, fp8.time_s + 1e-6, 1e-12);
  EXPECT_DOUBLE_EQ(weight_only_prediction(slow, 1, 14336, 4096, WeightFormat::int4).time_s, int4.time_s);
  // Inside a CUDA graph a library launch costs the graph's floor, as every node does: the library floor is eager's.
  Op graph_op = linear_cost({1, 14336, 4096}, WeightFormat::bf16);
  graph_op.kernels = linear_kernels(1, 14336, 4096, WeightFormat::bf16, hw, WeightOnlyKernel::automatic);
  for (auto& k : graph_op.kernels) k.launch = LaunchMode::graph;
  ASSERT_EQ(graph_op.kernels.at(0).tensor, TensorPath::library);
  EXPECT_DOUBLE_EQ(predict(graph_op, slow).time_s, predict(graph_op, hw).time_s);
  EXPECT_LT(predict(graph_op, hw).time_s, bf16.time_s);  // the graph's floor is below the eager one
  Hardware fast = hw;  // a library floor below the eager one is not charged: a launch costs that at least
  fast.pipes.launch_floor_library_s = fast.pipes.launch_floor_library_fp8_s = 0.5 * eager;
  EXPECT_DOUBLE_EQ(weight_only_prediction(fast, 1, 14336, 4096, WeightFormat::bf16).time_s, bf16.time_s);
}

// wgmma_tma: a block's copies arrive at one copying thread's bulk-copy rate (PipeCeilings::bulk_copy_*: the
// probe's 44.4 GB/s from HBM, 31.3 from L2), whatever its producer count (int8 at 64 tokens: two since 20d9ab0). On
// 1024 x 4096 at 64 tokens an int8 block copies 4 units of 32 KB (16 KB of weight, 16 KB of X): 3.6 us, twice its consumers' chain, so it
// sets the block's path and the launch's time; on the MLP shape (132 blocks of 28 units) DRAM binds and the copy
// rate does not count.
TEST(WeightOnlyModel, OneThreadsBulkCopiesBoundASmallGridNotTheFullOne) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  const PipeCeilings& p = hw.pipes;
  EXPECT_NEAR(p.bulk_copy_dram_bandwidth, 44.4e9, 1e6);
  EXPECT_NEAR(p.bulk_copy_l2_bandwidth, 31.3e9, 1e6);
  Hardware faster = hw;  // twice the copy engine
  faster.pipes.bulk_copy_dram_bandwidth *= 2;
  faster.pipes.bulk_copy_l2_bandwidth *= 2;

  KernelLaunch small;
  const Prediction ps = weight_only_prediction(hw, 64, 1024, 4096, WeightFormat::int8, &small);
  const WeightOnlyPlan plan = plan_weight_only(WeightFormat::int8, 64, 1024, 4096, hw.sm_count);
  ASSERT_EQ(plan.kernel, WeightOnlyKernel::wgmma_tma);
  ASSERT_EQ(plan.units / plan.ctas, 4);
  ASSERT_EQ(weight_only_tma_producers(WeightFormat::int8, 64), 2);  // whatever the count: one copy rate a block
  const double copies_s = 4 * (16384 / p.bulk_copy_dram_bandwidth + 16384 / p.bulk_copy_l2_bandwidth);
  EXPECT_NEAR(copies_s, 3.57e-6, 0.01e-6);
  EXPECT_GT(small.cta_cycles / p.sm_clock_hz, copies_s);                // the copies, then the last unit's chain
  EXPECT_LT(small.cta_cycles / p.sm_clock_hz, copies_s + 0.5e-6);
  EXPECT_EQ(ps.dominant, "latency");
  EXPECT_LT(weight_only_prediction(faster, 64, 1024, 4096, WeightFormat::int8).time_s, ps.time_s - 1e-6);

  const Prediction pf = weight_only_prediction(hw, 64, 14336, 4096, WeightFormat::int8);
  EXPECT_EQ(pf.dominant, "memory");
  EXPECT_GT(pf.memory_s, pf.latency_s);
  EXPECT_DOUBLE_EQ(weight_only_prediction(faster, 64, 14336, 4096, WeightFormat::int8).time_s, pf.time_s);
  // int4 at 64 tokens has 4 producers a block, but a block's copies arrive at one copying thread's rate whatever
  // its producers (until 2026-11-28 the model credited them 4x: its int4 points at m = 64 were 12-25% fast,
  // 1024 x 4096 25%; NOTES.md r6): its 4 units of 8.5 KB of weight and scales and 16 KB of X land after 2.9 us.
  ASSERT_EQ(weight_only_tma_producers(WeightFormat::int4, 64), 4);
  KernelLaunch int4;
  weight_only_prediction(hw, 64, 1024, 4096, WeightFormat::int4, &int4);
  KernelLaunch int4_faster;
  weight_only_prediction(faster, 64, 1024, 4096, WeightFormat::int4, &int4_faster);
  const double int4_copies_s = 4 * ((8192 + 512) / p.bulk_copy_dram_bandwidth + 16384 / p.bulk_copy_l2_bandwidth);
  EXPECT_GT(int4.cta_cycles / p.sm_clock_hz, int4_copies_s);
  EXPECT_LT(int4_faster.cta_cycles, int4.cta_cycles - 0.5e-6 * p.sm_clock_hz);
}

// cuBLAS splits k where its output tiles (64 weight rows x 16 tokens) are at most half the SMs, then reduces in a
// second kernel (ncu, NOTES.md r5): the model adds that launch at the graph floor. Without it cuBLAS bf16 on
// 1024 x 4096 was predicted 14-20% fast (9.7-10.6 us measured, 8.3-8.5 predicted).
TEST(LinearModel, CublasSplitsKOnFewOutputTilesAndReducesInASecondLaunch) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  EXPECT_TRUE(library_splits_k(1, 1024, 132));
  EXPECT_TRUE(library_splits_k(64, 1024, 132));
  EXPECT_TRUE(library_splits_k(16, 4096, 132));
  EXPECT_FALSE(library_splits_k(32, 4096, 132));  // 4096 x 4096: 16.4 us at 32-64 tokens, 17.3-17.5 to 16
  EXPECT_FALSE(library_splits_k(1, 14336, 132));
  const std::vector<KernelLaunch> small = linear_kernels(64, 1024, 4096, WeightFormat::bf16, hw);
  ASSERT_EQ(small.size(), 2u);
  EXPECT_EQ(small[1].kernel, "cublas_splitk_reduce");
  EXPECT_EQ(small[1].launch, LaunchMode::graph);
  EXPECT_EQ(linear_kernels(64, 14336, 4096, WeightFormat::bf16, hw).size(), 1u);
  EXPECT_EQ(linear_kernels(1, 1024, 4096, WeightFormat::fp8, hw).size(), 1u);  // cuBLASLt fp8: not looked at
  // The second launch costs about the graph floor: the 1024 x 4096 prediction moves by less than a microsecond and
  // a half and stays under the 10.6 us measured at 64 tokens.
  Op op = linear_cost({64, 1024, 4096}, WeightFormat::bf16);
  op.kernels = small;
  const double both = predict(op, hw).time_s;
  op.kernels.resize(1);
  const double gemm_only = predict(op, hw).time_s;
  EXPECT_GT(both - gemm_only, hw.pipes.launch_floor_graph_s);
  EXPECT_LT(both - gemm_only, 1.5e-6);
  EXPECT_LT(both, 10.6e-6);
}

// 2 to 16 tokens on the ring kernel: a tile ends at a block barrier the 16 warps leave together, so a tile's last
// stage's chain does not overlap the next tile's (NOTES.md r4). At 16 tokens on 14336 x 4096 split over a cluster of 2
// (named: the plan takes the wide kernel there) a block's tile is one stage: the chain drains every stage and the
// blocks' cycles bind; at 8 tokens (two stages a tile) the stream does. Without the drain the model put 16 tokens
// 14-22% fast.
TEST(WeightOnlyModel, TheRingKernelsTileBarrierDrainsAChainATile) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  KernelLaunch k16, k8;
  Op op16 = linear_cost({16, 14336, 4096}, WeightFormat::int4);
  op16.kernels = linear_kernels(16, 14336, 4096, WeightFormat::int4, hw, WeightOnlyKernel::mma_tma, 2);
  ASSERT_EQ(op16.kernels.size(), 1u);
  k16 = op16.kernels[0];
  const Prediction p16 = predict(op16, hw);
  const Prediction p8 = weight_only_prediction(hw, 8, 14336, 4096, WeightFormat::int4, &k8);
  ASSERT_EQ(k16.kernel, "weight_only_mma_tma_tokens_kernel");
  ASSERT_EQ(k8.kernel, "weight_only_mma_tma_tokens_kernel");
  EXPECT_EQ(p16.dominant, "latency");
  EXPECT_EQ(p8.dominant, "memory");
  // 14 stages a block at both: at 16 tokens a stage costs more than the 8-token stage's twice the products, by the
  // chain and the sums it drains every stage. Both blocks stage the same bytes of X before their loop (16 tokens x
  // 2048 columns, 8 x 4096: 64 KB, 132 blocks at the L2's bandwidth, NOTES.md r16), left out of the comparison.
  const double x_cycles = 132.0 * 64.0 * 1024.0 / hw.pipes.l2_bandwidth * hw.pipes.sm_clock_hz;
  EXPECT_GT(k16.cta_cycles - x_cycles, 2.0 * (k8.cta_cycles - x_cycles));
  EXPECT_GT(p16.time_s, p8.time_s + 2e-6);
}

// X's groups staged before the ring kernel's loop at 2 to 16 tokens stand on a block's path: every block asks L2 for
// them at the start (the grid's bytes at the L2's bandwidth). Knocked out on the H200 (NOTES.md r16) the wide and
// narrow kernels' first group cost 1.1-1.3 us at 16 tokens and their deferred second group nothing. So a block's
// cycles move with the L2's bandwidth by the first group's bytes on those two (132 blocks x 16 tokens x 2048 columns;
// 120 x 16 x 1792) and by every group a block holds on the others (4096 x 4096 at 8 tokens, unsplit: 132 x 8 x 4096).
TEST(WeightOnlyModel, XStagedBeforeTheRingsLoopIsOnABlocksPath) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  Hardware slower = hw;
  slower.pipes.l2_bandwidth /= 2;
  const struct {
    int64_t m, n, k, ctas;
    double bytes;
  } cases[] = {{16, 14336, 4096, 132, 132.0 * 16 * 2048 * 2},
               {16, 4096, 14336, 120, 120.0 * 16 * 1792 * 2},
               {8, 4096, 4096, 132, 132.0 * 8 * 4096 * 2}};
  for (const auto& c : cases) {
    KernelLaunch a, b;
    weight_only_prediction(hw, c.m, c.n, c.k, WeightFormat::int4, &a, WeightOnlyKernel::mma_tma);
    weight_only_prediction(slower, c.m, c.n, c.k, WeightFormat::int4, &b, WeightOnlyKernel::mma_tma);
    ASSERT_EQ(a.kernel, "weight_only_mma_tma_tokens_kernel");
    EXPECT_EQ(a.ctas, c.ctas);
    EXPECT_NEAR((b.cta_cycles - a.cta_cycles) / hw.pipes.sm_clock_hz, c.bytes / hw.pipes.l2_bandwidth, 1e-9)
        << c.m << " tokens, " << c.n << " x " << c.k;
  }
}

// The ring kernel over a cluster of 7 (4096 x 14336, 7 stages a tile): each block copies 1/7 of its cluster's tiles,
// so a block's copies (18 tiles x 16 KB at one thread's bulk-copy rate) do not bind; charging it the cluster's whole
// bytes put 4 tokens at 56 us. Measured (H100, bench_gemm, named, NOTES.md r10): 17.9 / 18.2 us at 4 tokens, 18.2 /
// 18.0 at 8, 21.5 / 21.4 at 16. At 16 tokens the plan's is now the narrow kernel over clusters of 4 (a block copies a
// quarter of 9 tiles' bytes; NOTES.md r15).
TEST(WeightOnlyModel, ARingBlockCopiesItsShareOfItsClustersTiles) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  for (int64_t m : {4, 8, 16}) {
    KernelLaunch kl;
    const Prediction pr = weight_only_prediction(hw, m, 4096, 14336, WeightFormat::int4, &kl, WeightOnlyKernel::mma_tma);
    ASSERT_EQ(kl.kernel, "weight_only_mma_tma_tokens_kernel");
    EXPECT_EQ(plan_weight_only(WeightFormat::int4, m, 4096, 14336, 132, WeightOnlyKernel::mma_tma).cluster,
              m > 8 ? 4 : 7);
    EXPECT_LT(pr.time_s, 24e-6) << m << " tokens";
    EXPECT_GT(pr.time_s, 15e-6) << m << " tokens";
  }
}

// wgmma_tma's streams: the weight from DRAM once, X's [N x 128] tile again for every unit from L2, the two added;
// before them the tensor map and the first boxes (two round trips), after them the write-out (fence, counter,
// fence; int8's channel scales one more): memory = DRAM bytes / read bandwidth + L2 bytes / L2 bandwidth + round trips.
TEST(WeightOnlyModel, XTilesStreamFromL2BesideTheWeightFromDram) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  const PipeCeilings& p = hw.pipes;
  EXPECT_NEAR(p.l2_bandwidth, 6.86e12, 0.01e12);  // the measured file's l2_bandwidth_gb_s
  for (WeightFormat f : kWeightOnly) {
    KernelLaunch kl;
    const Prediction pr = weight_only_prediction(hw, 64, 14336, 4096, f, &kl);
    const Op op = linear_cost({64, 14336, 4096}, f);
    EXPECT_DOUBLE_EQ(kl.bytes, op.bytes()) << weight_format_name(f);  // X from DRAM once
    EXPECT_DOUBLE_EQ(kl.l2_bytes, 112.0 * 32 * 64 * 128 * 2) << weight_format_name(f);
    const double round_trips = 2 + 3 + (f == WeightFormat::int8 ? 1 : 0);
    EXPECT_DOUBLE_EQ(kl.wave_round_trips, round_trips) << weight_format_name(f);
    EXPECT_NEAR(pr.memory_s, op.bytes() / p.read_bandwidth + kl.l2_bytes / p.l2_bandwidth + round_trips * p.dram_latency_s,
                1e-12)
        << weight_format_name(f);
  }
  // A GPU without a measured L2 takes twice its memory bandwidth, labelled an estimate.
  const Hardware sheet = load_hardware("a100-sxm-80gb");
  EXPECT_DOUBLE_EQ(sheet.pipes.l2_bandwidth, 2 * sheet.memory_bandwidth);
  EXPECT_NE(sheet.pipes.sources.at("l2_bandwidth_gb_s").find("estimate"), std::string::npos);
}

// mma split-k: a grid of (row tiles x split_k) blocks doing the same work, started together: each wave fills,
// streams, fences and counts together, so the memory term holds every wave's three round trips (int8 at 32 tokens
// on the mma kernel, 4096 x 14336: 512 blocks, two an SM: two waves); the last block's read-back after the last.
TEST(WeightOnlyModel, EachWaveOfTheSplitKGridFillsAndWritesOutBesideTheStream) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  const PipeCeilings& p = hw.pipes;
  // fill, fence, counter; int8 (and int4) a dependent round trip more for their scales, 2:4 none. At 16 tokens the
  // 14336 x 4096 grid (4 blocks an SM: weight_only_mma_blocks_per_sm) and 4096 x 14336 run in one wave, int8 at 32
  // tokens on 4096 x 14336 in two (the mma kernel named: the plan runs wgmma_tma there).
  struct Case {
    WeightFormat f;
    int64_t m, n, k;
    double waves, trips;
  };
  for (const Case& c : {Case{WeightFormat::int8, 16, 14336, 4096, 1, 4}, Case{WeightFormat::int8, 16, 4096, 14336, 1, 4},
                        Case{WeightFormat::int8, 32, 4096, 14336, 2, 4}, Case{WeightFormat::sparse24, 16, 14336, 4096, 1, 3},
                        Case{WeightFormat::sparse24, 16, 4096, 14336, 1, 3}, Case{WeightFormat::int4, 2, 4096, 14336, 1, 4}}) {
    KernelLaunch kl;
    const Prediction pr = weight_only_prediction(hw, c.m, c.n, c.k, c.f, &kl, WeightOnlyKernel::mma);
    const WeightOnlyPlan plan = plan_weight_only(c.f, c.m, c.n, c.k, hw.sm_count, WeightOnlyKernel::mma);
    ASSERT_EQ(plan.kernel, WeightOnlyKernel::mma);
    ASSERT_GT(plan.split_k, 1);
    EXPECT_EQ(pr.waves, c.waves) << c.n << "x" << c.k << " m " << c.m;
    EXPECT_DOUBLE_EQ(kl.wave_round_trips, c.trips);
    EXPECT_DOUBLE_EQ(kl.cta_round_trips, 3);
    EXPECT_DOUBLE_EQ(kl.tail_l2_round_trips, double(c.m) * 128 / 256);  // the last block's read-back
    EXPECT_NEAR(pr.memory_s, kl.bytes / p.read_bandwidth + c.waves * c.trips * p.dram_latency_s, 1e-12)
        << c.n << "x" << c.k << " m " << c.m;
  }
}

// The Hopper kernels' shared tiles are summed by vector reductions (red.global.add.v4.f32): every block that holds a
// piece of a tile sends 128 x N / 4 operations, padded rows and tokens included, whatever m and n are; a tile one block
// holds whole sends none. Counted here from the plan's segments, independently of the model's loop.
TEST(WeightOnlyModel, SharedTilesAreSummedByVectorReductions) {
  const Hardware hw = load_hardware("h200-sxm", CeilingsMode::measured);
  struct Case {
    WeightFormat f;
    int64_t m, n, k;
  };
  int shared_cases = 0;
  for (const Case& c : {Case{WeightFormat::int4, 64, 14336, 4096}, Case{WeightFormat::int4, 64, 4096, 14336},
                        Case{WeightFormat::int8, 33, 4096, 4096}, Case{WeightFormat::sparse24, 17, 1000, 4096},
                        Case{WeightFormat::int4, 64, 1024, 4096}}) {
    for (WeightOnlyKernel kern : {WeightOnlyKernel::wgmma, WeightOnlyKernel::wgmma_tma}) {
      if (kern == WeightOnlyKernel::wgmma && c.f == WeightFormat::sparse24) continue;
      const WeightOnlyPlan plan = plan_weight_only(c.f, c.m, c.n, c.k, hw.sm_count, kern);
      ASSERT_EQ(plan.kernel, kern);
      double pieces = 0;  // pieces of shared tiles over the launch
      for (int64_t t = 0; t < plan.row_tiles; ++t) {
        const int64_t segs = weight_only_wgmma_segments(plan, t, c.k);
        ASSERT_GE(segs, 1);
        if (segs > 1) pieces += double(segs);
      }
      KernelLaunch kl;
      const Prediction pr = weight_only_prediction(hw, c.m, c.n, c.k, c.f, &kl, kern);
      const std::string what = weight_format_name(c.f) + " " + std::to_string(c.n) + "x" + std::to_string(c.k) +
                               " m " + std::to_string(c.m) + " " + weight_only_kernel_name(kern);
      // write_out: 8 warps a block, each lane one red.v4 per n8 tile of its N tokens.
      const double per_piece = 8.0 * 32.0 * double(plan.tokens / 8);
      EXPECT_DOUBLE_EQ(kl.vector_reductions, pieces * per_piece) << what;
      EXPECT_EQ(kl.atomics, 0) << what;  // no scalar atomics
      EXPECT_DOUBLE_EQ(kl.tail_l2_round_trips, pieces > 0 ? 1 : 0) << what;
      // Charged at the L2's vector rate, the H200's measured one.
      EXPECT_NEAR(pr.atomics_s, kl.vector_reductions / (hw.pipes.l2_red_vector_per_clk * hw.pipes.sm_clock_hz),
                  1e-15) << what;
      if (pieces > 0) ++shared_cases;
    }
  }
  EXPECT_GT(shared_cases, 4);  // the cases exercise shared tiles, not only whole ones
}

// One token on shared tiles (no split-k): the fill, and the scales' round trip for int4 only: int8 there requests its
// channel scales with its first chunks, and its loop (fp16) is its own, shorter than the plain kernel's bf16 loop.
TEST(WeightOnlyModel, Int8OnSharedTilesWaitsNoScalesRoundTrip) {
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::measured);
  for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24}) {
    const WeightOnlyPlan plan = plan_weight_only(f, 1, 14336, 4096, hw.sm_count, WeightOnlyKernel::mma);
    ASSERT_GT(plan.k_warps, 1);
    ASSERT_EQ(plan.split_k, 1);
    KernelLaunch kl;
    weight_only_prediction(hw, 1, 14336, 4096, f, &kl, WeightOnlyKernel::mma);
    EXPECT_DOUBLE_EQ(kl.cta_round_trips, 1) << weight_format_name(f);
    EXPECT_DOUBLE_EQ(kl.wave_round_trips, f == WeightFormat::int4 ? 2 : 1) << weight_format_name(f);
  }
  // The plain kernel (two tokens on 4096 x 14336: split-k) loads int8's scales after its loop.
  KernelLaunch plain;
  weight_only_prediction(hw, 2, 4096, 14336, WeightFormat::int8, &plain, WeightOnlyKernel::mma);
  EXPECT_DOUBLE_EQ(plain.wave_round_trips, 3 + 1);
  // The shared loop (fp16: a prmt and a subtraction a pair) issues fewer instructions for the same chunks than the plain
  // one (bf16: two lop3 and an FMA a pair since 9da17cd, five instructions before): 211 against 255 per 6 chunks.
  KernelLaunch shared_int8;
  weight_only_prediction(hw, 1, 4096, 4096, WeightFormat::int8, &shared_int8, WeightOnlyKernel::mma);
  EXPECT_LT(shared_int8.work.warp_instructions(), 0.9 * plain.work.warp_instructions() * 4096 / 14336);
}

}  // namespace
}  // namespace inferlab
