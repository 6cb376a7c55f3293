#include "inferlab/kernels/common/tensor_map.h"

#include <mutex>

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "inferlab/kernels/common/check.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled(const std::string& who) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    INFERLAB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    if (found == cudaDriverEntryPointSuccess) fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  });
  if (!fn) throw Error(who + ": the driver has no cuTensorMapEncodeTiled (the kernel's TMA copies need it)");
  return fn;
}

}  // namespace

CUtensorMap make_tensor_map(const std::string& who, const void* base, CUtensorMapDataType type, int rank,
                            const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                            CUtensorMapSwizzle swizzle) {
  cuuint64_t d[5], s[4];
  cuuint32_t b[5], e[5];
  for (int i = 0; i < rank; ++i) d[i] = dims[i], b[i] = box[i], e[i] = 1;
  for (int i = 0; i + 1 < rank; ++i) s[i] = strides[i];
  CUtensorMap map{};
  const CUresult r = encode_tiled(who)(&map, type, cuuint32_t(rank), const_cast<void*>(base), d, s, b, e,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::string shape;
    for (int i = rank - 1; i >= 0; --i) shape += std::to_string(dims[i]) + (i ? ", " : "");
    throw Error(who + ": cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ") for a [" + shape +
                "] operand (TMA needs 16-byte aligned rows and base)");
  }
  return map;
}

}  // namespace inferlab
