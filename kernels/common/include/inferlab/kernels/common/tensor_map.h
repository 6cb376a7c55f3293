#pragma once
// TMA tensor maps (Hopper's tensor memory accelerator), encoded on the host through the runtime's
// driver entry point (cudaGetDriverEntryPointByVersion: no link against libcuda). Used by the kernels
// whose producer issues cp.async.bulk.tensor: attention/flash_fwd_sm90_overlap.cu and
// gemm/weight_only_sm90_tma.cu. A map is a kernel parameter (__grid_constant__), passed by value, so a
// launch captured in a CUDA graph carries its own.
#include <cstdint>
#include <string>

#include <cuda.h>

namespace inferlab {

// A rank-d tensor, dims innermost first, strides (rank - 1 of them) in bytes of dims 1.., boxes of
// `box` elements landing with `swizzle`; coordinates past dims read as zeros. Throws inferlab::Error
// naming `who` and the tensor when the driver refuses it (TMA needs a 16-byte aligned base and strides).
CUtensorMap make_tensor_map(const std::string& who, const void* base, CUtensorMapDataType type, int rank,
                            const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                            CUtensorMapSwizzle swizzle);

}  // namespace inferlab
