// The SM's rate and clock under back-to-back wgmma, the product the Hopper kernels (flash prefill, the weight-only
// wgmma rungs) issue. `inferlab ceilings` measures the tensor pipe with mma.sync (tensor_flops_per_clk: 2727 FLOP a
// clock on the H100 and the H200, two thirds of wgmma's 4096) and the library's rate with cuBLAS at 8192^3 (789 TFLOP/s
// on the H100, 685 on the H200, whose SMs are the H100's); the flash kernel runs at the same speed on both GPUs.
//   ss     every SM runs W warpgroups (1 CTA, or 2 CTAs of 2); each issues groups of 8 wgmma.m64n128k16 bf16 (one
//          head-dim-128 S = Q K^T of the flash kernel), A and B from 128-byte-swizzled shared memory, two groups in
//          flight into two accumulators (wait_group 1).
//   rs     the same with A from registers (the flash kernel's P V).
// Operands: random bf16 in [-1, 1) or zeros. Each case short (~1 ms) and long (~20 ms). Reported: FLOP an SM a clock
// and the clock (clock64 ticks over %globaltimer ns of block 0's thread 0, its start to its end), and TFLOP/s.
// Not part of the build (a probe):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a scripts/probes/wgmma_rate.cu -o wgmma_rate
//   ./wgmma_rate
#include "wgmma_probe.cuh"

template <bool RS>
__global__ void __launch_bounds__(256) wgmma_loop(int iters, int random, float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned long long c0 = 0, g0 = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) c0 = clock64(), g0 = global_ns();
  // Q and K tiles: random bf16 in [-1, 1) (sign, exponent 126 or below, random mantissa) or zeros.
  uint32_t* w = reinterpret_cast<uint32_t*>(smem);
  for (int i = threadIdx.x; i < 2 * kTile / 4; i += blockDim.x) {
    uint32_t h = (uint32_t(i) + 0x9e3779b9u * (blockIdx.x + 1)) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = random ? (h & 0xBF7FBF7Fu) & ~0x40004000u : 0u;
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t q = base + uint32_t(wg * 64 * 128), k = base + kTile;
  uint32_t pa[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) pa[i][j] = random ? (w[(threadIdx.x * 37 + i * 4 + j) & 1023] | 0x3c003c00u) & 0xBF7FBF7Fu : 0u;
  float d0[64], d1[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d0[i] = d1[i] = 0.f;
  for (int it = 0; it < iters; ++it) {
    group<RS>(d0, q, k, pa);
    wait<1>();
    group<RS>(d1, q, k, pa);
    wait<1>();
  }
  wait<0>();
  float s = 0;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += d0[i] + d1[i];
  if (s == 1234.5f) out[0] = s;
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    g_clock[0] = c0, g_clock[1] = g0;
    g_clock[2] = clock64(), g_clock[3] = global_ns();
  }
}

int main() {
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("%s, %d SMs\n", prop.name, sms);
  const int smem = 2 * kTile;  // 64 KB
  CK(cudaFuncSetAttribute(wgmma_loop<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(wgmma_loop<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  float* out;
  CK(cudaMalloc(&out, 16));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const double group_flops = 8.0 * 2.0 * 64 * 128 * 16;
  for (int round = 0; round < 2; ++round)
    for (int rsform = 0; rsform < 2; ++rsform)
      for (int random = 1; random >= 0; --random)
        for (int ctas = 1; ctas <= 2; ++ctas)
          for (int iters : {512, 8192}) {
            auto launch = [&] {
              if (rsform)
                wgmma_loop<true><<<sms * ctas, 256, smem>>>(iters, random, out);
              else
                wgmma_loop<false><<<sms * ctas, 256, smem>>>(iters, random, out);
            };
            // warm up for ~0.3 s so the clock settles as it would in a long run; timed back to back, not by probe.cuh's
            // Timer, whose L2 flush between launches would let the clock recover
            cudaEvent_t w0, w1;
            CK(cudaEventCreate(&w0));
            CK(cudaEventCreate(&w1));
            float warm = 0;
            CK(cudaEventRecord(w0));
            while (warm < 300.f) {
              launch();
              CK(cudaEventRecord(w1));
              CK(cudaEventSynchronize(w1));
              CK(cudaEventElapsedTime(&warm, w0, w1));
            }
            std::vector<float> t;
            std::vector<double> clk;
            for (int r = 0; r < 11; ++r) {
              CK(cudaEventRecord(a));
              launch();
              CK(cudaEventRecord(b));
              CK(cudaEventSynchronize(b));
              float ms;
              CK(cudaEventElapsedTime(&ms, a, b));
              t.push_back(ms);
              unsigned long long c[4];
              CK(cudaMemcpyFromSymbol(c, g_clock, sizeof(c)));
              clk.push_back(double(c[2] - c[0]) / (double(c[3] - c[1]) * 1e-9));
            }
            CK(cudaGetLastError());
            std::sort(t.begin(), t.end());
            std::sort(clk.begin(), clk.end());
            const double s = t[t.size() / 2] * 1e-3, hz = clk[clk.size() / 2];
            const double flops = double(sms) * ctas * 2 /*warpgroups*/ * 2.0 * iters * group_flops;
            printf("round %d %s %s ctas/SM %d iters %5d: %8.3f ms  %7.1f TFLOP/s  clock %6.0f MHz  %7.1f FLOP/SM/clk\n",
                   round, rsform ? "rs" : "ss", random ? "random" : "zeros ", ctas, iters, s * 1e3, flops / s / 1e12,
                   hz / 1e6, flops / (s * sms * hz));
          }
  return 0;
}
