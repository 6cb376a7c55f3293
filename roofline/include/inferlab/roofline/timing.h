#pragma once
// Timing GPU work honestly: CUDA events around the region, warm-up first, many repeats, the median
// reported with its spread, and L2 flushed before every repeat (a write of twice the L2 size), so
// that a kernel whose inputs fit in L2 is not timed from the cache.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace inferlab {

struct TimingOptions {
  int warmup = 3;
  int repeats = 30;
  double max_seconds = 2.0;  // stop repeating early once this much GPU time is spent (at least 5 repeats)
  bool flush_l2 = true;
  cudaStream_t stream = nullptr;
};

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0, p10_s = 0, p90_s = 0;
  int repeats = 0;
  double spread() const { return median_s > 0 ? (p90_s - p10_s) / median_s : 0; }  // relative
};

// Summary statistics of a set of durations (seconds).
Timing summarize(std::vector<double> seconds);

// Writes a buffer of twice the device's L2 so that nothing a kernel reads stays cached.
class L2Flusher {
 public:
  L2Flusher();
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  void flush(cudaStream_t stream);
  std::size_t bytes() const { return bytes_; }

 private:
  void* buf_ = nullptr;
  std::size_t bytes_ = 0;
  int toggle_ = 0;
};

// Times `enqueue` (which launches work on options.stream) with CUDA events. Every launch and call
// is checked; a failure throws inferlab::CudaError.
Timing time_cuda(const std::function<void()>& enqueue, const TimingOptions& options = {});

}  // namespace inferlab
