#include "inferlab/roofline/kernel_trace.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <cuda_runtime.h>
#include <cupti.h>

#include "inferlab/kernels/common/check.h"

namespace inferlab {
namespace {

std::mutex g_mutex;
std::vector<KernelRecord> g_records;
constexpr size_t kBufferBytes = 8 << 20;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  throw std::runtime_error(std::string("CUPTI ") + what + " failed: " + (msg ? msg : "unknown"));
}

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::vector<KernelRecord> local;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    local.push_back({demangle(k->name), double(k->start) * 1e-9, double(k->end) * 1e-9});
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.insert(g_records.end(), local.begin(), local.end());
}

}  // namespace

KernelTrace::KernelTrace() {
  static std::once_flag once;
  std::call_once(once, [] { check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register"); });
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  check(cuptiActivityFlushAll(1), "flush");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.clear();
  }
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable");
}

KernelTrace::~KernelTrace() { cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); }

std::vector<KernelRecord> KernelTrace::collect() {
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  check(cuptiActivityFlushAll(1), "flush");
  std::vector<KernelRecord> out;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    out.swap(g_records);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start_s < b.start_s; });
  return out;
}

std::string summarize_kernels(const std::vector<KernelRecord>& records) {
  std::string s;
  for (const auto& r : records) {
    std::string n = r.name;
    // "void ns::(anonymous namespace)::softmax_rows<...>(...)" -> "softmax_rows"; cuBLAS kernels -> "gemm".
    for (const char* anon : {"(anonymous namespace)::", "{unnamed}::"})
      for (auto pos = n.find(anon); pos != std::string::npos; pos = n.find(anon)) n.erase(pos, std::strlen(anon));
    if (const auto paren = n.find('('); paren != std::string::npos) n = n.substr(0, paren);
    if (const auto tmpl = n.find('<'); tmpl != std::string::npos) n = n.substr(0, tmpl);
    if (const auto sp = n.rfind(' '); sp != std::string::npos) n = n.substr(sp + 1);
    if (const auto ns = n.rfind("::"); ns != std::string::npos) n = n.substr(ns + 2);
    if (n.find("gemm") != std::string::npos || n.find("sm90_xmma") != std::string::npos || n.find("cutlass") != std::string::npos ||
        n.find("nvjet") != std::string::npos)
      n = "gemm";
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.3f ms", r.duration_s() * 1e3);
    s += (s.empty() ? "" : "; ") + n + buf;
  }
  return s;
}

}  // namespace inferlab
