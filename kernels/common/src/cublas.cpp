#include "inferlab/kernels/common/cublas.h"

#include <map>
#include <string>

#include "inferlab/kernels/common/check.h"

namespace inferlab {

void cublas_check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(cudaErrorUnknown, std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                                        cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

namespace {
template <class Handle, class Create, class Destroy>
Handle per_device(std::map<int, Handle>& handles, Create create, Destroy destroy) {
  (void)destroy;  // handles live until the thread ends; the driver reclaims them at exit
  int device = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  Handle h{};
  INFERLAB_CUBLAS_CHECK(create(&h));
  handles[device] = h;
  return h;
}
}  // namespace

cublasHandle_t cublas_handle() {
  thread_local std::map<int, cublasHandle_t> handles;
  return per_device(handles, cublasCreate, cublasDestroy);
}

cublasLtHandle_t cublaslt_handle() {
  thread_local std::map<int, cublasLtHandle_t> handles;
  return per_device(handles, cublasLtCreate, cublasLtDestroy);
}

}  // namespace inferlab
