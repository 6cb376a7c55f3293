// inferlab report RESULTS_DIR [--out PAGE.html]: one self-contained HTML page of a results folder, made by
// plots/report.py (figures inline as SVG, the rows, provenance, model errors marked, each figure linked to
// the rows it draws). Needs python3, not matplotlib.
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "describe.h"
#include "inferlab/experiments/plots.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"
#include "verbs.h"

namespace inferlab::cli {
namespace fs = std::filesystem;

Verb add_report_verb(CLI::App& app, bool& json) {
  struct Args {
    std::string results, out;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("report", "one self-contained HTML page of a results folder: figures, rows, "
                                         "provenance, model errors, each figure linked to its rows");
  c->add_option("results", a->results, "results folder (CSVs with their provenance, figures/ beside them)")->required();
  c->add_option("--out", a->out, "the page to write (default: RESULTS/report.html)");
  c->add_flag("--json", json, "machine-readable summary");
  return {c, [a, &json] {
            const fs::path dir(a->results);
            if (!fs::is_directory(dir)) throw Error("report: results folder " + a->results + " not found");
            const fs::path out = a->out.empty() ? dir / "report.html" : fs::path(a->out);
            const fs::path script = project_root() / "plots" / "report.py";
            const std::string python = script_python();
            if (python.empty()) throw Error("report: no python3 found to write the page (install python3)");
            if (!fs::is_regular_file(script)) throw Error("report: " + script.string() + " not found");
            std::string output;
            const int rc = run_command(shell_quote(python) + " " + shell_quote(script.string()) + " --results " +
                                           shell_quote(dir.string()) + " --out " + shell_quote(out.string()) + " 2>&1",
                                       &output);
            if (rc != 0) {
              const std::string prefix = "report.py: ";
              throw Error(output.rfind(prefix, 0) == 0 ? "report: " + output.substr(prefix.size()) : "report: " + output);
            }
            const auto summary = nlohmann::json::parse(output.substr(output.find('{')));
            if (json) {
              print_json(summary);
              return 0;
            }
            for (const auto& s : summary["specs"])
              fmt::print("{}: {} rows, {} of {} figures{}\n", s["name"].get<std::string>(), s["rows"].get<int64_t>(),
                         s["figures"].get<int64_t>(), s["plots"].get<int64_t>(),
                         s["provenance"].get<bool>() ? "" : " (no provenance)");
            fmt::print("wrote {}\n", summary["html"].get<std::string>());
            return 0;
          }};
}

}  // namespace inferlab::cli
