#pragma once
// wgmma.mma_async with A from registers (sm_90a) for the weight-only kernel: D[64 x N] (+)= A[64 x 16] ·
// B[16 x N], bf16 operands, fp32 accumulators, B K-major (not transposed) in shared memory through a
// descriptor; kAccumulate = 0 overwrites D (an immediate: a predicate computed by setp between two
// wgmma of one pipeline stage makes ptxas serialize them, C7513). Mechanical text, one function per N.
#include <cstdint>

namespace inferlab::wgmma_rs {

template <int kAccumulate>
__device__ __forceinline__ void bf16_n16(float (&d)[8], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, %13, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kAccumulate));
}

template <int kAccumulate>
__device__ __forceinline__ void bf16_n32(float (&d)[16], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, %21, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kAccumulate));
}

template <int kAccumulate>
__device__ __forceinline__ void bf16_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, %37, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kAccumulate));
}

template <int N, int kAccumulate>
__device__ __forceinline__ void bf16(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
  static_assert(N == 16 || N == 32 || N == 64, "wgmma_rs: N is 16, 32 or 64");
  if constexpr (N == 16) bf16_n16<kAccumulate>(d, a, b);
  else if constexpr (N == 32) bf16_n32<kAccumulate>(d, a, b);
  else bf16_n64<kAccumulate>(d, a, b);
}

// The 2:4 form (wgmma.mma_async.sp m64nNk32): A the compressed [64 x 16] bf16 fragment of the warpgroup's
// k32 step (per warp mma.sp m16n8k32's A layout, quant.h), e the metadata word (threads 0 and 1 of each quad:
// the 16-column halves of rows g (low 16 bits) and g + 8; sparsity selector 0), B [32 x N] through its
// descriptor.
template <int kAccumulate>
__device__ __forceinline__ void sp_bf16_n16(float (&d)[8], const uint32_t (&a)[4], uint64_t b, uint32_t e) {
  asm volatile(
      "wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, %13, 0, %14, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(e), "n"(kAccumulate));
}

template <int kAccumulate>
__device__ __forceinline__ void sp_bf16_n32(float (&d)[16], const uint32_t (&a)[4], uint64_t b, uint32_t e) {
  asm volatile(
      "wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, %21, 0, %22, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(e), "n"(kAccumulate));
}

template <int kAccumulate>
__device__ __forceinline__ void sp_bf16_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t b, uint32_t e) {
  asm volatile(
      "wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, %37, 0, %38, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(e), "n"(kAccumulate));
}

template <int N, int kAccumulate>
__device__ __forceinline__ void sp_bf16(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, uint32_t e) {
  static_assert(N == 16 || N == 32 || N == 64, "wgmma_rs: N is 16, 32 or 64");
  if constexpr (N == 16) sp_bf16_n16<kAccumulate>(d, a, b, e);
  else if constexpr (N == 32) sp_bf16_n32<kAccumulate>(d, a, b, e);
  else sp_bf16_n64<kAccumulate>(d, a, b, e);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Registers a wgmma in flight reads or writes are not touched by other code before its wait: this
// tells the compiler the array is in use up to here.
// A fragments are read by the wgmma in flight too: ptxas keeps their registers only while the program
// still uses them, and otherwise reuses them at once, waiting for every wgmma before the next (SASS:
// WARPGROUP.DEPBAR after each HGMMA). A use after the wait that covers their products keeps them.
template <int K>
__device__ __forceinline__ void keep(uint32_t (&a)[K][4]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" ::"r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]) : "memory");
}
// Operands computed by ordinary instructions must be complete before the wgmma.fence that opens the
// batch (ptxas serializes every wgmma when one is defined between two of a batch, C7513): the compiler
// would otherwise sink their arithmetic next to each wgmma. This pins them before it.
template <int K>
__device__ __forceinline__ void pin(uint32_t (&a)[K][4], uint64_t (&b)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3]), "+l"(b[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operand(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

}  // namespace inferlab::wgmma_rs
