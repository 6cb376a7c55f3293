// rope: rotary embedding of a token's query and key heads, and its K and V written to the KV cache, in one
// kernel (the sim/ops.h ops rope + kv_cache_write).
// One block per token. The angles depend on (position, i) only, so the block first computes the head_dim / 2
// cos/sin pairs once (accurate sincosf of the fp32 angle float(position) * inv_freq[i]) into shared memory; then
// one thread per VEC pairs (i .. i+VEC, i + D/2 .. i + D/2 + VEC) of a head: two VEC-element loads (16 bytes each
// when head_dim % 16 == 0), the rotation in fp32, rounded once; the V heads are copied VEC elements a thread.
// Rows whose slot is < 0 (padding) or beyond the pool rotate their queries only.
#include <algorithm>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/kernels/layers/layers.h"
#include "layers_common.cuh"

namespace inferlab {
namespace {

using namespace layers;  // the shared device helpers (layers_common.cuh)

constexpr int kRopeMaxHeadDim = 256;

struct RopeArgs {
  const void* qkv;
  const void* bias;
  const int32_t* positions;
  const float* inv_freq;
  void* q_out;
  void* k_cache;
  void* v_cache;
  const int32_t* slots;
  int64_t pool_rows;  // token rows of each cache pool
  int heads, kv_heads, head_dim;
};

// x (+ bias, rounded to T as nn.Linear's output is) as floats.
template <class T, int VEC>
__device__ __forceinline__ void load_input(const T* x, const T* bias, float (&f)[VEC]) {
  const Pack<T, VEC> v = load_pack<T, VEC>(x);
  if (bias) {
    const Pack<T, VEC> b = load_pack<T, VEC>(bias);
#pragma unroll
    for (int e = 0; e < VEC; ++e) f[e] = round_to<T>(to_f(v.v[e]) + to_f(b.v[e]));
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) f[e] = to_f(v.v[e]);
  }
}

template <class T, int VEC>
__global__ void rope_kernel(const RopeArgs a) {
  __shared__ float cs[kRopeMaxHeadDim];  // cos at [0, D/2), sin at [D/2, D)
  const int64_t t = blockIdx.x;
  const int D = a.head_dim, half = D / 2, H = a.heads, KH = a.kv_heads;
  const float position = float(a.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = position * a.inv_freq[i];  // fp32, as HF's inv_freq @ position_ids
    float s, c;
    sincosf(angle, &s, &c);
    cs[i] = c;
    cs[half + i] = s;
  }
  __syncthreads();
  const int64_t slot = a.slots[t];
  const bool write_kv = slot >= 0 && slot < a.pool_rows;
  const int width = (H + 2 * KH) * D;
  const T* row = static_cast<const T*>(a.qkv) + t * width;
  const T* bias = static_cast<const T*>(a.bias);
  const int per_half = half / VEC;                  // packs in half a head
  const int rotated = (H + (write_kv ? KH : 0)) * per_half;
  const int copied = write_kv ? KH * (D / VEC) : 0;
  for (int item = threadIdx.x; item < rotated + copied; item += blockDim.x) {
    if (item < rotated) {
      const int h = item / per_half, i0 = (item - h * per_half) * VEC;  // head (q heads, then k heads), pair
      const int col = h * D + i0;
      float x1[VEC], x2[VEC];
      load_input<T, VEC>(row + col, bias ? bias + col : nullptr, x1);
      load_input<T, VEC>(row + col + half, bias ? bias + col + half : nullptr, x2);
      Pack<T, VEC> o1, o2;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float c = cs[i0 + e], s = cs[half + i0 + e];
        o1.v[e] = from_f<T>(x1[e] * c - x2[e] * s);
        o2.v[e] = from_f<T>(x2[e] * c + x1[e] * s);
      }
      T* dst = h < H ? static_cast<T*>(a.q_out) + (t * H + h) * D
                     : static_cast<T*>(a.k_cache) + (slot * KH + (h - H)) * D;
      store_pack<T, VEC>(dst + i0, o1);
      store_pack<T, VEC>(dst + i0 + half, o2);
    } else {
      const int j = (item - rotated) * VEC;  // element of the token's V row
      const int col = (H + KH) * D + j;
      float v[VEC];
      load_input<T, VEC>(row + col, bias ? bias + col : nullptr, v);
      Pack<T, VEC> o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(v[e]);
      store_pack<T, VEC>(static_cast<T*>(a.v_cache) + slot * KH * D + j, o);
    }
  }
}

}  // namespace

void rope(const RopeParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.heads <= 0 || p.kv_heads <= 0 || p.head_dim <= 0)
    throw Error("rope: tokens must be >= 0 and heads, kv_heads, head_dim positive");
  if (p.head_dim % 2 != 0 || p.head_dim > kRopeMaxHeadDim)
    throw Error("rope: head_dim must be even and at most " + std::to_string(kRopeMaxHeadDim) + ", got " +
                std::to_string(p.head_dim));
  if (p.heads + 2 * p.kv_heads > (int64_t(1) << 20)) throw Error("rope: too many heads");
  dispatch_dtype(p.dtype, "rope", [](auto) {});
  const KvCacheView& c = p.cache;
  if (c.dtype != p.dtype)
    throw Error("rope: the KV cache holds " + dtype_name(c.dtype) + " but the activations are " + dtype_name(p.dtype));
  if (c.kv_heads != p.kv_heads || c.head_dim != p.head_dim)
    throw Error("rope: the KV cache has " + std::to_string(c.kv_heads) + " KV heads of dim " + std::to_string(c.head_dim) +
                ", the step " + std::to_string(p.kv_heads) + " of dim " + std::to_string(p.head_dim));
  if (p.tokens > 0x7fffffff) throw Error("rope: more than 2^31 - 1 tokens");
  if (p.tokens == 0) return;
  if (!p.qkv || !p.positions || !p.inv_freq || !p.q_out || !p.slots || !c.k || !c.v)
    throw Error("rope: qkv, positions, inv_freq, q_out, slots and the cache's k and v must be given");
  const int64_t per_token = c.kv_heads * c.head_dim * int64_t(c.element_bytes());
  const int64_t pool_rows = per_token > 0 ? int64_t(c.pool_bytes()) / per_token : 0;
  if (pool_rows <= 0)
    throw Error("rope: the KV cache view has no rows (contiguous: batch x max_len; paged: num_blocks x block_size)");
  NvtxRange range("rope");
  const RopeArgs args{p.qkv,   p.bias,   p.positions, p.inv_freq,      p.q_out,         c.k,
                      c.v,     p.slots,  pool_rows,   int(p.heads),    int(p.kv_heads), int(p.head_dim)};
  const bool vec = p.head_dim % 16 == 0 && aligned16(p.qkv) && aligned16(p.q_out) &&
                   aligned16(c.k) && aligned16(c.v) && (!p.bias || aligned16(p.bias));
  dispatch_dtype(p.dtype, "rope", [&](auto tag) {
    using T = decltype(tag);
    const int VEC = vec ? 8 : 1;
    const int64_t items = (p.heads + p.kv_heads) * (p.head_dim / 2 / VEC) + p.kv_heads * (p.head_dim / VEC);
    const unsigned threads = unsigned(std::clamp<int64_t>((items + 31) / 32 * 32, 64, 512));
    if (vec)
      rope_kernel<T, 8><<<unsigned(p.tokens), threads, 0, stream>>>(args);
    else
      rope_kernel<T, 1><<<unsigned(p.tokens), threads, 0, stream>>>(args);
    INFERLAB_CHECK_LAUNCH();
  });
}

}  // namespace inferlab
