#pragma once
// Internal: the flash forward launcher (src/flash_fwd.cu). attention.cu validates before calling it.
#include <cuda_runtime.h>

#include "inferlab/kernels/attention/attention.h"

namespace inferlab {

void launch_flash_forward(const AttentionParams& p, cudaStream_t stream);
// The Hopper (wgmma, sm_90a) kernel; launch_flash_forward picks it on compute capability 9.0.
void launch_flash_forward_sm90(const AttentionParams& p, cudaStream_t stream);

}  // namespace inferlab
