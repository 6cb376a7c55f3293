#pragma once
// The wgmma ceiling's kernel (wgmma_ceiling.cu, built for sm_90a only): every SM's two warpgroups issue the flash
// kernels' products back to back. Its host side is in pipe_ceilings.cu.
#include <cuda_runtime.h>

namespace inferlab {

// Products of one launch per block: FLOPs of `iters` rounds (each an S = Q K^T group and a P V group of 8
// wgmma.m64n128k16 for each of the block's 2 warpgroups).
double wgmma_ceiling_flops_per_block(int iters);
// Dynamic shared memory the kernel takes (set as its attribute by the launcher).
int wgmma_ceiling_smem_bytes();
// Launches `blocks` blocks of 256 threads; block 0's thread 0 writes clock64 and %globaltimer at its start and end
// to stamps[0..3]. `units` units of softmax-like CUDA-core work run between each round's two groups (0: the products
// back to back). For compute capability 9.0 only (sm_90a code).
void launch_wgmma_ceiling(int blocks, int iters, int units, unsigned long long* stamps, float* sink,
                          cudaStream_t stream);

}  // namespace inferlab
