// How many thread-block clusters of 1 to 8 blocks fit the GPU at once when each block takes a whole SM (the
// weight-only ring kernel's blocks: 17 warps, 160-224 KB of shared memory): cudaOccupancyMaxActiveClusters, and the
// SMs those clusters hold. The question behind automatic's clusters of at most 2 (kernels/gemm/NOTES.md r5).
// Not part of the build (a probe):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a scripts/probes/cluster_occupancy.cu -o cluster_occupancy
//   ./cluster_occupancy
#include "probe.cuh"

__global__ void __launch_bounds__(544, 1) whole_sm(int* out) {
  extern __shared__ int smem[];
  smem[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 0 && out) out[blockIdx.x] = smem[1];
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaFuncSetAttribute(whole_sm, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int kb : {160, 192, 224}) {
    CK(cudaFuncSetAttribute(whole_sm, cudaFuncAttributeMaxDynamicSharedMemorySize, kb * 1024));
    for (int c = 1; c <= 8; ++c) {
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(unsigned(c * (sms / c)));
      config.blockDim = dim3(544);
      config.dynamicSmemBytes = size_t(kb) * 1024;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(c);
      attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
      int clusters = 0;
      CK(cudaOccupancyMaxActiveClusters(&clusters, whole_sm, &config));
      printf("smem %3d KB  cluster %d  max active clusters %3d  SMs %3d of %d (sm_count / c = %d)\n", kb, c, clusters,
             clusters * c, sms, sms / c);
    }
  }
  return 0;
}
