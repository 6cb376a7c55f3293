#pragma once
// Device helpers shared by the kernels of kernels/layers: the dtype switch, VEC-element loads and stores
// (one 16-byte access for 8 bf16/fp16), and block-wide reductions.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/sim/dtype.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace layers {

// Calls f(T{}) with T the storage type of a bf16 or fp16 dtype; anything else throws naming `op`.
template <class F>
void dispatch_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::fp16: f(__half{}); return;
    default: throw Error(std::string(op) + ": unsupported dtype " + dtype_name(dtype) + " (supported: bf16, fp16)");
  }
}

template <class T>
__device__ __forceinline__ float to_f(T v) {
  return DTypeTraits<DTypeOf<T>::value>::to_float(v);
}
template <class T>
__device__ __forceinline__ T from_f(float v) {
  return DTypeTraits<DTypeOf<T>::value>::from_float(v);
}
// The value v takes when stored in T (round to nearest even), as a float.
template <class T>
__device__ __forceinline__ float round_to(float v) {
  return to_f(from_f<T>(v));
}

// VEC consecutive elements moved as one access when they fill 16, 8 or 4 bytes (the caller guarantees the
// alignment), element by element otherwise.
template <class T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};
template <class T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, VEC>*>(p);
}
template <class T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, VEC>& x) {
  *reinterpret_cast<Pack<T, VEC>*>(p) = x;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 floats; the function synchronizes before reusing it, so it may be called repeatedly.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace layers
}  // namespace inferlab
