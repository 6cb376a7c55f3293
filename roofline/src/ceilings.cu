// The measured ceilings of this GPU (see ceilings.h). In order:
//   fill_random_kernel  inputs are random, never zeros (power draw and any compression depend on data)
//   copy_kernel         HBM copy, 16 B per thread per access; compared with cudaMemcpyAsync D2D
//   read_kernel         HBM read (one pass over a buffer >> L2) and L2 read (many passes over L2/4)
//   fma_kernel          FP32 peak: independent FMA chains on every SM
//   empty_kernel        launch overhead, back to back on one stream
//   DenseGemm           bf16/fp16 through cublasGemmEx, fp8 through cuBLASLt (kernels/gemm)
//   measure_ceilings    sizes from the device, every measurement timed by time_cuda()
//
// L2 flushing: time_cuda() can flush L2 before each repeat (a read sweep over 2x L2). Every
// measurement here turns it off: the bandwidth buffers are >= 16x L2 and read in order, so each
// repeat evicts its own data before reading it again; L2 bandwidth wants a warm L2, and the FLOP
// and launch measurements do not depend on it.
#include "inferlab/roofline/ceilings.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/cublas.h"
#include "inferlab/kernels/common/device_buffer.h"

namespace inferlab {
namespace {

constexpr int kThreads = 256;  // per block, every kernel here
constexpr int kUnroll = 4;     // 16 B accesses in flight per thread in the bandwidth kernels
constexpr int kChains = 8;     // independent FMA chains per thread (hides the FMA latency)
constexpr std::size_t kMiB = std::size_t(1) << 20;

__device__ __forceinline__ uint32_t hash32(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return uint32_t((x ^ (x >> 31)) >> 32);
}

// Fills p[0, n) from a hash of (seed, index): raw bits for uint32_t, uniform in [-1, 1) otherwise.
template <class T>
__global__ void fill_random_kernel(T* p, std::size_t n, uint64_t seed) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const uint32_t h = hash32((seed << 40) ^ i);
    if constexpr (std::is_same_v<T, uint32_t>) {
      p[i] = h;
    } else {
      p[i] = T(float(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
  }
}

// Copy: each thread loads kUnroll uint4 (16 B) at a grid stride, then stores them.
// Bytes = 2 · 16 · n (every byte read once and written once).
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// 16 B load cached in L2 only (ld.global.cg), so repeated passes cannot be served by L1; volatile,
// so no pass can be merged with another.
__device__ __forceinline__ uint4 load_cg(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Read: `passes` sweeps over src[0, n) with 16 B loads, kUnroll in flight per thread, folded into a
// checksum that is stored only if it equals an unlikely value (so no load is dead).
// Bytes = 16 · n · passes. One pass over a buffer >> L2 measures HBM; many over L2/4 measure L2.
__global__ void read_kernel(const uint4* __restrict__ src, std::size_t n, int passes, uint4* sink) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  uint32_t acc = 0;
  for (int pass = 0; pass < passes; ++pass) {
    // Predicated rather than a separate tail loop: an L2/4 buffer gives each thread only a few
    // loads per pass, and they should still be in flight together.
    for (std::size_t i = first; i < n; i += kUnroll * stride) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        v[u] = i + u * stride < n ? load_cg(src + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  if (acc == 0x9e3779b9u) *sink = make_uint4(acc, 0, 0, 0);
}

// FP32: each thread runs kChains independent chains a = a·b + c for `iters` steps; b and c are
// runtime values, so nothing folds. FLOPs = 2 · kChains · iters · threads (the FMAs only).
__global__ void fma_kernel(int iters, float b, float c, float* sink) {
  float a[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) a[j] = float(threadIdx.x + j) * 1e-3f;
#pragma unroll 8
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < kChains; ++j) a[j] = fmaf(a[j], b, c);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < kChains; ++j) s += a[j];
  if (s == -1.0f) *sink = s;  // never true for these b, c; the compiler cannot know
}

// Launch overhead: does nothing; what is timed is launch to launch.
__global__ void empty_kernel() {}

struct DeviceFacts {
  int sm_count = 0, l2_bytes = 0, cc = 0;
};

DeviceFacts query_device() {
  DeviceFacts d;
  int dev = 0, major = 0, minor = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&d.l2_bytes, cudaDevAttrL2CacheSize, dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  d.cc = major * 10 + minor;
  d.l2_bytes = std::max(d.l2_bytes, 1 << 20);  // a device reporting no L2 still gets sane sizes
  return d;
}

// Blocks of kThreads that exactly fill every SM once (one wave at full occupancy).
template <class Kernel>
int full_wave(Kernel kernel, int sm_count) {
  int per_sm = 0;
  INFERLAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  return sm_count * std::max(per_sm, 1);
}

template <class T>
void fill_random(T* p, std::size_t n, uint64_t seed, int sm_count, cudaStream_t stream) {
  const std::size_t blocks = std::min<std::size_t>((n + kThreads - 1) / kThreads, std::size_t(sm_count) * 8);
  fill_random_kernel<T><<<unsigned(std::max<std::size_t>(blocks, 1)), kThreads, 0, stream>>>(p, n, seed);
  INFERLAB_CHECK_LAUNCH();
}

void fill_random(DType dtype, void* p, std::size_t n, uint64_t seed, int sm_count, cudaStream_t stream) {
  switch (dtype) {
    case DType::bf16: return fill_random(static_cast<__nv_bfloat16*>(p), n, seed, sm_count, stream);
    case DType::fp16: return fill_random(static_cast<__half*>(p), n, seed, sm_count, stream);
    case DType::fp8_e4m3: return fill_random(static_cast<__nv_fp8_e4m3*>(p), n, seed, sm_count, stream);
    default: throw std::invalid_argument("fill_random: unsupported dtype " + dtype_name(dtype));
  }
}

std::string mib(std::size_t bytes) { return std::to_string(bytes / kMiB) + " MiB"; }

// The same statistics divided by `count`: the timing of one of `count` identical steps.
Timing per_step(Timing t, int count) {
  for (double* v : {&t.median_s, &t.min_s, &t.max_s, &t.p10_s, &t.p90_s}) *v /= count;
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

Ceilings measure_ceilings(const CeilingOptions& options) {
  const bool quick = options.quick;
  const DeviceFacts dev = query_device();
  TimingOptions topt;
  topt.flush_l2 = false;  // see the top of this file
  if (quick) {
    topt.warmup = 1;
    topt.warmup_seconds = 0;
    topt.repeats = 5;
  }
  const cudaStream_t stream = topt.stream;
  Ceilings c;
  // Records one measurement of `amount` (bytes or FLOPs) per timed region; returns amount / median.
  auto record = [&](const std::string& key, double amount, const std::string& unit, const std::string& method,
                    const Timing& t) {
    const double value = amount / t.median_s;
    c.details.push_back({key, value, unit, method, t});
    return value;
  };
  uint64_t seed = 1;

  // HBM copy and read: buffers of at least 1 GiB (quick: 64 MiB) and at least 16x (quick: 4x) L2.
  {
    const std::size_t l2 = std::size_t(dev.l2_bytes);
    const std::size_t bytes = (std::max(quick ? 64 * kMiB : 1024 * kMiB, (quick ? 4 : 16) * l2) / kMiB) * kMiB;
    const std::size_t n = bytes / sizeof(uint4);
    DeviceBuffer<uint4> src(n), dst(n), sink(1);
    fill_random(reinterpret_cast<uint32_t*>(src.get()), n * 4, seed++, dev.sm_count, stream);
    fill_random(reinterpret_cast<uint32_t*>(dst.get()), n * 4, seed++, dev.sm_count, stream);

    const int copy_grid = full_wave(copy_kernel, dev.sm_count);
    const Timing tk = time_cuda(
        [&] {
          copy_kernel<<<copy_grid, kThreads, 0, stream>>>(src.get(), dst.get(), n);
          INFERLAB_CHECK_LAUNCH();
        },
        topt);
    const double by_kernel = record("copy_bandwidth.kernel", 2.0 * double(bytes), "B/s",
                                    "copy_kernel " + mib(bytes) + ", uint4 per access, " + std::to_string(copy_grid) +
                                        " blocks x " + std::to_string(kThreads) + "; bytes = read + written",
                                    tk);
    const Timing tm = time_cuda(
        [&] {
          INFERLAB_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
        },
        topt);
    const double by_memcpy = record("copy_bandwidth.memcpy", 2.0 * double(bytes), "B/s",
                                    "cudaMemcpyAsync D2D " + mib(bytes) + "; bytes = read + written", tm);
    c.copy_bandwidth = std::max(by_kernel, by_memcpy);

    const int read_grid = full_wave(read_kernel, dev.sm_count);
    const Timing tr = time_cuda(
        [&] {
          read_kernel<<<read_grid, kThreads, 0, stream>>>(src.get(), n, 1, sink.get());
          INFERLAB_CHECK_LAUNCH();
        },
        topt);
    c.read_bandwidth = record("read_bandwidth", double(bytes), "B/s",
                              "read_kernel 1 pass over " + mib(bytes) + " (" + std::to_string(bytes / l2) +
                                  "x L2), ld.global.cg uint4, " + std::to_string(read_grid) + " blocks x " +
                                  std::to_string(kThreads) + "; bytes = read",
                              tr);
  }

  // L2: a buffer of 1/4 of L2 read `passes` times per launch (8 GiB in all; quick: 1 GiB), L2 warm.
  {
    const std::size_t bytes = std::max<std::size_t>(std::size_t(dev.l2_bytes) / 4 / 4096 * 4096, 4096);
    const std::size_t n = bytes / sizeof(uint4);
    const int passes = int(std::max<std::size_t>((quick ? 1024 : 8192) * kMiB / bytes, 1));
    DeviceBuffer<uint4> src(n), sink(1);
    fill_random(reinterpret_cast<uint32_t*>(src.get()), n * 4, seed++, dev.sm_count, stream);
    const int grid = full_wave(read_kernel, dev.sm_count);
    const Timing t = time_cuda(
        [&] {
          read_kernel<<<grid, kThreads, 0, stream>>>(src.get(), n, passes, sink.get());
          INFERLAB_CHECK_LAUNCH();
        },
        topt);
    c.l2_bandwidth = record("l2_bandwidth", double(bytes) * passes, "B/s",
                            "read_kernel " + std::to_string(passes) + " passes over " + std::to_string(bytes / 1024) +
                                " KiB (L2/4, L2 " + std::to_string(dev.l2_bytes / 1024) +
                                " KiB), ld.global.cg uint4; bytes = read",
                            t);
  }

  // FP32: one full wave of FMA chains.
  {
    DeviceBuffer<float> sink(1);
    const int grid = full_wave(fma_kernel, dev.sm_count);
    const int iters = quick ? 1024 : 16384;
    const Timing t = time_cuda(
        [&] {
          fma_kernel<<<grid, kThreads, 0, stream>>>(iters, 0.999999f, 1e-6f, sink.get());
          INFERLAB_CHECK_LAUNCH();
        },
        topt);
    c.fp32_flops = record("fp32_flops", 2.0 * kChains * double(iters) * grid * kThreads, "FLOP/s",
                          "fma_kernel " + std::to_string(grid) + " blocks x " + std::to_string(kThreads) + ", " +
                              std::to_string(kChains) + " chains x " + std::to_string(iters) +
                              " FMA per thread; FLOPs = 2 per FMA",
                          t);
  }

  // Tensor cores: square GEMMs on random data, FLOPs = 2·s³.
  {
    const int s = quick ? 1024 : 8192;
    const std::size_t elems = std::size_t(s) * s;
    auto time_gemm = [&](DType dtype, bool fast_accum, const std::string& key) {
      const DenseGemm gemm(dtype, s, s, s, fast_accum);
      const std::size_t in_bytes = std::size_t(dtype_bytes(dtype));
      DeviceBuffer<unsigned char> x(elems * in_bytes), w(elems * in_bytes), y(elems * 2);
      fill_random(dtype, x.get(), elems, seed++, dev.sm_count, stream);
      fill_random(dtype, w.get(), elems, seed++, dev.sm_count, stream);
      const Timing t = time_cuda([&] { gemm.run(x.get(), w.get(), y.get(), stream); }, topt);
      const std::string how = dtype == DType::fp8_e4m3
                                  ? std::string("cuBLASLt e4m3 x e4m3 -> bf16, TN, scales 1, fast_accum ") +
                                        (fast_accum ? "on" : "off")
                                  : "cublasGemmEx " + dtype_name(dtype) + ", CUBLAS_COMPUTE_32F, TN";
      const std::string sz = std::to_string(s);
      return record(key, gemm.flops(), "FLOP/s", how + ", " + sz + "x" + sz + "x" + sz + " random; FLOPs = 2mnk", t);
    };
    c.tensor_flops["bf16"] = time_gemm(DType::bf16, false, "tensor_flops.bf16");
    c.tensor_flops["fp16"] = time_gemm(DType::fp16, false, "tensor_flops.fp16");
    if (dev.cc >= 89) {
      const double exact = time_gemm(DType::fp8_e4m3, false, "tensor_flops.fp8");
      const double fast = time_gemm(DType::fp8_e4m3, true, "tensor_flops.fp8_fast_accum");
      c.tensor_flops["fp8"] = std::max(exact, fast);
    } else {
      c.details.push_back({"tensor_flops.fp8", 0.0, "FLOP/s",
                           "skipped: compute capability " + std::to_string(dev.cc / 10) + "." +
                               std::to_string(dev.cc % 10) + " < 8.9 has no fp8 tensor cores",
                           Timing{}});
    }
  }

  // Launch overhead: `launches` empty kernels back to back; the timing kept is per launch.
  {
    const int launches = quick ? 200 : 1000;
    TimingOptions lopt = topt;
    lopt.gate = false;  // launch to launch as the host issues them, not a pre-filled queue
    const Timing t = time_cuda(
        [&] {
          for (int i = 0; i < launches; ++i) empty_kernel<<<1, 1, 0, stream>>>();
          INFERLAB_CHECK_LAUNCH();  // a failed launch leaves its error for cudaGetLastError
        },
        lopt);
    const Timing one = per_step(t, launches);
    c.launch_overhead_s = one.median_s;
    c.details.push_back({"launch_overhead", one.median_s, "s",
                         "empty_kernel<<<1, 1>>> x " + std::to_string(launches) +
                             " back to back on one stream, events around all; timing per launch",
                         one});
  }
  return c;
}

}  // namespace inferlab

namespace inferlab {

Timing time_hbm_read(std::size_t bytes, const TimingOptions& timing) {
  const DeviceFacts dev = query_device();
  const std::size_t n = std::max<std::size_t>(bytes / sizeof(uint4), 1);
  DeviceBuffer<uint4> src(n), sink(1);
  fill_random(reinterpret_cast<uint32_t*>(src.get()), n * 4, 99, dev.sm_count, timing.stream);
  const int grid = full_wave(read_kernel, dev.sm_count);
  return time_cuda(
      [&] {
        read_kernel<<<grid, kThreads, 0, timing.stream>>>(src.get(), n, 1, sink.get());
        INFERLAB_CHECK_LAUNCH();
      },
      timing);
}

}  // namespace inferlab
