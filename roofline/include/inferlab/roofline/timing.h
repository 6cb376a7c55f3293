#pragma once
// Timing GPU work honestly: CUDA events around the region, warm-up first, many repeats, the median
// reported with its spread, and L2 flushed before every repeat (a read sweep over twice the L2
// size), so that a kernel whose inputs fit in L2 is not timed from the cache.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace inferlab {

struct TimingOptions {
  // Warm-up: at least `warmup` runs and at least `warmup_seconds` of wall time spent running them.
  // The count alone is not enough: a GPU that has been idle (a new process, a host-side setup
  // between points) runs its first ~0.1 s at lower clocks. Measured on the H100: the same 134 MB
  // read, timed first in its process after 3 warm-up runs, streamed 2349 GB/s; timed fourth, 2978.
  int warmup = 3;
  double warmup_seconds = 0.25;
  int repeats = 30;
  double max_seconds = 2.0;  // stop repeating early once this much GPU time is spent (at least 5 repeats)
  bool flush_l2 = true;
  bool gate = true;  // hold the stream until each repeat is enqueued (see time_cuda)
  cudaStream_t stream = nullptr;
};

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0, p10_s = 0, p90_s = 0;
  int repeats = 0;
  double spread() const { return median_s > 0 ? (p90_s - p10_s) / median_s : 0; }  // relative
};

// Summary statistics of a set of durations (seconds).
Timing summarize(std::vector<double> seconds);

// Reads a buffer of twice the device's L2 so that nothing a kernel reads stays cached. A read, not a
// write: a flush by memset leaves up to an L2 of dirty lines, whose write-back then lands inside the
// timed region. Measured on the H100 (kernels/attention/NOTES.md, d7): one pass of the read kernel
// over 134 MB streamed 2362 GB/s after a memset flush and 2902 GB/s after this one; decode
// attention at 1 x 32768 tokens 2045 vs 2401 GB/s. The cost falls on the small, memory-bound kernels.
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
};

// Times `enqueue` (which launches work on options.stream) with CUDA events. Each timed repeat is
// enqueued behind a gate kernel that holds the stream until the host has enqueued the flush, the
// start event, the work and the stop event (as nvbench's blocking kernel does), so a host-side
// pause cannot put idle time between the events. `enqueue` must not synchronize with the stream
// (that would wait on the gate: it is reported after a 2 s timeout). Every launch and call is
// checked; a failure throws inferlab::CudaError.
Timing time_cuda(const std::function<void()>& enqueue, const TimingOptions& options = {});

}  // namespace inferlab
