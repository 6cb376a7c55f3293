// The device side of timing.h: the L2 flush (a read sweep over a buffer of twice the L2, see
// L2Flusher) and the host gate (a kernel that holds the stream until the host has enqueued all the
// timed work, see time_cuda).
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "inferlab/kernels/common/check.h"

namespace inferlab {
namespace {

// Reads n 16-byte words with ld.global.cg (cached in L2 only) and folds them into a value stored
// only when it matches an unlikely constant, so the loads stay live.
__global__ void l2_sweep_kernel(const uint4* __restrict__ p, std::size_t n, uint4* sink) {
  uint32_t acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + i));
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x2545f491u) *sink = make_uint4(acc, 0, 0, 0);
}

// Spins until *open (host memory, mapped) is non-zero, or `timeout_ns` passed (then *timed_out = 1).
__global__ void host_gate_kernel(const volatile int* open, int* timed_out, unsigned long long timeout_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*open == 0) {
    __nanosleep(200);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
  }
}

}  // namespace

void launch_host_gate(const volatile int* open, int* timed_out, unsigned long long timeout_ns, cudaStream_t stream) {
  host_gate_kernel<<<1, 1, 0, stream>>>(open, timed_out, timeout_ns);
  INFERLAB_CHECK_LAUNCH();
}

void l2_read_sweep(const void* buf, std::size_t bytes, void* sink, cudaStream_t stream) {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  l2_sweep_kernel<<<sms * 4, 512, 0, stream>>>(static_cast<const uint4*>(buf), bytes / sizeof(uint4),
                                                 static_cast<uint4*>(sink));
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace inferlab
