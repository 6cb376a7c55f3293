// How fast one thread's bulk copies (cp.async.bulk, the weight-only wgmma_tma kernel's) fill shared memory: a
// ring of S stages per block, one producer thread issuing each stage as `pieces` copies of stage / pieces
// bytes (contiguous, or each piece its own stream, as that kernel's 8 warps' weight chunks), one consumer
// thread waiting on the stage's mbarrier and releasing it; GB/s over the GPU (1 GiB streamed, best of 5).
// With the argument `sms`: one or two blocks on each of N SMs (N = 1 ... all), 16 KB stages as two 8 KB copies, from
// HBM (each block its own slice) and from L2 (every block re-reading one 2 MB slice): what one SM's bulk
// copies can pull, and whether the source matters.
// kernels/gemm/NOTES.md tma2 and tma3 have what it measured on the H100. Not part of the build (a probe, sm_90a):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a scripts/probes/tma_bulk_copy.cu -o tma_bulk_copy
//   ./tma_bulk_copy [sms]
#include "probe.cuh"
__global__ void probe(const uint8_t* src, int64_t per_block, int stage, int S, int pieces, int64_t stride, int units, unsigned long long* sink,
                      int64_t wrap = 0) {
  extern __shared__ __align__(128) uint8_t sm[];
  uint64_t* full = reinterpret_cast<uint64_t*>(sm + S * stage);
  uint64_t* empty = full + S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(&empty[s])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const uint8_t* base = src + (wrap ? 0 : blockIdx.x * per_block);
  const int piece = stage / pieces;
  if (threadIdx.x == 32) {  // producer
    for (int i = 0; i < units; ++i) {
      const int s = i % S;
      if (i >= S) wait(&empty[s], (i / S - 1) & 1);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(&full[s])), "r"(stage) : "memory");
      for (int p = 0; p < pieces; ++p) {
        const uint8_t* g = stride ? base + p * stride + int64_t(i) * piece
                           : base + (wrap ? (int64_t(i) * stage) % wrap : int64_t(i) * stage) + p * piece;
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(sa(sm + s * stage + p * piece)),
                     "l"(g), "r"(piece), "r"(sa(&full[s])) : "memory");
      }
    }
  } else if (threadIdx.x == 0) {  // consumer
    unsigned long long acc = 0;
    for (int i = 0; i < units; ++i) {
      const int s = i % S;
      wait(&full[s], (i / S) & 1);
      acc += sm[s * stage];
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sa(&empty[s])) : "memory");
    }
    if (acc == 12345) *sink = acc;
  }
}
int main(int argc, char** argv) {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t total = int64_t(1) << 30;
  uint8_t* buf; CK(cudaMalloc(&buf, total)); CK(cudaMemset(buf, 1, total));
  unsigned long long* sink; CK(cudaMalloc(&sink, 8));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  if (argc > 1) {  // sms: the rate per SM at N SMs, from HBM and from L2
    const int stage = 16384, S = 6, pieces = 2, smem = S * stage + 2 * S * 8;
    CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    printf("SMs blocks/SM source GB/s_total GB/s_per_SM bytes_per_clock_per_SM(1.98 GHz)\n");
    for (int bps : {1, 2})
    for (int n : {1, 8, 16, 32, 64, 96, 132}) {
      if (n > sms) continue;
      for (int l2 : {0, 1}) {
        const int64_t per_block = l2 ? (int64_t(2) << 20) : total / (2 * sms) / 65536 * 65536;
        const int u = l2 ? 1024 : int(per_block / stage);
        float best = 1e9;
        for (int r = 0; r < 5; ++r) {
          cudaEventRecord(a);
          probe<<<n * bps, 64, smem>>>(buf, per_block, stage, S, pieces, 0, u, sink, l2 ? per_block : 0);
          cudaEventRecord(b); CK(cudaEventSynchronize(b));
          float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
        }
        CK(cudaGetLastError());
        const double gbs = double(n) * bps * u * stage / (best * 1e-3) / 1e9;
        printf("%3d %d %s %8.1f %7.1f %5.1f\n", n, bps, l2 ? "L2 " : "HBM", gbs, gbs / n, gbs / n / 1.98);
      }
    }
    return 0;
  }
  printf("blocks/SM stage pieces stride ring_KB GB/s\n");
  for (int bps : {1, 2})
  for (int stage : {8192, 16384})
  for (int pieces : {1, 2, 8, 16})
  for (int strided : {0, 1}) {
    if (pieces == 1 && strided) continue;
    for (int ringkb : {48, 96}) {
      const int S = ringkb * 1024 / stage / bps;
      if (S < 2) continue;
      const int blocks = sms * bps;
      const int64_t per_block = total / blocks / 65536 * 65536;
      // units per block: each piece stream advances piece bytes a unit; keep inside the block's slice
      const int64_t stride = strided ? per_block / pieces / 4096 * 4096 : 0;  // the pieces: separate streams
      const int u = int(per_block / stage);
      const int smem = S * stage + 2 * S * 8;
      CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      float best = 1e9;
      for (int r = 0; r < 5; ++r) {
        cudaEventRecord(a);
        probe<<<blocks, 64, smem>>>(buf, per_block, stage, S, pieces, stride, u, sink);
        cudaEventRecord(b); CK(cudaEventSynchronize(b));
        float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
      }
      CK(cudaGetLastError());
      const double bytes = double(blocks) * u * stage;
      printf("%d %6d %3d %6lld %3d %8.1f   (units/block %d, %.1f us)\n", bps, stage, pieces, (long long)stride, ringkb, bytes / (best * 1e-3) / 1e9, u, best * 1e3);
    }
  }
  return 0;
}
