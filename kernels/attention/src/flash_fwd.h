#pragma once
// Internal: the flash forward launcher (src/flash_fwd.cu). attention.cu validates before calling it.
#include <cuda_runtime.h>

#include "inferlab/kernels/attention/attention.h"

namespace inferlab {

void launch_flash_forward(const AttentionParams& p, cudaStream_t stream);
// The tile (rows of Q x rows of K/V per block, warps) the launcher picks for a head dim, as text.
const char* flash_tile_name(int head_dim);

}  // namespace inferlab
