#include "inferlab/sim/paths.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "inferlab/sim/error.h"

#ifndef INFERLAB_SOURCE_ROOT
#define INFERLAB_SOURCE_ROOT ""
#endif

namespace inferlab {
namespace fs = std::filesystem;
namespace {

bool is_root(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p / "data" / "hardware", ec) && fs::is_directory(p / "data" / "models", ec);
}

fs::path find_upwards(fs::path p) {
  for (int i = 0; i < 8 && !p.empty(); ++i) {
    if (is_root(p)) return p;
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  return {};
}

}  // namespace

fs::path in_project(const std::string& given) {
  const fs::path p(given);
  std::error_code ec;
  if (p.is_relative() && !fs::exists(p, ec) && fs::exists(project_root() / p, ec)) return project_root() / p;
  return p;
}

fs::path project_root() {
  static const fs::path root = [] {
    if (const char* env = std::getenv("INFERLAB_ROOT"); env && *env) {
      if (!is_root(env))
        throw Error(std::string("INFERLAB_ROOT=") + env + " does not hold data/hardware and data/models");
      return fs::path(env);
    }
    std::error_code ec;
    if (auto p = find_upwards(fs::current_path(ec)); !p.empty()) return p;
    if (auto exe = fs::read_symlink("/proc/self/exe", ec); !ec)
      if (auto p = find_upwards(exe.parent_path()); !p.empty()) return p;
    if (is_root(INFERLAB_SOURCE_ROOT)) return fs::path(INFERLAB_SOURCE_ROOT);
    throw Error("cannot find the inferlab project root (a folder with data/hardware and data/models); "
                "run from inside the repository or set INFERLAB_ROOT");
  }();
  return root;
}

fs::path data_dir() { return project_root() / "data"; }

std::vector<std::string> list_stems(const fs::path& dir, const std::string& ext, const std::string& exclude_suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ext) continue;
    std::string stem = e.path().stem().string();
    if (!exclude_suffix.empty() && stem.size() >= exclude_suffix.size() &&
        stem.compare(stem.size() - exclude_suffix.size(), exclude_suffix.size(), exclude_suffix) == 0)
      continue;
    out.push_back(stem);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

}  // namespace inferlab
