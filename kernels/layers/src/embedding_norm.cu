// embedding (a row gather) and rmsnorm (the residual add fused, and the row-selecting final norm).
//   embedding  grid (hidden pieces, tokens): one thread moves VEC elements (16 bytes when hidden % 8 == 0).
//   rmsnorm    one block per row; each thread keeps ITEMS packs of VEC elements of the row in registers (the
//              residual sum rounded to the dtype, which is what the norm reads, so nothing is lost), one block
//              reduction of the fp32 sum of squares, then the HF rounding: dtype(weight * dtype(x * r)).
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/kernels/layers/layers.h"
#include "layers_common.cuh"

namespace inferlab {
namespace {

using namespace layers;  // the shared device helpers (layers_common.cuh)

template <class T, int VEC>
__global__ void embedding_kernel(const int32_t* __restrict__ ids, const T* __restrict__ table, T* __restrict__ out,
                                 int64_t tokens, int64_t hidden, int64_t vocab, int64_t first_id) {
  const int64_t packs = hidden / VEC;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const int64_t id = int64_t(ids[t]) - first_id;
    const bool inside = id >= 0 && id < vocab;
    for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < packs; c += int64_t(gridDim.x) * blockDim.x) {
      Pack<T, VEC> x;
      if (inside) {
        x = load_pack<T, VEC>(table + id * hidden + c * VEC);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) x.v[e] = from_f<T>(0.f);
      }
      store_pack<T, VEC>(out + t * hidden + c * VEC, x);
    }
  }
}

struct NormArgs {
  int64_t hidden;
  float eps;
  void* residual;
  const void* add;
  const void* weight;
  void* out;
  const int32_t* row_index;
  int64_t source_rows;
};

template <class T, int VEC, int ITEMS>
__global__ void __launch_bounds__(1024) rmsnorm_kernel(const NormArgs a) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x, hidden = a.hidden;
  const int packs = int(hidden / VEC);
  T* out = static_cast<T*>(a.out) + row * hidden;
  const int64_t src = a.row_index ? int64_t(a.row_index[row]) : row;
  if (a.row_index && (src < 0 || src >= a.source_rows)) {  // uniform over the block: a zero row, nothing read
    Pack<T, VEC> z;
#pragma unroll
    for (int e = 0; e < VEC; ++e) z.v[e] = from_f<T>(0.f);
    for (int c = threadIdx.x; c < packs; c += blockDim.x) store_pack<T, VEC>(out + c * VEC, z);
    return;
  }
  T* res = static_cast<T*>(a.residual) + src * hidden;
  const T* add = a.add ? static_cast<const T*>(a.add) + src * hidden : nullptr;
  Pack<T, VEC> x[ITEMS];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < packs) {
      x[k] = load_pack<T, VEC>(res + c * VEC);
      if (add) {
        const Pack<T, VEC> b = load_pack<T, VEC>(add + c * VEC);
#pragma unroll
        for (int e = 0; e < VEC; ++e) x[k].v[e] = from_f<T>(to_f(x[k].v[e]) + to_f(b.v[e]));
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float f = to_f(x[k].v[e]);
        ss = fmaf(f, f, ss);
      }
    }
  }
  if (add && !a.row_index) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int c = threadIdx.x + k * blockDim.x;
      if (c < packs) store_pack<T, VEC>(res + c * VEC, x[k]);
    }
  }
  ss = block_sum(ss, scratch);
  const float r = 1.f / sqrtf(ss / float(hidden) + a.eps);
  const T* w = static_cast<const T*>(a.weight);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < packs) {
      const Pack<T, VEC> wk = load_pack<T, VEC>(w + c * VEC);
      Pack<T, VEC> o;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        o.v[e] = from_f<T>(to_f(wk.v[e]) * round_to<T>(to_f(x[k].v[e]) * r));
      store_pack<T, VEC>(out + c * VEC, o);
    }
  }
}

// Threads per row block and packs per thread: at most 512 threads while ITEMS can grow, else 1024.
constexpr int kNormMaxItems[2] = {16, 4};  // VEC = 1, VEC = 8: at most 16 / 32 elements a thread
constexpr int64_t kNormMaxHidden = 32768;

template <class T, int VEC>
void launch_rmsnorm(const RmsNormParams& p, const NormArgs& args, cudaStream_t stream) {
  const int64_t packs = p.hidden / VEC;
  const int max_items = kNormMaxItems[VEC == 8];
  int items = 1;
  while (items < max_items && (packs + items - 1) / items > 512) items *= 2;
  const int64_t per = (packs + items - 1) / items;
  if (per > 1024) throw Error("rmsnorm: hidden " + std::to_string(p.hidden) + " needs more than 1024 threads a row");
  const unsigned threads = unsigned((per + 31) / 32 * 32);
  const dim3 grid(unsigned(p.rows));
  switch (items) {
    case 1: rmsnorm_kernel<T, VEC, 1><<<grid, threads, 0, stream>>>(args); break;
    case 2: rmsnorm_kernel<T, VEC, 2><<<grid, threads, 0, stream>>>(args); break;
    case 4: rmsnorm_kernel<T, VEC, 4><<<grid, threads, 0, stream>>>(args); break;
    case 8: if constexpr (VEC == 1) rmsnorm_kernel<T, VEC, 8><<<grid, threads, 0, stream>>>(args); break;
    case 16: if constexpr (VEC == 1) rmsnorm_kernel<T, VEC, 16><<<grid, threads, 0, stream>>>(args); break;
  }
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace

void embedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.hidden <= 0 || p.vocab <= 0)
    throw Error("embedding: tokens must be >= 0 and hidden, vocab positive (got " + std::to_string(p.tokens) + ", " +
                std::to_string(p.hidden) + ", " + std::to_string(p.vocab) + ")");
  dispatch_dtype(p.dtype, "embedding", [](auto) {});
  if (p.tokens == 0) return;
  if (!p.ids || !p.table || !p.out) throw Error("embedding: ids, table and out must be given");
  NvtxRange range("embedding");
  dispatch_dtype(p.dtype, "embedding", [&](auto tag) {
    using T = decltype(tag);
    const bool vec = p.hidden % 8 == 0 && aligned16(p.table) && aligned16(p.out);
    const int64_t packs = vec ? p.hidden / 8 : p.hidden;
    const dim3 grid(unsigned(std::min<int64_t>((packs + 255) / 256, 1024)), unsigned(std::min<int64_t>(p.tokens, 65535)));
    const auto* table = static_cast<const T*>(p.table);
    auto* out = static_cast<T*>(p.out);
    if (vec)
      embedding_kernel<T, 8><<<grid, 256, 0, stream>>>(p.ids, table, out, p.tokens, p.hidden, p.vocab, p.first_id);
    else
      embedding_kernel<T, 1><<<grid, 256, 0, stream>>>(p.ids, table, out, p.tokens, p.hidden, p.vocab, p.first_id);
    INFERLAB_CHECK_LAUNCH();
  });
}

void rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.hidden <= 0)
    throw Error("rmsnorm: rows must be >= 0 and hidden positive (got " + std::to_string(p.rows) + ", " +
                std::to_string(p.hidden) + ")");
  const bool vec_shape = p.hidden % 8 == 0;
  if (p.hidden > (vec_shape ? kNormMaxHidden : kNormMaxHidden / 2))
    throw Error("rmsnorm: hidden " + std::to_string(p.hidden) + " is beyond the supported " +
                std::to_string(kNormMaxHidden) + " (" + std::to_string(kNormMaxHidden / 2) + " when hidden % 8 != 0)");
  if (!(p.eps >= 0)) throw Error("rmsnorm: eps must be >= 0, got " + std::to_string(p.eps));
  dispatch_dtype(p.dtype, "rmsnorm", [](auto) {});
  if (p.rows > 0x7fffffff) throw Error("rmsnorm: more than 2^31 - 1 rows");
  if (p.rows == 0) return;
  if (!p.residual || !p.weight || !p.out) throw Error("rmsnorm: residual, weight and out must be given");
  if (p.row_index && p.source_rows <= 0)
    throw Error("rmsnorm: row_index needs source_rows, the rows of residual/add (got " + std::to_string(p.source_rows) + ")");
  NvtxRange range(p.name ? p.name : "rmsnorm");
  const NormArgs args{p.hidden, p.eps, p.residual, p.add, p.weight, p.out, p.row_index, p.source_rows};
  const bool vec = vec_shape && aligned16(p.residual) && aligned16(p.weight) && aligned16(p.out) &&
                   (!p.add || aligned16(p.add));
  dispatch_dtype(p.dtype, "rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    if (vec)
      launch_rmsnorm<T, 8>(p, args, stream);
    else
      launch_rmsnorm<T, 1>(p, args, stream);
  });
}

}  // namespace inferlab
