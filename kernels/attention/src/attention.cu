// Attention forward: validation, the entry point, and the naive variant.
//
// naive (3 passes over the scores, plus a tiny pointer-table kernel):
//   1. S = scale * Q K^T   cuBLAS batched GEMM, one matrix per (batch, head), written to HBM
//   2. softmax             one block per row: max and sum in fp32, P written over S, log-sum-exp
//   3. O = P V             cuBLAS batched GEMM
// GQA/MQA: the pointer table maps query head h to KV head h / group, so K/V are not copied.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flash_fwd.h"
#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/cublas.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kernels.h"

namespace inferlab {
namespace {

constexpr std::size_t kAlign = 256;
__host__ __device__ std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::size_t scores_bytes(const AttentionParams& p) {
  return std::size_t(p.batch) * p.heads * p.seq_q * p.seq_k * 2;
}
__host__ __device__ std::size_t pointer_table_bytes(const AttentionParams& p) { return std::size_t(p.batch) * p.heads * 5 * sizeof(void*); }

// Pointer tables for the two batched GEMMs: [q, k, v, s, o] x (batch * heads).
__global__ void build_pointer_tables(const AttentionParams p, const void** table) {
  const int64_t n = p.batch * p.heads;
  const int64_t group = p.heads / p.kv_heads;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / p.heads, h = i % p.heads, kh = h / group;
    const auto* q = static_cast<const char*>(p.q);
    const auto* k = static_cast<const char*>(p.k);
    const auto* v = static_cast<const char*>(p.v);
    auto* o = static_cast<char*>(p.o);
    auto* s = static_cast<char*>(p.workspace) + align_up(pointer_table_bytes(p));
    table[0 * n + i] = q + ((b * p.seq_q) * p.heads + h) * p.head_dim * 2;
    table[1 * n + i] = k + ((b * p.seq_k) * p.kv_heads + kh) * p.head_dim * 2;
    table[2 * n + i] = v + ((b * p.seq_k) * p.kv_heads + kh) * p.head_dim * 2;
    table[3 * n + i] = s + i * p.seq_q * p.seq_k * 2;
    table[4 * n + i] = o + ((b * p.seq_q) * p.heads + h) * p.head_dim * 2;
  }
}

template <class T>
__device__ __forceinline__ float to_f(T x) {
  return DTypeTraits<DTypeOf<T>::value>::to_float(x);
}
template <class T>
__device__ __forceinline__ T from_f(float x) {
  return DTypeTraits<DTypeOf<T>::value>::from_float(x);
}

// Online (max, sum) pair combine: the sum is kept relative to the max.
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
  m = mx;
}

// One block per row of S ([batch, heads, seq_q, seq_k]); P written in place, masked entries 0.
template <class T, int kThreads>
__global__ void __launch_bounds__(kThreads) softmax_rows(const AttentionParams p, float* lse) {
  const int64_t row = blockIdx.x;
  const int64_t i = row % p.seq_q;
  T* s = reinterpret_cast<T*>(static_cast<char*>(p.workspace) + align_up(pointer_table_bytes(p))) + row * p.seq_k;
  const int64_t valid = p.causal ? min(p.seq_k, i + p.seq_k - p.seq_q + 1) : p.seq_k;
  float m = -INFINITY, sum = 0.f;
  for (int64_t j = threadIdx.x; j < valid; j += kThreads) {
    const float x = to_f(s[j]);
    if (x > m) {
      sum = sum * __expf(m - x) + 1.f;
      m = x;
    } else {
      sum += __expf(x - m);
    }
  }
  // Block reduction of (m, sum): warp shuffles, then one warp over the warp results.
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) combine(m, sum, __shfl_xor_sync(~0u, m, off), __shfl_xor_sync(~0u, sum, off));
  if (threadIdx.x % 32 == 0) {
    sm[threadIdx.x / 32] = m;
    ss[threadIdx.x / 32] = sum;
  }
  __syncthreads();
  m = threadIdx.x < kThreads / 32 ? sm[threadIdx.x] : -INFINITY;
  sum = threadIdx.x < kThreads / 32 ? ss[threadIdx.x] : 0.f;
  for (int off = 16; off > 0; off >>= 1) combine(m, sum, __shfl_xor_sync(~0u, m, off), __shfl_xor_sync(~0u, sum, off));
  m = __shfl_sync(~0u, m, 0);
  sum = __shfl_sync(~0u, sum, 0);
  __shared__ float fm, fs;
  if (threadIdx.x == 0) {
    fm = m;
    fs = sum;
    lse[row] = sum > 0.f ? m + logf(sum) : -INFINITY;
  }
  __syncthreads();
  m = fm;
  const float inv = fs > 0.f ? 1.f / fs : 0.f;
  for (int64_t j = threadIdx.x; j < p.seq_k; j += kThreads)
    s[j] = from_f<T>(j < valid ? __expf(to_f(s[j]) - m) * inv : 0.f);
}

void naive_forward(const AttentionParams& p, cudaStream_t stream) {
  const int64_t n = p.batch * p.heads;
  auto** table = static_cast<const void**>(p.workspace);
  build_pointer_tables<<<int((n + 255) / 256), 256, 0, stream>>>(p, table);
  INFERLAB_CHECK_LAUNCH();
  const cudaDataType_t t = p.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  cublasHandle_t h = cublas_handle();
  INFERLAB_CUBLAS_CHECK(cublasSetStream(h, stream));
  const float scale = p.softmax_scale(), one = 1.f, zero = 0.f;
  const int sq = int(p.seq_q), sk = int(p.seq_k), d = int(p.head_dim);
  // S^T (column-major, seq_k x seq_q) = K (d x seq_k, column-major view)^T * Q (d x seq_q): row-major S.
  INFERLAB_CUBLAS_CHECK(cublasGemmBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sk, sq, d, &scale, table + 1 * n, t,
                                            int(p.kv_heads * d), table + 0 * n, t, int(p.heads * d), &zero,
                                            const_cast<void**>(table + 3 * n), t, sk, int(n), CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
  constexpr int kThreads = 256;
  if (p.dtype == DType::bf16)
    softmax_rows<__nv_bfloat16, kThreads><<<unsigned(n * p.seq_q), kThreads, 0, stream>>>(p, p.lse);
  else
    softmax_rows<__half, kThreads><<<unsigned(n * p.seq_q), kThreads, 0, stream>>>(p, p.lse);
  INFERLAB_CHECK_LAUNCH();
  // O^T (column-major, d x seq_q) = V^T (d x seq_k) * P^T (seq_k x seq_q).
  INFERLAB_CUBLAS_CHECK(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, d, sq, sk, &one, table + 2 * n, t,
                                            int(p.kv_heads * d), table + 3 * n, t, sk, &zero,
                                            const_cast<void**>(table + 4 * n), t, int(p.heads * d), int(n),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void validate_shape(const AttentionParams& p, AttentionVariant variant) {
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16)
    throw Error("attention: unsupported dtype " + dtype_name(p.dtype) + " (supported: bf16, fp16)");
  // The overlapped flash kernel's head dims (naive runs any of them; the other flash rungs have 64 and
  // 128, flash_fwd.cu check_options says so).
  if (!flash_overlap_head_dim_supported(p.head_dim))
    throw Error("attention: unsupported head dim " + std::to_string(p.head_dim) + " (supported: 64, 96, 128, 256)");
  if (!(p.scale >= 0.f) || std::isinf(p.scale))  // the flash kernels scale a row's maximum, not each score
    throw Error("attention: scale must be positive and finite, or 0 for 1 / sqrt(head_dim) (got " +
                std::to_string(p.scale) + ")");
  if (p.batch <= 0 || p.heads <= 0 || p.kv_heads <= 0 || p.seq_q <= 0 || p.seq_k <= 0)
    throw Error("attention: batch, heads, kv_heads, seq_q and seq_k must be positive");
  if (p.heads % p.kv_heads != 0)
    throw Error("attention: kv_heads " + std::to_string(p.kv_heads) + " does not divide heads " +
                std::to_string(p.heads));
  if (variant == AttentionVariant::naive && (p.seq_k > INT32_MAX || p.seq_q > INT32_MAX ||
                                             p.batch * p.heads > INT32_MAX || p.batch * p.heads * p.seq_q > INT32_MAX))
    throw Error("attention/naive: shape too large for cuBLAS's 32-bit sizes");
  if (variant == AttentionVariant::flash && (p.seq_q > INT32_MAX || p.seq_k > INT32_MAX || p.batch * p.heads > INT32_MAX))
    throw Error("attention/flash: shape too large for 32-bit indices");
}

void validate(const AttentionParams& p, AttentionVariant variant) {
  validate_shape(p, variant);
  if (!p.q || !p.k || !p.v || !p.o || !p.lse) throw Error("attention: q, k, v, o and lse must all be given");
  // The flash kernels store O four bytes at a time at least (16 from head dim 128 on Hopper, where o allows it).
  if (variant == AttentionVariant::flash && reinterpret_cast<std::uintptr_t>(p.o) % 4 != 0)
    throw Error("attention/flash: o must be 4-byte aligned (its kernels store O in pairs of elements at least)");
  if (variant == AttentionVariant::naive) {
    // cuBLAS's batched GEMM (P V into O) wrote the two elements before an o placed 4 bytes past a 16-byte boundary
    // (H200, cuBLAS 13.0; AttentionGpu.AnOutputNotSixteenByteAlignedIsStoredNarrow), so such an o is refused.
    if (reinterpret_cast<std::uintptr_t>(p.o) % 16 != 0)
      throw Error("attention/naive: o must be 16-byte aligned (cuBLAS's batched GEMM writes outside a less aligned one)");
    if (p.workspace_bytes < attention_workspace_bytes(p, variant) || !p.workspace)
      throw Error("attention/naive: needs a workspace of " + std::to_string(attention_workspace_bytes(p, variant)) +
                  " bytes for the scores");
  }
}

std::size_t attention_workspace_bytes(const AttentionParams& p, AttentionVariant variant) {
  if (variant == AttentionVariant::flash) return 0;
  return align_up(pointer_table_bytes(p)) + scores_bytes(p);
}

std::size_t attention_device_bytes(const AttentionParams& p, AttentionVariant variant) {
  const std::size_t q = std::size_t(p.batch) * p.seq_q * p.heads * p.head_dim * 2;
  const std::size_t kv = std::size_t(p.batch) * p.seq_k * p.kv_heads * p.head_dim * 2;
  const std::size_t lse = std::size_t(p.batch) * p.heads * p.seq_q * 4;
  return 2 * q + 2 * kv + lse + attention_workspace_bytes(p, variant);
}

void attention_forward(const AttentionParams& p, AttentionVariant variant, cudaStream_t stream) {
  validate(p, variant);
  if (variant == AttentionVariant::naive) {
    NvtxRange range("attention/naive");
    naive_forward(p, stream);
  } else {
    NvtxRange range("attention/flash");
    launch_flash_forward(p, stream);
  }
}

}  // namespace inferlab
