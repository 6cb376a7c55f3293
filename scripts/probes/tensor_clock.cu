// The SM clock a kernel runs at, by how many tensor-core instructions it issues, and the tensor cores' speed by
// the values they multiply. The weight-only kernels at 16 tokens ran at 1.77-1.81 GHz with their mma.sync and at
// 1.95-1.97 GHz with the products knocked out, even where the tensor pipe was nearly idle (kernels/gemm/NOTES.md r19).
// Is the clock set by the tensor cores' presence or by their load, and does an mma's time depend on its operands?
//   mix    every SM runs 8 warps of integer work (four LOP3/IADD chains a thread, each feeding the next: ~40 warp
//          instructions a loop iteration); one mma.sync m16n8k16
//          (bf16, fp32 sums) every `every` loop iterations, 0 for none. Clock = clock64 ticks over %globaltimer ns of
//          block 0's thread 0, from its start to its end.
//   dense  back-to-back mma.sync, 8 warps an SM, 4 independent accumulators a warp, with A and B from four operand
//          sets: zeros; the weight-only kernels' 128 + q (bf16, q 0..15); normal(0, 1) in bf16; random bits masked
//          as the knock-out of r18 (w & 0x3F7F3F7F: any exponent up to 2^63, subnormals included). Reported: the
//          clock and the clock ticks an SM takes per mma.
// Each case runs short (mix ~150 us, dense ~10 us) and long (~15 ms, ~1 ms), every one after the others in one process,
// three rounds; then both long runs on 1 to all SMs (one block an SM), two rounds. Not part of the build (a probe):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a scripts/probes/tensor_clock.cu -o tensor_clock
//   ./tensor_clock
#include "probe.cuh"

__device__ unsigned long long g_clock[4];

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(256) mix(int iters, int every, uint32_t seed, float* out) {
  unsigned long long c0 = 0, g0 = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) c0 = clock64(), g0 = global_ns();
  uint32_t x0 = seed ^ threadIdx.x, x1 = x0 * 3u + 1u, x2 = x0 * 5u + 7u, x3 = x0 * 9u + 3u;
  const uint32_t a[4] = {0x43004300u, 0x43014301u, 0x43024302u, 0x43034303u};
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  int next = every;  // iterations to the next mma (a countdown: no division in the loop)
#pragma unroll 1
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      x0 = (x0 ^ 0x9e3779b9u) + x1, x1 = (x1 ^ 0x7f4a7c15u) + x2;
      x2 = (x2 ^ 0x85ebca6bu) + x3, x3 = (x3 ^ 0xc2b2ae35u) + x0;
    }
    if (every > 0 && --next == 0) next = every, mma(c, a, 0x3f803f80u, 0x3f803f80u);
  }
  if ((x0 ^ x1 ^ x2 ^ x3) == 0x12345678u || c[0] + c[1] + c[2] + c[3] == -1.f) out[threadIdx.x] = float(x0) + c[0];
  if (blockIdx.x == 0 && threadIdx.x == 0)
    g_clock[0] = c0, g_clock[1] = clock64(), g_clock[2] = g0, g_clock[3] = global_ns();
}

// Operand set s of lane l, register r: A's four and B's two words.
__device__ __forceinline__ uint32_t operand(int s, uint32_t h) {
  h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
  switch (s) {
    case 0: return 0u;
    case 1: return (h & 0x000F000Fu) | 0x43004300u;  // 128 + q
    case 2: {  // about normal(0, 1): the sum of four uniforms, centred, as two bf16
      const float u = (float(h & 0xffu) + float((h >> 8) & 0xffu) + float((h >> 16) & 0xffu) + float(h >> 24)) / 255.f - 2.f;
      const float v = (float(h & 0x7fu) + float((h >> 7) & 0xffu) + float((h >> 15) & 0xffu) + float(h >> 23)) / 255.f - 2.f;
      return (__float_as_uint(u) >> 16) | (__float_as_uint(v) & 0xffff0000u);
    }
    default: return h & 0x3F7F3F7Fu;  // random bits (r18's knock-out)
  }
}

__global__ void __launch_bounds__(256) dense(int iters, int set, float* out) {
  unsigned long long c0 = 0, g0 = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) c0 = clock64(), g0 = global_ns();
  const uint32_t base = blockIdx.x * 256u + threadIdx.x;
  uint32_t a[4], b[2];
  for (int r = 0; r < 4; ++r) a[r] = operand(set, base * 8u + r);
  for (int r = 0; r < 2; ++r) b[r] = operand(set, base * 8u + 4 + r);
  float c[4][4] = {};
#pragma unroll 1
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) mma(c[j], a, b[0], b[1]);
  }
  float s = 0.f;
  for (int j = 0; j < 4; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == -1.2345f) out[threadIdx.x] = s;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    g_clock[0] = c0, g_clock[1] = clock64(), g_clock[2] = g0, g_clock[3] = global_ns();
}

struct Clock {
  double mhz, ticks, ns;
};
Clock read_clock() {
  unsigned long long v[4];
  CK(cudaMemcpyFromSymbol(v, g_clock, sizeof v));
  return {double(v[1] - v[0]) / double(v[3] - v[2]) * 1e3, double(v[1] - v[0]), double(v[3] - v[2])};
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out = nullptr;
  CK(cudaMalloc(&out, 256 * sizeof(float)));
  const int everys[] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
  const char* sets[] = {"zeros", "128+q", "normal", "random bits"};
  // Iterations of a short and a long run (mix: a loop iteration is ~40 instructions; dense: 4 mma a warp)
  const int mix_iters[] = {3000, 300000}, dense_iters[] = {300, 30000};
  for (int round = 0; round < 3; ++round) {
    printf("round %d\n", round);
    for (int len = 0; len < 2; ++len) {
      for (int e : everys) {
        mix<<<sms, 256>>>(mix_iters[len], e, 1234u + round, out);  // warm-up of the same case
        mix<<<sms, 256>>>(mix_iters[len], e, 1234u + round, out);
        CK(cudaDeviceSynchronize());
        const Clock c = read_clock();
        printf("  mix   %s  mma every %4d iterations  %7.1f us  %6.0f MHz\n", len ? "long " : "short", e, c.ns / 1e3,
               c.mhz);
      }
      for (int s = 0; s < 4; ++s) {
        dense<<<sms, 256>>>(dense_iters[len], s, out);
        dense<<<sms, 256>>>(dense_iters[len], s, out);
        CK(cudaDeviceSynchronize());
        const Clock c = read_clock();
        // an SM's mma: 8 warps x 4 a loop iteration
        printf("  dense %s  %-11s  %7.1f us  %6.0f MHz  %5.2f clocks an SM per mma\n", len ? "long " : "short", sets[s],
               c.ns / 1e3, c.mhz, c.ticks / (double(dense_iters[len]) * 32.0));
      }
    }
  }
  // The clock by how many SMs issue the mma (one block an SM: blocks beyond the first wave would not start at once):
  // back-to-back mma.sync and the integer loop with one mma every 4 iterations, long runs.
  printf("by SMs issuing mma\n");
  for (int round = 0; round < 2; ++round)
    for (int blocks : {1, 2, 4, 8, 16, 32, 48, 64, 96, sms}) {
      dense<<<blocks, 256>>>(dense_iters[1], 2, out);
      dense<<<blocks, 256>>>(dense_iters[1], 2, out);
      CK(cudaDeviceSynchronize());
      const Clock d = read_clock();
      mix<<<blocks, 256>>>(mix_iters[1], 4, 99u, out);
      mix<<<blocks, 256>>>(mix_iters[1], 4, 99u, out);
      CK(cudaDeviceSynchronize());
      const Clock m = read_clock();
      printf("  %3d SMs  dense %6.0f MHz  mix (one mma every 4) %6.0f MHz\n", blocks, d.mhz, m.mhz);
    }
  CK(cudaGetLastError());
  return 0;
}
