#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/smoke.h"

namespace inferlab {
namespace {

__global__ void axpy_kernel(const AxpyParams p) {
  // Grid-stride loop: any n with any grid.
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n; i += int64_t(gridDim.x) * blockDim.x)
    p.z[i] = fmaf(p.alpha, p.x[i], p.y[i]);
}

}  // namespace

void launch_axpy(const AxpyParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks_needed = (p.n + p.block - 1) / (p.block > 0 ? p.block : 1);
  const int grid = int(blocks_needed < int64_t(sms) * 8 ? blocks_needed : int64_t(sms) * 8);
  axpy_kernel<<<grid, p.block, 0, stream>>>(p);
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace inferlab
