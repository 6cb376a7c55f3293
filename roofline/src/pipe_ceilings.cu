// Per-pipe microbenchmarks (pipe_ceilings.h). In order:
//   pipe_kernel<Op>   kChains independent chains per thread of one instruction (FFMA, LOP3, MUFU.EX2,
//                     F2FP pack, FFMA+LOP3 mix) on every SM at full occupancy; block 0 stamps clock64
//                     and globaltimer at its start and end (the SM clock under that load)
//   mma_kernel        mma.sync m16n8k16 bf16 into 4 independent accumulators per warp
//   wgmma_ceiling_kernel (wgmma_ceiling.cu, sm_90a) the flash kernels' wgmma groups back to back, random operands:
//                     FLOPs per SM per clock and the SM clock the power limit holds under them
//   dependent_kernel  one warp, one chain of dependent FFMAs: cycles per instruction
//   chase_kernel      pointer chase over random 4 KiB pages of 1 GiB (one thread), alone or while
//                     every other block streams a 1 GiB buffer
//   l2_chase_kernel   pointer chase over random 128-byte lines of 4 MiB (resident in L2; one thread):
//                     SM clock cycles per hop of a load that hits in L2
//   red_kernel        every SM's threads adding fp32 into their own words of a 16 MiB L2-resident buffer
//                     (RED.E.ADD.F32, no return, as the split-k kernels do): atomics per SM clock, whole GPU
//   red_fragment_kernel  the same reductions in the split-k kernels' pattern (weight_only.cu): a warp's 32
//                     lanes add into 4 token rows (2t + e&1, n words apart) x 8 consecutive words (row0 + g)
//   red_vector_kernel the Hopper weight-only kernels' vector reductions (red.global.add.v4.f32, a warp's 512
//                     contiguous bytes an instruction): vector operations per SM clock, whole GPU
//   sweep_read_kernel N blocks of 1024 threads reading their own slices: the bandwidth N SMs reach
//   empty_kernel      the launch floor, one event-timed launch, and as nodes of a CUDA graph
#include "inferlab/roofline/pipe_ceilings.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <cuda_bf16.h>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/roofline/timing.h"
#include "wgmma_ceiling.h"

namespace inferlab {
namespace {

constexpr int kThreads = 256, kChains = 8;

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// stamps[0..3]: clock64 and globaltimer at the start and end of block 0, thread 0.
__device__ __forceinline__ void stamp(unsigned long long* stamps, int k) {
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    stamps[2 * k] = clock64();
    stamps[2 * k + 1] = global_ns();
  }
}

enum class PipeOp { fp32, alu, mufu, cvt, mix };

template <PipeOp OP>
__global__ void __launch_bounds__(kThreads) pipe_kernel(int iters, float b, unsigned long long* stamps, float* sink) {
  stamp(stamps, 0);
  float a[kChains];
  uint32_t x[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) {
    a[j] = -1.0f - 1e-3f * float(threadIdx.x + j);
    x[j] = threadIdx.x * 2654435761u + j;
  }
  const uint32_t y = __float_as_uint(b), z = y * 3u + 1u;
#pragma unroll 4
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < kChains; ++j) {
      if constexpr (OP == PipeOp::fp32 || OP == PipeOp::mix) a[j] = fmaf(a[j], b, 0.5f);
      if constexpr (OP == PipeOp::alu || OP == PipeOp::mix) asm("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x[j]) : "r"(y), "r"(z));
      if constexpr (OP == PipeOp::mufu) asm("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[j]));
      if constexpr (OP == PipeOp::cvt) {
        uint32_t u;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(a[j]), "f"(b));
        a[j] = __uint_as_float(u);
      }
    }
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < kChains; ++j) s += a[j] + float(x[j] & 1u);
  if (s == 1234.5f) *sink = s;
  __syncthreads();
  stamp(stamps, 1);
}

__global__ void __launch_bounds__(kThreads) mma_kernel(int iters, unsigned long long* stamps, float* sink) {
  stamp(stamps, 0);
  const uint32_t a0 = 0x3f803f80u ^ threadIdx.x, b0 = 0x3f803f80u + threadIdx.x;  // bf16x2 near 1
  float c[4][4] = {};
#pragma unroll 2
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a0), "r"(a0 + 1), "r"(a0 + 2), "r"(a0 + 3), "r"(b0), "r"(b0 + 1));
  }
  float s = 0;
  for (int j = 0; j < 4; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 1234.5f) *sink = s;
  __syncthreads();
  stamp(stamps, 1);
}

// One warp: a chain of `iters` dependent FFMAs; stamps clock64 around it.
__global__ void dependent_kernel(int iters, float b, unsigned long long* out, float* sink) {
  float a = float(threadIdx.x) * 1e-3f;
  const long long t0 = clock64();
#pragma unroll 16
  for (int i = 0; i < iters; ++i) a = fmaf(a, b, 0.5f);
  const long long t1 = clock64();
  if (threadIdx.x == 0) out[0] = static_cast<unsigned long long>(t1 - t0);
  if (a == 1234.5f) *sink = a;
}

// One thread chases `hops` pointers that stay in L2 (__ldcg: not cached in L1), after a warm pass; writes
// clock64 ticks per hop.
__global__ void l2_chase_kernel(const uint32_t* next, int lines, int hops, double* cycles_per_hop) {
  uint32_t p = 0;
  for (int i = 0; i < lines; ++i) p = __ldcg(next + p);  // every line into L2
  const long long t0 = clock64();
  for (int i = 0; i < hops; ++i) p = __ldcg(next + p);
  const long long t1 = clock64();
  *cycles_per_hop = double(t1 - t0) / hops + double(p == 0xFFFFFFFFu);
}

// Each thread adds into its own word (consecutive words across a warp), `iters` times over a buffer of
// `words` floats that stays in L2; the result is never read back (the compiler emits RED, not ATOM).
__global__ void red_kernel(float* buf, std::size_t words, int iters, unsigned long long* stamps) {
  stamp(stamps, 0);
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (int it = 0; it < iters; ++it)
    for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
      atomicAdd(buf + i, 1.0f);
  stamp(stamps, 1);
}

// The split-k kernels' output pattern: partial[m x n] fp32, block b owns rows b*128 .. +127 (warp w: 16 of
// them), each thread adds its mma fragment: for nt < 8 token tiles, e < 4: token 8 nt + 2 t + (e & 1), row
// row0 + g + 8 (e >> 1) (g = lane / 4, t = lane % 4), as weight_only.cu's for_outputs does at m = 64. The
// gridDim.y blocks of a tile add into the same words, as the split_k blocks of a row tile do.
__global__ void red_fragment_kernel(float* partial, int n, int row_tiles, int iters, unsigned long long* stamps) {
  stamp(stamps, 0);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  for (int it = 0; it < iters; ++it)
    for (int tile = blockIdx.x; tile < row_tiles; tile += gridDim.x) {
      const int row0 = tile * 128 + warp * 16;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          atomicAdd(partial + int64_t(8 * nt + 2 * t + (e & 1)) * n + row0 + g + 8 * (e >> 1), 1.0f);
    }
  stamp(stamps, 1);
}

// The Hopper weight-only kernels' vector reductions (weight_only_sm90_unit.cuh write_out): a block of 8 warps per
// 128-row tile, each warp's 8 n8 tiles of 64 tokens sent as red.global.add.v4.f32, four sums a lane, the warp's 32 lanes
// 512 contiguous bytes (wo_partial_index: [tile][warp][n8 tile][lane][4]); the gridDim.y blocks of a tile add into the
// same words, as the blocks that share a tile do. The same 4 MiB as red_fragment_kernel's.
__global__ void red_vector_kernel(float* partial, int row_tiles, int iters, unsigned long long* stamps) {
  stamp(stamps, 0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int it = 0; it < iters; ++it)
    for (int tile = blockIdx.x; tile < row_tiles; tile += gridDim.x) {
      float* part = partial + (int64_t(tile) * 8 + warp) * 8 * 128 + lane * 4;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(part + nt * 128), "f"(1.0f), "f"(1.0f),
                     "f"(1.0f), "f"(1.0f)
                     : "memory");
    }
#endif
  stamp(stamps, 1);
}

// Block 0 thread 0 chases `hops` pointers and writes ns per hop; with `stream`, every other block
// reads `stream_n` uint4 until the chase is done (at most 64 passes).
__global__ void chase_kernel(const uint64_t* next, int hops, const uint4* stream, std::size_t stream_n, int* done,
                             double* ns_per_hop, uint4* sink) {
  if (blockIdx.x == 0) {
    if (threadIdx.x != 0) return;
    uint64_t p = 0;
    for (int i = 0; i < 8; ++i) p = __ldcg(next + p);  // warm the TLB path of the first pages
    const uint64_t t0 = global_ns();
    for (int i = 0; i < hops; ++i) p = __ldcg(next + p);
    const uint64_t t1 = global_ns();
    *ns_per_hop = double(t1 - t0) / hops + double(p == ~0ull);
    atomicExch(done, 1);
    return;
  }
  if (!stream) return;
  uint32_t acc = 0;
  const std::size_t stride = std::size_t(gridDim.x - 1) * blockDim.x;
  for (int pass = 0; pass < 64 && !*(volatile int*)done; ++pass)
    for (std::size_t i = (blockIdx.x - 1) * std::size_t(blockDim.x) + threadIdx.x; i < stream_n; i += stride) {
      const uint4 v = __ldcg(stream + i);
      acc ^= v.x ^ v.w;
    }
  if (acc == 0x12345678u) *sink = make_uint4(acc, 0, 0, 0);
}

// Block b reads its own slice of `per_block` uint4.
__global__ void __launch_bounds__(1024) sweep_read_kernel(const uint4* src, std::size_t per_block, uint4* sink) {
  const uint4* s = src + blockIdx.x * per_block;
  uint32_t acc = 0;
  for (std::size_t i = threadIdx.x; i < per_block; i += 4 * blockDim.x) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = i + u * blockDim.x < per_block ? __ldcg(s + i + u * blockDim.x) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].w;
  }
  if (acc == 0x12345678u) *sink = make_uint4(acc, 0, 0, 0);
}

__global__ void empty_kernel() {}

int sm_count() {
  int dev = 0, n = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

int compute_capability() {  // major * 10 + minor
  int dev = 0, major = 0, minor = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major * 10 + minor;
}

double clock_of(const std::vector<unsigned long long>& s) {
  const double ns = double(s[3] - s[1]);
  return ns > 0 ? double(s[2] - s[0]) / (ns * 1e-9) : 0.0;
}

}  // namespace

PipeMeasurements measure_pipes(bool quick) {
  PipeMeasurements m;
  const int sms = sm_count();
  TimingOptions t;
  t.flush_l2 = false;
  t.repeats = quick ? 3 : 10;
  t.warmup = quick ? 1 : 3;
  t.warmup_seconds = quick ? 0 : 0.25;
  const int iters = quick ? 256 : 8192;
  DeviceBuffer<unsigned long long> stamps_buf(4);
  DeviceBuffer<float> sink(16);
  unsigned long long* stamps = stamps_buf.get();
  float* fsink = sink.get();
  const int blocks = sms * (2048 / kThreads);
  const double threads = double(blocks) * kThreads;
  auto stamped = [&]() {
    std::vector<unsigned long long> s(4);
    INFERLAB_CUDA_CHECK(cudaMemcpy(s.data(), stamps, 4 * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    return s;
  };
  auto pipe = [&](auto kernel, double ops_per_step) {
    const Timing tm = time_cuda([&] {
      kernel<<<blocks, kThreads, 0, t.stream>>>(iters, 0.999f, stamps, fsink);
      INFERLAB_CHECK_LAUNCH();
    }, t);
    return PipeRun{threads * kChains * double(iters) * ops_per_step, tm.median_s, clock_of(stamped()), sms};
  };
  m.fp32 = pipe(pipe_kernel<PipeOp::fp32>, 1);
  m.fma_clock_hz = m.fp32.clock_hz;
  m.alu = pipe(pipe_kernel<PipeOp::alu>, 1);
  m.mufu = pipe(pipe_kernel<PipeOp::mufu>, 1);
  m.cvt = pipe(pipe_kernel<PipeOp::cvt>, 1);
  const PipeRun mix = pipe(pipe_kernel<PipeOp::mix>, 2);  // FFMA and LOP3: two pipes, one issue port
  m.issue_per_clk = mix.per_sm_per_clock() / 32.0;
  {
    const Timing tm = time_cuda([&] {
      mma_kernel<<<blocks, kThreads, 0, t.stream>>>(iters, stamps, fsink);
      INFERLAB_CHECK_LAUNCH();
    }, t);
    const double warps = threads / 32;
    m.tensor_mma = PipeRun{warps * 4.0 * double(iters) * 4096.0, tm.median_s, clock_of(stamped()), sms};
    m.tensor_clock_hz = m.tensor_mma.clock_hz;
  }
#ifdef INFERLAB_HAVE_SM90A
  {  // wgmma (Hopper only: sm_90a code), one block an SM; ~5 ms a launch at full length after the warm-up's 0.25 s,
     // so the clock is the one the power limit settles at
    if (compute_capability() == 90) {
      const int rounds = quick ? 256 : 4096;
      const Timing tm = time_cuda([&] { launch_wgmma_ceiling(sms, rounds, 0, stamps, fsink, t.stream); }, t);
      m.tensor_wgmma = PipeRun{double(sms) * wgmma_ceiling_flops_per_block(rounds), tm.median_s, clock_of(stamped()), sms};
      m.wgmma_clock_hz = m.tensor_wgmma.clock_hz;
      // The clock against the tensor pipe's duty: softmax-like units between the groups; the duty is the FLOP an SM
      // a clock over the back-to-back run's. Launches of ~3 ms, as a prefill at seq 16384 is timed.
      const double peak = m.tensor_wgmma.per_sm_per_clock();
      const std::vector<int> sweep = quick ? std::vector<int>{8, 16, 32} : std::vector<int>{4, 8, 12, 16, 20, 24, 32, 48, 64, 96};
      for (const int units : sweep) {
        const int r = std::max(64, int(double(rounds) * 0.6 / (1.0 + units / 12.0)));
        const Timing tu = time_cuda([&] { launch_wgmma_ceiling(sms, r, units, stamps, fsink, t.stream); }, t);
        const PipeRun run{double(sms) * wgmma_ceiling_flops_per_block(r), tu.median_s, clock_of(stamped()), sms};
        if (peak > 0 && run.clock_hz > 0) m.wgmma_clock_by_duty.emplace_back(run.per_sm_per_clock() / peak, run.clock_hz);
      }
    }
  }
#endif
  {
    dependent_kernel<<<1, 32>>>(iters, 0.999f, stamps, fsink);
    INFERLAB_CHECK_LAUNCH();
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    m.dependent_issue_cycles = double(stamped()[0]) / iters;
  }
  {  // pointer chase over random 4 KiB pages of 1 GiB (64 MiB quick)
    const std::size_t bytes = quick ? (64u << 20) : (std::size_t(1) << 30), page = 4096 / 8;
    const std::size_t pages = bytes / 4096;
    std::vector<uint32_t> order(pages);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937(7));
    std::vector<uint64_t> host(bytes / 8, 0);
    for (std::size_t i = 0; i < pages; ++i) host[order[i] * page] = uint64_t(order[(i + 1) % pages]) * page;
    DeviceBuffer<uint64_t> next(bytes / 8);
    DeviceBuffer<uint4> stream(bytes / 16), vsink(4);
    DeviceBuffer<int> done(1);
    DeviceBuffer<double> ns(1);
    INFERLAB_CUDA_CHECK(cudaMemcpy(next.get(), host.data(), bytes, cudaMemcpyHostToDevice));
    INFERLAB_CUDA_CHECK(cudaMemset(stream.get(), 1, bytes));
    const int hops = quick ? 200 : 4000;
    auto chase = [&](bool loaded) {
      INFERLAB_CUDA_CHECK(cudaMemset(done.get(), 0, sizeof(int)));
      chase_kernel<<<loaded ? unsigned(sms * 2) : 1u, loaded ? 1024 : 32>>>(
          next.get(), hops, loaded ? stream.get() : nullptr, bytes / 16, done.get(), ns.get(), vsink.get());
      INFERLAB_CHECK_LAUNCH();
      INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
      double v = 0;
      INFERLAB_CUDA_CHECK(cudaMemcpy(&v, ns.get(), sizeof v, cudaMemcpyDeviceToHost));
      return v * 1e-9;
    };
    m.dram_latency_idle_s = chase(false);
    m.dram_latency_loaded_s = chase(true);
  }
  {  // a load that hits in L2: random 128-byte lines of 4 MiB (the H100's L2 holds 50 MB)
    const int lines = (4 << 20) / 128, stride = 128 / 4;
    std::vector<uint32_t> order(static_cast<std::size_t>(lines));
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937(11));
    std::vector<uint32_t> host(std::size_t(lines) * stride, 0);
    for (int i = 0; i < lines; ++i) host[std::size_t(order[std::size_t(i)]) * stride] = order[std::size_t((i + 1) % lines)] * stride;
    DeviceBuffer<uint32_t> next(host.size());
    DeviceBuffer<double> cyc(1);
    next.upload(host);
    l2_chase_kernel<<<1, 1>>>(next.get(), lines, quick ? 2000 : 20000, cyc.get());
    INFERLAB_CHECK_LAUNCH();
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    INFERLAB_CUDA_CHECK(cudaMemcpy(&m.l2_latency_cycles, cyc.get(), sizeof(double), cudaMemcpyDeviceToHost));
  }
  {  // fp32 reductions into L2: every SM, 1024 threads each, into a 16 MiB buffer
    const std::size_t words = (16u << 20) / 4;
    const int iters = quick ? 4 : 32;
    DeviceBuffer<float> buf(words);
    INFERLAB_CUDA_CHECK(cudaMemset(buf.get(), 0, words * 4));
    const Timing tm = time_cuda([&] {
      red_kernel<<<sms, 1024, 0, t.stream>>>(buf.get(), words, iters, stamps);
      INFERLAB_CHECK_LAUNCH();
    }, t);
    const double clock = clock_of(stamped());
    if (clock > 0) m.l2_red_coalesced_per_clk = double(words) * iters / (tm.median_s * clock);
  }
  {  // the split-k pattern: 64 tokens x 16384 rows of fp32 partial sums (4 MiB, in L2), a block of 8 warps per
     // 128-row tile, and split = 1, 2, 4, 8, 16 blocks a tile adding into the same words
    const int n = 16384, row_tiles = n / 128, iters = quick ? 2 : 16;
    DeviceBuffer<float> partial(std::size_t(64) * n);
    INFERLAB_CUDA_CHECK(cudaMemset(partial.get(), 0, std::size_t(64) * n * 4));
    for (int split : {1, 2, 4, 8, 16}) {
      const Timing tm = time_cuda([&] {
        red_fragment_kernel<<<dim3(unsigned(row_tiles), unsigned(split)), 256, 0, t.stream>>>(partial.get(), n, row_tiles,
                                                                                              iters, stamps);
        INFERLAB_CHECK_LAUNCH();
      }, t);
      const double clock = clock_of(stamped());
      if (clock > 0)
        m.l2_atomics_split.emplace_back(split, double(row_tiles) * split * 256 * 32 * iters / (tm.median_s * clock));
    }
    if (!m.l2_atomics_split.empty()) m.l2_atomics_per_clk = m.l2_atomics_split.front().second;
    // The same words by vector reductions (Hopper: red.global.add.v4.f32), one block a tile: operations per clock.
    // Event-timed over one launch, as the fragment pattern is: at 16 passes (~22 us on the H200) the launch's ~2.7 us
    // make it read ~10% low, the fragment's (~38 us) ~7% (kernels/gemm/NOTES.md r28).
    // The code the GPU runs: one built without sm_90 (an older GPU's image, or its PTX) runs an empty body here.
    cudaFuncAttributes fa{};
    INFERLAB_CUDA_CHECK(cudaFuncGetAttributes(&fa, red_vector_kernel));
    if (fa.ptxVersion >= 90) {
      const Timing tm = time_cuda([&] {
        red_vector_kernel<<<dim3(unsigned(row_tiles), 1u), 256, 0, t.stream>>>(partial.get(), row_tiles, iters, stamps);
        INFERLAB_CHECK_LAUNCH();
      }, t);
      const double clock = clock_of(stamped());
      if (clock > 0) m.l2_red_vector_per_clk = double(row_tiles) * 256 * 8 * iters / (tm.median_s * clock);
    }
  }
  {  // the bandwidth N SMs reach
    const std::size_t per_block = (quick ? (4u << 20) : (32u << 20)) / 16;  // uint4 per block
    DeviceBuffer<uint4> src(per_block * std::size_t(sms)), vsink(4);
    INFERLAB_CUDA_CHECK(cudaMemset(src.get(), 1, per_block * 16 * std::size_t(sms)));
    for (int n : {1, 2, 4, 8, 16, 32, 64, 96, sms}) {
      if (n > sms) continue;
      const Timing tm = time_cuda([&] {
        sweep_read_kernel<<<n, 1024, 0, t.stream>>>(src.get(), per_block, vsink.get());
        INFERLAB_CHECK_LAUNCH();
      }, t);
      m.sm_bandwidth.emplace_back(n, double(n) * double(per_block) * 16 / tm.median_s);
    }
  }
  {  // launch floors
    TimingOptions one = t;
    one.repeats = quick ? 5 : 50;
    m.launch_floor_eager_s = time_cuda([&] {
      empty_kernel<<<1, 32, 0, one.stream>>>();
      INFERLAB_CHECK_LAUNCH();
    }, one).median_s;
    constexpr int kNodes = 100;
    cudaStream_t s;
    INFERLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t exec;
    INFERLAB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kNodes; ++i) empty_kernel<<<1, 32, 0, s>>>();
    INFERLAB_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    INFERLAB_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    const Timing tg = time_cuda([&] { INFERLAB_CUDA_CHECK(cudaGraphLaunch(exec, one.stream)); }, one);
    m.launch_floor_graph_s = tg.median_s / kNodes;
    INFERLAB_CUDA_CHECK(cudaGraphExecDestroy(exec));
    INFERLAB_CUDA_CHECK(cudaGraphDestroy(g));
    INFERLAB_CUDA_CHECK(cudaStreamDestroy(s));
  }
  {  // the library's floor: its GEMM on a tiny problem, timed as the experiments time a library call (events, the
     // stream gated), its operands left in L2 so that no DRAM round trip is in it (the model charges those apart)
    TimingOptions one = t;
    one.repeats = quick ? 5 : 50;
    auto tiny = [&](DType dtype, int rows) {
      constexpr int kSide = 256;
      const DenseGemm gemm(dtype, rows, kSide, kSide);
      const std::size_t in = std::size_t(dtype_bytes(dtype));
      DeviceBuffer<unsigned char> x(std::size_t(rows) * kSide * in), w(std::size_t(kSide) * kSide * in),
          y(std::size_t(rows) * kSide * 2);
      INFERLAB_CUDA_CHECK(cudaMemset(x.get(), 0, std::size_t(rows) * kSide * in));
      INFERLAB_CUDA_CHECK(cudaMemset(w.get(), 0, std::size_t(kSide) * kSide * in));
      return time_cuda([&] { gemm.run(x.get(), w.get(), y.get(), one.stream); }, one).median_s;
    };
    m.launch_floor_library_s = tiny(DType::bf16, 1);
    // fp8 at 16 rows: cuBLASLt picks a slower kernel at 1-4 rows (the compression runs: 10.7-15.2 us on 1024 x 4096 against
    // 8.0 from 8 rows), which is a kernel choice, not the floor; the bf16 and fp8 probes are not like for like in rows.
    if (compute_capability() >= 89) m.launch_floor_library_fp8_s = tiny(DType::fp8_e4m3, 16);
  }
  return m;
}

}  // namespace inferlab
