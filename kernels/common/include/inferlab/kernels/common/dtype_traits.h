#pragma once
// The CUDA storage type of each sim/ dtype and back, with float conversions usable on host and
// device, and the NaN pattern used to poison outputs. Plain C++: include from g++ or nvcc.
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "inferlab/sim/dtype.h"

namespace inferlab {

template <DType D>
struct DTypeTraits;

template <>
struct DTypeTraits<DType::fp32> {
  using type = float;
  static constexpr const char* name = "fp32";
  static __host__ __device__ float to_float(type v) { return v; }
  static __host__ __device__ type from_float(float v) { return v; }
  static type nan() { return __builtin_nanf(""); }
};

template <>
struct DTypeTraits<DType::fp16> {
  using type = __half;
  static constexpr const char* name = "fp16";
  static __host__ __device__ float to_float(type v) { return __half2float(v); }
  static __host__ __device__ type from_float(float v) { return __float2half_rn(v); }
  static type nan() {
    __half_raw r;
    r.x = 0x7e00;
    return type(r);
  }
};

template <>
struct DTypeTraits<DType::bf16> {
  using type = __nv_bfloat16;
  static constexpr const char* name = "bf16";
  static __host__ __device__ float to_float(type v) { return __bfloat162float(v); }
  static __host__ __device__ type from_float(float v) { return __float2bfloat16_rn(v); }
  static type nan() {
    __nv_bfloat16_raw r;
    r.x = 0x7fc0;
    return type(r);
  }
};

template <>
struct DTypeTraits<DType::fp8_e4m3> {
  using type = __nv_fp8_e4m3;
  static constexpr const char* name = "fp8_e4m3";
  static __host__ __device__ float to_float(type v) { return float(v); }
  static __host__ __device__ type from_float(float v) { return type(v); }  // saturating to finite
  static type nan() {
    type t;
    t.__x = 0x7f;
    return t;
  }
};

template <>
struct DTypeTraits<DType::int8> {
  using type = int8_t;
  static constexpr const char* name = "int8";
  static __host__ __device__ float to_float(type v) { return float(v); }
  static __host__ __device__ type from_float(float v) {
    const float r = v < -128.f ? -128.f : (v > 127.f ? 127.f : v);
    return type(nearbyintf(r));  // round half to even, as cvt.rni
  }
  static type nan() { return type(-128); }  // no NaN: the most negative value as a sentinel
};

// Storage-type -> DType, for launchers templated on the element type.
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::fp32;
};
template <>
struct DTypeOf<__half> {
  static constexpr DType value = DType::fp16;
};
template <>
struct DTypeOf<__nv_bfloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<__nv_fp8_e4m3> {
  static constexpr DType value = DType::fp8_e4m3;
};

}  // namespace inferlab
