// Decode attention (one query token per sequence) over a contiguous or paged KV cache.
//
// One block = (piece of the context, sequence, KV head, group of up to 32 query heads). Its query
// heads are the rows of mma.sync m16n8k16 tiles (padded to 16 or 32 rows), so the scores Q K^T
// and the output P V run on tensor cores while the block streams K and V once:
//   - 4 or 8 warps (8 when the grid has at most one block per SM) split the block's tokens in
//     tiles of 16; each warp keeps a ring of 3 K/V tiles in shared memory filled by cp.async (rows
//     past the context zero-filled, their scores -inf), so the loads of tiles i+1 and i+2 are in
//     flight while tile i is used. A paged cache is read through the piece's block-table entries,
//     staged in shared memory; a tile may straddle blocks of any power-of-two size.
//   - online softmax per query head (as in flash_fwd.cu), then the warps' (max, sum, O) are
//     merged through shared memory.
//   - plain: one piece: the block writes O and the log-sum-exp. split: each piece writes its
//     unnormalized O with (max, sum) to the workspace; the last piece to finish for its
//     (sequence, KV head, group) — a counter, reset by that block — merges all pieces, loading
//     them in one round trip (batches of 16 pieces).
// The model of this kernel's cost is sim/ops.h attention_cost with the KV layout and the pieces.
#include <cfloat>
#include <cmath>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "flash_common.cuh"
#include "inferlab/kernels/attention/decode.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/ops.h"

namespace inferlab {
namespace {

constexpr int kTile = 16;         // tokens per warp tile
constexpr int kMaxSplits = 1024;  // pieces per context (the plan stays near one block per SM)
constexpr int kTraceStamps = 6;   // DecodeParams::trace

// Warps per block and K/V tiles per warp's ring (the one in use, STAGES - 1 in flight): 4 or 8
// warps with 3 tiles each (dispatch_config below); the candidates they were measured against are
// DecodeParams::block (decode.h).
template <int WARPS_, int STAGES_>
struct DecodeConfig {
  static constexpr int WARPS = WARPS_, THREADS = WARPS_ * 32, STAGES = STAGES_;
};

struct DecodeKernelParams {
  const void* q;
  KvCacheView cache;
  void* o;
  float* lse;
  float* part_o;    // [batch, heads, splits, D] unnormalized, relative to part_m
  float* part_ml;   // [batch, heads, splits, 2]: max (log2 units) and sum
  int* counters;    // [batch, kv_heads, groups]
  int heads, group, groups, splits;  // group: query heads per KV head; groups: blocks per KV head
  int chunk;                         // tokens per piece (a multiple of the 16-token tile)
  int table_entries;                 // paged: block-table entries a piece spans at most (staged in smem)
  int block_shift;                   // paged: log2(block size)
  float scale_log2;
  unsigned long long* trace;  // DecodeParams::trace
};

__device__ __forceinline__ void stamp(unsigned long long* trace, int k) {
  if (trace && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    trace[(blockIdx.y * gridDim.x + blockIdx.x) * kTraceStamps + k] = t;
  }
}

// Shared memory: the warps' double-buffered K/V tiles, later reused for merging the warps
// (fp32 O rows and (max, sum) per warp), whichever is larger; then the staged table entries.
template <int D, int MT, class Cfg>
constexpr int kv_smem_bytes() {
  constexpr int tiles = Cfg::WARPS * Cfg::STAGES * 2 /*K,V*/ * kTile * D * 2;
  constexpr int merge = Cfg::WARPS * 16 * MT * D * 4 + Cfg::WARPS * 16 * MT * 8;
  return tiles > merge ? tiles : merge;
}

// Copies a warp's K and V tile (tokens [t, t + 16)) into its shared buffers (swizzled rows).
// Paged: the piece's block-table entries were staged in shared memory (stab, from token t_base),
// so no copy waits on a global load of the table.
template <int D, KvLayout kLayout, class T>
__device__ __forceinline__ void load_kv_tile(T* sk, T* sv, const KvCacheView& c, const int* stab, int t_base,
                                             int block_shift, int b, int kh, int t, int t_end, int lane) {
  constexpr int kChunks = D / 8;
  const int64_t row = int64_t(c.kv_heads) * D;  // elements per token in the pool
#pragma unroll
  for (int i = lane; i < kTile * kChunks; i += 32) {
    const int r = i / kChunks, ch = i % kChunks, tok = t + r;
    const bool ok = tok < t_end;
    int64_t slot = 0;
    if (ok) {
      if constexpr (kLayout == KvLayout::paged)  // block size 2^block_shift: shifts, not 64-bit divisions
        slot = (int64_t(stab[(tok >> block_shift) - (t_base >> block_shift)]) << block_shift) +
               (tok & ((1 << block_shift) - 1));
      else
        slot = int64_t(b) * c.max_len + tok;
    }
    const int64_t off = slot * row + int64_t(kh) * D + ch * 8;
    cp_async_16(sk + swz<D>(r, ch * 8), static_cast<const T*>(c.k) + off, ok);
    cp_async_16(sv + swz<D>(r, ch * 8), static_cast<const T*>(c.v) + off, ok);
  }
}

template <int D, int MT, KvLayout kLayout, class T, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) decode_kernel(const __grid_constant__ DecodeKernelParams p) {
  constexpr int kWarps = Cfg::WARPS, kThreads = Cfg::THREADS, kStages = Cfg::STAGES;
  constexpr int ROWS = 16 * MT, NO = D / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  // The (sequence, KV head, group) index runs fastest: the blocks that read the same tokens of
  // different KV heads (interleaved in every token's row of the pool) start together, which keeps
  // the DRAM reads of neighbouring blocks in the same rows.
  const int unit = blockIdx.x;  // (b, kh, hg)
  const int split = blockIdx.y;
  const int hg = unit % p.groups, kh = (unit / p.groups) % int(p.cache.kv_heads), b = unit / p.groups / int(p.cache.kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int h0 = kh * p.group + hg * ROWS;                  // first query head of the block
  const int rows = min(ROWS, p.group - hg * ROWS);          // real query heads (the rest is padding)

  stamp(p.trace, 0);
  // The context length, the piece's block-table entries and Q are loaded together: the entries
  // are those of the piece's whole token range (clipped to the table), whatever the length turns
  // out to be, so the first K/V loads wait for one round trip, not two.
  const int n = __ldg(p.cache.context_lens + b);
  const int base = split * p.chunk;  // the piece's first token, when the context reaches it
  int* stab = reinterpret_cast<int*>(smem_raw + kv_smem_bytes<D, MT, Cfg>());  // paged: this piece's table entries
  if constexpr (kLayout == KvLayout::paged) {
    const int first = base >> p.block_shift;
    const int last = min((base + p.chunk - 1) >> p.block_shift, int(p.cache.max_blocks_per_seq) - 1);
    const int32_t* row = p.cache.block_table + int64_t(b) * p.cache.max_blocks_per_seq;
    for (int i = threadIdx.x; i <= last - first; i += kThreads) stab[i] = __ldg(row + first + i);
  }
  const int t0 = min(n, base), t1 = min(n, t0 + p.chunk);

  // Q rows of this block straight into A fragments (row g/g+8, columns 2t/2t+8 of each 16-wide
  // k-step; padding rows zero). These loads and the table's are in flight together.
  uint32_t qa[MT][D / 16][4];
  {
    const uint32_t* qg = reinterpret_cast<const uint32_t*>(static_cast<const T*>(p.q) + (int64_t(b) * p.heads + h0) * D);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = mt * 16 + g + 8 * (i & 1), c = ks * 16 + 2 * t + 8 * (i >> 1);
          qa[mt][ks][i] = r < rows ? __ldg(qg + (r * D + c) / 2) : 0u;
        }
  }
  if constexpr (kLayout == KvLayout::paged) __syncthreads();  // the staged table entries are visible

  // This warp's ring of kStages (K, V) tile pairs.
  T* ring = smem + warp * kStages * 2 * kTile * D;
  auto sk = [&](int i) { return ring + (i % kStages) * 2 * kTile * D; };
  auto sv = [&](int i) { return sk(i) + kTile * D; };

  float acc_o[MT][NO][4];
  float m_i[MT][2], l_i[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < NO; ++i) acc_o[mt][i][0] = acc_o[mt][i][1] = acc_o[mt][i][2] = acc_o[mt][i][3] = 0.f;
    m_i[mt][0] = m_i[mt][1] = -INFINITY;
    l_i[mt][0] = l_i[mt][1] = 0.f;
  }

  // This warp's tiles: t0 + 16 * (warp + 4 i); tiles i+1 and i+2 load while tile i is used.
  constexpr int kStride = kWarps * kTile;
  const int first = t0 + warp * kTile;
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    const int tt = first + i * kStride;
    if (tt < t1) load_kv_tile<D, kLayout>(sk(i), sv(i), p.cache, stab, base, p.block_shift, b, kh, tt, t1, lane);
    cp_async_commit();
  }
  int it = 0;
  for (int tile = first; tile < t1; tile += kStride, ++it) {
    const int ahead = tile + (kStages - 1) * kStride;
    if (ahead < t1)
      load_kv_tile<D, kLayout>(sk(it + kStages - 1), sv(it + kStages - 1), p.cache, stab, base, p.block_shift, b, kh,
                               ahead, t1, lane);
    cp_async_commit();
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1) : "memory");
    __syncwarp();
    if (it == 0) stamp(p.trace, 1);

    {
      float s[MT][2][4];
  #pragma unroll
      for (int mt = 0; mt < MT; ++mt)
  #pragma unroll
        for (int nt = 0; nt < 2; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
  #pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t kb[4];
        ldmatrix_x4(kb, sk(it) + swz<D>((lane % 8) + 8 * (lane / 16), ks * 16 + 8 * ((lane / 8) & 1)));
  #pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(s[mt][0], qa[mt][ks], kb[0], kb[1]);
          Mma<T>::run(s[mt][1], qa[mt][ks], kb[2], kb[3]);
        }
      }
      if (tile + kTile > t1) {  // the last tile of the piece: mask tokens past its end
  #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
  #pragma unroll
          for (int nt = 0; nt < 2; ++nt)
  #pragma unroll
            for (int e = 0; e < 4; ++e)
              if (tile + nt * 8 + 2 * t + (e & 1) >= t1) s[mt][nt][e] = -INFINITY;
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) online_softmax_step(s[mt], m_i[mt], l_i[mt], acc_o[mt], p.scale_log2);
      uint32_t pa[MT][4];
  #pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = Mma<T>::pack(s[mt][0][0], s[mt][0][1]);
        pa[mt][1] = Mma<T>::pack(s[mt][0][2], s[mt][0][3]);
        pa[mt][2] = Mma<T>::pack(s[mt][1][0], s[mt][1][1]);
        pa[mt][3] = Mma<T>::pack(s[mt][1][2], s[mt][1][3]);
      }
  #pragma unroll
      for (int dp = 0; dp < NO / 2; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, sv(it) + swz<D>((lane % 8) + 8 * ((lane / 8) & 1), dp * 16 + 8 * (lane / 16)));
  #pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(acc_o[mt][2 * dp], pa[mt], vb[0], vb[1]);
          Mma<T>::run(acc_o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
    __syncwarp();  // done reading this stage before it is refilled
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  stamp(p.trace, 2);

  // Merge the 4 warps: each leaves (max, sum) per row and its O rows in shared memory.
  __syncthreads();
  float* so = reinterpret_cast<float*>(smem_raw);           // [warps][ROWS][D]
  float* sml = so + kWarps * ROWS * D;                      // [warps][ROWS][2]
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = mt * 16 + g + 8 * half;
      float l = l_i[mt][half];
      l += __shfl_xor_sync(~0u, l, 1);
      l += __shfl_xor_sync(~0u, l, 2);
      if (r >= rows) continue;  // padding rows are not merged
      if (t == 0) {
        sml[(warp * ROWS + r) * 2] = m_i[mt][half];
        sml[(warp * ROWS + r) * 2 + 1] = l;
      }
#pragma unroll
      for (int i = 0; i < NO; ++i) {
        so[(warp * ROWS + r) * D + i * 8 + 2 * t] = acc_o[mt][i][2 * half];
        so[(warp * ROWS + r) * D + i * 8 + 2 * t + 1] = acc_o[mt][i][2 * half + 1];
      }
    }
  __syncthreads();
  using Tr = DTypeTraits<DTypeOf<T>::value>;
  constexpr float kLn2 = 0.6931471805599453f;
  for (int i = threadIdx.x; i < rows * D; i += kThreads) {
    const int r = i / D, d = i % D;
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sml[(w * ROWS + r) * 2]);
    const float base = M == -INFINITY ? 0.f : M;
    float L = 0.f, acc = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float f = fast_exp2(sml[(w * ROWS + r) * 2] - base);
      L += f * sml[(w * ROWS + r) * 2 + 1];
      acc += f * so[(w * ROWS + r) * D + d];
    }
    const int64_t bh = int64_t(b) * p.heads + h0 + r;
    if (p.splits == 1) {
      static_cast<T*>(p.o)[bh * D + d] = Tr::from_float(L > 0.f ? acc / L : 0.f);
      if (d == 0) p.lse[bh] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
    } else {
      p.part_o[(bh * p.splits + split) * D + d] = acc;  // relative to 2^base
      if (d == 0) {
        p.part_ml[(bh * p.splits + split) * 2] = M;
        p.part_ml[(bh * p.splits + split) * 2 + 1] = L;
      }
    }
  }
  stamp(p.trace, 3);
  if (p.splits == 1) return;

  // The last piece of this (sequence, KV head, group) to finish merges all pieces.
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&p.counters[unit], 1) == p.splits - 1;
  __syncthreads();
  stamp(p.trace, 4);
  if (!last) return;
  __threadfence();
  // Every thread merges one row x 4 consecutive d over the pieces, kMergeBatch at a time with an online
  // rescale: the pieces' partial outputs and their (max, sum) are loaded together, so the merge
  // costs one round trip to L2 per batch of pieces (one in all for up to kMergeBatch pieces).
  constexpr int kMergeBatch = 16;
  for (int i = threadIdx.x; i < rows * (D / 4); i += kThreads) {  // 4 consecutive d per thread
    const int r = i / (D / 4), d = (i % (D / 4)) * 4;
    const int64_t bh = int64_t(b) * p.heads + h0 + r;
    const float4* po = reinterpret_cast<const float4*>(p.part_o + bh * p.splits * D + d);
    const float2* pml = reinterpret_cast<const float2*>(p.part_ml) + bh * p.splits;
    float M = -INFINITY, L = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < p.splits; s0 += kMergeBatch) {
      float4 o[kMergeBatch];
      float2 ml[kMergeBatch];
#pragma unroll
      for (int j = 0; j < kMergeBatch; ++j) {
        const bool ok = s0 + j < p.splits;
        o[j] = ok ? __ldcg(po + int64_t(s0 + j) * (D / 4)) : make_float4(0.f, 0.f, 0.f, 0.f);
        ml[j] = ok ? __ldcg(pml + s0 + j) : make_float2(-INFINITY, 0.f);
      }
      float Mn = M;
#pragma unroll
      for (int j = 0; j < kMergeBatch; ++j) Mn = fmaxf(Mn, ml[j].x);
      const float base2 = Mn == -INFINITY ? 0.f : Mn;
      const float alpha = fast_exp2(M - base2);
      L *= alpha;
      acc.x *= alpha, acc.y *= alpha, acc.z *= alpha, acc.w *= alpha;
#pragma unroll
      for (int j = 0; j < kMergeBatch; ++j) {
        const float f = fast_exp2(ml[j].x - base2);
        L += f * ml[j].y;
        acc.x += f * o[j].x, acc.y += f * o[j].y, acc.z += f * o[j].z, acc.w += f * o[j].w;
      }
      M = Mn;
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
    T* out = static_cast<T*>(p.o) + bh * D + d;
    out[0] = Tr::from_float(acc.x * inv);
    out[1] = Tr::from_float(acc.y * inv);
    out[2] = Tr::from_float(acc.z * inv);
    out[3] = Tr::from_float(acc.w * inv);
    if (d == 0) p.lse[bh] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
  }
  if (threadIdx.x == 0) p.counters[unit] = 0;  // ready for the next launch
  stamp(p.trace, 5);
}

template <int D, int MT, KvLayout kLayout, class T, class Cfg>
void launch(const DecodeParams& a, const DecodeKernelParams& kp, cudaStream_t stream) {
  auto kernel = decode_kernel<D, MT, kLayout, T, Cfg>;
  const int smem = kv_smem_bytes<D, MT, Cfg>() + (kLayout == KvLayout::paged ? kp.table_entries * 4 : 0);
  // Host work between launches is part of what a decode step costs: the attributes are set once per
  // kernel and device (raised when a launch needs more dynamic shared memory than any before it there).
  static KernelSmem attr;
  attr.ensure(kernel, smem, "attention/decode", true);
  const dim3 grid(unsigned(a.batch * a.cache.kv_heads * kp.groups), unsigned(kp.splits));
  kernel<<<grid, Cfg::THREADS, smem, stream>>>(kp);
  INFERLAB_CHECK_LAUNCH();
}

template <int D, int MT, class Cfg>
void dispatch_layout_dtype(const DecodeParams& a, const DecodeKernelParams& kp, cudaStream_t s) {
  const bool paged = a.cache.layout == KvLayout::paged;
  if (a.dtype == DType::bf16) {
    if (paged) launch<D, MT, KvLayout::paged, __nv_bfloat16, Cfg>(a, kp, s);
    else launch<D, MT, KvLayout::contiguous, __nv_bfloat16, Cfg>(a, kp, s);
  } else {
    if (paged) launch<D, MT, KvLayout::paged, __half, Cfg>(a, kp, s);
    else launch<D, MT, KvLayout::contiguous, __half, Cfg>(a, kp, s);
  }
}

template <int D, int MT>
void dispatch_config(const DecodeParams& a, const DecodeKernelParams& kp, int sm_count, cudaStream_t s) {
  if (a.block != DecodeBlock::planned) {  // the candidates the plan was measured against (NOTES.md, d7)
    if constexpr (D == 128 && MT == 1) {
      switch (a.block) {
        case DecodeBlock::w4s3: return dispatch_layout_dtype<D, MT, DecodeConfig<4, 3>>(a, kp, s);
        case DecodeBlock::w8s3: return dispatch_layout_dtype<D, MT, DecodeConfig<8, 3>>(a, kp, s);
        case DecodeBlock::w8s2: return dispatch_layout_dtype<D, MT, DecodeConfig<8, 2>>(a, kp, s);
        case DecodeBlock::w4s5: return dispatch_layout_dtype<D, MT, DecodeConfig<4, 5>>(a, kp, s);
        case DecodeBlock::planned: break;
      }
    }
    throw Error(std::string("attention/decode: block ") + decode_block_name(a.block) +
                " is a choice for head dim 128 and query groups of at most 16 heads (head dim " + std::to_string(D) +
                ", group " + std::to_string(a.heads / a.cache.kv_heads) + ")");
  }
  const int64_t blocks = a.batch * a.cache.kv_heads * kp.groups * kp.splits;
  if (blocks <= sm_count) dispatch_layout_dtype<D, MT, DecodeConfig<8, 3>>(a, kp, s);
  else dispatch_layout_dtype<D, MT, DecodeConfig<4, 3>>(a, kp, s);
}

int query_group(const DecodeParams& p) { return int(p.heads / p.cache.kv_heads); }

// Blocks per KV head: groups of at most 32 query heads (two 16-row tensor-core tiles).
int head_groups(const DecodeParams& p) { return (query_group(p) + 31) / 32; }

struct WorkspaceLayout {
  std::size_t part_o, part_ml, counters, total;
};
WorkspaceLayout workspace_layout(const DecodeParams& p, int splits) {
  auto up = [](std::size_t x) { return (x + 255) / 256 * 256; };
  WorkspaceLayout w{};
  if (splits <= 1) return w;
  const std::size_t rows = std::size_t(p.batch * p.heads) * std::size_t(splits);
  w.part_o = 0;
  w.part_ml = up(rows * std::size_t(p.head_dim) * 4);
  w.counters = w.part_ml + up(rows * 8);
  w.total = w.counters + up(std::size_t(p.batch * p.cache.kv_heads * head_groups(p)) * 4);
  return w;
}

}  // namespace

float DecodeParams::softmax_scale() const {
  return scale != 0.f ? scale : float(1.0 / std::sqrt(double(head_dim)));
}

const char* decode_block_name(DecodeBlock b) {
  switch (b) {
    case DecodeBlock::planned: return "planned";
    case DecodeBlock::w4s3: return "w4s3";
    case DecodeBlock::w8s3: return "w8s3";
    case DecodeBlock::w8s2: return "w8s2";
    case DecodeBlock::w4s5: return "w4s5";
  }
  return "?";
}

std::string decode_variant_name(DecodeVariant v) { return v == DecodeVariant::plain ? "plain" : "split"; }
DecodeVariant parse_decode_variant(const std::string& s) {
  if (s == "plain") return DecodeVariant::plain;
  if (s == "split") return DecodeVariant::split;
  throw Error("unknown decode variant '" + s + "' (known: plain, split)");
}

int decode_splits(const DecodeParams& p, DecodeVariant v, int sm_count) {
  if (v == DecodeVariant::plain) return 1;
  if (p.splits > 0) return p.splits;
  return int(plan_decode_splits(p.batch * p.cache.kv_heads * head_groups(p), p.max_context, sm_count));
}

std::size_t decode_workspace_bytes(const DecodeParams& p, DecodeVariant v, int sm_count) {
  return workspace_layout(p, decode_splits(p, v, sm_count)).total;
}

void validate_decode(const DecodeParams& p, DecodeVariant v, int sm_count) {
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16)
    throw Error("decode attention: unsupported dtype " + dtype_name(p.dtype) + " (supported: bf16, fp16)");
  if (p.head_dim != 64 && p.head_dim != 128)
    throw Error("decode attention: unsupported head dim " + std::to_string(p.head_dim) + " (supported: 64, 128)");
  if (p.cache.head_dim != p.head_dim || p.cache.dtype != p.dtype || p.cache.batch != p.batch)
    throw Error("decode attention: the KV cache's batch, head dim or dtype differs from the query's");
  if (p.batch <= 0 || p.heads <= 0 || p.cache.kv_heads <= 0) throw Error("decode attention: sizes must be positive");
  if (p.heads % p.cache.kv_heads != 0)
    throw Error("decode attention: kv_heads " + std::to_string(p.cache.kv_heads) + " does not divide heads " +
                std::to_string(p.heads));
  if (p.max_context < 0 || p.max_context > INT32_MAX) throw Error("decode attention: max_context out of range");
  if (!p.q || !p.o || !p.lse || !p.cache.k || !p.cache.v || !p.cache.context_lens)
    throw Error("decode attention: q, o, lse and the cache's k, v, context_lens must be given");
  if (p.cache.layout == KvLayout::paged && !p.cache.block_table) throw Error("decode attention: paged cache without a block table");
  if (p.cache.layout == KvLayout::paged &&
      (p.cache.block_size <= 0 || (p.cache.block_size & (p.cache.block_size - 1)) != 0 || p.cache.block_size > 1024))
    throw Error("decode attention: paged block size " + std::to_string(p.cache.block_size) +
                " must be a power of two up to 1024");
  const std::size_t need = decode_workspace_bytes(p, v, sm_count);
  if (need > 0 && (!p.workspace || p.workspace_bytes < need))
    throw Error("decode attention/" + decode_variant_name(v) + ": needs a workspace of " + std::to_string(need) + " bytes");
  if (decode_splits(p, v, sm_count) > kMaxSplits)
    throw Error("decode attention: " + std::to_string(p.splits) + " pieces per context; at most " +
                std::to_string(kMaxSplits) + " are merged");
  if (decode_splits(p, v, sm_count) > 65535) throw Error("decode attention: too many pieces for one launch");
}

void decode_attention(const DecodeParams& p, DecodeVariant v, cudaStream_t stream) {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  validate_decode(p, v, sms);
  NvtxRange range(v == DecodeVariant::plain ? "attention/decode_plain" : "attention/decode_split");
  DecodeKernelParams kp{};
  kp.q = p.q;
  kp.cache = p.cache;
  kp.o = p.o;
  kp.lse = p.lse;
  kp.splits = decode_splits(p, v, sms);
  const WorkspaceLayout w = workspace_layout(p, kp.splits);
  if (kp.splits > 1) {
    auto* base = static_cast<char*>(p.workspace);
    kp.part_o = reinterpret_cast<float*>(base + w.part_o);
    kp.part_ml = reinterpret_cast<float*>(base + w.part_ml);
    // The counters sit at the END of the workspace, the pieces' partial outputs at its start: a counter's
    // address then depends only on its (sequence, KV head, group), never on this launch's shape, so launches
    // of other shapes sharing the workspace (the engine's decode steps) never write partial outputs over a
    // counter another launch expects to find at zero. (The partial outputs are not cleared after use.)
    const std::size_t counter_bytes = w.total - w.counters;
    kp.counters = reinterpret_cast<int*>(base + (p.workspace_bytes - counter_bytes) / 4 * 4);
  }
  int chunk = int((p.max_context + kp.splits - 1) / kp.splits);
  kp.chunk = std::max(kTile, (chunk + kTile - 1) / kTile * kTile);
  kp.table_entries = p.cache.layout == KvLayout::paged ? int(kp.chunk / p.cache.block_size + 2) : 0;
  kp.block_shift = 0;
  while (p.cache.layout == KvLayout::paged && (int64_t(1) << kp.block_shift) < p.cache.block_size) ++kp.block_shift;
  kp.heads = int(p.heads);
  kp.group = query_group(p);
  kp.groups = head_groups(p);
  kp.scale_log2 = p.softmax_scale() * 1.4426950408889634f;
  kp.trace = p.trace;
  const bool two_tiles = kp.group > 16;
  if (p.head_dim == 128) {
    if (two_tiles) dispatch_config<128, 2>(p, kp, sms, stream);
    else dispatch_config<128, 1>(p, kp, sms, stream);
  } else {
    if (two_tiles) dispatch_config<64, 2>(p, kp, sms, stream);
    else dispatch_config<64, 1>(p, kp, sms, stream);
  }
}

}  // namespace inferlab
