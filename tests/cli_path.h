#pragma once
// The CLI under test: $INFERLAB_CLI, else `inferlab` beside the test binary or one folder up (a carried
// bundle such as scripts/pack-gpu.sh's .gpu/bin, a build tree), else the path CMake compiled in
// (INFERLAB_CLI). Every test that runs the binary finds it this way, so a bundle moved to another
// machine tests its own CLI rather than looking for the build tree it came from.
#include <cstdlib>
#include <filesystem>
#include <string>

namespace inferlab {

inline std::string cli_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("INFERLAB_CLI"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (const fs::path& p : {self / "inferlab", self.parent_path() / "inferlab"})
    if (fs::is_regular_file(p, ec)) return p.string();
  return INFERLAB_CLI;
}

}  // namespace inferlab
