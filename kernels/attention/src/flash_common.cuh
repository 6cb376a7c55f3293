#pragma once
// Device helpers shared by the two flash forward kernels: the launch parameters, cp.async, and the
// mma.sync m16n8k16 instruction with its fp32 -> 16-bit packing (the packing is also how both
// kernels turn score accumulators into the A operand of P V).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "inferlab/kernels/attention/attention.h"

namespace inferlab {
namespace {

struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int seq_q, seq_k, heads, kv_heads, group, batch_heads;
  float scale_log2;  // softmax scale * log2(e)
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// Element offset of (row, col) in a [rows x D] tile stored with 16-byte chunks XOR-swizzled.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

template <class T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
  }
};
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
  }
};

// 2^x on the SFU, flushing denormals (exp2f without fast-math adds a range fix-up per call). The
// softmax only feeds it x <= 0 and needs no denormal results.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// One online-softmax step over the score accumulators of one m16 tile of mma.sync (rows g and g + 8;
// a quad of lanes shares a row): s[n][4] holds this lane's scores of NS n-tiles (raw Q K^T; turned
// into P = 2^(s * scale_log2 - m) in place), m[2] the running row maxima (log2 units), l[2] this
// lane's partial row sums (the quad is summed at the end), acc[NO][4] the O accumulators, rescaled.
template <int NS, int NO>
__device__ __forceinline__ void online_softmax_step(float (&s)[NS][4], float (&m)[2], float (&l)[2],
                                                    float (&acc)[NO][4], float scale_log2) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float mx = m[half];
#pragma unroll
    for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * half], s[n][2 * half + 1]) * scale_log2);
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
    const float base = mx == -INFINITY ? 0.f : mx;
    const float alpha = fast_exp2(m[half] - base);
    m[half] = mx;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < NS; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pv = fast_exp2(s[n][2 * half + e] * scale_log2 - base);
        s[n][2 * half + e] = pv;
        sum += pv;
      }
    l[half] = l[half] * alpha + sum;
#pragma unroll
    for (int n = 0; n < NO; ++n) {
      acc[n][2 * half] *= alpha;
      acc[n][2 * half + 1] *= alpha;
    }
  }
}

// Runtime (dtype, causal) -> compile time, in one place for both kernels:
//   dispatch_dtype_causal(a, [&](auto causal, auto element) {
//     launch<Cfg, decltype(causal)::value, typename decltype(element)::type>(a, stream); });
template <class T>
struct Element {
  using type = T;
};
template <class F>
void dispatch_dtype_causal(const AttentionParams& a, F&& f) {
  if (a.dtype == DType::bf16) {
    if (a.causal) f(std::true_type{}, Element<__nv_bfloat16>{}); else f(std::false_type{}, Element<__nv_bfloat16>{});
  } else {
    if (a.causal) f(std::true_type{}, Element<__half>{}); else f(std::false_type{}, Element<__half>{});
  }
}

inline FlashParams make_flash_params(const AttentionParams& a) {
  FlashParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.o = a.o;
  p.lse = a.lse;
  p.seq_q = int(a.seq_q);
  p.seq_k = int(a.seq_k);
  p.heads = int(a.heads);
  p.kv_heads = int(a.kv_heads);
  p.group = int(a.heads / a.kv_heads);
  p.batch_heads = int(a.batch * a.heads);
  p.scale_log2 = a.softmax_scale() * 1.4426950408889634f;
  return p;
}

}  // namespace
}  // namespace inferlab
