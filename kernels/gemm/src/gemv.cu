// The streaming dense GEMV of gemv.h. One warp (ROWS = 1) or a pair of rows per warp (ROWS = 2, m >= 4:
// each X load then feeds two rows' products, halving the L1 traffic of X) walks k in 16-byte pieces.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/kernels/gemm/gemv.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kUnroll = 4;  // 16-byte pieces of W in flight per lane and row

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <class T>
__device__ __forceinline__ float2 to_float2(uint32_t u);
template <>
__device__ __forceinline__ float2 to_float2<__nv_bfloat16>(uint32_t u) {
  // bf16 -> fp32 is a shift: the low half to the high 16 bits, the high half masked.
  return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
template <>
__device__ __forceinline__ float2 to_float2<__half>(uint32_t u) {
  __half2 h;
  memcpy(&h, &u, 4);
  return __half22float2(h);
}

template <class T>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = to_float2<T>(av[i]), fb = to_float2<T>(bv[i]);
    acc = fmaf(fa.x, fb.x, acc);
    acc = fmaf(fa.y, fb.y, acc);
  }
  return acc;
}

template <class TO>
__device__ __forceinline__ TO from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

template <class T, class TO, int M, int ROWS>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                        TO* __restrict__ y, int n, int k) {
  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarps + threadIdx.x / 32) * ROWS;
  if (row0 >= n) return;
  const int pieces = k / 8;  // 16-byte pieces per row
  const uint4* wr[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
    wr[r] = reinterpret_cast<const uint4*>(w + int64_t(min(row0 + r, n - 1)) * k);  // a missing 2nd row re-reads the 1st
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc[ROWS][M];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.f;

  int c = lane;
  for (; c + 32 * (kUnroll - 1) < pieces; c += 32 * kUnroll) {
    uint4 wv[ROWS][kUnroll];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[r][u] = load_stream(wr[r] + c + 32 * u);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int i = 0; i < M; ++i) {
        const uint4 xv = __ldg(xr + int64_t(i) * pieces + c + 32 * u);
#pragma unroll
        for (int r = 0; r < ROWS; ++r) acc[r][i] = dot8<T>(wv[r][u], xv, acc[r][i]);
      }
  }
  for (; c < pieces; c += 32) {
    uint4 wv[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) wv[r] = load_stream(wr[r] + c);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const uint4 xv = __ldg(xr + int64_t(i) * pieces + c);
#pragma unroll
      for (int r = 0; r < ROWS; ++r) acc[r][i] = dot8<T>(wv[r], xv, acc[r][i]);
    }
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[r][i] += __shfl_xor_sync(~0u, acc[r][i], off);
  // Lane (r, i) writes output (row0 + r, token i): the M x ROWS results go out in one store each.
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i)
      if (lane == r * M + i && row0 + r < n) y[int64_t(i) * n + row0 + r] = from_float<TO>(acc[r][i]);
}

template <class T, class TO, int M>
void launch_m(const GemvParams& p, cudaStream_t s) {
  constexpr int ROWS = M >= 4 ? 2 : 1;
  const int64_t warps = (p.n + ROWS - 1) / ROWS;
  const unsigned blocks = unsigned((warps + kWarps - 1) / kWarps);
  gemv_kernel<T, TO, M, ROWS><<<blocks, kThreads, 0, s>>>(static_cast<const T*>(p.x), static_cast<const T*>(p.w),
                                                          static_cast<TO*>(p.y), int(p.n), int(p.k));
  INFERLAB_CHECK_LAUNCH();
}

template <class T, class TO>
void launch(const GemvParams& p, cudaStream_t s) {
  switch (p.m) {
    case 1: return launch_m<T, TO, 1>(p, s);
    case 2: return launch_m<T, TO, 2>(p, s);
    case 3: return launch_m<T, TO, 3>(p, s);
    case 4: return launch_m<T, TO, 4>(p, s);
    case 5: return launch_m<T, TO, 5>(p, s);
    case 6: return launch_m<T, TO, 6>(p, s);
    case 7: return launch_m<T, TO, 7>(p, s);
    default: return launch_m<T, TO, 8>(p, s);
  }
}

}  // namespace

void validate_gemv(const GemvParams& p) {
  const std::string what = "gemv m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + ": ";
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16) throw Error(what + "dtype must be bf16 or fp16");
  if (p.out_dtype != p.dtype && p.out_dtype != DType::fp32) throw Error(what + "the output must be the input dtype or fp32");
  if (p.m < 1 || p.m > kGemvMaxTokens) throw Error(what + "m must be in 1.." + std::to_string(kGemvMaxTokens));
  if (p.n < 1 || p.k < 8 || p.k % 8) throw Error(what + "n must be positive and k a positive multiple of 8");
  if (p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31)) throw Error(what + "n and k must fit in 32 bits");
  if (!p.x || !p.w || !p.y) throw Error(what + "x, w and y must be given");
  if ((reinterpret_cast<uintptr_t>(p.x) | reinterpret_cast<uintptr_t>(p.w)) % 16)
    throw Error(what + "x and w must be 16-byte aligned");
}

void gemv(const GemvParams& p, cudaStream_t stream) {
  validate_gemv(p);
  NvtxRange range("linear/gemv");
  const bool f32 = p.out_dtype == DType::fp32;
  if (p.dtype == DType::bf16) {
    if (f32) launch<__nv_bfloat16, float>(p, stream);
    else launch<__nv_bfloat16, __nv_bfloat16>(p, stream);
  } else {
    if (f32) launch<__half, float>(p, stream);
    else launch<__half, __half>(p, stream);
  }
}

}  // namespace inferlab
