#pragma once
// What the wgmma probes share (wgmma_rate.cu, wgmma_duty.cu): block 0's clock stamps, the 128-byte-swizzled
// descriptors, wgmma.m64n128k16 bf16 with A from shared memory (ss) or registers (rs), and one group of 8 of them
// over head dim 128 as flash_sm90_common.cuh issue_qk issues them.
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
