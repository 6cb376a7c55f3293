// What the probes in this folder share (each probe is one file built alone with nvcc; this header is included, not
// built): the error check, a streaming 16-byte load, shared-memory addresses and mbarrier waits, and the timing of a
// launch as the linear benchmarks time a kernel (roofline/src/timing.cpp: L2 flushed by a read sweep before every
// repeat, CUDA events around the launch, median of 30 after 5 warm-up launches).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

// 16 bytes read once (not kept in L1), as the weight-only kernels stream their weight.
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t sa(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Waits until the mbarrier at b has completed phase ph.
__device__ __forceinline__ void wait(uint64_t* b, int ph) {
  asm volatile("{\n.reg .pred d;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 d, [%0], %1;\n@!d bra W_%=;\n}\n" ::"r"(sa(b)),
               "r"(ph)
               : "memory");
}

__global__ void empty_kernel() {}

// Reads n 16-byte words cached in L2 only (ld.global.cg), so that L2 holds none of what is timed next.
__global__ void flush_kernel(const uint4* p, int64_t n, unsigned* sink) {
  unsigned acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

// A grid-stride read of n 16-byte words, 4 loads in flight a thread: the plain stream the probes measure against.
__global__ void __launch_bounds__(256) grid_read(const uint4* p, int64_t n, unsigned* sink) {
  unsigned acc = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = load_stream(p + i), b = load_stream(p + i + stride), c = load_stream(p + i + 2 * stride),
                d = load_stream(p + i + 3 * stride);
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < n; i += stride) acc ^= load_stream(p + i).x;
  if (acc == 0x9e3779b9u) *sink = acc;
}

// median_us(launch): the median of 30 event-timed launches, each after a 200 MB flush of L2.
struct Timer {
  uint4* flush = nullptr;
  int64_t flush_n = (int64_t(200) << 20) / 16;
  unsigned* sink = nullptr;
  cudaEvent_t a{}, b{};
  Timer() {
    CK(cudaMalloc(&flush, flush_n * 16));
    CK(cudaMemset(flush, 1, flush_n * 16));
    CK(cudaMalloc(&sink, 16));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  template <class F>
  double median_us(F&& launch) {
    for (int i = 0; i < 5; ++i) launch();
    std::vector<float> t;
    for (int r = 0; r < 30; ++r) {
      flush_kernel<<<528, 256>>>(flush, flush_n, sink);
      CK(cudaEventRecord(a));
      launch();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1e3f);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};
