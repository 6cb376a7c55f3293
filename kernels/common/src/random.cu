#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/common/random.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

__device__ __forceinline__ uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
__global__ void fill_normal_kernel(T* dst, int64_t n, uint64_t seed, float stddev) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = mix(seed ^ mix(uint64_t(i)));
    // Box-Muller on two 24-bit uniforms in (0, 1].
    const float u1 = (float((r >> 40) & 0xffffff) + 1.f) * (1.f / 16777216.f);
    const float u2 = float((r >> 16) & 0xffffff) * (1.f / 16777216.f);
    dst[i] = DTypeTraits<DTypeOf<T>::value>::from_float(stddev * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
  }
}

template <class T>
void launch(void* dst, int64_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  const int64_t blocks = (n + 255) / 256;
  fill_normal_kernel<T><<<unsigned(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(static_cast<T*>(dst), n, seed, stddev);
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace

void fill_normal(void* dst, int64_t n, DType dtype, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n <= 0) return;
  switch (dtype) {
    case DType::fp32: return launch<float>(dst, n, seed, stddev, stream);
    case DType::fp16: return launch<__half>(dst, n, seed, stddev, stream);
    case DType::bf16: return launch<__nv_bfloat16>(dst, n, seed, stddev, stream);
    case DType::fp8_e4m3: return launch<__nv_fp8_e4m3>(dst, n, seed, stddev, stream);
    default: throw Error("fill_normal: unsupported dtype " + dtype_name(dtype));
  }
}

}  // namespace inferlab
