#pragma once
// Linear layers Y[m, n] = X[m, k] · W[n, k]ᵀ (nn.Linear) with the weight in one of the formats of
// sim/linear.h, behind one params struct and one entry point:
//   bf16, fp16  cuBLAS (cublasGemmEx): the baseline, GEMV at m = 1 (cuBLAS picks its kernel)
//   fp8         cuBLASLt, e4m3 X and W with per-tensor scales, bf16 Y (compute capability >= 8.9)
//   int8, int4  weight-only: the packed weight is streamed once and dequantized in registers into the
//               tensor cores with the bf16 activations, never materialized in HBM: two kernels side by
//               side (LinearParams::kernel, sim/kernels.h WeightOnlyKernel): mma.sync (weight_only.cu)
//               and, on Hopper, wgmma (weight_only_sm90.cu), wgmma_tma (weight_only_sm90_tma.cu: its
//               ring filled by a TMA producer) and, at one token, mma_tma (weight_only_mma_tma.cu: mma.sync
//               fed by a producer's bulk copies, one block an SM over whole row tiles), the plan choosing by m
//   sparse24    2:4: the compressed values and their metadata feed the sparse tensor cores directly:
//               mma.sp (weight_only.cu) and, on Hopper, wgmma.sp (weight_only_sm90_tma.cu), by m
// Plain C++ header: the weight's host-side packing is kernels/gemm/quant.h.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/dtype.h"
#include "inferlab/sim/kernels.h"
#include "inferlab/sim/linear.h"

namespace inferlab {

struct LinearParams {
  WeightFormat format = WeightFormat::bf16;
  int64_t m = 1, n = 1, k = 1;
  const void* x = nullptr;         // [m, k] row-major: bf16 (fp16 for fp16, e4m3 for fp8)
  const void* w = nullptr;         // PackedWeight::values on the device
  const void* scales = nullptr;    // PackedWeight::scales on the device (int8, int4, fp8); else unused
  const void* metadata = nullptr;  // PackedWeight::metadata on the device (sparse24)
  const float* x_scale = nullptr;  // fp8: X's per-tensor scale on the device (nullptr: 1)
  void* y = nullptr;               // [m, n] row-major: bf16 (fp16 for fp16)
  // Split-K partial sums of the weight-only kernels: zeroed once before first use (cudaMemset);
  // every launch leaves it zeroed (the block that finishes a row tile clears what it read).
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Weight-only formats: blocks along k per 128-row tile. 0: the plan's (sim/kernels.h plan_weight_only,
  // the grid the model charges); else a candidate it was measured against (it must divide k / 128, with
  // the X slice of a block within its shared memory: plan_linear says so by name).
  int64_t split_k = 0;
  // Weight-only formats: which kernel runs (automatic: the plan's choice by m, wgmma_from_tokens);
  // wgmma or wgmma_tma where it was not built or the GPU lacks it, or wgmma for sparse24, is an
  // inferlab::Error naming why.
  // split_k applies to the mma kernel, and to mma_tma named (kernel = mma_tma) at 2 to 16 tokens: its cluster's blocks
  // along k (1 at 9-16 tokens and k = 4096: the wide kernel, sim/kernels.h weight_only_mma_tma_wide). With automatic
  // it names the mma kernel's split at every m (the plan's wgmma_tma at 9 tokens or more plans its own grid).
  WeightOnlyKernel kernel = WeightOnlyKernel::automatic;
  // The mma kernel: how the split-k blocks of a row tile sum (sim/kernels.h SplitReduce; automatic: the plan's).
  // cluster where the GPU or the build lacks clusters, the split exceeds 16 blocks or m 16 tokens, is an inferlab::Error.
  SplitReduce split_reduce = SplitReduce::automatic;
};

// How the weight-only kernels cut the problem (tile choices in one place: sim/kernels.h plan_weight_only).
struct LinearPlan {
  WeightOnlyKernel kernel = WeightOnlyKernel::mma;  // resolved: mma, wgmma, wgmma_tma or mma_tma
  int m_tiles = 1;   // mma: n8 tiles of tokens (m padded to 8, 16, 32 or 64)
  int split_k = 1;   // mma: blocks along k per row tile
  int k_warps = 1;   // mma: warps sharing a 16-row tile along the block's k range (a block: 128 / k_warps rows)
  int blocks_per_sm = 0;  // mma: the blocks an SM the kernel is built for (its registers and chunks in flight)
  int64_t k_per_block = 0;
  int cluster = 1;   // mma, split_k > 1: the blocks of a cluster that sum a row tile (SplitReduce::cluster), 1: atomics;
                     // mma_tma at 2 to 16 tokens: the blocks of a cluster along k
  int tokens = 0;    // wgmma, wgmma_tma: N of m64nNk16 (m padded to 16, 32 or 64)
  int64_t ctas = 0;  // wgmma, wgmma_tma, mma_tma: the persistent grid
};
// compute_capability: 0 asks the current device (whether the wgmma kernel can run there).
LinearPlan plan_linear(const LinearParams& p, int sm_count, int compute_capability = 0);

std::size_t linear_workspace_bytes(const LinearParams& p, int sm_count);
// Everything checkable on the host, before any launch: the format on this GPU (fp8 needs compute
// capability >= 8.9), the shape (the layouts' constraints, m <= 64 for the weight-only kernels),
// 16-byte alignment of every pointer, the workspace. Throws inferlab::Error naming the problem.
void validate_linear(const LinearParams& p, int sm_count, int compute_capability);
void linear(const LinearParams& p, cudaStream_t stream);

// CPU reference in double: y[m, n] = x[m, k] · unpack_weight(w)ᵀ, x as given (already rounded to
// the activation type by the caller).
std::vector<double> linear_reference(const std::vector<float>& x, int64_t m, const PackedWeight& w);

// A dense GEMM through cuBLAS(Lt), planned once: Y[m, n] = X[m, k] · W[n, k]ᵀ, row-major, fp32
// accumulation. bf16 / fp16: cublasGemmEx, Y of the input type. fp8_e4m3: cuBLASLt, Y bf16, with
// per-tensor scales (device pointers, nullptr = 1) of X and W; fast_accum selects
// CUBLASLT_MATMUL_DESC_FAST_ACCUM (no periodic promotion to fp32: faster, less exact). The
// ceilings' tensor-core measurement and the linear() baselines both use it.
class DenseGemm {
 public:
  DenseGemm(DType dtype, int m, int n, int k, bool fast_accum = false);
  ~DenseGemm();
  DenseGemm(const DenseGemm&) = delete;
  DenseGemm& operator=(const DenseGemm&) = delete;

  void run(const void* x, const void* w, void* y, cudaStream_t stream = nullptr, const float* x_scale = nullptr,
           const float* w_scale = nullptr) const;
  double flops() const { return 2.0 * double(m_) * double(n_) * double(k_); }
  DType output_dtype() const { return dtype_ == DType::fp8_e4m3 ? DType::bf16 : dtype_; }

 private:
  struct Lt;  // cuBLASLt plan, fp8 only
  DType dtype_;
  int m_, n_, k_;
  std::unique_ptr<Lt> lt_;
};

}  // namespace inferlab
