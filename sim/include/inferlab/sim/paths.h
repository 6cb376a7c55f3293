#pragma once
// Where the shipped files live. The project root holds data/, experiments/ and plots/; it is found as
//   1. $INFERLAB_ROOT, 2. the current directory or one of its parents, 3. a parent of the running
//   executable, 4. the source tree the binary was built from.
// so a build carried to another machine (the GPU machine) finds the copy of the tree it runs in.
#include <filesystem>
#include <string>
#include <vector>

namespace inferlab {

std::filesystem::path project_root();
std::filesystem::path data_dir();  // project_root()/data
// A path a spec or the CLI names (a trace, a model folder, a text): as given when it exists or is absolute,
// else under the project root when it exists there (specs name files from the root), else as given.
std::filesystem::path in_project(const std::string& given);

// File stems under dir with the given extension, sorted ("llama-2-7b" for llama-2-7b.json);
// names ending in `exclude_suffix` (e.g. ".measured") are left out.
std::vector<std::string> list_stems(const std::filesystem::path& dir, const std::string& ext,
                                    const std::string& exclude_suffix = "");

std::string join(const std::vector<std::string>& items, const std::string& sep);

}  // namespace inferlab
