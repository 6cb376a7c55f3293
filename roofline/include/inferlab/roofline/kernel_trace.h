#pragma once
// Per-kernel GPU durations inside a composite run, through CUPTI's activity API
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: start and end timestamps taken by the GPU). Used where
// one operator launches several kernels (naive attention: GEMM, softmax, GEMM) to see where the
// time goes; the events of timing.h time the whole.
#include <string>
#include <vector>

namespace inferlab {

struct KernelRecord {
  std::string name;  // demangled where CUPTI gives a mangled name
  double start_s = 0, end_s = 0;
  double duration_s() const { return end_s - start_s; }
};

class KernelTrace {
 public:
  KernelTrace();  // enables the activity kind; throws CudaError-like std::runtime_error on failure
  ~KernelTrace();
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;
  // Synchronizes the device, flushes CUPTI's buffers, and returns the kernels run since
  // construction (or the previous collect), in start order.
  std::vector<KernelRecord> collect();
};

// "gemm 1.21 ms; softmax 3.40 ms; gemm 1.10 ms": kernel names shortened to what a reader needs.
std::string summarize_kernels(const std::vector<KernelRecord>& records);

}  // namespace inferlab
