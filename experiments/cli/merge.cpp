// inferlab merge SHARDS...: joins the shards of `inferlab run SPEC --shard I/N` (experiments/shard.h).
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "describe.h"
#include "inferlab/experiments/shard.h"
#include "verbs.h"

namespace inferlab::cli {

Verb add_merge_verb(CLI::App& app, bool& json) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out;
    bool no_plots = false;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("merge", "join the shards of `run SPEC --shard I/N` into one results file (spec, code "
                                        "and ceilings checked to agree), then draw the spec's figures");
  c->add_option("shards", a->inputs, "folders holding NAME.shard-I-of-N.{csv,json}, or shard files")->required();
  c->add_option("--out", a->out, "folder of the merged NAME.{csv,json} (default: the shards' folder)");
  c->add_flag("--no-plots", a->no_plots, "skip the figures");
  c->add_flag("--json", json, "machine-readable summary");
  return {c, [a, &json] {
            std::vector<std::filesystem::path> inputs(a->inputs.begin(), a->inputs.end());
            MergeOptions o;
            o.out_dir = a->out;
            o.plots = !a->no_plots;
            const auto merged = merge_shards(inputs, o);
            nlohmann::json out = nlohmann::json::array();
            for (const auto& m : merged) {
              nlohmann::json shards = nlohmann::json::array(), figs = nlohmann::json::array();
              for (const auto& s : m.shards) shards.push_back(s.string());
              for (const auto& f : m.figures) figs.push_back(f.string());
              out.push_back({{"spec", m.spec_name}, {"csv", m.csv.string()}, {"provenance", m.provenance.string()},
                             {"shards", shards}, {"points", m.points}, {"rows", m.rows}, {"figures", figs}});
              if (!json) {
                fmt::print("{}: {} shards, {} points, {} rows\n  wrote {}\n", m.spec_name, m.shards.size(), m.points,
                           m.rows, m.csv.string());
                for (const auto& f : m.figures) fmt::print("  figure {}\n", f.string());
              }
            }
            if (json) print_json(out);
            return 0;
          }};
}

}  // namespace inferlab::cli
