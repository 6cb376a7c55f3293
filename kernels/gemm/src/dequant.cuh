#pragma once
// The weight-only kernels' dequantization, shared by the mma kernel (weight_only.cu) and the wgmma
// kernel (weight_only_sm90.cu): packed values to the bf16x2 A-fragment registers, exactly.
#include <cstdint>

namespace inferlab {

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {  // (a & b) | c
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Bytes `byte` and `byte + 1` of w (two's complement int8) as a bf16x2, without the conversion unit:
// the byte with its sign bit flipped is u = q + 128, the low byte of the float 2^23 + u (bits
// 0x4B0000uu); subtracting 2^23 + 128 leaves q exactly, and |q| <= 128 is exact in bf16, so the
// float's upper half is the bf16 (prmt 0x7632 packs the two upper halves).
__device__ __forceinline__ uint32_t int8x2_to_bf16x2(uint32_t w, int byte) {
  const uint32_t u = w ^ 0x80808080u;
  const float lo = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7650 + byte)) - 8388736.f;
  const float hi = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7650 + byte + 1)) - 8388736.f;
  return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}

// Bytes `byte` and `byte + 1` of w (two's complement int8) as an f16x2 of q exactly, in two instructions
// after the sign flip (which a word's four values share): the byte with its sign bit flipped is u = q + 128, and
// the half 0x64uu is 1024 + u exactly (fp16 has 10 mantissa bits), so one prmt builds two of them and one
// f16x2 subtraction of 1152 leaves q (integers to 2048 are exact in fp16). The bf16 form above needs five: bf16's
// 7 mantissa bits hold no byte. The mma kernel's int8 path at m <= 8 (weight_only.cu) feeds these to mma.sync
// with X converted to fp16.
__device__ __forceinline__ uint32_t int8x2_to_f16x2(uint32_t w, int byte) {
  const uint32_t u = w ^ 0x80808080u;
  const uint32_t h = __byte_perm(u, 0x64646464u, byte == 0 ? 0x4140 : 0x4342);
  uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(h), "r"(0x64806480u));
  return d;
}

}  // namespace inferlab
