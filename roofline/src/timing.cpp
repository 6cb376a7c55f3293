#include "inferlab/roofline/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "inferlab/kernels/common/check.h"

namespace inferlab {

Timing summarize(std::vector<double> s) {
  Timing t;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  auto q = [&](double p) {
    const double idx = p * double(s.size() - 1);
    const std::size_t lo = std::size_t(std::floor(idx)), hi = std::size_t(std::ceil(idx));
    return s[lo] + (s[hi] - s[lo]) * (idx - double(lo));
  };
  t.median_s = q(0.5);
  t.p10_s = q(0.1);
  t.p90_s = q(0.9);
  t.min_s = s.front();
  t.max_s = s.back();
  t.repeats = int(s.size());
  return t;
}

void l2_read_sweep(const void* buf, std::size_t bytes, void* sink, cudaStream_t stream);  // l2_flush.cu

L2Flusher::L2Flusher() {
  int device = 0, l2 = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  bytes_ = std::size_t(std::max(l2, 1 << 20)) * 2;
  INFERLAB_CUDA_CHECK(cudaMalloc(&buf_, bytes_ + 16));
  // Filled once, then swept once so that none of the fill's dirty lines is left in L2.
  INFERLAB_CUDA_CHECK(cudaMemset(buf_, 0xa5, bytes_ + 16));
  l2_read_sweep(buf_, bytes_, static_cast<char*>(buf_) + bytes_, nullptr);
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

L2Flusher::~L2Flusher() {
  if (buf_) cudaFree(buf_);
}

void L2Flusher::flush(cudaStream_t stream) {
  l2_read_sweep(buf_, bytes_, static_cast<char*>(buf_) + bytes_, stream);
}

Timing time_cuda(const std::function<void()>& enqueue, const TimingOptions& o) {
  L2Flusher* flusher = nullptr;
  L2Flusher local;  // allocated once per call; cheap next to the repeats
  if (o.flush_l2) flusher = &local;
  const auto begin = std::chrono::steady_clock::now();
  for (int done = 0;;) {
    for (int i = 0; i < std::max(o.warmup, 1); ++i, ++done) {
      if (flusher) flusher->flush(o.stream);
      enqueue();
    }
    INFERLAB_CUDA_CHECK(cudaStreamSynchronize(o.stream));
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - begin;
    if (done >= o.warmup && spent.count() >= o.warmup_seconds) break;
  }
  cudaEvent_t start, stop;
  INFERLAB_CUDA_CHECK(cudaEventCreate(&start));
  INFERLAB_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  double total = 0;
  try {
    for (int i = 0; i < o.repeats; ++i) {
      if (flusher) flusher->flush(o.stream);
      INFERLAB_CUDA_CHECK(cudaEventRecord(start, o.stream));
      enqueue();
      INFERLAB_CUDA_CHECK(cudaEventRecord(stop, o.stream));
      INFERLAB_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      INFERLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(double(ms) * 1e-3);
      total += times.back();
      if (i + 1 >= 5 && total > o.max_seconds) break;
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return summarize(times);
}

}  // namespace inferlab
