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

// timing_kernels.cu
void l2_read_sweep(const void* buf, std::size_t bytes, void* sink, cudaStream_t stream);
void launch_host_gate(const volatile int* open, int* timed_out, unsigned long long timeout_ns, cudaStream_t stream);

namespace {

// A flag in mapped host memory the gate kernel spins on (time_cuda).
class HostGate {
 public:
  HostGate() {
    INFERLAB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flags_), 2 * sizeof(int), cudaHostAllocMapped));
    flags_[0] = flags_[1] = 0;
    INFERLAB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_), flags_, 0));
  }
  ~HostGate() {
    if (flags_) cudaFreeHost(flags_);
  }
  HostGate(const HostGate&) = delete;
  HostGate& operator=(const HostGate&) = delete;
  void close(cudaStream_t s) {
    reinterpret_cast<volatile int*>(flags_)[0] = 0;
    launch_host_gate(dev_, dev_ + 1, 2'000'000'000ull, s);
  }
  void open() { reinterpret_cast<volatile int*>(flags_)[0] = 1; }
  bool timed_out() const { return reinterpret_cast<volatile int*>(flags_)[1] != 0; }

 private:
  int* flags_ = nullptr;
  int* dev_ = nullptr;
};

}  // namespace

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
  HostGate gate;
  try {
    for (int i = 0; i < o.repeats; ++i) {
      // The stream is held by the gate kernel until flush, start, the work and stop are all
      // enqueued: the GPU then runs them back to back, whatever the host does meanwhile.
      if (o.gate) gate.close(o.stream);
      if (flusher) flusher->flush(o.stream);
      INFERLAB_CUDA_CHECK(cudaEventRecord(start, o.stream));
      enqueue();
      INFERLAB_CUDA_CHECK(cudaEventRecord(stop, o.stream));
      if (o.gate) gate.open();
      INFERLAB_CUDA_CHECK(cudaEventSynchronize(stop));
      if (o.gate && gate.timed_out())
        throw CudaError(cudaErrorTimeout, "time_cuda: the timed work waited on the host while the stream was held (a synchronizing "
                        "call inside the enqueue function)");
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
