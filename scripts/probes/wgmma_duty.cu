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
#include "probe.cuh"

__device__ unsigned long long g_clock[4];

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) | (1ull << 62);
}

#define ACC64(d)                                                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),         \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),           \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),          \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),          \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),          \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),          \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),          \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define REGS64                                                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "    \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, " \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

__device__ __forceinline__ void ss(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " REGS64 ", %64, %65, 1, 1, 1, 0, 0;\n"
               : ACC64(d)
               : "l"(a), "l"(b));
}
__device__ __forceinline__ void rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " REGS64 ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
               : ACC64(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

constexpr int kTile = 128 * 128 * 2;  // a [128 x 128] bf16 tile, two 64-column atoms of 128 rows x 128 bytes

// One group: 8 k-steps of 16 over head dim 128, as flash_sm90_common.cuh issue_qk.
template <bool RS>
__device__ __forceinline__ void group(float (&d)[64], uint32_t q, uint32_t k, const uint32_t (&pa)[8][4]) {
  fence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const uint32_t kb = k + uint32_t((ks * 16 / 64) * 128 * 128 + (ks * 16 % 64) * 2);
    if constexpr (RS) {
      rs(d, pa[ks], desc_sw128(kb, 16, 1024));
    } else {
      const uint32_t a = q + uint32_t((ks * 16 / 64) * 128 * 128 + (ks * 16 % 64) * 2);
      ss(d, desc_sw128(a, 16, 1024), desc_sw128(kb, 16, 1024));
    }
  }
  commit();
}

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
      if (mode == 0) {
        float warm = 0;
        CK(cudaEventRecord(a));
        while (warm < 300.f) {
          launch();
          CK(cudaEventRecord(b));
          CK(cudaEventSynchronize(b));
          CK(cudaEventElapsedTime(&warm, a, b));
        }
        for (int r = 0; r < 11; ++r) {
          CK(cudaEventRecord(a));
          launch();
          CK(cudaEventRecord(b));
          CK(cudaEventSynchronize(b));
          float ms;
          CK(cudaEventElapsedTime(&ms, a, b));
          t.push_back(ms * 1e3);
          clk.push_back(clock_of_last());
        }
      } else {
        // the Timer's repeats, each launch's clock read after it (the flush kernel runs before the next)
        for (int i = 0; i < 5; ++i) launch();
        for (int r = 0; r < 30; ++r) {
          flush_kernel<<<528, 256>>>(timer.flush, timer.flush_n, timer.sink);
          CK(cudaEventRecord(a));
          launch();
          CK(cudaEventRecord(b));
          CK(cudaEventSynchronize(b));
          float ms;
          CK(cudaEventElapsedTime(&ms, a, b));
          t.push_back(ms * 1e3);
          clk.push_back(clock_of_last());
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
