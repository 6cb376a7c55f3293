#pragma once
// The mma.sync pieces the two one-token-capable weight-only kernels share (weight_only.cu: mma; weight_only_mma_tma.cu:
// mma_tma): X's fragments by ldmatrix, the m16n8k16 products in bf16 and fp16, and int8's fp16 path's conversion of
// X's row (bf16) to fp16 x 2^e; and the 16-byte cp.async the mma, wgmma and mma_tma kernels stage X (and scales) with.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace inferlab {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(uint32_t(__cvta_generic_to_shared(p))));
}

// 16 bytes global -> shared by cp.async (L2 only), zero-filled where !valid.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(uint32_t(__cvta_generic_to_shared(smem))),
               "l"(gmem), "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// m16n8k8: A's rows g and g + 8 at columns 2t, 2t + 1 (a0, a1), B's rows 2t, 2t + 1 of column g (b).
__device__ __forceinline__ void mma_bf16_k8(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(b));
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t f16x2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// int8's fp16 path: X (bf16) to fp16 times 2^e, e such that the largest |x| of the range it scales lies in [2^14, 2^15):
// bf16's 8 significant bits fit fp16's 11, values below 2^-14 of the scaled range become fp16 subnormals (an error below
// 2^-39 of the largest), none overflows. The products q x 2^e are exact in the fp32 sums; 2^-e leaves with the channel
// scale.
// The largest bf16 magnitude bits of eight values (magnitudes compare as integers).
__device__ __forceinline__ uint32_t bf16x8_max_bits(uint4 v, uint32_t mx) {
  for (uint32_t w : {v.x, v.y, v.z, v.w}) mx = max(mx, max(w & 0x7fffu, (w >> 16) & 0x7fffu));
  return mx;
}
// 2^e and 2^-e for the range whose largest magnitude bits are mx (inf and NaN stay so).
__device__ __forceinline__ void fp16_range_scale(uint32_t mx, float& scale, float& inverse) {
  const int e = min(max(141 - int(mx >> 7), -126), 126);  // 14 - the biased exponent (mx >> 7)
  scale = __int_as_float((127 + e) << 23);
  inverse = __int_as_float((127 - e) << 23);
}
// Eight bf16 values as eight fp16 values times scale.
__device__ __forceinline__ uint4 bf16x8_to_f16x8(uint4 v, float scale) {
  uint4 h;
  h.x = f16x2_bits(__uint_as_float(v.x << 16) * scale, __uint_as_float(v.x & 0xffff0000u) * scale);
  h.y = f16x2_bits(__uint_as_float(v.y << 16) * scale, __uint_as_float(v.y & 0xffff0000u) * scale);
  h.z = f16x2_bits(__uint_as_float(v.z << 16) * scale, __uint_as_float(v.z & 0xffff0000u) * scale);
  h.w = f16x2_bits(__uint_as_float(v.w << 16) * scale, __uint_as_float(v.w & 0xffff0000u) * scale);
  return h;
}

// The sum of 16 consecutive bf16 values (int4's group sums of X: eight threads a 128-column group).
__device__ __forceinline__ float bf16x16_sum(const uint4* src) {
  float lo = 0.f, hi = 0.f;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const uint4 v = src[j];
    for (uint32_t w : {v.x, v.y, v.z, v.w}) lo += __uint_as_float(w << 16), hi += __uint_as_float(w & 0xffff0000u);
  }
  return lo + hi;
}

}  // namespace inferlab
