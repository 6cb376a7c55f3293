// What the one-token ring kernel's stream alone costs (WeightOnlyKernel::mma_tma without its math), timed as the
// linear benchmarks time a kernel (L2 flushed by a read sweep before every repeat, CUDA events around the launch,
// median of 30): which ring shape moves a weight of one layer (int4 14336 x 4096: 29.4 MB of chunks and 1.8 MB of
// scales) fastest, against the plain grid read of the same bytes. Each block takes a share of the row tiles (16 rows
// x k: contiguous and uneven, as the kernel was before NOTES.md r9; `even` at stage granularity; or interleaved, as
// the kernel is since), one producer thread copies it in stages of `stage` bytes as one bulk copy each (L2
// evict-first or no hint), plus a `side` copy a stage from a second buffer (the scales' 1 KB) or the block's scales
// in one copy up front, into a ring of S slots; 16 consumer warps wait on each stage and release it (one arrive a
// warp, as the kernel's early release). The configurations are the rows of NOTES.md r9's table.
// kernels/gemm/NOTES.md r9 has what it measured on the H100. Not part of the build (a probe, sm_90a):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a scripts/probes/ring_stream.cu -o ring_stream
//   ./ring_stream
#include "probe.cuh"

struct Ring {
  const uint8_t* w;     // the chunks
  const uint8_t* side;  // the scales
  int64_t tile_bytes;   // a tile's bytes (16 rows x k)
  int tiles, blocks;    // uneven shares of tiles, as the kernel
  int64_t total;        // even: the bytes, split at stage granularity
  int even;  // 0: contiguous shares of tiles (the kernel before r9); 1: of stages; 2: tiles interleaved (block b: b,
             // b + blocks, ...: the kernel since r9)
  int stage, S, side_bytes, hint;
  int upfront;  // the block's scales (1/16 of its contiguous share's bytes) as one copy before the ring
};

constexpr int kConsumerWarps = 16;

__global__ void __launch_bounds__(kConsumerWarps * 32 + 32) ring(const __grid_constant__ Ring r, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  const int slot_bytes = r.stage + r.side_bytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(sm + r.S * slot_bytes);
  uint64_t* empty = full + r.S;
  int64_t begin, end;
  if (r.even == 2) {
    begin = 0;
    end = int64_t((r.tiles - blockIdx.x + r.blocks - 1) / r.blocks) * r.tile_bytes;
  } else if (r.even) {
    const int64_t stages = r.total / r.stage;
    begin = blockIdx.x * stages / r.blocks * r.stage;
    end = (blockIdx.x + 1) * stages / r.blocks * r.stage;
  } else {
    begin = int64_t(blockIdx.x) * r.tiles / r.blocks * r.tile_bytes;
    end = int64_t(blockIdx.x + 1) * r.tiles / r.blocks * r.tile_bytes;
  }
  const int units = int((end - begin) / r.stage);
  const int per_tile = int(r.tile_bytes / r.stage);
  // the byte offset of the block's unit i
  auto at = [&](int i) -> int64_t {
    if (r.even != 2) return begin + int64_t(i) * r.stage;
    return (int64_t(blockIdx.x) + int64_t(i / per_tile) * r.blocks) * r.tile_bytes + int64_t(i % per_tile) * r.stage;
  };
  uint64_t* upbar = empty + r.S;
  uint8_t* upbuf = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(upbar + 1) + 127) & ~uintptr_t(127));
  const int up_bytes = r.upfront ? int((end - begin) / 16) : 0;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(upbar)));
    for (int s = 0; s < r.S; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sa(&empty[s])), "r"(kConsumerWarps));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == kConsumerWarps) {
    if (lane != 0) return;
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    const int64_t side_begin = begin / 16;  // the scales: 1/16 of the chunks' bytes, in the same order
    if (up_bytes) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(upbar)), "r"(up_bytes) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(sa(upbuf)),
                   "l"(r.side + side_begin), "r"(up_bytes), "r"(sa(upbar))
                   : "memory");
    }
    for (int i = 0; i < units; ++i) {
      const int s = i % r.S;
      if (i >= r.S) wait(&empty[s], (i / r.S - 1) & 1);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(&full[s])),
                   "r"(r.stage + r.side_bytes)
                   : "memory");
      uint8_t* dst = sm + s * slot_bytes;
      if (r.side_bytes)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                         sa(dst + r.stage)),
                     "l"(r.side + at(i) / 16), "r"(r.side_bytes), "r"(sa(&full[s]))
                     : "memory");
      const uint8_t* g = r.w + at(i);
      if (r.hint)
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
                sa(dst)),
            "l"(g), "r"(r.stage), "r"(sa(&full[s])), "l"(policy)
            : "memory");
      else
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(sa(dst)),
                     "l"(g), "r"(r.stage), "r"(sa(&full[s]))
                     : "memory");
    }
    return;
  }
  uint32_t acc = 0;
  if (up_bytes) {
    wait(upbar, 0);
    acc += upbuf[threadIdx.x % 64];
  }
  for (int i = 0; i < units; ++i) {
    const int s = i % r.S;
    wait(&full[s], (i / r.S) & 1);
    const uint4 v = *reinterpret_cast<const uint4*>(sm + s * slot_bytes + (warp * 32 + lane) * 16 % r.stage);
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(sa(&empty[s])) : "memory");
    acc += v.x ^ v.w;
  }
  if (acc == 0x2545f491u) *sink = acc;
}

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t max_bytes = 14336 * 4096 / 2;
  uint8_t *w, *side;  // w holds the chunks and, for the grid read, as many bytes again as the scales
  CK(cudaMalloc(&w, max_bytes + max_bytes / 16 + (1 << 20)));
  CK(cudaMalloc(&side, max_bytes / 16 + (1 << 20)));
  CK(cudaMemset(w, 1, max_bytes + max_bytes / 16 + (1 << 20)));
  CK(cudaMemset(side, 1, max_bytes / 16 + (1 << 20)));
  Timer tm;
  unsigned* sink = tm.sink;
  printf("empty kernel: %.2f us\n", tm.median_us([&] { empty_kernel<<<1, 32>>>(); }));
  const double mb = (max_bytes + max_bytes / 16) / 1e6;
  for (int bps : {4, 8}) {
    const double us = tm.median_us([&] { grid_read<<<sms * bps, 256>>>(reinterpret_cast<const uint4*>(w), (max_bytes + max_bytes / 16) / 16, sink); });
    printf("grid read %d blocks/SM, %.1f MB: %.2f us\n", bps, mb, us);
  }
  struct Cfg { int bps, S, stage, side, hint, even, upfront; };
  // NOTES.md r9's rows: contiguous shares (the kernel before r9) and their variants, then the interleaved tiles
  const std::vector<Cfg> cfgs = {
      {1, 3, 16384, 1024, 1, 0, 0},                                // the kernel's ring before r9
      {1, 3, 16384, 0, 1, 0, 0},                                   // no side copies
      {1, 4, 16384, 1024, 1, 0, 0}, {1, 6, 16384, 1024, 1, 0, 0}, {1, 8, 16384, 1024, 1, 0, 0},
      {1, 4, 8192, 512, 1, 0, 0},   {1, 8, 8192, 512, 1, 0, 0},    // 8 KB stages
      {1, 3, 32768, 2048, 1, 0, 0},                                // 32 KB stages
      {1, 3, 16384, 0, 1, 0, 1},    {1, 4, 16384, 0, 1, 0, 1}, {1, 3, 32768, 0, 1, 0, 1},  // the scales up front
      {2, 3, 16384, 1024, 1, 0, 0},                                // two blocks an SM
      {1, 3, 16384, 1024, 1, 1, 0},                                // shares even at stage granularity
      {1, 3, 16384, 1024, 0, 0, 0},                                // no L2 hint
      {1, 3, 16384, 1024, 1, 2, 0},                                // tiles interleaved (the kernel since r9)
      {1, 4, 16384, 1024, 1, 2, 0}, {1, 3, 16384, 0, 1, 2, 0}, {1, 3, 32768, 2048, 1, 2, 0},
      {1, 6, 16384, 1024, 1, 2, 0}, {1, 8, 16384, 1024, 1, 2, 0},  // deeper interleaved rings (the H200's bandwidth)
  };
  struct Shape { int64_t n, k; };
  for (Shape sh : {Shape{14336, 4096}, Shape{4096, 14336}}) {
    const int64_t tile_bytes = 16 * sh.k / 2, tiles = sh.n / 16, chunk_bytes = tiles * tile_bytes;
    printf("%lld x %lld: bps S stage side hint even upfront | us\n", (long long)sh.n, (long long)sh.k);
    for (int rep = 0; rep < 2; ++rep)
      for (Cfg c : cfgs) {
        if (tile_bytes % c.stage) continue;  // stages straddle tiles
        if (c.upfront && c.even == 2) continue;  // the up-front copy is of a contiguous share's scales
        Ring r{w, side, tile_bytes, int(tiles), sms * c.bps, chunk_bytes, c.even, c.stage, c.S, c.side, c.hint, c.upfront};
        const int up_max = c.upfront ? int(chunk_bytes / (sms * c.bps) / 16 + tile_bytes / 16 + c.stage / 16) : 0;
        const int smem = c.S * (c.stage + c.side) + 2 * c.S * 8 + 8 + 128 + up_max;
        if (smem > 227 * 1024) continue;
        CK(cudaFuncSetAttribute(ring, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const double us = tm.median_us([&] { ring<<<r.blocks, kConsumerWarps * 32 + 32, smem>>>(r, sink); });
        printf("%d %d %5d %4d %d %d %d | %.2f\n", c.bps, c.S, c.stage, c.side, c.hint, c.even, c.upfront, us);
      }
  }
  return 0;
}
