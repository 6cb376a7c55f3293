// The SM's rate and clock under back-to-back wgmma (roofline/pipe_ceilings.h, PipeMeasurements::wgmma): one block
// of two warpgroups an SM, as the flash kernels run; each warpgroup issues, round after round, an S = Q K^T group
// (8 wgmma.m64n128k16 bf16, A and B from 128-byte-swizzled shared memory: head dim 128) and a P V group (A from
// registers), into two accumulators, one group in flight while the next issues (wait_group 1). The operands are
// random bf16 in [-1, 1): the clock the power limit holds depends on them (scripts/probes/wgmma_rate.cu on the H200:
// 1.58-1.62 GHz on random operands, 1.71-1.80 on zeros, 4090-4100 FLOP an SM a clock either way). With CUDA-core work
// between the groups the tensor pipe is busy less of the time and the clock rises (scripts/probes/wgmma_duty.cu on
// the H200: ~1.8 GHz up to a share of 0.57, 1.66 at 0.755, 1.53-1.55 at 0.94-0.99): PipeMeasurements::wgmma_clock_by_duty.
#include "wgmma_ceiling.h"

#include <cstdint>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/kernels/common/sm90_async.cuh"
#include "wgmma.h"  // kernels/attention/src: the flash kernels' wrappers

namespace inferlab {
namespace {

constexpr int kTileBytes = 128 * 128 * 2;  // [128 x 128] bf16: two 64-column atoms of 128 rows x 128 bytes
constexpr int kGroups = 2;                 // S = Q K^T, then P V, each round
constexpr double kGroupFlops = 8.0 * 2.0 * 64 * 128 * 16;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// `units` units of softmax-like CUDA-core work between each round's two groups (a unit: 8 independent FFMA + MUFU.EX2
// chains a thread, their results summed (FADD) and maximized (FMNMX) into one running sum and one running maximum),
// which run while the first group is in flight: the more units, the less of the time the tensor pipe is busy (0: the
// products back to back).
__global__ void __launch_bounds__(256) wgmma_ceiling_kernel(int iters, int units, unsigned long long* stamps,
                                                            float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned long long c0 = 0, g0 = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) c0 = clock64(), g0 = global_ns();
  // Q and K tiles of random bf16 in [-1, 1): a hash's sign and mantissa bits, an exponent of at most 126.
  uint32_t* w = reinterpret_cast<uint32_t*>(smem);
  for (int i = threadIdx.x; i < 2 * kTileBytes / 4; i += blockDim.x) {
    uint32_t h = (uint32_t(i) + 0x9e3779b9u * (blockIdx.x + 1)) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = h & 0xBF7FBF7Fu & ~0x40004000u;
  }
  sm90::fence_proxy_async();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const uint32_t base = sm90::shared_addr(smem);
  const uint32_t q = base + uint32_t(wg * 64 * 128), k = base + kTileBytes;
  uint32_t pa[8][4];  // P's fragments: random bf16 in [-1, 1)
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) pa[i][j] = (w[(threadIdx.x * 37 + i * 4 + j) & 1023] | 0x3c003c00u) & 0xBF7FBF7Fu;
  float s[64], o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) s[i] = o[i] = 0.f;
  float x[8], xsum = 0.f, xmax = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = 0.1f * float((threadIdx.x + i) & 7);
  for (int it = 0; it < iters; ++it) {
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const uint32_t off = uint32_t((ks * 16 / 64) * 128 * 128 + (ks * 16 % 64) * 2);
      wgmma::ss_Bf16_n128(s, sm90::desc_sw128(q + off, 16, 1024), sm90::desc_sw128(k + off, 16, 1024), 1);
    }
    wgmma::commit();
    wgmma::wait<1>();
    for (int u = 0; u < units; ++u) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        x[i] = ex2(fmaf(x[i], -0.5f, 0.1f));
        xsum += x[i];
        xmax = fmaxf(xmax, x[i]);
      }
    }
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
      wgmma::rs_Bf16_n128_tb(o, pa[kk], sm90::desc_sw128(k + uint32_t(kk * 16 * 128), 128 * 128, 1024));
    wgmma::commit();
    wgmma::wait<1>();
  }
  wgmma::wait<0>();
  wgmma::fence_operand(s);
  wgmma::fence_operand(o);
  float sum = xsum + xmax;
#pragma unroll
  for (int i = 0; i < 64; ++i) sum += s[i] + o[i];
  if (sum == 1234.5f) *sink = sum;
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    stamps[0] = c0, stamps[1] = g0;
    stamps[2] = clock64(), stamps[3] = global_ns();
  }
#else
  __trap();  // built for a GPU without wgmma: the launcher runs it on compute capability 9.0 only
#endif
}

}  // namespace

double wgmma_ceiling_flops_per_block(int iters) { return 2.0 /*warpgroups*/ * kGroups * kGroupFlops * double(iters); }
int wgmma_ceiling_smem_bytes() { return 2 * kTileBytes; }

void launch_wgmma_ceiling(int blocks, int iters, int units, unsigned long long* stamps, float* sink,
                          cudaStream_t stream) {
  static KernelSmem attr;
  attr.ensure(wgmma_ceiling_kernel, wgmma_ceiling_smem_bytes(), "ceilings/wgmma");
  wgmma_ceiling_kernel<<<blocks, 256, wgmma_ceiling_smem_bytes(), stream>>>(iters, units, stamps, sink);
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace inferlab
