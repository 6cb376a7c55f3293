// Where a grid's blocks land, and how fast they stream, launched as thread-block clusters or not: the question
// behind the weight-only kernel's split-k summed in a cluster (kernels/gemm/NOTES.md, c1). Each block of 8 warps
// streams its share of a weight-sized buffer in the mma kernel's geometry (each warp its own run of 512-byte chunks,
// 6 in flight, ld.global.nc.L1::no_allocate), 4 blocks an SM at most (48 KB of shared memory each), and records its
// SM and its start and end (globaltimer). For each grid, plain and as clusters of its y extent (1, y, 1):
//   us          median of 20 launches, events, L2 flushed by a read sweep before each
//   sms         distinct SMs that ran a block; max/SM the most blocks one SM ran
//   start_us    the last block's start after the first's (the dispatch ramp); end_us the same for the ends
//   clusters    cudaOccupancyMaxActiveClusters (plain: blocks an SM x SMs)
// Not part of the build (a probe):
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/probes/cluster_placement.cu -o cluster_placement
//   ./cluster_placement [BYTES [XxY ...]]   (default: the int8 weight of 4096 x 14336 over the grids below; BYTES 0
//   launches the same grids with nothing to stream: what the launch and the clusters' placement cost alone)
#include <set>

#include "probe.cuh"

constexpr int kSmem = 48 << 10, kDepth = 6;

__device__ __forceinline__ uint64_t now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// Block (x, y) streams chunks [block * per_block, +per_block) of 512 bytes, each warp its own run.
__global__ void __launch_bounds__(256, 4) stream(const uint4* w, int per_warp, uint32_t* sm, uint64_t* t0, uint64_t* t1,
                                                 uint32_t* sink) {
  extern __shared__ uint4 pad[];
  const int block = blockIdx.y * gridDim.x + blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint64_t start = now();
  const uint4* p = w + (int64_t(block) * 8 + warp) * per_warp * 32 + lane;
  uint4 ring[kDepth];
  uint32_t acc = 0;
#pragma unroll
  for (int i = 0; i < kDepth; ++i) ring[i] = i < per_warp ? load_stream(p + i * 32) : make_uint4(0, 0, 0, 0);
  for (int c0 = 0; c0 < per_warp; c0 += kDepth) {
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      acc ^= ring[i].x ^ ring[i].y ^ ring[i].z ^ ring[i].w;
      if (c0 + i + kDepth < per_warp) ring[i] = load_stream(p + (c0 + i + kDepth) * 32);
    }
  }
  if (acc == 0x12345678u) pad[threadIdx.x] = make_uint4(acc, 0, 0, 0), sink[0] = pad[lane].x;
  __syncthreads();
  if (threadIdx.x == 0) sm[block] = smid(), t0[block] = start, t1[block] = now();
}

int main(int argc, char** argv) {
  size_t bytes = size_t(58720256);  // the int8 weight of 4096 x 14336
  if (argc > 1) {
    char* end = nullptr;
    bytes = size_t(std::strtoull(argv[1], &end, 10));
    if (end == argv[1] || *end != '\0' || argv[1][0] == '-') {
      printf("bad BYTES %s (a non-negative integer)\n", argv[1]);
      return 1;
    }
  }
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint4 *w, *f;
  uint32_t *sm, *sink;
  uint64_t *t0, *t1;
  const size_t fbytes = size_t(256) << 20;
  CK(cudaMalloc(&w, std::max(bytes, size_t(1) << 20)));
  CK(cudaMalloc(&f, fbytes));
  CK(cudaMemset(w, 1, std::max(bytes, size_t(1) << 20)));
  CK(cudaMemset(f, 1, fbytes));
  CK(cudaMalloc(&sm, 4096 * 4));
  CK(cudaMalloc(&sink, 16));
  CK(cudaMalloc(&t0, 4096 * 8));
  CK(cudaMalloc(&t1, 4096 * 8));
  CK(cudaFuncSetAttribute(stream, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CK(cudaFuncSetAttribute(stream, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<std::pair<int, int>> grids = {{128, 4}, {112, 4}, {128, 2}, {64, 8}, {32, 8}, {32, 16}, {112, 8}, {8, 8}};
  if (argc > 2) grids.clear();
  for (int i = 2; i < argc; ++i) {
    int x = 0, y = 0;
    if (std::sscanf(argv[i], "%dx%d", &x, &y) != 2 || x < 1 || y < 1 || y > 16) {
      printf("bad grid %s (XxY, Y <= 16)\n", argv[i]);
      return 1;
    }
    grids.push_back({x, y});
  }
  printf("%-9s %-7s %8s %5s %7s %9s %7s %9s\n", "grid", "cluster", "us", "sms", "max/SM", "start_us", "end_us", "clusters");
  printf("bytes %zu\n", bytes);
  for (const auto& gp : grids) {
    const int g[2] = {gp.first, gp.second};
    const int blocks = g[0] * g[1];
    if (blocks > 4096) {
      printf("grid %dx%d: more than 4096 blocks\n", g[0], g[1]);
      return 1;
    }
    const int per_warp = int(bytes / 512 / (size_t(blocks) * 8));
    for (int clustered = 0; clustered < 2; ++clustered) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(g[0], g[1]);
      cfg.blockDim = dim3(256);
      cfg.dynamicSmemBytes = kSmem;
      cudaLaunchAttribute at{};
      at.id = cudaLaunchAttributeClusterDimension;
      at.val.clusterDim.x = 1, at.val.clusterDim.y = g[1], at.val.clusterDim.z = 1;
      cfg.attrs = clustered ? &at : nullptr;
      cfg.numAttrs = clustered ? 1 : 0;
      int clusters = 0;
      if (clustered) {
        CK(cudaOccupancyMaxActiveClusters(&clusters, stream, &cfg));
      } else {
        int per = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, stream, 256, kSmem));
        clusters = per * sms;
      }
      std::vector<float> ts;
      for (int r = 0; r < 23; ++r) {
        flush_kernel<<<sms * 4, 256>>>(f, int64_t(fbytes / 16), sink);
        CK(cudaEventRecord(a));
        CK(cudaLaunchKernelEx(&cfg, stream, (const uint4*)w, per_warp, sm, t0, t1, sink));
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 3) ts.push_back(ms * 1000);
      }
      std::sort(ts.begin(), ts.end());
      std::vector<uint32_t> hs(blocks);
      std::vector<uint64_t> h0(blocks), h1(blocks);
      CK(cudaMemcpy(hs.data(), sm, blocks * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(h0.data(), t0, blocks * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(h1.data(), t1, blocks * 8, cudaMemcpyDeviceToHost));
      std::vector<int> per_sm(1024, 0);
      std::set<uint32_t> used(hs.begin(), hs.end());
      for (uint32_t s : hs) ++per_sm[s];
      const uint64_t first = *std::min_element(h0.begin(), h0.end());
      const double start_us = (*std::max_element(h0.begin(), h0.end()) - first) / 1e3;
      const double end_us = (*std::max_element(h1.begin(), h1.end()) - *std::min_element(h1.begin(), h1.end())) / 1e3;
      char gs[16];
      snprintf(gs, sizeof gs, "%dx%d", g[0], g[1]);
      char cs[16];
      snprintf(cs, sizeof cs, clustered ? "1x%d" : "no", g[1]);
      printf("%-9s %-7s %8.2f %5zu %7d %9.2f %7.2f %9d\n", gs, cs, ts[ts.size() / 2], used.size(),
             *std::max_element(per_sm.begin(), per_sm.end()), start_us, end_us, clusters);
    }
  }
  return 0;
}
