#include "inferlab/experiments/provenance.h"

#include <cstdio>
#include <ctime>
#include <unistd.h>

#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

#include "inferlab_build_commit.h"  // generated at every build: INFERLAB_BUILD_COMMIT

namespace inferlab {

std::string git_commit() {
  // The tree's HEAD (+dirty when tracked files outside data/results differ from it) when the binary was
  // built from it; otherwise the binary's own build commit (a copy of the tree on another machine may carry
  // a stale .git, whose state says nothing about the binary that ran).
  const std::string built = INFERLAB_BUILD_COMMIT;
  const std::string root = shell_quote(project_root().string());
  std::string head, dirty;
  run_command("git -C " + root + " rev-parse HEAD 2>/dev/null", &head);
  if (head.size() != 40) return built + " (built from)";
  // Changed results files are what a run writes, not a change of the code or data it ran on.
  run_command("git -C " + root + " status --porcelain --untracked-files=no -- . ':(exclude)data/results' 2>/dev/null",
              &dirty);
  if (built.compare(0, 40, head) == 0) return head + (dirty.empty() ? "" : "+dirty");
  return built + " (built from; not the tree's HEAD)";
}

bool tree_has_changes() {
  std::string head, dirty;
  const std::string root = shell_quote(project_root().string());
  run_command("git -C " + root + " rev-parse HEAD 2>/dev/null", &head);
  if (head.size() != 40) return false;
  run_command("git -C " + root + " status --porcelain --untracked-files=no -- . ':(exclude)data/results' 2>/dev/null",
              &dirty);
  return !dirty.empty();
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
