// Google Benchmark over decode attention at the lab's anchor shapes: GQA 32 query / 8 KV heads,
// head dim 128, bf16; batch x context = 1 x 32768, 8 x 8192, 32 x 4096, 64 x 4096; plain and
// split; contiguous and paged (block 8, 16, 32). Counters from the sim/ cost of the launch:
//   GB/s         bytes the model counts (K and V once, the table, the partials) over the median
//   kv_GB/s      K + V bytes alone (the peers' measure)
//   pct_bw       of the bandwidth the model uses (measured copy bandwidth when the GPU has a file)
//   splits, predicted_us, error_pct
#include <benchmark/benchmark.h>

#include <string>

#include "inferlab/roofline/ceilings.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/measure_decode.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace {

void run(benchmark::State& state, DecodeShape s, DecodeVariant v) {
  Hardware hw;
  try {
    hw = hardware_of_this_gpu();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  DecodeMeasurement m;
  try {
    for (auto _ : state) {
      m = measure_decode(s, v, TimingOptions{}, /*trace_kernels=*/true);
      state.SetIterationTime(m.timing.median_s);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const Op cost = attention_cost(decode_cost_shape(s, m.splits), AttentionVariant::flash, s.dtype, s.dtype);
  const Prediction pred = predict(cost, hw);
  const double t = m.timing.median_s;
  state.counters["GB/s"] = cost.bytes() / t / 1e9;
  state.counters["kv_GB/s"] = cost.bytes(TensorRole::kv_cache) / t / 1e9;
  state.counters["pct_bw"] = 100.0 * cost.bytes() / t / pred.bandwidth;
  state.counters["splits"] = m.splits;
  state.counters["predicted_us"] = pred.total_s * 1e6;
  state.counters["error_pct"] = 100.0 * (pred.total_s - t) / t;
  state.counters["spread_pct"] = 100.0 * m.timing.spread();
  state.counters["kernel_us"] = m.kernel_s * 1e6;
  state.counters["kernel_kv_GB/s"] = m.kernel_s > 0 ? cost.bytes(TensorRole::kv_cache) / m.kernel_s / 1e9 : 0;
}

// Upper bound: one pass of the ceilings' HBM read kernel over the K+V bytes of the shape (the
// "memcpy of the same bytes" comparison point).
void read_bound(benchmark::State& state, DecodeShape s) {
  const Op cost = attention_cost(decode_cost_shape(s, 1), AttentionVariant::flash, s.dtype, s.dtype);
  const double kv = cost.bytes(TensorRole::kv_cache);
  Timing t;
  for (auto _ : state) {
    t = time_hbm_read(std::size_t(kv));
    state.SetIterationTime(t.median_s);
  }
  state.counters["kv_GB/s"] = kv / t.median_s / 1e9;
  state.counters["spread_pct"] = 100.0 * t.spread();
}

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  using namespace inferlab;
  const int64_t shapes[][2] = {{1, 32768}, {8, 8192}, {32, 4096}, {64, 4096}};
  for (DecodeVariant v : {DecodeVariant::split, DecodeVariant::plain})
    for (const auto& sh : shapes)
      for (int64_t block : {0, 16, 8, 32}) {
        DecodeShape s;
        s.batch = sh[0];
        s.context = sh[1];
        s.layout = block ? KvLayout::paged : KvLayout::contiguous;
        s.block_size = block ? block : 16;
        const std::string name = "decode/" + decode_variant_name(v) + "/" +
                                 (block ? "paged" + std::to_string(block) : std::string("contiguous")) + "/b" +
                                 std::to_string(sh[0]) + "xctx" + std::to_string(sh[1]);
        benchmark::RegisterBenchmark(name.c_str(), [s, v](benchmark::State& st) { run(st, s, v); })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  // Candidates beside the plan's split-KV paged16 kernel, each a named row in one process
  // (decode/split/paged16/<knob>/b<b>xctx<ctx>, scripts/tune-decode.sh): the block shapes it was measured against
  // (head dim 128, group 4), and split counts beside its one block an SM (kernels/attention/NOTES.md measured 8, 12,
  // 16 and 24 at 1 x 32k; DecodeShape::splits).
  auto candidate = [&](const std::string& knob, auto set) {
    for (const auto& sh : shapes) {
      DecodeShape s;
      s.batch = sh[0];
      s.context = sh[1];
      set(s);
      const std::string name =
          "decode/split/paged16/" + knob + "/b" + std::to_string(sh[0]) + "xctx" + std::to_string(sh[1]);
      benchmark::RegisterBenchmark(name.c_str(), [s](benchmark::State& st) { run(st, s, DecodeVariant::split); })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  };
  for (DecodeBlock blk : {DecodeBlock::w4s3, DecodeBlock::w8s3, DecodeBlock::w8s2, DecodeBlock::w4s5})
    candidate(std::string("block:") + decode_block_name(blk), [blk](DecodeShape& s) { s.block = blk; });
  for (int splits : {8, 12, 16, 24})
    candidate("splits:" + std::to_string(splits), [splits](DecodeShape& s) { s.splits = splits; });
  for (const auto& sh : shapes) {
    DecodeShape s;
    s.batch = sh[0];
    s.context = sh[1];
    const std::string name = "decode/upper_bound_read/b" + std::to_string(sh[0]) + "xctx" + std::to_string(sh[1]);
    benchmark::RegisterBenchmark(name.c_str(), [s](benchmark::State& st) { read_bound(st, s); })
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
