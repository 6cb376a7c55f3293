// The clock the power limit holds against how busy the tensor pipe is. wgmma_rate.cu measures the SM under
// back-to-back wgmma (4090-4100 FLOP a clock at 1.58-1.62 GHz on the H200, random operands), the clock the model runs
// the flash kernels at (KernelLaunch::wgmma_clocked); but ncu puts the wgmma rung's prefill and the overlapped kernel
// at head dim 64, whose tensor pipes are 36-48% busy, at 1.77-1.80 GHz in the experiments' own timing, and the
// overlapped kernel at head dim 128 (76% busy) at 1.53. Here every SM runs 2 warpgroups (one CTA of 256 threads, as the
// flash kernels' consumers) issuing, round after round, two groups of 8 wgmma.m64n128k16 bf16 on random operands
// (A and B from shared memory, one group in flight) and, between them, F units of softmax-like work on the CUDA cores
// (a unit: 8 independent chains of FFMA, MUFU.EX2, FADD, FMNMX a thread), so the tensor pipe's share of the time
// falls as F grows. Two timings:
//   sustained  back to back after ~0.3 s of warm-up (the clock settled as in a long run)
//   timed      as the experiments time a launch: L2 flushed before each of 30 repeats, the median (probe.cuh Timer)
// Reported per F: the tensor pipe's duty (FLOP an SM a clock / 4096), the clock (clock64 ticks over %globaltimer ns,
// block 0's thread 0, median over the repeats) and the FLOP an SM a clock.
// Found (H200, 2026-11-29): ~1.8 GHz up to a duty of 0.57, 1.66 at 0.755, 1.53-1.55 at 0.94-0.99. The flash kernels'
// clocks do not follow this curve alone: the overlapped kernel at head dim 96 keeps the tensor pipe 61% busy (ncu) and
// runs at 1.58 GHz in the experiments' timing, where the curve holds 1.78 (kernels/attention/NOTES.md). `inferlab
// ceilings` measures the same sweep (PipeMeasurements::wgmma_clock_by_duty).
// Not part of the build (a probe):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a scripts/probes/wgmma_duty.cu -o wgmma_duty
//   ./wgmma_duty
#include "wgmma_probe.cuh"

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The tensor pipe's rounds with F units of CUDA-core work between the groups.
__global__ void __launch_bounds__(256) duty_loop(int iters, int units, float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned long long c0 = 0, g0 = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) c0 = clock64(), g0 = global_ns();
  uint32_t* w = reinterpret_cast<uint32_t*>(smem);
  for (int i = threadIdx.x; i < 2 * kTile / 4; i += blockDim.x) {
    uint32_t h = (uint32_t(i) + 0x9e3779b9u * (blockIdx.x + 1)) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = (h & 0xBF7FBF7Fu) & ~0x40004000u;
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t q = base + uint32_t(wg * 64 * 128), k = base + kTile;
  uint32_t pa[8][4] = {};
  float d0[64], d1[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d0[i] = d1[i] = 0.f;
  float x[8], sum = 0.f, mx = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = 0.1f * float((threadIdx.x + i) & 7);
  for (int it = 0; it < iters; ++it) {
    group<false>(d0, q, k, pa);
    wait<1>();
    for (int u = 0; u < units; ++u) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        x[i] = ex2(fmaf(x[i], -0.5f, 0.1f));
        sum += x[i];
        mx = fmaxf(mx, x[i]);
      }
    }
    group<false>(d1, q, k, pa);
    wait<1>();
  }
  wait<0>();
  float s = sum + mx;
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
  const int smem = 2 * kTile;
  CK(cudaFuncSetAttribute(duty_loop, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  float* out;
  CK(cudaMalloc(&out, 16));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  Timer timer;
  const double round_flops = 2.0 /*warpgroups*/ * 2.0 /*groups*/ * 8.0 * 2.0 * 64 * 128 * 16;
  auto clock_of_last = [] {
    unsigned long long c[4];
    CK(cudaMemcpyFromSymbol(c, g_clock, sizeof(c)));
    return double(c[2] - c[0]) / (double(c[3] - c[1]) * 1e-9);
  };
  for (int units : {0, 4, 8, 12, 16, 20, 24, 32, 48, 64, 96}) {
    // ~3 ms a launch, as a prefill point at seq 16384: 2400 rounds at units = 0, fewer as the filler grows
    const int iters = std::max(200, int(2400.0 / (1.0 + units / 12.0)));
    auto launch = [&] { duty_loop<<<sms, 256, smem>>>(iters, units, out); };
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<double> t, clk;
      auto timed_once = [&] {  // one launch between events, its block 0's clock read after it
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1e3);
        clk.push_back(clock_of_last());
      };
      if (mode == 0) {
        float warm = 0;
        CK(cudaEventRecord(a));
        while (warm < 300.f) {
          launch();
          CK(cudaEventRecord(b));
          CK(cudaEventSynchronize(b));
          CK(cudaEventElapsedTime(&warm, a, b));
        }
        for (int r = 0; r < 11; ++r) timed_once();
      } else {
        // the Timer's repeats (the flush kernel before each)
        for (int i = 0; i < 5; ++i) launch();
        for (int r = 0; r < 30; ++r) {
          flush_kernel<<<528, 256>>>(timer.flush, timer.flush_n, timer.sink);
          timed_once();
        }
      }
      CK(cudaGetLastError());
      std::sort(t.begin(), t.end());
      std::sort(clk.begin(), clk.end());
      const double us = t[t.size() / 2], hz = clk[clk.size() / 2];
      const double per_clk = round_flops * iters / (us * 1e-6 * hz);
      printf("units %3d %-9s iters %5d: %9.1f us  clock %6.0f MHz  %7.1f FLOP/SM/clk  duty %5.3f\n", units,
             mode ? "timed" : "sustained", iters, us, hz / 1e6, per_clk, per_clk / 4096.0);
    }
  }
  return 0;
}
