// Google Benchmark over the linear-layer formats (kernels/gemm) at the Llama-3-8B layer shapes
// (n x k: 4096x4096 q/o, 14336x4096 gate/up, 4096x14336 down, 1024x4096 k/v) and m = 1, 16, 64
// tokens, plus the 8192^3 GEMM of bf16 against fp8; the weight-only kernels' split-k candidates and
// the weight-only kernels (mma, wgmma, wgmma_tma) beside the plan's rows. Counters from the sim/ cost of the launch:
//   weight_GB/s   the format's weight bytes (values, scales, metadata) over the median
//   speedup       cuBLAS bf16 on the same shape and activations (same run) / this format
//   ideal         the bf16 weight bytes / this format's weight bytes
//   pct_bw        of the bandwidth the model uses;  TFLOP/s;  predicted_us, error_pct;  rel_error
#include <benchmark/benchmark.h>

#include <string>

#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/measure_linear.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace {

void run(benchmark::State& state, LinearShape s, WeightFormat f, int64_t split_k = 0,
         WeightOnlyKernel kernel = WeightOnlyKernel::automatic, SplitReduce reduce = SplitReduce::automatic) {
  Hardware hw;
  LinearMeasurement m;
  try {
    hw = hardware_of_this_gpu();
    for (auto _ : state) {
      m = measure_linear(s, f, TimingOptions{}, split_k, kernel, reduce);
      state.SetIterationTime(m.timing.median_s);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const Op cost = linear_cost(s, f);
  const Prediction pred = predict(cost, hw);
  const double t = m.timing.median_s;
  const double wbytes = cost.bytes(TensorRole::weight);
  state.counters["weight_GB/s"] = wbytes / t / 1e9;
  state.counters["TFLOP/s"] = cost.flops / t / 1e12;
  state.counters["pct_bw"] = 100.0 * cost.bytes() / t / pred.bandwidth;
  state.counters["speedup"] = m.baseline.median_s / t;
  state.counters["ideal"] = weight_format_bytes(WeightFormat::bf16, s.n, s.k).total() / weight_format_bytes(f, s.n, s.k).total();
  state.counters["predicted_us"] = pred.total_s * 1e6;
  state.counters["error_pct"] = 100.0 * (pred.total_s - t) / t;
  state.counters["rel_error"] = m.rel_error;
  state.counters["spread_pct"] = 100.0 * m.timing.spread();
}

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  using namespace inferlab;
  const int64_t shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}};
  const WeightFormat formats[] = {WeightFormat::bf16, WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24,
                                  WeightFormat::fp8};
  for (const auto& sh : shapes)
    for (int64_t m : {1, 16, 64})
      for (WeightFormat f : formats) {
        const LinearShape s{m, sh[0], sh[1]};
        const std::string name = "linear/" + weight_format_name(f) + "/n" + std::to_string(sh[0]) + "xk" +
                                 std::to_string(sh[1]) + "/m" + std::to_string(m);
        benchmark::RegisterBenchmark(name.c_str(), [s, f](benchmark::State& st) { run(st, s, f); })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  // The weight-only kernels' split-k candidates side by side with the plan's (linear/<f>/.../m<m>):
  // linear/<f>/n<n>xk<k>/m<m>/split:<s> (scripts/tune-gemm.sh).
  for (const auto& sh : shapes)
    for (int64_t m : {1, 16, 64})
      for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24})
        for (int64_t split : {1, 2, 4, 8, 16}) {
          const LinearShape s{m, sh[0], sh[1]};
          const std::string name = "linear/" + weight_format_name(f) + "/n" + std::to_string(sh[0]) + "xk" +
                                   std::to_string(sh[1]) + "/m" + std::to_string(m) + "/split:" + std::to_string(split);
          benchmark::RegisterBenchmark(name.c_str(), [s, f, split](benchmark::State& st) { run(st, s, f, split); })
              ->Iterations(1)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
  // How the split-k blocks sum (LinearParams::split_reduce), each split beside the other way, on the mma kernel at
  // m = 1 to 16: linear/<f>/n<n>xk<k>/m<m>/split:<s>/reduce:<atomics|cluster> (a split that cannot run so is a
  // skipped row), and the plan's own choice, split:plan/reduce:automatic; with the Llama-3.2-1B projections (2048 x
  // 2048, 512 x 2048, 2048 x 8192) and 1024 x 8192, whose row tiles are few (the reasons beside SplitReduce).
  const int64_t reduce_shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096},
                                      {2048, 2048}, {512, 2048},   {2048, 8192},  {1024, 8192}};
  for (const auto& sh : reduce_shapes)
    for (int64_t m : {1, 2, 4, 8, 16})
      for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24})
        for (int64_t split : {0, 2, 4, 8, 16})
          for (SplitReduce reduce : {SplitReduce::automatic, SplitReduce::atomics, SplitReduce::cluster}) {
            if (reduce == SplitReduce::automatic && split != 0) continue;  // a named split: the atomics row
            const LinearShape s{m, sh[0], sh[1]};
            const std::string name = "linear/" + weight_format_name(f) + "/n" + std::to_string(sh[0]) + "xk" +
                                     std::to_string(sh[1]) + "/m" + std::to_string(m) + "/split:" +
                                     (split == 0 ? std::string("plan") : std::to_string(split)) +
                                     "/reduce:" + split_reduce_name(reduce);
            benchmark::RegisterBenchmark(name.c_str(), [s, f, split, reduce](benchmark::State& st) {
              run(st, s, f, split, WeightOnlyKernel::mma, reduce);
            })
                ->Iterations(1)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
  // The weight-only kernels side by side with the plan's choice (LinearParams::kernel):
  // linear/<f>/n<n>xk<k>/m<m>/kernel:<mma|wgmma|wgmma_tma|mma_tma> at m = 1, 4, 8, 16, 32, 64 (mma_tma: int8 at m = 1, int4 to 16) (a kernel that cannot run here
  // is a skipped row).
  for (const auto& sh : shapes)
    for (int64_t m : {1, 4, 8, 16, 32, 64})
      for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4, WeightFormat::sparse24})
        for (WeightOnlyKernel kernel : {WeightOnlyKernel::mma, WeightOnlyKernel::wgmma, WeightOnlyKernel::wgmma_tma,
                                        WeightOnlyKernel::mma_tma}) {
          if (f == WeightFormat::sparse24 && kernel == WeightOnlyKernel::wgmma) continue;  // 2:4: mma, wgmma_tma
          if (kernel == WeightOnlyKernel::mma_tma && (m > 16 || f == WeightFormat::sparse24)) continue;  // int8 m = 1, int4 to 16
          const LinearShape s{m, sh[0], sh[1]};
          const std::string name = "linear/" + weight_format_name(f) + "/n" + std::to_string(sh[0]) + "xk" +
                                   std::to_string(sh[1]) + "/m" + std::to_string(m) + "/kernel:" + weight_only_kernel_name(kernel);
          benchmark::RegisterBenchmark(name.c_str(), [s, f, kernel](benchmark::State& st) { run(st, s, f, 0, kernel); })
              ->Iterations(1)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
  // The mma_tma kernel at 16 tokens over a named split of k (LinearParams::split_k): 1, the wide kernel at k = 4096,
  // beside the cluster of 2 (the plan takes one by the grid's length, sim/kernels.h weight_only_mma_tma_plan_split);
  // at k = 14336 clusters of 7 and of 4, the narrow kernel (sim/kernels.h weight_only_mma_tma_narrow):
  // linear/int4/n<n>xk<k>/m16/kernel:mma_tma/split:<s> (a split that cannot run is a skipped row).
  for (const auto& sh : shapes)
    for (int64_t split : {1, 2, 4, 7}) {
      const LinearShape s{16, sh[0], sh[1]};
      const std::string name = "linear/int4/n" + std::to_string(sh[0]) + "xk" + std::to_string(sh[1]) +
                               "/m16/kernel:mma_tma/split:" + std::to_string(split);
      benchmark::RegisterBenchmark(name.c_str(), [s, split](benchmark::State& st) {
        run(st, s, WeightFormat::int4, split, WeightOnlyKernel::mma_tma);
      })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  for (WeightFormat f : {WeightFormat::bf16, WeightFormat::fp8}) {
    const LinearShape s{8192, 8192, 8192};
    benchmark::RegisterBenchmark(("linear/" + weight_format_name(f) + "/gemm8192").c_str(),
                                 [s, f](benchmark::State& st) { run(st, s, f); })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
