#include "inferlab/experiments/plots.h"

#include <cstdlib>
#include <unistd.h>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

#ifndef INFERLAB_PYTHON
#define INFERLAB_PYTHON ""
#endif

namespace inferlab {
namespace fs = std::filesystem;
namespace {

// Runs a shell command, returning its exit status and combined output.
int run(const std::string& cmd, std::string& output) { return run_command(cmd + " 2>&1", &output); }

}  // namespace

std::string plot_python() {
  static const std::string chosen = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("INFERLAB_PYTHON"); env && *env) candidates.push_back(env);
    if (*INFERLAB_PYTHON) candidates.push_back(INFERLAB_PYTHON);
    candidates.push_back("python3");
    candidates.push_back("/usr/bin/python3");
    for (const auto& py : candidates) {
      std::string out;
      if (run(shell_quote(py) + " -c 'import matplotlib, numpy'", out) == 0) return py;
    }
    return std::string();
  }();
  if (chosen.empty())
    throw Error("no python3 with matplotlib and numpy found to draw plots (install python3-matplotlib python3-numpy, "
                "or set INFERLAB_PYTHON)");
  return chosen;
}

std::string script_python() {
  for (const std::string& py : {std::string(std::getenv("INFERLAB_PYTHON") ? std::getenv("INFERLAB_PYTHON") : ""),
                                std::string(INFERLAB_PYTHON), std::string("python3")}) {
    std::string out;
    if (!py.empty() && run(shell_quote(py) + " -c ''", out) == 0) return py;
  }
  return std::string();
}

void check_plots(const std::string& csv_text, const std::vector<nlohmann::json>& plots) {
  if (plots.empty()) return;
  const fs::path script = project_root() / "plots" / "plot.py";
  const std::string python = script_python();
  if (python.empty() || !fs::is_regular_file(script)) return;
  const fs::path dir = fs::temp_directory_path() / ("inferlab_plotcheck_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_file_atomic(dir / "rows.csv", csv_text);
  write_file_atomic(dir / "plots.json", nlohmann::json(plots).dump());
  std::string output;
  const int rc = run(shell_quote(python) + " " + shell_quote(script.string()) + " --check --csv " +
                         shell_quote((dir / "rows.csv").string()) + " --plot " + shell_quote((dir / "plots.json").string()),
                     output);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (rc != 0) {
    const std::string prefix = "plot.py: ";
    throw Error(output.rfind(prefix, 0) == 0 ? output.substr(prefix.size()) : output);
  }
}

fs::path draw_plot(const fs::path& csv, const nlohmann::json& plot, const fs::path& out_base) {
  const fs::path script = project_root() / "plots" / "plot.py";
  if (!fs::is_regular_file(script)) throw Error("plot script not found: " + script.string());
  fs::create_directories(out_base.parent_path());
  const fs::path spec_file = out_base.parent_path() / ("." + out_base.filename().string() + ".plot.json");
  write_file_atomic(spec_file, plot.dump(2));
  std::string output;
  const std::string cmd = shell_quote(plot_python()) + " " + shell_quote(script.string()) + " --csv " +
                          shell_quote(csv.string()) + " --plot " + shell_quote(spec_file.string()) + " --out " +
                          shell_quote(out_base.string());
  const int rc = run(cmd, output);
  std::error_code ec;
  fs::remove(spec_file, ec);
  if (rc == 130 || rc == -1)
    throw PlotsInterrupted("interrupted while drawing the figures; the results are complete: `inferlab plot " +
                           csv.string() + "` draws them");
  if (rc != 0) {
    const std::string where = plot.value("_where", std::string());
    throw Error((where.empty() ? std::string() : where + ": ") + "plot '" + plot.value("name", std::string("?")) +
                "' failed:\n" + output);
  }
  return fs::path(out_base.string() + ".png");
}

std::vector<fs::path> draw_plots(const fs::path& csv, const std::vector<nlohmann::json>& plots, const fs::path& figures_dir,
                                 const std::string& name) {
  std::vector<fs::path> pngs;
  std::string failures;
  for (const auto& p : plots) {
    try {
      pngs.push_back(draw_plot(csv, p, figures_dir / (name + "-" + p.value("name", std::string("plot")))));
    } catch (const PlotsInterrupted&) {
      throw;
    } catch (const Error& e) {
      failures += std::string(failures.empty() ? "" : "\n") + e.what();
    }
  }
  if (!failures.empty()) throw Error(failures);
  return pngs;
}

}  // namespace inferlab
