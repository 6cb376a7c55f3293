#pragma once
// An experiment spec (experiments/*.yaml):
//
//   name: quickstart_roofline            # optional, defaults to the file stem
//   description: free text
//   scenario: model                      # which evaluator turns a point into rows (scenarios.h)
//   fixed:   {model: llama-2-7b, dtype: fp16}
//   cases:                               # optional explicit points, crossed with the sweep axes
//     - {phase: decode, batch: 1, context: 2048}
//     - {phase: prefill, batch: [1, 8], context: 2048}   # a list: one case per value (the
//                                                         # cartesian product over the case's lists)
//   sweep:                               # axes; the points are their cartesian product, in order
//     hardware: [a100-sxm-80gb, h100-sxm-80gb]
//   plots:                               # figures drawn from the result rows (plots/plot.py)
//     - {name: roofline, kind: roofline, facet: [hardware]}
//
// A point is fixed + one case + one value of every axis; a parameter may be set in one place only.
// Every error names the file and line.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace inferlab {

using Params = std::map<std::string, std::string>;  // parameter -> scalar text

struct Point {
  Params params;
  std::string key() const;  // "batch=1;context=2048;hardware=...": identifies the point in a results file
};

struct Spec {
  std::filesystem::path path;
  std::string text;        // the file as read (hashed into the provenance)
  std::string name;
  std::string description;
  std::string scenario;
  Params fixed;
  std::vector<Params> cases;
  std::vector<std::pair<std::string, std::vector<std::string>>> sweep;  // axes in file order
  std::vector<nlohmann::json> plots;
  // Line of each parameter's first mention, for errors found after parsing ("spec.yaml:12").
  std::map<std::string, std::string> where;

  std::vector<Point> points() const;
  std::string location(const std::string& param) const;  // "file:line" or the file
};

Spec load_spec(const std::filesystem::path& path);
Spec parse_spec(const std::string& text, const std::filesystem::path& path);

}  // namespace inferlab
