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
