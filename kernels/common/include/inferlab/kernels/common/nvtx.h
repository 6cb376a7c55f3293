#pragma once
// An NVTX range around every launch, named "<operator>/<variant>" (the sim/ names), so Nsight
// Systems and Nsight Compute show the same names as our result rows. NVTX 3 is header-only and
// costs nothing when no tool is attached.
#include <nvtx3/nvToolsExt.h>

namespace inferlab {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace inferlab
