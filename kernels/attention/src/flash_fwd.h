#pragma once
// Internal: the flash forward launchers (src/flash_fwd.cu). attention.cu validates before calling them.
#include <cuda_runtime.h>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/attention/prefill.h"

namespace inferlab {

void launch_flash_forward(const AttentionParams& p, cudaStream_t stream);
// The Hopper (wgmma, sm_90a) kernel; launch_flash_forward picks it on compute capability 9.0.
void launch_flash_forward_sm90(const AttentionParams& p, cudaStream_t stream);
// The same two kernels in their varlen modes (prefill.h); prefill.cu validates before calling.
void launch_flash_prefill(const PrefillParams& p, cudaStream_t stream);
void launch_flash_prefill_sm90(const PrefillParams& p, cudaStream_t stream);

}  // namespace inferlab
