#pragma once
// Every CUDA call and every launch is checked. A failure throws inferlab::CudaError naming the
// call, the file and line, and the CUDA error string.
//   INFERLAB_CUDA_CHECK(cudaMemcpy(...));
//   kernel<<<grid, block, smem, stream>>>(params);
//   INFERLAB_CHECK_LAUNCH();
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace inferlab {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

void cuda_check(cudaError_t status, const char* what, const char* file, int line);

// Whether a CUDA device can be used; when not, `reason` says why (for GTEST_SKIP messages).
bool gpu_available(std::string* reason = nullptr);

}  // namespace inferlab

#define INFERLAB_CUDA_CHECK(expr) ::inferlab::cuda_check((expr), #expr, __FILE__, __LINE__)
#define INFERLAB_CHECK_LAUNCH() ::inferlab::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
