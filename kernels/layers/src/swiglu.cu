// swiglu (the sim/ops.h op "act"): out = silu(gate) * up, in fp32 (accurate expf), rounded once.
// Grid (intermediate pieces, tokens): one thread reads VEC gate and VEC up elements (16 bytes each when
// intermediate % 8 == 0) and writes VEC outputs.
#include <algorithm>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/kernels/layers/layers.h"
#include "layers_common.cuh"

namespace inferlab {
namespace {

using namespace layers;  // the shared device helpers (layers_common.cuh)

template <class T, int VEC>
__global__ void swiglu_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t tokens, int64_t inter) {
  const int64_t packs = inter / VEC;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const T* g = gate_up + t * 2 * inter;
    for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < packs; c += int64_t(gridDim.x) * blockDim.x) {
      const Pack<T, VEC> gv = load_pack<T, VEC>(g + c * VEC), uv = load_pack<T, VEC>(g + inter + c * VEC);
      Pack<T, VEC> o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float x = to_f(gv.v[e]);
        o.v[e] = from_f<T>(x / (1.f + expf(-x)) * to_f(uv.v[e]));
      }
      store_pack<T, VEC>(out + t * inter + c * VEC, o);
    }
  }
}

}  // namespace

void swiglu(const SwiGluParams& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.intermediate <= 0)
    throw Error("swiglu: tokens must be >= 0 and intermediate positive (got " + std::to_string(p.tokens) + ", " +
                std::to_string(p.intermediate) + ")");
  dispatch_dtype(p.dtype, "swiglu", [](auto) {});
  if (p.tokens == 0) return;
  if (!p.gate_up || !p.out) throw Error("swiglu: gate_up and out must be given");
  NvtxRange range("act");
  dispatch_dtype(p.dtype, "swiglu", [&](auto tag) {
    using T = decltype(tag);
    const bool vec = p.intermediate % 8 == 0 && aligned16(p.gate_up) && aligned16(p.out);
    const int64_t packs = vec ? p.intermediate / 8 : p.intermediate;
    const dim3 grid(unsigned(std::min<int64_t>((packs + 255) / 256, 1024)), unsigned(std::min<int64_t>(p.tokens, 65535)));
    const auto* in = static_cast<const T*>(p.gate_up);
    auto* out = static_cast<T*>(p.out);
    if (vec)
      swiglu_kernel<T, 8><<<grid, 256, 0, stream>>>(in, out, p.tokens, p.intermediate);
    else
      swiglu_kernel<T, 1><<<grid, 256, 0, stream>>>(in, out, p.tokens, p.intermediate);
    INFERLAB_CHECK_LAUNCH();
  });
}

}  // namespace inferlab
