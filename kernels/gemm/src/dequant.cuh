#pragma once
// The weight-only kernels' dequantization, shared by the mma kernels (weight_only.cu, weight_only_mma_tma.cu) and the
// wgmma kernels (weight_only_sm90.cu, weight_only_sm90_tma.cu): packed values to the A-fragment registers, exactly.
#include <cstdint>

namespace inferlab {

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {  // (a & b) | c
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Pair `pair` (0 or 1) of the word w of int8 values (two's complement) as a bf16x2, exactly: pair 0 is bytes 0 and 2,
// pair 1 bytes 1 and 3 (quant.h's byte order a0 a2 a1 a3). bf16's 7 mantissa bits hold no byte, but they hold its
// low 7 bits: with b the byte, q = (b & 0x7F) − 128·(b >> 7), the half 0x4300 | (b & 0x7F) is 128 + (b & 0x7F) and
// the half 0x4300 | (b & 0x80) is 128 or 256 (the sign bit lands on the exponent's lowest bit), so their
// difference is q exactly: two lop3 and one bf16x2 FMA a pair (and a shift a word for pair 1), against the five
// instructions of the float route (2^23 + q + 128 by prmt, fadd, the halves packed by prmt).
__device__ __forceinline__ uint32_t int8x2_to_bf16x2(uint32_t w, int pair) {
  const uint32_t b = pair == 0 ? w : w >> 8;
  const uint32_t low = lop3_and_or(b, 0x007F007Fu, 0x43004300u), sign = lop3_and_or(b, 0x00800080u, 0x43004300u);
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(sign), "r"(0xBF80BF80u), "r"(low));  // low − sign
  return d;
}

// Pair `pair` of w (as above) as an f16x2 of q exactly, in two instructions after the sign flip (which a word's four
// values share): the byte with its sign bit flipped is u = q + 128, and the half 0x64uu is 1024 + u exactly (fp16 has
// 10 mantissa bits), so one prmt builds two of them and one f16x2 subtraction of 1152 leaves q (integers to 2048 are
// exact in fp16). The mma kernels' int8 path at one token (weight_only.cu, weight_only_mma_tma.cu) feeds these to
// mma.sync with X converted to fp16.
__device__ __forceinline__ uint32_t int8x2_to_f16x2(uint32_t w, int pair) {
  const uint32_t u = w ^ 0x80808080u;
  const uint32_t h = __byte_perm(u, 0x64646464u, pair == 0 ? 0x4240 : 0x4341);
  uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(h), "r"(0x64806480u));
  return d;
}

}  // namespace inferlab
