// The system-level model's own speed (CPU only):
//   Serving/...       10,000 requests of a ShareGPT-like Llama-2-7B trace on one H100, through each
//                     scheduler x KV allocator (the trace is generated once, outside the timing; a
//                     fresh roofline step cost each run, so its memo starts cold).
//   ParallelConfig    one full TP x PP configuration of Llama-2-70B: the step on every stage and the
//                     per-device memory.
//   SpeculativeOptimum  the optimal draft length for one acceptance rate (gamma 0..10).
#include <benchmark/benchmark.h>

#include "inferlab/sim/memory.h"
#include "inferlab/sim/parallel.h"
#include "inferlab/sim/serving.h"
#include "inferlab/sim/speculative.h"

namespace inferlab {
namespace {

const OpOptions kFp16{Precision{DType::fp16, DType::fp16, DType::fp16}, AttentionVariant::flash, true, std::nullopt};

void Serving(benchmark::State& state, Scheduler scheduler, KvLayout kv) {
  const ModelConfig model = load_model("llama-2-7b");
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  TraceSpec ts;
  ts.requests = state.range(0);
  ts.rate = double(state.range(1));
  ts.max_tokens = 2048;
  const std::vector<Request> trace = generate_trace(ts);
  ServingConfig c;
  c.scheduler = scheduler;
  c.kv = kv;
  c.max_len = 2048;
  c.kv_bytes_per_token = kv_bytes_per_token(model, DType::fp16);
  c.kv_capacity_bytes = serving_kv_capacity(model, hw, kFp16.precision, 1, 0.9, default_batch_tokens(c));
  int64_t iterations = 0;
  double makespan = 0;
  for (auto _ : state) {
    RooflineStepCost cost(model, hw, kFp16);
    const ServingResult r = simulate_serving(trace, c, cost);
    iterations = r.iteration_count;
    makespan = summarize(r).makespan_s;
    benchmark::DoNotOptimize(iterations);
  }
  state.counters["engine_iterations"] = double(iterations);
  state.counters["simulated_s"] = makespan;
  state.counters["requests_per_s"] = benchmark::Counter(double(ts.requests) * double(state.iterations()),
                                                        benchmark::Counter::kIsRate);
}

void ParallelConfig(benchmark::State& state) {
  const ModelConfig model = load_model("llama-2-70b");
  const Hardware hw = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  const Parallelism par{state.range(0), state.range(1), 1};
  MemoryOptions mo;
  mo.precision = kFp16.precision;
  for (auto _ : state) {
    const ParallelPrediction p = predict_parallel(model, decode_step(32, 2048), kFp16, hw, par);
    const DeviceMemory m = device_memory(model, 32, 2048, mo, par);
    benchmark::DoNotOptimize(p.time_s + m.breakdown.total());
  }
}

void SpeculativeOptimum(benchmark::State& state) {
  SpeculativeSetup s;
  s.target = load_model("llama-2-70b");
  s.draft = load_model("llama-2-7b");
  s.hardware = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  s.options = kFp16;
  for (auto _ : state) {
    const SpeculativeModel m(s);
    benchmark::DoNotOptimize(m.optimal_gamma(0.8, 10));
  }
}

BENCHMARK_CAPTURE(Serving, static_contiguous, Scheduler::static_batching, KvLayout::contiguous)
    ->Args({10000, 15})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Serving, continuous_paged, Scheduler::continuous, KvLayout::paged)
    ->Args({10000, 5})->Args({10000, 15})->Args({10000, 40})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Serving, chunked_paged, Scheduler::chunked, KvLayout::paged)
    ->Args({10000, 15})->Unit(benchmark::kMillisecond);
BENCHMARK(ParallelConfig)->Args({1, 1})->Args({4, 2})->Args({8, 1})->Unit(benchmark::kMicrosecond);
BENCHMARK(SpeculativeOptimum)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace inferlab

BENCHMARK_MAIN();
