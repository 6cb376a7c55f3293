#include "inferlab/kernels/common/check.h"

namespace inferlab {

void cuda_check(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw CudaError(status, std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                              cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

bool gpu_available(std::string* reason) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (reason) *reason = e != cudaSuccess ? std::string("no usable CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace inferlab
