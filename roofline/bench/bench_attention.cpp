// Google Benchmark over kernels/attention at the lab's anchor shape: bf16, head dim 128, 16 query
// heads, batch x seq = 16384 tokens; seq 512..16384 x {naive, flash} x {causal, not} x {MHA,
// GQA-8, MQA}. Each row's counters come from the sim/ cost of the shape (attention_cost), never
// from a formula here:
//   TFLOP/s, GB/s          the cost over the measured median
//   pct_peak, pct_bw       of the ceilings the model uses (measured ones when the GPU has a file)
//   predicted_ms, error    the roofline prediction and (predicted - measured) / measured
// Timing: CUDA events, warm-up, L2 flushed before every repeat, the median (roofline/timing.h).
//   inferlab_bench_attention [--benchmark_filter=flash/causal] [--benchmark_format=csv]
#include <benchmark/benchmark.h>

#include <string>

#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/measure_attention.h"
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
};

void run(benchmark::State& state, const Bench& b) {
  Hardware hw;
  try {
    hw = hardware_of_this_gpu();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  AttentionShape cs;
  cs.heads = 16;
  cs.kv_heads = b.kv_heads;
  cs.head_dim = 128;
  cs.new_tokens = b.seq;
  cs.batch = 16384 / b.seq;
  cs.causal = b.causal;
  const AttentionParams shape = params_for(cs, DType::bf16);
  const Op cost = attention_cost(cost_shape(shape), b.variant, shape.dtype, shape.dtype);
  const Prediction pred = predict(cost, hw);
  AttentionMeasurement m;
  try {
    for (auto _ : state) {
      m = measure_attention(shape, b.variant, TimingOptions{}, false);
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

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  using namespace inferlab;
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
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
