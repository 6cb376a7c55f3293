#include "inferlab/sim/warnings.h"

#include <algorithm>
#include <mutex>

namespace inferlab {
namespace {
std::mutex g_mutex;
std::vector<std::string> g_pending;
}  // namespace

void note_warning(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (std::find(g_pending.begin(), g_pending.end(), message) == g_pending.end()) g_pending.push_back(message);
}

std::vector<std::string> drain_warnings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::string> out;
  out.swap(g_pending);
  return out;
}

}  // namespace inferlab
