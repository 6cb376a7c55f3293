#pragma once
// A kernel's dynamic shared memory attribute, set per device: cudaFuncSetAttribute applies to the
// current device only, so a process that launches on two GPUs must raise it on each. The attribute is
// raised when a launch on a device needs more than any launch before it there (host work between a
// step's launches counts, so an unchanged attribute costs one atomic load), after checking the request
// against what the device allows (cudaDevAttrMaxSharedMemoryPerBlockOptin): a kernel that cannot fit is
// an inferlab::Error naming the bytes, not a launch failure.
//   static KernelSmem attr;                       // one per kernel instantiation
//   attr.ensure(kernel, smem_bytes, "attention/prefill");
#include <array>
#include <atomic>
#include <string>

#include <cuda_runtime.h>

#include "inferlab/kernels/common/check.h"
#include "inferlab/sim/error.h"

namespace inferlab {

class KernelSmem {
 public:
  static constexpr int kMaxDevices = 64;
  KernelSmem() {
    for (auto& s : set_) s.store(-1);
  }
  template <class Kernel>
  void ensure(Kernel kernel, int bytes, const char* who, bool max_carveout = false) {
    int device = 0;
    INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
    if (device < 0 || device >= kMaxDevices) throw Error(std::string(who) + ": device " + std::to_string(device) + " beyond 63");
    std::atomic<int>& set = set_[std::size_t(device)];
    if (bytes <= set.load(std::memory_order_acquire)) return;
    int optin = 0;
    INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (bytes > optin)
      throw Error(std::string(who) + ": needs " + std::to_string(bytes) + " bytes of shared memory a block, device " +
                  std::to_string(device) + " allows " + std::to_string(optin));
    INFERLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    if (max_carveout) INFERLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    int seen = set.load();
    while (bytes > seen && !set.compare_exchange_weak(seen, bytes)) {
    }
  }

 private:
  std::array<std::atomic<int>, kMaxDevices> set_;
};

}  // namespace inferlab
