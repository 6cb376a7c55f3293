// What the best weight stream costs, timed as the linear benchmarks time a kernel (L2 flushed by a read sweep
// before every repeat, CUDA events around the launch, median of 30): the floor the weight-only kernels at m = 1
// stand on. For each byte count (the packed weights of the Llama-3-8B MLP and attention shapes):
//   empty   an empty kernel of one block (the launch floor);
//   grid    a grid-stride read of 16-byte loads, 4 loads in flight a thread, 132 x {4, 8} blocks of 256 threads;
//   tiles   the mma weight-only kernel's geometry: 8 warps a block, each warp streaming its own run of 512-byte
//           chunks (ld.global.nc.L1::no_allocate.v4, `depth` in flight), runs of `per_warp` chunks;
//   tiles+t the same with the kernel's split-k tail: a fp32 atomic a warp, a fence, the tile's counter, the last
//           block of a row tile reading the sums back (what an in-block reduction would save).
// kernels/gemm/NOTES.md (w4) has what it measured on the H100. Not part of the build (a probe):
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/probes/weight_stream.cu -o weight_stream && ./weight_stream
#include "probe.cuh"

// warps = the grid's warps; warp w streams chunks [w * per_warp, (w + 1) * per_warp) of 32 uint4 each.
template <int D, bool kTail>
__global__ void __launch_bounds__(256, 4) tiles(const uint4* p, int per_warp, int split, float* partial, int* counters,
                                                unsigned* sink) {
  const int lane = threadIdx.x % 32;
  const int64_t warp = (blockIdx.y * int64_t(gridDim.x) + blockIdx.x) * 8 + threadIdx.x / 32;
  const uint4* wp = p + warp * per_warp * 32 + lane;
  uint4 ring[D];
#pragma unroll
  for (int i = 0; i < D; ++i)
    if (i < per_warp) ring[i] = load_stream(wp + i * 32);
  unsigned acc = 0;
  for (int c0 = 0; c0 < per_warp; c0 += D) {
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int c = c0 + i;
      if (c >= per_warp) break;
      acc = acc * 3u + (ring[i].x ^ ring[i].y ^ ring[i].z ^ ring[i].w);
      if (c + D < per_warp) ring[i] = load_stream(wp + (c + D) * 32);
    }
  }
  if constexpr (!kTail) {
    if (acc == 0x9e3779b9u) *sink = acc;
  } else {
    const int row = blockIdx.x * 128 + (threadIdx.x / 32) * 16 + lane / 4;
    if (lane % 4 == 0) atomicAdd(partial + row, float(acc & 0xff));
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counters + blockIdx.x, 1) == split - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (threadIdx.x < 128) {
      const float v = __ldcg(partial + blockIdx.x * 128 + threadIdx.x);
      partial[blockIdx.x * 128 + threadIdx.x] = 0.f;
      if (v == -1.f) *sink = 1;
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;
  }
}

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Timer tm;
  const int64_t max_bytes = int64_t(130) << 20;
  uint4* w;
  CK(cudaMalloc(&w, max_bytes));
  CK(cudaMemset(w, 3, max_bytes));
  float* partial;
  int* counters;
  CK(cudaMalloc(&partial, 1 << 20));
  CK(cudaMemset(partial, 0, 1 << 20));
  CK(cudaMalloc(&counters, 1 << 16));
  CK(cudaMemset(counters, 0, 1 << 16));
  // warm the clocks
  for (int i = 0; i < 200; ++i) grid_read<<<sms * 4, 256>>>(w, max_bytes / 16, tm.sink);
  CK(cudaDeviceSynchronize());

  printf("empty kernel: %.2f us\n", tm.median_us([&] { empty_kernel<<<1, 32>>>(); }));
  struct Shape {
    const char* name;
    int n, k;
    double bytes_per_weight;
  };
  const Shape shapes[] = {{"int4 14336x4096", 14336, 4096, 0.5}, {"int8 14336x4096", 14336, 4096, 1.0},
                          {"bf16 14336x4096", 14336, 4096, 2.0}, {"int4 4096x4096", 4096, 4096, 0.5},
                          {"int4 1024x4096", 1024, 4096, 0.5},   {"int4 4096x14336", 4096, 14336, 0.5}};
  printf("%-18s %9s %-34s %8s %8s\n", "shape", "MB", "variant", "us", "GB/s");
  for (const Shape& s : shapes) {
    const int64_t bytes = int64_t(double(s.n) * s.k * s.bytes_per_weight);
    const int64_t chunks = bytes / 512;
    auto row = [&](const char* v, double us) {
      printf("%-18s %9.2f %-34s %8.2f %8.0f\n", s.name, bytes / 1e6, v, us, bytes / (us * 1e-6) / 1e9);
    };
    for (int bps : {4, 8}) {
      char name[64];
      snprintf(name, sizeof name, "grid %d x 256", sms * bps);
      row(name, tm.median_us([&] { grid_read<<<sms * bps, 256>>>(w, bytes / 16, tm.sink); }));
    }
    // tiles: row tiles of 128 rows (n / 128), chunks per row-tile warp = k / cols_per_chunk / split
    const int row_tiles = s.n / 128;
    const int chunks_per_row = int(chunks / (s.n / 16));  // a 16-row warp tile's chunks over the whole k
    for (int split : {1, 2, 4, 8, 16}) {
      if (chunks_per_row % split) continue;
      const int per_warp = chunks_per_row / split;
      const dim3 grid(row_tiles, split);
      char name[64];
      snprintf(name, sizeof name, "tiles %dx%d d6 (%d/warp)", row_tiles, split, per_warp);
      row(name, tm.median_us([&] { tiles<6, false><<<grid, 256>>>(w, per_warp, split, partial, counters, tm.sink); }));
      snprintf(name, sizeof name, "tiles %dx%d d8 (%d/warp)", row_tiles, split, per_warp);
      row(name, tm.median_us([&] { tiles<8, false><<<grid, 256>>>(w, per_warp, split, partial, counters, tm.sink); }));
      if (split > 1) {
        snprintf(name, sizeof name, "tiles+t %dx%d d6", row_tiles, split);
        row(name, tm.median_us([&] { tiles<6, true><<<grid, 256>>>(w, per_warp, split, partial, counters, tm.sink); }));
      }
    }
  }
  return 0;
}
