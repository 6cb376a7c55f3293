#pragma once
// A dense linear layer for the decode regime, Y[m, n] = X[m, k] · W[n, k]ᵀ with m <= 8 tokens and a
// bf16/fp16 weight in nn.Linear's row-major layout: the weight is streamed once at the bandwidth limit.
// At these sizes the layer is a read of W and nothing else (2mnk FLOPs against 2nk bytes: ≤ 8 FLOP/B,
// far left of the ridge), and cuBLAS reaches 1163 GB/s on 4096 × 4096 and 1958 GB/s on 14336 × 4096 at
// m = 1 on the H100 (../shared/DEVICE.md, compression peers): a decoder step at batch 1 is made of such
// layers, so the engine runs them here and cuBLAS above m = 8.
//   - one warp per output row (two for m >= 4, sharing each X load); lanes read 16-byte pieces along k,
//     four per lane in flight (the loads of the next pieces are issued before the products of these);
//   - W read with ld.global.nc.L1::no_allocate (streamed once, kept out of L1), X through L1 (every warp
//     reads it: it stays cached);
//   - fp32 products and sums, a warp-shuffle reduction; Y in the input dtype or fp32 (logits).
// The cost is sim/linear.h linear_cost (format bf16/fp16): the weight bytes once.
#include <cstdint>

#include <cuda_runtime.h>

#include "inferlab/sim/dtype.h"

namespace inferlab {

constexpr int64_t kGemvMaxTokens = 8;

struct GemvParams {
  DType dtype = DType::bf16;      // bf16 or fp16: X and W
  DType out_dtype = DType::bf16;  // dtype, or fp32
  int64_t m = 1, n = 1, k = 1;    // m <= kGemvMaxTokens; k a multiple of 8
  const void* x = nullptr;        // [m, k]
  const void* w = nullptr;        // [n, k]
  void* y = nullptr;              // [m, n]
};

// Host checks (dtypes, sizes, 16-byte alignment of x and w), inferlab::Error naming the problem.
void validate_gemv(const GemvParams& p);
void gemv(const GemvParams& p, cudaStream_t stream);

}  // namespace inferlab
