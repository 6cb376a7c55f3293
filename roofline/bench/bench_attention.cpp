// Google Benchmark over kernels/attention at the lab's anchor shape: bf16, head dim 128, 16 query
// heads, batch x seq = 16384 tokens; seq 512..16384 x {naive, flash} x {causal, not} x {MHA,
// GQA-8, MQA}. Each row's counters come from the sim/ cost of the shape (attention_cost), never
// from a formula here:
//   TFLOP/s, GB/s          the cost over the measured median
//   pct_peak, pct_bw       of the ceilings the model uses (measured ones when the GPU has a file)
//   predicted_ms, error    the roofline prediction and (predicted - measured) / measured
// Timing: CUDA events, warm-up, L2 flushed before every repeat, the median (roofline/timing.h).
//   inferlab_bench_attention [--benchmark_filter=flash/causal] [--benchmark_format=csv]
// Prefill (prefill.h, varlen over a KV cache) at the engine's shapes: Llama-2-7B / Llama-3-8B
// heads (32 query heads, 32 or 8 KV heads, head dim 128), causal, bf16, paged blocks of 16 and
// contiguous: 4 x 512 new after 1024 past; 1 x 2048 new; 16 x 128 new after 0, 273, ..., 4096 past.
// Charged with prefill_cost (sim's batch_attention_op of the same sequences: the op's roofline) and, on Hopper, as the
// engine's step charges it (engine_model_ms, engine_error_pct: the wgmma rung's model over each sequence's tiles);
// kernel_ms (CUPTI, the kernel alone) beside the event time. Also the trained models' attention (head dim 64, 8 heads)
// and dense twins of the uniform mixes on the automatic rung and on the wgmma rung (what the varlen mode costs).
// The dense rows are charged by their rung's model where sim/ has one (naive; the overlapped and wgmma kernels on
// Hopper), the op's roofline otherwise.
//   inferlab_bench_attention --benchmark_filter=prefill
#include <benchmark/benchmark.h>

#include <string>

#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/measure_attention.h"
#include "inferlab/roofline/measure_prefill.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace {

struct Bench {
  AttentionVariant variant;
  bool causal;
  int64_t kv_heads;
  int64_t seq;
  FlashOptions flash{};
};

void run_shape(benchmark::State& state, const AttentionShape& cs, AttentionVariant variant, FlashOptions flash = {}) {
  Hardware hw;
  try {
    hw = hardware_of_this_gpu();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  AttentionParams shape = params_for(cs, DType::bf16);
  shape.flash = flash;
  Op cost = attention_cost(cost_shape(shape), variant, shape.dtype, shape.dtype);
  // The rung's own model where sim/ has one (the naive path; on Hopper the overlapped and wgmma flash kernels), as
  // the experiments charge it; the mma.sync rung and other GPUs: the op's roofline.
  const bool hopper = hw.architecture.find("Hopper") != std::string::npos;
  if (variant == AttentionVariant::naive) {
    cost.kernels = attention_prefill_kernels(cost_shape(shape), variant, shape.dtype, hw);
  } else if (hopper && flash.kernel != FlashKernel::mma) {
    cost.kernels = attention_prefill_kernels(cost_shape(shape), variant, shape.dtype, hw,
                                             flash.kernel == FlashKernel::wgmma ? FlashRung::wgmma : FlashRung::overlapped);
  }
  const Prediction pred = predict(cost, hw);
  AttentionMeasurement m;
  try {
    for (auto _ : state) {
      m = measure_attention(shape, variant, TimingOptions{}, false);
      state.SetIterationTime(m.timing.median_s);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double t = m.timing.median_s;
  state.counters["TFLOP/s"] = cost.flops / t / 1e12;
  state.counters["GB/s"] = cost.bytes() / t / 1e9;
  state.counters["pct_peak"] = 100.0 * cost.flops / t / pred.peak_flops;
  state.counters["pct_bw"] = 100.0 * cost.bytes() / t / pred.bandwidth;
  state.counters["predicted_ms"] = pred.total_s * 1e3;
  state.counters["error_pct"] = 100.0 * (pred.total_s - t) / t;
  state.counters["spread_pct"] = 100.0 * m.timing.spread();
  state.SetLabel(hw.ceilings_source);
}

void run(benchmark::State& state, const Bench& b) {
  AttentionShape cs;
  cs.heads = 16;
  cs.kv_heads = b.kv_heads;
  cs.head_dim = 128;
  cs.new_tokens = b.seq;
  cs.batch = 16384 / b.seq;
  cs.causal = b.causal;
  run_shape(state, cs, b.variant, b.flash);
}

void run_prefill(benchmark::State& state, const PrefillShape& s) {
  Hardware hw;
  try {
    hw = hardware_of_this_gpu();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const Op cost = prefill_shape_cost(s);
  const Prediction pred = predict(cost, hw);
  // The engine's charge for the same launch (its step model: the wgmma rung over each sequence's tiles) on Hopper.
  const bool hopper = hw.architecture.find("Hopper") != std::string::npos;
  const double engine_s = hopper && s.causal ? predict(prefill_shape_engine_cost(s, hw), hw).total_s : 0.0;
  PrefillMeasurement m;
  try {
    for (auto _ : state) {
      m = measure_prefill(s, TimingOptions{}, /*trace_kernels=*/true);
      state.SetIterationTime(m.timing.median_s);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double t = m.timing.median_s;
  state.counters["TFLOP/s"] = cost.flops / t / 1e12;
  state.counters["GB/s"] = cost.bytes() / t / 1e9;
  state.counters["pct_peak"] = 100.0 * cost.flops / t / pred.peak_flops;
  state.counters["predicted_ms"] = pred.total_s * 1e3;
  state.counters["error_pct"] = 100.0 * (pred.total_s - t) / t;
  state.counters["spread_pct"] = 100.0 * m.timing.spread();
  if (engine_s > 0) {
    state.counters["engine_model_ms"] = engine_s * 1e3;
    state.counters["engine_error_pct"] = 100.0 * (engine_s - t) / t;
  }
  state.counters["kernel_ms"] = m.kernel_s * 1e3;
  state.counters["kernel_TFLOP/s"] = m.kernel_s > 0 ? cost.flops / m.kernel_s / 1e12 : 0;
  state.SetLabel(hw.ceilings_source);
}

void register_prefill() {
  struct Mix {
    const char* name;
    std::vector<SequenceWork> sequences;
  };
  std::vector<SequenceWork> staggered;  // 16 x 128 new after 0 .. 4096 past
  for (int64_t i = 0; i < 16; ++i) staggered.push_back(SequenceWork{128, i * 4096 / 15, 1, 0});
  const Mix mixes[] = {{"4x512+1024", {SequenceWork{512, 1024, 4, 0}}},
                       {"1x2048", {SequenceWork{2048, 0, 1, 0}}},
                       {"16x128+0..4096", staggered}};
  for (int64_t kv : {32, 8})
    for (int64_t block : {16, 0})
      for (const Mix& mix : mixes) {
        PrefillShape s;
        s.heads = 32;
        s.kv_heads = kv;
        s.head_dim = 128;
        s.sequences = mix.sequences;
        s.layout = block ? KvLayout::paged : KvLayout::contiguous;
        s.block_size = block ? block : 16;
        const std::string name = std::string("attention/prefill_") + (block ? "paged16" : "contiguous") +
                                 (kv == 32 ? "/MHA/" : "/GQA-4/") + mix.name;
        benchmark::RegisterBenchmark(name.c_str(), [s](benchmark::State& st) { run_prefill(st, s); })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
  // The trained models' attention (data/models/trained: head dim 64, 8 query and 8 KV heads), paged: the shape the
  // engine's prefill runs on the lab's own models.
  for (const Mix& mix : mixes) {
    PrefillShape s;
    s.heads = 8;
    s.kv_heads = 8;
    s.head_dim = 64;
    s.sequences = mix.sequences;
    const std::string name = std::string("attention/prefill_paged16/d64-MHA-8/") + mix.name;
    benchmark::RegisterBenchmark(name.c_str(), [s](benchmark::State& st) { run_prefill(st, s); })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  // The dense flash kernel at the uniform mixes' shapes: what the varlen mode costs over it.
  for (int64_t kv : {32, 8})
    for (const Mix& mix : mixes) {
      if (mix.sequences.size() != 1) continue;
      AttentionShape cs;
      cs.batch = mix.sequences[0].count;
      cs.heads = 32;
      cs.kv_heads = kv;
      cs.head_dim = 128;
      cs.new_tokens = mix.sequences[0].new_tokens;
      cs.past_tokens = mix.sequences[0].past_tokens;
      cs.causal = true;
      const std::string name = std::string("attention/prefill_dense_twin") + (kv == 32 ? "/MHA/" : "/GQA-4/") + mix.name;
      benchmark::RegisterBenchmark(name.c_str(), [cs](benchmark::State& st) { run_shape(st, cs, AttentionVariant::flash); })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      // ... and on the rung the varlen prefill runs (the wgmma kernel): what the varlen mode itself costs.
      FlashOptions wgmma;
      wgmma.kernel = FlashKernel::wgmma;
      const std::string wname = std::string("attention/prefill_dense_twin_wgmma") + (kv == 32 ? "/MHA/" : "/GQA-4/") + mix.name;
      benchmark::RegisterBenchmark(wname.c_str(),
                                   [cs, wgmma](benchmark::State& st) { run_shape(st, cs, AttentionVariant::flash, wgmma); })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
}

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  using namespace inferlab;
  register_prefill();
  for (AttentionVariant v : {AttentionVariant::flash, AttentionVariant::naive})
    for (bool causal : {false, true})
      for (int64_t kv : {16, 2, 1})
        for (int64_t seq : {512, 1024, 2048, 4096, 8192, 16384}) {
          const std::string kind = attention_kind_of(16, kv);
          const std::string name = "attention/" + attention_variant_name(v) + (causal ? "/causal/" : "/full/") + kind +
                                   "/seq:" + std::to_string(seq);
          const Bench b{v, causal, kv, seq};
          benchmark::RegisterBenchmark(name.c_str(), [b](benchmark::State& s) { run(s, b); })
              ->Iterations(1)
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond);
        }
  // The flash ladder's rungs side by side: the mma.sync kernel with each of its head-dim-128 tiles, and the
  // wgmma kernel, forced (attention/flash_<kernel>[_<tile>]/..., scripts/tune-flash.sh).
  const std::pair<FlashKernel, MmaTile> rungs[] = {{FlashKernel::mma, MmaTile::planned},
                                                   {FlashKernel::mma, MmaTile::bm128_bn32_w4},
                                                   {FlashKernel::mma, MmaTile::bm64_bn64_w4},
                                                   {FlashKernel::mma, MmaTile::bm128_bn64_w8},
                                                   {FlashKernel::wgmma, MmaTile::planned},
                                                   {FlashKernel::overlapped, MmaTile::planned}};
  for (const auto& [kernel, tile] : rungs)
    for (bool causal : {false, true})
      for (int64_t seq : {1024, 4096, 16384}) {
        Bench b{AttentionVariant::flash, causal, 16, seq};
        b.flash.kernel = kernel, b.flash.mma_tile = tile;
        const std::string rung = std::string("flash_") + flash_kernel_name(kernel) +
                                 (tile == MmaTile::planned ? "" : std::string("_") + mma_tile_name(tile));
        const std::string name = "attention/" + rung + (causal ? "/causal/" : "/full/") + "MHA/seq:" + std::to_string(seq);
        benchmark::RegisterBenchmark(name.c_str(), [b](benchmark::State& s) { run(s, b); })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
