#pragma once
// Host side of the weight formats of sim/linear.h: quantize, prune and pack an n × k weight into
// the exact bytes kernels/gemm reads, and unpack them back into the dense weight the kernel
// multiplies with. Plain C++ (no CUDA): built and tested without a GPU.
//
// Device layouts. The weight-only kernels (weight_only.cu) give each warp 16 output rows and feed
// the weight to mma.sync as its A operand straight from registers, so the values are stored in
// the order of the A fragments (the offline reordering Marlin and FasterTransformer also use): a
// warp's 32 lanes load 512 contiguous bytes, lane L = 4g + t getting 16 bytes that hold, for each
// k16 step, its 8 values  a0 a1 = (row g, cols 2t, 2t+1), a2 a3 = (row g+8, cols 2t, 2t+1),
// a4 a5 = (row g, cols 2t+8, 2t+9), a6 a7 = (row g+8, cols 2t+8, 2t+9)  (PTX m16n8k16 A layout).
// One such 512-byte "chunk" covers 16 rows × C columns, C = 64 (int4), 32 (int8), 32 (sparse24);
// chunks are ordered [row tile n/16][k/C].
//   int8     chunk: per k16 step j (2 of them) the 8 bytes a0 a2 a1 a3 a4 a6 a5 a7 (two's complement), so
//            that a 32-bit word's bytes 0 and 2 hold the pair of one A register and bytes 1 and 3 the
//            next's: word & 0x00FF00FF and (word >> 8) & 0x00FF00FF put a pair in the halves;
//            scales: fp32 [n], w = q · s.
//   int4     chunk: per k16 step j (4 of them) one 32-bit word with nibbles (low to high)
//            a0 a2 a4 a6 a1 a3 a5 a7, so that (word >> 4i) & 0x000F000F holds the pair of A
//            register i; q in [0, 15];
//            scales: uint32 [k/128][n]: bf16 scale s (low half) | bf16 (128 + z) (high half),
//            z in [0, 15], w = (q − z) · s.
//   sparse24 chunk: the mma.sp m16n8k32 A fragment of the compressed 16 × 16 tile: lane (g, t)
//            holds the two kept values of group t (dense cols 4t..4t+3) and of group t+4, rows g
//            and g+8, in the a0..a7 order above (bf16);
//            metadata: uint32 [n/16][k/32][8 g][2 h]: half h covers dense cols 16h..16h+15 of the
//            k32 step; its low 16 bits are row g's, its high 16 bits row g+8's; group j of the half
//            has 4 bits at 4j: the index (0..3) of its first kept value, then of its second
//            (ascending). Threads t = 0, 1 of each quad pass word h = t (sparsity selector 0).
//   fp8      e4m3 values [n, k] row-major (cuBLASLt), per-tensor fp32 scale: w = q · s.
//   bf16/fp16 [n, k] row-major.
#include <cstdint>
#include <vector>

#include "inferlab/sim/linear.h"

namespace inferlab {

struct PackedWeight {
  WeightFormat format = WeightFormat::bf16;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> values;    // device layout above
  std::vector<uint8_t> scales;    // int8: fp32 [n]; int4: uint32 [k/128][n]; fp8: fp32 [1]; else empty
  std::vector<uint8_t> metadata;  // sparse24; else empty
};

// The shape constraints of the kernels' layouts (stricter than sim's format constraints): n a
// multiple of 16 (a warp's rows), k a multiple of the chunk (64 int4 — and of the group 128 —, 32
// int8 and sparse24, 16 fp8 (cuBLASLt), 8 bf16/fp16). Throws inferlab::Error naming the constraint.
void check_packable(WeightFormat f, int64_t n, int64_t k);

// Quantizes (int8, int4, fp8), prunes (sparse24: the 2 largest |w| of every 4 along k, the lower
// index on ties) or rounds (bf16, fp16) w [n, k] row-major, and packs it.
PackedWeight pack_weight(const std::vector<float>& w, int64_t n, int64_t k, WeightFormat f);
// The dense [n, k] weight the kernel multiplies with: exactly what the packed bytes encode.
std::vector<float> unpack_weight(const PackedWeight& p);

// A tensor quantized per tensor to fp8 e4m3 as the fp8 layer takes its activations: the codes of
// x / scale with scale = amax / 448 (1 for an all-zero tensor); value i is fp8_e4m3_value(codes[i]) * scale.
struct Fp8Tensor {
  std::vector<uint8_t> codes;
  float scale = 1.f;
};
Fp8Tensor quantize_fp8(const std::vector<float>& x);

// The pieces, exposed for tests.
// 2:4 pruning in place of a dense [n, k] weight (k a multiple of 4).
void prune_2_4(std::vector<float>& w, int64_t n, int64_t k);
// Round to nearest even into bf16 / fp16 / fp8 e4m3 (saturating at ±448) and back to float.
float round_bf16(float x);
float round_fp16(float x);
float round_fp8_e4m3(float x);
uint16_t bf16_bits(float x);     // bits of round_bf16(x)
uint16_t fp16_bits(float x);
uint8_t fp8_e4m3_bits(float x);  // bits of round_fp8_e4m3(x)
float bf16_value(uint16_t bits);
float fp16_value(uint16_t bits);
float fp8_e4m3_value(uint8_t bits);

// A weight for the experiments, with the outliers LLM weights have: normal(0, 1/sqrt(k)) entries,
// and `outlier_channels` input channels (columns) scaled by `outlier_scale` (0: none).
std::vector<float> random_weight(int64_t n, int64_t k, uint64_t seed, int64_t outlier_channels = 8,
                                 float outlier_scale = 20.f);
// Activations [m, k]: normal(0, 1), rounded to bf16.
std::vector<float> random_activations(int64_t m, int64_t k, uint64_t seed);

}  // namespace inferlab
