// sample: greedy argmax or seeded top-k / top-p sampling of fp32 logits, one launch, grid (pieces, rows).
//
// Greedy rows (temperature <= 0): the row is cut into `chunks` pieces, one block each (enough blocks to fill the
// GPU at batch 1), float4 loads, a (value, lowest index) reduction; each block leaves its partial in the workspace
// and the last block of the row to finish (an atomic counter, reset by that block) merges them.
//
// Sampling rows: one block (block 0 of the row) runs the exact algorithm below; the others return.
//   weights   w_i = exp2((l_i - max) * log2(e) / T) in fp32, held as 2^-40 fixed point (uint64): every sum is
//             exact and order-free, so the thresholds and the draw do not depend on how the row is split.
//   keys      an order-preserving uint32 of each value (ties are equal keys); NaN and -inf take no part.
//   top-k     theta_k = the k-th largest key (radix select, 4 passes of 8-bit digits, counts per digit in per-warp
//             shared-memory histograms); kept: key >= theta_k (ties kept).
//   top-p     theta_p = the largest key whose kept mass (keys >= it, and >= theta_k) reaches ceil(p * Z_k): the
//             same radix select on masses.
//   draw      inverse CDF in a fixed element order: target = floor(Z_kept * r / 2^64), r the 64 bits of
//             Philox4x32-10 keyed by (seed, offset); the token is the element whose cumulative mass passes it.
// Fast path: the selects and the draw run over a short candidate list in shared memory instead of the whole row.
// One pass (0) gives the max, the count of values and each thread's max; the candidates are then
//   top-k on: the values >= the k-th largest of the 512 per-thread maxima (k distinct elements reach it, so every
//             value of the top-k set does);
//   top-p only: the values with w >= (1 - p) * Zlow / n, Zlow = sum of the per-thread maxima's w <= Z: the values
//             below it weigh less than (1 - p) * Z together, so top-p drops them all; their mass is kept as `below`.
// gathered by each warp into its own segment in element order (deterministic; read segment after segment). A list
// longer than a segment (896) holds sends the row to the slow path: the same selects and draw over the whole row.
// Block: 512 threads, ~153 KB of shared memory (fits the A100's 164 KB too) (the candidate list, the per-warp histograms, the tile sums),
// 102 registers, so one block per SM; every pass over a row keeps 4 float4 loads in flight a thread.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <climits>
#include <cmath>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/kernels/layers/layers.h"
#include "inferlab/kernels/layers/philox.h"
#include "layers_common.cuh"

namespace inferlab {
namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int kTile = kThreads * 4;  // elements a block reads per step: 4 consecutive per thread
constexpr int kMaxTiles = 1024;      // vocab <= kTile * kMaxTiles = 2^21
constexpr int64_t kMaxVocab = int64_t(kTile) * kMaxTiles;
constexpr int kCandPerWarp = 896, kCandidates = kWarps * kCandPerWarp;
constexpr int64_t kGreedyChunkMin = 4096;  // elements a greedy block reads at least
constexpr unsigned long long kOne = 1ull << 40;  // weight 1.0 in fixed point
constexpr float kLog2e = 1.4426950408889634f;

using u64 = unsigned long long;

struct alignas(8) Partial {
  float value;
  int32_t index;
};

struct SampleArgs {
  const float* logits;
  int vocab;
  const float* temperature;
  const int32_t* top_k;
  const float* top_p;
  const uint64_t* seed;
  const uint64_t* offset;
  int32_t* out;
  Partial* partials;      // [rows, max_chunks]
  unsigned* counters;     // [rows]
  int chunks, max_chunks;
  int chunk_len;          // a multiple of 4
  bool vec4;              // the logits rows are 16-byte aligned
};

struct SampleSmem {
  u64 hist[kWarps][256];
  float cand_val[kCandidates];
  int32_t cand_idx[kCandidates];
  u64 tile_sum[kMaxTiles];
  float red_f[32];
  int red_i[32];
  u64 red_u[32];
  int warp_count[kWarps];
  int seg_start[kWarps + 1];
  unsigned sel_bin;
  int sel_tile, sel_token;
  u64 sel_above, sel_target;
  int last;
};

// ---------------------------------------------------------------- reductions
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, scratch[w]);
  return r;
}
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Add {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

// Greedy order: larger value first, then lower index; NaN never replaces anything.
__device__ __forceinline__ void consider(float v, int i, float& best, int& best_i) {
  if (v > best || (v == best && i < best_i)) {
    best = v;
    best_i = i;
  }
}
__device__ void block_argmax(float& best, int& best_i, SampleSmem& sm) {
  for (int o = 16; o > 0; o >>= 1) consider(__shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, best_i, o), best, best_i);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    sm.red_f[threadIdx.x >> 5] = best;
    sm.red_i[threadIdx.x >> 5] = best_i;
  }
  __syncthreads();
  best = sm.red_f[0];
  best_i = sm.red_i[0];
  for (int w = 1; w < kWarps; ++w) consider(sm.red_f[w], sm.red_i[w], best, best_i);
}

// Exclusive prefix sum over the block in thread order; *total gets the sum of all.
__device__ u64 block_exclusive_scan(u64 v, u64* total, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  __syncthreads();
  if (lane == 31) sm.red_u[warp] = incl;
  __syncthreads();
  u64 before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += sm.red_u[w];
    all += sm.red_u[w];
  }
  *total = all;
  return before + incl - v;
}

// ---------------------------------------------------------------- values, keys, weights
__device__ __forceinline__ bool drawable(float l) { return l > -INFINITY; }  // false for NaN and -inf
__device__ __forceinline__ float clamped(float l) { return fminf(l, FLT_MAX); }
// Order-preserving key of a non-NaN value; -0 and +0 share one. Every drawable value's key is >= 1.
__device__ __forceinline__ uint32_t key_of(float f) {
  if (f == 0.f) f = 0.f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
struct Weights {
  float top, scale;  // the row's largest (clamped) value, log2(e) / temperature
  __device__ u64 operator()(float lc) const {
    if (lc >= top) return kOne;
    return __float2ull_rn(exp2f((lc - top) * scale) * float(kOne));
  }
};

// ---------------------------------------------------------------- sources: the row, or the candidate list
struct RowSource {
  const float* row;
  int n;
  bool vec4;
  __device__ void load(int e0, float (&v)[4], int (&idx)[4]) const {
    if (vec4 && e0 + 3 < n) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(row + e0));
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = e0 + j < n ? row[e0 + j] : NAN;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) idx[j] = e0 + j;
  }
};
// A list in shared memory: plain (seg == nullptr), or the candidates: 16 per-warp segments of kCandPerWarp
// slots, element e in segment w at slot e - seg[w] (seg: 17 prefix counts), read in segment order.
struct ListSource {
  const float* val;
  const int32_t* idx;
  int n;
  const int* seg;
  __device__ void load(int e0, float (&v)[4], int (&id)[4]) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = e0 + j;
      int at = e;
      if (seg && e < n) {
        int w = 0;
#pragma unroll
        for (int step = kWarps / 2; step > 0; step >>= 1)
          if (seg[w + step] <= e) w += step;
        at = w * kCandPerWarp + e - seg[w];
      }
      v[j] = e < n ? val[at] : NAN;
      id[j] = e < n ? idx[at] : -1;
    }
  }
};

// f(tile, v, idx) for every tile of kTile elements, thread t holding elements tile * kTile + 4t .. + 3 (NaN past
// the end). The loads of kUnroll tiles are issued before any is used (one block streams a whole row: it needs
// several 16-byte loads in flight a thread). Every thread runs the same iterations, so f may use warp collectives.
constexpr int kUnroll = 4;
template <class Src, class F>
__device__ void for_tiles(const Src& s, F&& f) {
  const int tiles = (s.n + kTile - 1) / kTile;
  for (int t0 = 0; t0 < tiles; t0 += kUnroll) {
    float v[kUnroll][4];
    int idx[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (t0 + u < tiles) s.load((t0 + u) * kTile + int(threadIdx.x) * 4, v[u], idx[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (t0 + u < tiles) f(t0 + u, v[u], idx[u]);
  }
}

// ---------------------------------------------------------------- selects, masses, the draw
// The largest key K such that the count (kMass: the weight) of drawable elements with key >= max(K, floor_key)
// reaches `target`: a radix select, 8 bits a pass from the top. When even floor_key does not reach it, a key at
// or below every eligible element's.
template <bool kMass, class Src>
__device__ uint32_t select_key(const Src& s, uint32_t floor_key, u64 target, const Weights& W, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t prefix = 0;
  u64 above = 0;  // count / weight of the eligible elements above the current prefix's range
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t hi_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = lane; b < 256; b += 32) sm.hist[warp][b] = 0;
    __syncwarp();
    for_tiles(s, [&](int, const float(&v)[4], const int(&)[4]) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (!drawable(v[j])) continue;
        const float lc = clamped(v[j]);
        const uint32_t key = key_of(lc);
        if (key >= floor_key && (key & hi_mask) == prefix)
          atomicAdd(&sm.hist[warp][(key >> shift) & 255u], kMass ? W(lc) : 1ull);
      }
    });
    __syncthreads();
    if (threadIdx.x < 256) {
      u64 sum = 0;
      for (int w = 0; w < kWarps; ++w) sum += sm.hist[w][threadIdx.x];
      sm.hist[0][threadIdx.x] = sum;
    }
    __syncthreads();
    if (warp == 0) {  // lane l holds bins 255 - 8l - j, j = 0..7: from the top down
      u64 h[8], local = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) local += (h[j] = sm.hist[0][255 - 8 * lane - j]);
      u64 incl = local;
      for (int o = 1; o < 32; o <<= 1) {
        const u64 y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      u64 run = above + incl - local;
      int found = -1;
      u64 found_above = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (found < 0 && run + h[j] >= target) {
          found = 255 - 8 * lane - j;
          found_above = run;
        }
        if (found < 0 && j < 7) run += h[j];
      }
      const unsigned ball = __ballot_sync(0xffffffffu, found >= 0);
      if (ball == 0 && lane == 31) {  // not reached: the lowest bin, keeping the whole group
        sm.sel_bin = 0;
        sm.sel_above = run;
      } else if (ball != 0 && lane == __ffs(ball) - 1) {
        sm.sel_bin = unsigned(found);
        sm.sel_above = found_above;
      }
    }
    __syncthreads();
    prefix |= sm.sel_bin << shift;
    above = sm.sel_above;
  }
  return prefix;
}

// Weight of the drawable elements with key >= floor_key.
template <class Src>
__device__ u64 mass_at_least(const Src& s, uint32_t floor_key, const Weights& W, SampleSmem& sm) {
  u64 m = 0;
  for_tiles(s, [&](int, const float(&v)[4], const int(&)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (drawable(v[j]) && key_of(clamped(v[j])) >= floor_key) m += W(clamped(v[j]));
  });
  return block_reduce(m, Add{}, sm.red_u);
}

// The drawn token: the element (in the source's order) whose cumulative weight, over the drawable elements with
// key >= floor_key, first exceeds floor(Z * r / 2^64). Every thread gets it.
template <class Src>
__device__ int draw(const Src& s, uint32_t floor_key, const Weights& W, u64 r, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int tiles = (s.n + kTile - 1) / kTile;
  auto weights4 = [&](const float(&v)[4], u64(&w)[4]) {
    u64 sum = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      w[j] = (drawable(v[j]) && key_of(clamped(v[j])) >= floor_key) ? W(clamped(v[j])) : 0;
      sum += w[j];
    }
    return sum;
  };
  for (int t = threadIdx.x; t < tiles; t += kThreads) sm.tile_sum[t] = 0;
  if (threadIdx.x == 0) sm.sel_token = -1;
  __syncthreads();
  for_tiles(s, [&](int t, const float(&v)[4], const int(&)[4]) {
    u64 w[4];
    u64 x = weights4(v, w);
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0 && x) atomicAdd(&sm.tile_sum[t], x);
  });
  __syncthreads();
  if (warp == 0) {  // lane l sums a contiguous run of tiles; find the tile holding the target
    const int per = (tiles + 31) / 32, lo = min(tiles, lane * per), hi = min(tiles, lo + per);
    u64 local = 0;
    for (int t = lo; t < hi; ++t) local += sm.tile_sum[t];
    u64 incl = local;
    for (int o = 1; o < 32; o <<= 1) {
      const u64 y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    const u64 total = __shfl_sync(0xffffffffu, incl, 31);
    const u64 target = __umul64hi(total, r);
    u64 before = incl - local;
    if (lane == 0) sm.sel_tile = -1;
    __syncwarp();
    if (total > 0 && target >= before && target < incl)
      for (int t = lo; t < hi; ++t) {
        if (target < before + sm.tile_sum[t]) {
          sm.sel_tile = t;
          sm.sel_above = before;
          sm.sel_target = target;
          break;
        }
        before += sm.tile_sum[t];
      }
  }
  __syncthreads();
  const int t = sm.sel_tile;
  if (t < 0) return -1;  // nothing to draw from (the caller falls back to greedy)
  float v[4];
  int idx[4];
  s.load(t * kTile + int(threadIdx.x) * 4, v, idx);
  u64 w[4];
  const u64 mine = weights4(v, w);
  u64 tile_total;
  u64 acc = block_exclusive_scan(mine, &tile_total, sm);
  const u64 rem = sm.sel_target - sm.sel_above;
  if (rem >= acc && rem < acc + mine)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (rem < acc + w[j]) {
        sm.sel_token = idx[j];
        break;
      }
      acc += w[j];
    }
  __syncthreads();
  return sm.sel_token;
}

// The candidates of the fast path (see the top of the file): each warp's in its segment of sm.cand_val / cand_idx,
// in element order, with the segments' starts in sm.seg_start.
// k-mode (cut == 0): drawable values with key >= floor_key; p-mode: drawable values with w >= cut, the weight of
// the others added into *below. Returns their count, or -1 when a warp's segment overflowed.
__device__ int collect(const RowSource& g, uint32_t floor_key, u64 cut, const Weights& W, SampleSmem& sm, u64* below) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* seg_v = sm.cand_val + warp * kCandPerWarp;
  int32_t* seg_i = sm.cand_idx + warp * kCandPerWarp;
  int count = 0;
  u64 low = 0;
  for_tiles(g, [&](int, const float(&v)[4], const int(&idx)[4]) {
    bool take[4];
    int mine = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      take[j] = false;
      if (!drawable(v[j])) continue;
      const float lc = clamped(v[j]);
      if (cut == 0) {
        take[j] = key_of(lc) >= floor_key;
      } else {
        const u64 w = W(lc);
        take[j] = w >= cut;
        if (!take[j]) low += w;
      }
      mine += take[j];
    }
    int incl = mine;
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    int pos = count + incl - mine;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (take[j]) {
        if (pos < kCandPerWarp) {
          seg_v[pos] = clamped(v[j]);
          seg_i[pos] = idx[j];
        }
        ++pos;
      }
    count += __shfl_sync(0xffffffffu, incl, 31);
  });
  if (lane == 0) sm.warp_count[warp] = count;
  *below = block_reduce(low, Add{}, sm.red_u);  // synchronizes: warp_count is visible after it
  if (threadIdx.x == 0) {
    int at = 0;
    for (int w = 0; w < kWarps; ++w) {
      sm.seg_start[w] = at;
      at += sm.warp_count[w];
    }
    sm.seg_start[kWarps] = at;
  }
  __syncthreads();
  int total = 0;
  bool overflow = false;
  for (int w = 0; w < kWarps; ++w) {
    total += sm.warp_count[w];
    overflow |= sm.warp_count[w] > kCandPerWarp;
  }
  return overflow ? -1 : total;
}

// The thresholds and the draw over a source (the row, or the candidates with `below` = the weight left out).
template <class Src>
__device__ int thresholds_and_draw(const Src& s, bool k_on, int k, bool p_on, float p, u64 below, const Weights& W,
                                   u64 r, SampleSmem& sm) {
  uint32_t theta = 1;
  if (k_on) theta = select_key<false>(s, 1, u64(k), W, sm);
  if (p_on) {
    const u64 zk = mass_at_least(s, theta, W, sm) + below;
    double want = ceil(fmax(double(p), 0.0) * double(zk));
    const u64 target = want < 1.0 ? 1ull : (want >= double(zk) ? zk : u64(want));
    theta = select_key<true>(s, theta, target, W, sm);
  }
  return draw(s, theta, W, r, sm);
}

__device__ void sample_row(const SampleArgs& a, int64_t r, float temperature, SampleSmem& sm) {
  const RowSource g{a.logits + r * a.vocab, a.vocab, a.vec4};
  // Pass 0: the largest value, the count of drawable values, each thread's largest, and the greedy answer.
  float tmax = -INFINITY, best = -INFINITY;
  int count = 0, best_i = INT_MAX;
  for_tiles(g, [&](int, const float(&v)[4], const int(&idx)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      consider(v[j], idx[j], best, best_i);
      if (drawable(v[j])) {
        ++count;
        tmax = fmaxf(tmax, clamped(v[j]));
      }
    }
  });
  const float top = block_reduce(tmax, Max{}, sm.red_f);
  const int n = block_reduce(count, Add{}, sm.red_i);
  block_argmax(best, best_i, sm);
  const int greedy = best_i == INT_MAX ? -1 : best_i;
  if (n == 0) {
    if (threadIdx.x == 0) a.out[r] = greedy;
    return;
  }
  const Weights W{top, kLog2e / temperature};
  const int k = a.top_k[r];
  const float p = a.top_p[r];
  const bool k_on = k > 0 && k < n, p_on = p < 1.f;
  const u64 rnd = philox_draw64(a.seed[r], a.offset[r]);
  int token = -1;
  bool fast = false;
  if (k_on || p_on) {
    uint32_t floor_key = 1;
    u64 cut = 0;
    if (k_on) {
      // The k-th largest of the per-thread maxima (-inf where a thread saw nothing drawable).
      const int maxima = block_reduce(int(drawable(tmax)), Add{}, sm.red_i);
      sm.cand_val[threadIdx.x] = tmax;
      __syncthreads();
      if (k <= maxima) floor_key = select_key<false>(ListSource{sm.cand_val, sm.cand_idx, kThreads, nullptr}, 1, u64(k), W, sm);
      __syncthreads();
    } else {
      const u64 zlow = block_reduce(drawable(tmax) ? W(tmax) : 0ull, Add{}, sm.red_u);
      const double bound = (1.0 - fmin(fmax(double(p), 0.0), 1.0)) * double(zlow) / double(n) * (1.0 - 1e-9);
      cut = bound >= 1.0 ? u64(bound) : 0;
    }
    if (k_on || cut > 0) {
      u64 below = 0;
      const int c = collect(g, floor_key, cut, W, sm, &below);
      if (c >= 0) {
        fast = true;
        token = thresholds_and_draw(ListSource{sm.cand_val, sm.cand_idx, c, sm.seg_start}, k_on, k, p_on, p, below, W, rnd, sm);
      }
    }
  }
  if (!fast) token = thresholds_and_draw(g, k_on, k, p_on, p, 0, W, rnd, sm);
  if (threadIdx.x == 0) a.out[r] = token >= 0 ? token : greedy;
}

__device__ void greedy_piece(const SampleArgs& a, int64_t r, int c, SampleSmem& sm) {
  const float* row = a.logits + r * a.vocab;
  const int lo = c * a.chunk_len, hi = min(a.vocab, lo + a.chunk_len);
  float best = -INFINITY;
  int best_i = INT_MAX;
  if (a.vec4) {  // kUnroll float4 loads in flight a thread
    constexpr int kStep = kThreads * 4;
    for (int e0 = lo + int(threadIdx.x) * 4; e0 < hi; e0 += kUnroll * kStep) {
      float4 q[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (e0 + u * kStep < hi) q[u] = __ldg(reinterpret_cast<const float4*>(row + e0 + u * kStep));
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int e = e0 + u * kStep;
        if (e < hi) {
          consider(q[u].x, e, best, best_i);
          consider(q[u].y, e + 1, best, best_i);
          consider(q[u].z, e + 2, best, best_i);
          consider(q[u].w, e + 3, best, best_i);
        }
      }
    }
  } else {
    for (int e = lo + int(threadIdx.x); e < hi; e += kThreads) consider(row[e], e, best, best_i);
  }
  block_argmax(best, best_i, sm);
  if (a.chunks == 1) {
    if (threadIdx.x == 0) a.out[r] = best_i == INT_MAX ? -1 : best_i;
    return;
  }
  if (threadIdx.x == 0) {
    a.partials[r * a.max_chunks + c] = Partial{best, best_i};
    __threadfence();
    sm.last = atomicAdd(&a.counters[r], 1u) == unsigned(a.chunks - 1);
  }
  __syncthreads();
  if (!sm.last) return;
  __threadfence();
  best = -INFINITY;
  best_i = INT_MAX;
  for (int i = threadIdx.x; i < a.chunks; i += kThreads) {
    const int2 q = __ldcg(reinterpret_cast<const int2*>(a.partials + r * a.max_chunks + i));
    consider(__int_as_float(q.x), q.y, best, best_i);
  }
  block_argmax(best, best_i, sm);
  if (threadIdx.x == 0) {
    a.out[r] = best_i == INT_MAX ? -1 : best_i;
    a.counters[r] = 0;  // the workspace is left as it was found
  }
}

__global__ void __launch_bounds__(kThreads, 1) sample_kernel(const SampleArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  SampleSmem& sm = *reinterpret_cast<SampleSmem*>(smem_raw);
  const int64_t r = blockIdx.y;
  const int c = blockIdx.x;
  const float temperature = a.temperature[r];
  if (temperature > 0.f) {
    if (c == 0) sample_row(a, r, temperature, sm);
  } else if (c < a.chunks) {
    greedy_piece(a, r, c, sm);
  }
}

int max_chunks(int64_t vocab) { return int((vocab + kGreedyChunkMin - 1) / kGreedyChunkMin); }

}  // namespace

std::size_t sample_workspace_bytes(int64_t rows, int64_t vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  const std::size_t partials = std::size_t(rows) * std::size_t(max_chunks(vocab)) * sizeof(Partial);
  return (partials + std::size_t(rows) * sizeof(unsigned) + 255) / 256 * 256;
}

void sample(const SampleParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.vocab <= 0)
    throw Error("sample: rows must be >= 0 and vocab positive (got " + std::to_string(p.rows) + ", " +
                std::to_string(p.vocab) + ")");
  if (p.vocab > kMaxVocab)
    throw Error("sample: vocab " + std::to_string(p.vocab) + " is beyond the supported " + std::to_string(kMaxVocab));
  if (p.rows > 65535) throw Error("sample: more than 65535 rows (" + std::to_string(p.rows) + ")");
  if (p.rows == 0) return;
  if (!p.logits || !p.temperature || !p.top_k || !p.top_p || !p.seed || !p.offset || !p.out)
    throw Error("sample: logits, temperature, top_k, top_p, seed, offset and out must be given");
  const std::size_t need = sample_workspace_bytes(p.rows, p.vocab);
  if (!p.workspace || p.workspace_bytes < need)
    throw Error("sample: the workspace must hold sample_workspace_bytes(" + std::to_string(p.rows) + ", " +
                std::to_string(p.vocab) + ") = " + std::to_string(need) + " bytes (got " +
                std::to_string(p.workspace ? p.workspace_bytes : 0) + ")");
  NvtxRange range("sample");
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Greedy pieces: about one block per SM over the batch, each at least kGreedyChunkMin elements.
  const int most = max_chunks(p.vocab);
  int chunks = int(std::clamp<int64_t>((sms + p.rows - 1) / p.rows, 1, most));
  const int64_t len = ((p.vocab + chunks - 1) / chunks + 3) / 4 * 4;
  chunks = int((p.vocab + len - 1) / len);
  SampleArgs args{};
  args.logits = p.logits;
  args.vocab = int(p.vocab);
  args.temperature = p.temperature;
  args.top_k = p.top_k;
  args.top_p = p.top_p;
  args.seed = p.seed;
  args.offset = p.offset;
  args.out = p.out;
  args.partials = static_cast<Partial*>(p.workspace);
  args.counters = reinterpret_cast<unsigned*>(static_cast<char*>(p.workspace) +
                                              std::size_t(p.rows) * std::size_t(most) * sizeof(Partial));
  args.chunks = chunks;
  args.max_chunks = most;
  args.chunk_len = int(len);
  args.vec4 = p.vocab % 4 == 0 && layers::aligned16(p.logits);
  const std::size_t smem = sizeof(SampleSmem);
  static std::atomic<uint64_t> configured{0};  // devices whose kernel attribute is set
  if (device >= 64 || !(configured.load() & (uint64_t(1) << device))) {
    int optin = 0;
    INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (std::size_t(optin) < smem)
      throw Error("sample: needs " + std::to_string(smem) + " bytes of shared memory a block, the device allows " +
                  std::to_string(optin));
    INFERLAB_CUDA_CHECK(cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    if (device < 64) configured.fetch_or(uint64_t(1) << device);
  }
  sample_kernel<<<dim3(unsigned(chunks), unsigned(p.rows)), kThreads, smem, stream>>>(args);
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace inferlab
