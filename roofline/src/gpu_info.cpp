#include "inferlab/roofline/gpu_info.h"

#include <cctype>
#include <sstream>
#include <vector>

#include "inferlab/sim/error.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/io.h"

#ifdef INFERLAB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace inferlab {
namespace {

#ifdef INFERLAB_HAVE_CUDA  // (used by the device query only)
std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
#endif

}  // namespace

bool cuda_built() {
#ifdef INFERLAB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string GpuInfo::slug() const {
  if (!present) return "model";
  std::string s;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u))
      s += static_cast<char>(std::tolower(u));
    else if (!s.empty() && s.back() != '-')
      s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "gpu" : s;
}

nlohmann::json GpuInfo::to_json() const {
  if (!present) return {{"present", false}, {"reason", reason}};
  return {{"present", true},
          {"device", device},
          {"name", name},
          {"driver", driver},
          {"cuda_runtime", cuda_runtime},
          {"cuda_driver", cuda_driver},
          {"compute_capability", compute_capability},
          {"sm_count", sm_count},
          {"memory_bytes", memory_bytes},
          {"l2_bytes", l2_bytes},
          {"sm_clock_max_mhz", sm_clock_max_mhz},
          {"sm_clock_at_detection_mhz", sm_clock_now_mhz},
          {"mem_clock_max_mhz", mem_clock_max_mhz}};
}

GpuInfo detect_gpu() {
  GpuInfo g;
#ifndef INFERLAB_HAVE_CUDA
#ifdef INFERLAB_PREDICT_ONLY_PROCESS
  g.reason = "not looked for: this process predicts only (inferlab-cuda measures)";
#else
  g.reason = "built without CUDA";
#endif
  return g;
#else
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    g.reason = e != cudaSuccess ? std::string("no usable CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();  // clear the sticky error from a missing driver
    return g;
  }
  cudaDeviceProp p{};
  if (cudaGetDevice(&g.device) != cudaSuccess || cudaGetDeviceProperties(&p, g.device) != cudaSuccess) {
    g.reason = "cannot query the CUDA device";
    return g;
  }
  g.present = true;
  g.name = p.name;
  g.sm_count = p.multiProcessorCount;
  g.compute_capability = p.major * 10 + p.minor;
  g.memory_bytes = double(p.totalGlobalMem);
  g.l2_bytes = double(p.l2CacheSize);
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) g.cuda_runtime = version_string(v);
  if (cudaDriverGetVersion(&v) == cudaSuccess) g.cuda_driver = version_string(v);
  if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, g.device) == cudaSuccess) g.sm_clock_max_mhz = v / 1000.0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, g.device) == cudaSuccess) g.mem_clock_max_mhz = v / 1000.0;
  // The driver's own version string and the current clocks come from nvidia-smi when it is there.
  std::string q;
  run_command("nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.max.mem "
                                    "--format=csv,noheader,nounits -i " + std::to_string(g.device) + " 2>/dev/null", &q);
  std::vector<std::string> f;
  std::stringstream ss(q);
  for (std::string item; std::getline(ss, item, ',');) f.push_back(trim(item));
  if (f.size() == 4) {
    g.driver = f[0];
    try {
      g.sm_clock_now_mhz = std::stod(f[1]);
      g.sm_clock_max_mhz = std::stod(f[2]);
      g.mem_clock_max_mhz = std::stod(f[3]);
    } catch (...) {
    }
  }
  if (g.driver.empty()) g.driver = "CUDA driver " + g.cuda_driver;
  return g;
#endif
}

Hardware hardware_of_this_gpu() {
  static const GpuInfo gpu = detect_gpu();
  if (!gpu.present) throw Error("no GPU: " + gpu.reason);
  const std::string id = hardware_for_device(gpu.name);
  if (id.empty()) throw Error("no data/hardware file lists " + gpu.name);
  return load_hardware(id, CeilingsMode::automatic);  // benchmarks on this GPU: its measured ceilings where they exist
}

}  // namespace inferlab
