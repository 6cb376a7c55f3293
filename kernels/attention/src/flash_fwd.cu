// Flash attention forward on tensor cores (mma.sync m16n8k16, fp32 accumulation), FlashAttention-2
// style. One block computes BM query rows of one (batch, head):
//   - Q tile [BM x D] to shared memory once (cp.async); K and V tiles [BN x D] streamed: V_j loads
//     while S = Q K_j^T is computed, K_{j+1} loads while the softmax and O += P V_j run.
//   - Each warp owns BM / WARPS rows; its scores stay in registers: the S accumulator fragment is
//     re-packed as the A operand of P V without touching shared memory.
//   - Online softmax in base 2 (scale folded into log2(e)); row max / sum reduced over the 4 lanes
//     of a quad; fully masked rows handled (max = -inf -> no NaN).
//   - Shared tiles are XOR-swizzled in 16-byte chunks (chunk ^ row % 8), so the 8 row addresses
//     of every ldmatrix fall in distinct banks.
//   - Causal: blocks stop at the diagonal (only the kept pairs are computed) and the longest
//     query blocks are scheduled first; blocks that straddle the diagonal or the end of K mask.
// Out-of-range rows of K/V are zero-filled (so P = 0 never meets garbage); out-of-range query rows
// are computed on zeros and not written.
// Varlen (prefill.h): the same kernel in a FlashMode that reads each sequence's lengths from
// q_start / context_lens and its keys through the cache view (load_kv_rows); the grid is
// (query blocks of the longest sequence, sequences x heads) and blocks past a sequence's queries
// return at once.
#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flash_common.cuh"
#include "flash_fwd.h"
#include "inferlab/kernels/attention/prefill.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

template <int D_, int BM_, int BN_, int WARPS_>
struct Tile {
  static constexpr int D = D_, BM = BM_, BN = BN_, WARPS = WARPS_, THREADS = WARPS * 32;
  static constexpr int MT = BM / (16 * WARPS);  // 16-row m-tiles per warp
  static constexpr int NS = BN / 8;             // n-tiles of S
  static constexpr int NO = D / 8;              // n-tiles of O
  static constexpr int SMEM = (BM + 2 * BN) * D * 2;
  static_assert(MT >= 1 && BM % (16 * WARPS) == 0, "BM must be a multiple of 16 * WARPS");
  static_assert(BN % 16 == 0 && D % 16 == 0 && D >= 64, "tile shape");
};

// The tile for each head dim, in one place. Measured on the H100 (see kernels/attention/NOTES.md).
template <int D>
struct DefaultTile;
template <>
struct DefaultTile<128> {
  using type = Tile<128, 128, 64, 4>;
};
template <>
struct DefaultTile<64> {
  using type = Tile<64, 128, 64, 4>;
};

// Copies a [ROWS x D] tile (global row stride `stride` elements) into swizzled shared memory;
// rows at or past `rows_valid` are zero-filled.
template <class Cfg, int ROWS, class T>
__device__ __forceinline__ void load_tile(T* smem, const T* g, int64_t stride, int rows_valid) {
  constexpr int kChunks = Cfg::D / 8;
#pragma unroll
  for (int c = threadIdx.x; c < ROWS * kChunks; c += Cfg::THREADS) {
    const int r = c / kChunks, ch = c % kChunks;
    const bool ok = r < rows_valid;
    cp_async_16(smem + swz<Cfg::D>(r, ch * 8), ok ? g + r * stride + ch * 8 : g, ok);
  }
}

template <class Cfg, bool kCausal, class T, FlashMode kMode>
__global__ void __launch_bounds__(Cfg::THREADS) flash_fwd_kernel(const __grid_constant__ FlashParams p) {
  constexpr int D = Cfg::D, BM = Cfg::BM, BN = Cfg::BN, MT = Cfg::MT, NS = Cfg::NS, NO = Cfg::NO;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * D;
  T* sV = sK + BN * D;

  const int m_block = int(gridDim.x) - 1 - int(blockIdx.x);  // longest causal rows first
  const int bh = int(blockIdx.y + gridDim.y * blockIdx.z);
  if (bh >= p.batch_heads) return;
  const int b = bh / p.heads, h = bh % p.heads, kh = h / p.group;  // b: the sequence
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // mma fragment coordinates
  const int row0 = m_block * BM;         // first query row of the block
  const SeqSpan span = seq_span<kMode>(p, b);
  auto seq_q = [&] { return queries<kMode>(p, span); };
  auto seq_k = [&] { return keys<kMode>(p, span); };
  if constexpr (kMode != FlashMode::dense)
    if (row0 >= seq_q()) return;  // the grid covers the longest sequence
  const int offset = seq_k() - seq_q();  // causal: query i sees keys j <= i + offset

  const int64_t q_stride = int64_t(p.heads) * D, kv_stride = int64_t(p.kv_heads) * D;
  const T* qg = static_cast<const T*>(p.q) + (span.q_row + row0) * q_stride + int64_t(h) * D;
  const T* kg = static_cast<const T*>(p.k) + int64_t(b) * seq_k() * kv_stride + int64_t(kh) * D;
  const T* vg = static_cast<const T*>(p.v) + int64_t(b) * seq_k() * kv_stride + int64_t(kh) * D;
  // varlen: keys through the cache view, a run of rows per thread
  const KvRows<kMode> rows = kv_rows<kMode>(p, b, kh, D);
  auto load_varlen = [&](T* smem, const void* pool, int tile0) {
    load_kv_rows<D, BN, Cfg::THREADS, 4>(static_cast<const T*>(pool), rows, tile0, seq_k(), int(threadIdx.x),
                                         [&](int r, int c) { return smem + swz<D>(r, c); });
  };

  int n_end = seq_k();
  if (kCausal) n_end = min(seq_k(), row0 + BM + offset);
  const int n_blocks = n_end > 0 ? (n_end + BN - 1) / BN : 0;

  load_tile<Cfg, BM>(sQ, qg, q_stride, min(BM, seq_q() - row0));
  if constexpr (kMode == FlashMode::dense) {
    if (n_blocks > 0) load_tile<Cfg, BN>(sK, kg, kv_stride, min(BN, seq_k()));
  } else {
    if (n_blocks > 0) load_varlen(sK, p.k, 0);
  }
  cp_async_commit();

  float acc_o[MT][NO][4];
  float m_i[MT][2], l_i[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < NO; ++n) acc_o[mt][n][0] = acc_o[mt][n][1] = acc_o[mt][n][2] = acc_o[mt][n][3] = 0.f;
    m_i[mt][0] = m_i[mt][1] = -INFINITY;
    l_i[mt][0] = l_i[mt][1] = 0.f;
  }
  const int warp_row = warp * MT * 16;  // first row of this warp within the block

  for (int nb = 0; nb < n_blocks; ++nb) {
    cp_async_wait_all();
    __syncthreads();  // K_nb (and Q) visible; every warp is done reading V_{nb-1}
    if constexpr (kMode == FlashMode::dense)
      load_tile<Cfg, BN>(sV, vg + int64_t(nb) * BN * kv_stride, kv_stride, min(BN, seq_k() - nb * BN));
    else
      load_varlen(sV, p.v, nb * BN);
    cp_async_commit();

    // S = Q K^T for this warp's rows.
    float s[MT][NS][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NS; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int r = warp_row + mt * 16 + (lane % 8) + 8 * ((lane / 8) & 1);
        ldmatrix_x4(qa[mt], sQ + swz<D>(r, ks * 16 + 8 * (lane / 16)));
      }
#pragma unroll
      for (int np = 0; np < NS / 2; ++np) {
        uint32_t kb[4];
        const int r = np * 16 + (lane % 8) + 8 * (lane / 16);
        ldmatrix_x4(kb, sK + swz<D>(r, ks * 16 + 8 * ((lane / 8) & 1)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(s[mt][2 * np], qa[mt], kb[0], kb[1]);
          Mma<T>::run(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }

    // Mask columns past the end of K and, causally, past each row's diagonal.
    const int col0 = nb * BN;
    const bool need_mask = col0 + BN > seq_k() || (kCausal && col0 + BN - 1 > row0 + offset);
    if (need_mask) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = col0 + n * 8 + 2 * t + (e & 1);
            const int row = row0 + warp_row + mt * 16 + g + 8 * (e >> 1);
            if (col >= seq_k() || (kCausal && col > row + offset)) s[mt][n][e] = -INFINITY;
          }
    }

    cp_async_wait_all();
    __syncthreads();  // V_nb visible; every warp is done reading K_nb
    if (nb + 1 < n_blocks) {
      if constexpr (kMode == FlashMode::dense)
        load_tile<Cfg, BN>(sK, kg + int64_t(nb + 1) * BN * kv_stride, kv_stride, min(BN, seq_k() - (nb + 1) * BN));
      else
        load_varlen(sK, p.k, (nb + 1) * BN);
      cp_async_commit();
    }

    // Online softmax: rows g and g + 8 of each m-tile; a quad of lanes shares a row.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) online_softmax_step(s[mt], m_i[mt], l_i[mt], acc_o[mt], p.scale_log2);

    // O += P V: the S accumulators of n-tiles 2kk, 2kk+1 are the A fragment of k-step kk.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = Mma<T>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = Mma<T>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = Mma<T>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = Mma<T>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < NO / 2; ++dp) {
        uint32_t vb[4];
        const int r = kk * 16 + (lane % 8) + 8 * ((lane / 8) & 1);
        ldmatrix_x4_trans(vb, sV + swz<D>(r, dp * 16 + 8 * (lane / 16)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(acc_o[mt][2 * dp], pa[mt], vb[0], vb[1]);
          Mma<T>::run(acc_o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }

  // Epilogue: finish the row sums, normalize, write O and the log-sum-exp.
  // The sequence's first row again rather than kept live across the loop (registers).
  const int64_t q_row = seq_span<kMode>(p, b).q_row;
  T* og = static_cast<T*>(p.o) + (q_row + row0) * q_stride + int64_t(h) * D;
  float* lse = lse_at<kMode>(p, bh, h, q_row, row0);
  constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_i[mt][half];
      l += __shfl_xor_sync(~0u, l, 1);
      l += __shfl_xor_sync(~0u, l, 2);
      const int r = warp_row + mt * 16 + g + 8 * half;
      if (row0 + r >= seq_q()) continue;
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        const uint32_t packed = Mma<T>::pack(acc_o[mt][n][2 * half] * inv, acc_o[mt][n][2 * half + 1] * inv);
        *reinterpret_cast<uint32_t*>(og + int64_t(r) * q_stride + n * 8 + 2 * t) = packed;
      }
      if (t == 0 && (kMode == FlashMode::dense || lse))
        lse[int64_t(r) * lse_step<kMode>(p)] = l > 0.f ? (m_i[mt][half] + log2f(l)) * kLn2 : -INFINITY;
    }
}

// Grid: x = query blocks (of the longest sequence), y/z = sequences x heads.
template <class Cfg, bool kCausal, class T, FlashMode kMode>
void launch(const FlashParams& p, int64_t max_q, cudaStream_t stream) {
  auto kernel = flash_fwd_kernel<Cfg, kCausal, T, kMode>;
  static KernelSmem attr;
  attr.ensure(kernel, Cfg::SMEM, "attention/flash (mma.sync)");
  const unsigned m_blocks = unsigned((max_q + Cfg::BM - 1) / Cfg::BM);
  const unsigned bh = unsigned(p.batch_heads), y = bh < 65535u ? bh : 65535u, z = (bh + y - 1) / y;
  kernel<<<dim3(m_blocks, y, z), Cfg::THREADS, Cfg::SMEM, stream>>>(p);
  INFERLAB_CHECK_LAUNCH();
}

template <class Cfg>
void dispatch_dtype(const AttentionParams& a, cudaStream_t stream) {
  dispatch_dtype_causal(a.dtype, a.causal, [&](auto causal, auto element) {
    launch<Cfg, decltype(causal)::value, typename decltype(element)::type, FlashMode::dense>(make_flash_params(a),
                                                                                             a.seq_q, stream);
  });
}

template <class Cfg>
void dispatch_prefill(const PrefillParams& a, cudaStream_t stream) {
  dispatch_dtype_causal(a.dtype, a.causal, [&](auto causal, auto element) {
    dispatch_varlen_mode(a, [&](auto mode) {
      launch<Cfg, decltype(causal)::value, typename decltype(element)::type, decltype(mode)::value>(
          make_flash_params(a), a.max_q, stream);
    });
  });
}

// The mma.sync kernel's head-dim-128 candidates (MmaTile); planned is DefaultTile.
template <class F>
void with_mma_tile(MmaTile t, int64_t head_dim, F&& f) {
  if (t == MmaTile::planned) {
    if (head_dim == 128) return f(typename DefaultTile<128>::type{});
    if (head_dim == 64) return f(typename DefaultTile<64>::type{});
    throw Error("attention/flash: unsupported head dim " + std::to_string(head_dim) + " (supported: 64, 128)");
  }
  switch (t) {
    case MmaTile::bm128_bn32_w4: return f(Tile<128, 128, 32, 4>{});
    case MmaTile::bm64_bn64_w4: return f(Tile<128, 64, 64, 4>{});
    case MmaTile::bm128_bn64_w8: return f(Tile<128, 128, 64, 8>{});
    case MmaTile::planned: break;
  }
}

constexpr bool kWgmmaBuilt =
#ifdef INFERLAB_HAVE_SM90A
    true;
#else
    false;
#endif

void check_options(const FlashOptions& o, int64_t head_dim, FlashKernel resolved) {
  if (o.max_ctas < 0) throw Error("attention/flash: max_ctas must not be negative");
  if (o.mma_tile != MmaTile::planned && resolved != FlashKernel::mma)
    throw Error(std::string("attention/flash: mma tile ") + mma_tile_name(o.mma_tile) +
                " needs the mma kernel (this launch runs " + flash_kernel_name(resolved) + ")");
  if ((head_dim != 64 && head_dim != 128) && resolved != FlashKernel::overlapped)
    throw Error("attention/flash: head dim " + std::to_string(head_dim) +
                " runs on the overlapped kernel only (dense attention, compute capability 9.0); the " +
                flash_kernel_name(resolved) + " kernel has head dims 64 and 128");
  if (o.mma_tile != MmaTile::planned && head_dim != 128)
    throw Error(std::string("attention/flash: mma tile ") + mma_tile_name(o.mma_tile) + " is a head-dim-128 tile (head dim " +
                std::to_string(head_dim) + ")");
}

}  // namespace

const char* flash_kernel_name(FlashKernel k) {
  switch (k) {
    case FlashKernel::automatic: return "automatic";
    case FlashKernel::mma: return "mma";
    case FlashKernel::wgmma: return "wgmma";
    case FlashKernel::overlapped: return "overlapped";
  }
  return "?";
}

const char* mma_tile_name(MmaTile t) {
  switch (t) {
    case MmaTile::planned: return "planned";
    case MmaTile::bm128_bn32_w4: return "128x32x4";
    case MmaTile::bm64_bn64_w4: return "64x64x4";
    case MmaTile::bm128_bn64_w8: return "128x64x8";
  }
  return "?";
}

// wgmma runs on compute capability 9.0 exactly (sm_90a code does not run on later GPUs), when it was built.
FlashKernel resolve_flash_kernel(const FlashOptions& o, bool varlen) {
  if (o.kernel == FlashKernel::mma) return FlashKernel::mma;
  int device = 0, major = 0, minor = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const bool sm90 = major == 9 && minor == 0;
  if (o.kernel == FlashKernel::wgmma || o.kernel == FlashKernel::overlapped) {
    const std::string name = flash_kernel_name(o.kernel);
    if (!kWgmmaBuilt) throw Error("attention/flash: the " + name + " kernel was not built (CMAKE_CUDA_ARCHITECTURES without 90)");
    if (!sm90)
      throw Error("attention/flash: the " + name + " kernel needs compute capability 9.0; device " + std::to_string(device) +
                  " is " + std::to_string(major) + "." + std::to_string(minor));
    return o.kernel;
  }
  if (!(kWgmmaBuilt && sm90)) return FlashKernel::mma;
  return varlen ? FlashKernel::wgmma : FlashKernel::overlapped;
}

void launch_flash_forward(const AttentionParams& a, cudaStream_t stream) {
  const FlashKernel k = resolve_flash_kernel(a.flash);
  check_options(a.flash, a.head_dim, k);
#ifdef INFERLAB_HAVE_SM90A
  if (k == FlashKernel::wgmma) return launch_flash_forward_sm90(a, stream);
  if (k == FlashKernel::overlapped) return launch_flash_forward_overlap(a, stream);
#endif
  with_mma_tile(a.flash.mma_tile, a.head_dim, [&](auto tile) { dispatch_dtype<decltype(tile)>(a, stream); });
}

void launch_flash_prefill(const PrefillParams& a, cudaStream_t stream) {
  const FlashKernel k = resolve_flash_kernel(a.flash, /*varlen=*/true);
  check_options(a.flash, a.head_dim, k);
  if (k == FlashKernel::overlapped)
    throw Error("attention/prefill: the overlapped flash kernel runs dense attention only (use wgmma or mma)");
#ifdef INFERLAB_HAVE_SM90A
  if (k == FlashKernel::wgmma) return launch_flash_prefill_sm90(a, stream);
#endif
  with_mma_tile(a.flash.mma_tile, a.head_dim, [&](auto tile) { dispatch_prefill<decltype(tile)>(a, stream); });
}

}  // namespace inferlab
