#pragma once
// What GPU this process runs on, for provenance and to decide between predicting and measuring.
// Plain C++: compiled with or without CUDA (without it, or without a device, present == false).
#include <string>

#include <nlohmann/json.hpp>

namespace inferlab {

struct GpuInfo {
  bool present = false;
  std::string reason;        // why no GPU (no CUDA build, no device, driver error)
  int device = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  std::string driver;        // "580.159.04" (nvidia-smi) or the CUDA driver API version
  std::string cuda_runtime;  // "13.0"
  std::string cuda_driver;   // highest CUDA version the driver supports
  int sm_count = 0;
  int compute_capability = 0;  // 90 for sm_90
  double memory_bytes = 0;
  double sm_clock_max_mhz = 0;
  double sm_clock_now_mhz = 0;  // at the time of detection (nvidia-smi), 0 if unknown
  double mem_clock_max_mhz = 0;
  double l2_bytes = 0;

  // File-name friendly: "nvidia-h100-80gb-hbm3", or "model" when no GPU is present.
  std::string slug() const;
  nlohmann::json to_json() const;
};

GpuInfo detect_gpu();
// The hardware description (measured ceilings where present) of the GPU this process runs on;
// throws inferlab::Error when there is no GPU or no data/hardware file names it.
struct Hardware;
Hardware hardware_of_this_gpu();
bool cuda_built();  // whether this binary was built with the CUDA kernels

}  // namespace inferlab
