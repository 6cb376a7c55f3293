#include "inferlab/experiments/provenance.h"

#include <cstdio>
#include <ctime>
#include <unistd.h>

#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

#include "inferlab_build_commit.h"  // generated at every build: INFERLAB_BUILD_COMMIT

namespace inferlab {

std::string git_commit() {
  // The commit the binary was built from, unless the tree it runs in is that commit (then its changes are
  // visible too): a tree copied to another machine may carry a stale .git, whose HEAD says nothing about
  // the binary that ran.
  const std::string built = INFERLAB_BUILD_COMMIT;
  const std::string root = shell_quote(project_root().string());
  std::string head, dirty;
  run_command("git -C " + root + " rev-parse HEAD 2>/dev/null", &head);
  if (head.size() == 40 && built.compare(0, 40, head) == 0) {
    // Changed results files are what a run writes, not a change of the code or data it ran on.
    run_command("git -C " + root + " status --porcelain --untracked-files=no -- . ':(exclude)data/results' 2>/dev/null",
                &dirty);
    return head + (dirty.empty() ? "" : "+dirty");
  }
  return built + " (built from)";
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

nlohmann::json provenance_json(const GpuInfo& gpu) {
  return {{"commit", git_commit()},
          {"date", utc_now_iso8601()},
          {"host", host_name()},
          {"gpu", gpu.to_json()},
          {"cuda_kernels_built", cuda_built()}};
}

}  // namespace inferlab
