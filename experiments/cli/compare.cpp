// inferlab compare --model A,B --hardware G[,H] [--batch B --context C ...]: models or GPUs side by side
// (experiments/compare.h), as a table (text, Markdown or CSV) and, with --figure, a figure.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "describe.h"
#include "inferlab/experiments/compare.h"
#include "inferlab/experiments/plots.h"
#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "verbs.h"

namespace inferlab::cli {
namespace fs = std::filesystem;

Verb add_compare_verb(CLI::App& app, bool& json) {
  struct Args {
    std::vector<std::string> models, hardware;
    Params params;
    std::string format = "text", figure;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("compare", "two or more models or GPUs side by side: weights, KV per token, largest "
                                          "batch at a context, prefill and decode step time and tokens/s");
  c->add_option("--model", a->models, "models (names or config.json paths), comma-separated")->delimiter(',')->required();
  c->add_option("--hardware", a->hardware, "hardware (names or paths), comma-separated")->delimiter(',')->required();
  // The parameters every entry shares: those both the memory and the step scenario take, with their help.
  for (const std::string& key : compare_parameters()) {
    std::string flag = "--" + key, help;
    std::replace(flag.begin(), flag.end(), '_', '-');
    for (const auto& p : find_scenario("model").params)
      if (p.name == key) help = p.help + (p.fallback.empty() ? "" : " (default " + p.fallback + ")");
    if (key == "context") help += " (default 4096 here)";
    c->add_option_function<std::string>(flag, [a, key](const std::string& v) { a->params[key] = v; }, help);
  }
  c->add_option("--format", a->format, "table format: text (default), markdown or csv")
      ->check(CLI::IsMember({"text", "markdown", "csv"}));
  c->add_option("--figure", a->figure, "also draw the comparison into FIGURE.png and FIGURE.svg");
  c->add_flag("--json", json, "machine-readable output: one object per (model, hardware)");
  return {c, [a, &json] {
            if (!a->figure.empty()) {
              const fs::path dir = fs::absolute(a->figure).parent_path();
              if (!fs::is_directory(dir)) throw Error("--figure " + a->figure + ": folder " + dir.string() + " does not exist");
            }
            const auto rows = compare_rows(compare_entries(a->models, a->hardware, a->params));
            std::vector<std::string> figures;
            if (!a->figure.empty()) {
              // plot.py reads the rows from a CSV: a temporary one, removed once drawn.
              ResultTable t;
              for (const Row& r : rows) t.add(r);
              const fs::path csv = fs::temp_directory_path() / ("inferlab_compare_" + std::to_string(::getpid()) + ".csv");
              write_file_atomic(csv, t.to_csv());
              try {
                const fs::path png = draw_plot(csv, compare_plot(rows), a->figure);
                figures = {png.string(), fs::path(png).replace_extension(".svg").string()};
              } catch (...) {
                fs::remove(csv);
                throw;
              }
              fs::remove(csv);
            }
            if (json) {
              print_json({{"rows", rows_to_json(rows)}, {"figures", figures}});
              return 0;
            }
            if (a->format == "csv") {
              ResultTable t;
              for (const Row& r : rows) t.add(r);
              fmt::print("{}", t.to_csv());
            } else {
              const Row& r = rows.front();
              fmt::print("batch {} · context {} · ceilings {}\n\n", get_cell(r, "batch"), get_cell(r, "context"), get_cell(r, "ceilings"));
              fmt::print("{}", compare_table(rows, a->format == "markdown"));
            }
            for (const auto& f : figures) fmt::print(stderr, "figure {}\n", f);
            return 0;
          }};
}

}  // namespace inferlab::cli
