#include "inferlab/experiments/spec.h"

#include <algorithm>
#include <set>

#include <yaml-cpp/yaml.h>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace {

std::string at(const std::filesystem::path& file, const YAML::Node& n) {
  const auto m = n.Mark();
  if (m.is_null()) return file.string();
  return file.string() + ":" + std::to_string(m.line + 1);
}

std::string scalar(const std::filesystem::path& file, const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) throw Error(at(file, n) + ": " + what + " must be a single value");
  return n.Scalar();
}

nlohmann::json to_json(const std::filesystem::path& file, const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: keep as text
      if (s == "true") return true;
      if (s == "false") return false;
      try {
        std::size_t used = 0;
        const double d = std::stod(s, &used);
        if (used == s.size()) return d;
      } catch (...) {
      }
      return s;
    }
    case YAML::NodeType::Sequence: {
      auto a = nlohmann::json::array();
      for (const auto& item : n) a.push_back(to_json(file, item));
      return a;
    }
    case YAML::NodeType::Map: {
      auto o = nlohmann::json::object();
      for (const auto& kv : n) o[scalar(file, kv.first, "a key")] = to_json(file, kv.second);
      return o;
    }
  }
  return nullptr;
}

Params read_params(const std::filesystem::path& file, const YAML::Node& n, const std::string& what,
                   std::map<std::string, std::string>& where) {
  Params p;
  if (!n || n.IsNull()) return p;
  if (!n.IsMap()) throw Error(at(file, n) + ": '" + what + "' must be a mapping of parameter: value");
  for (const auto& kv : n) {
    const std::string k = scalar(file, kv.first, "a parameter name");
    p[k] = scalar(file, kv.second, "parameter '" + k + "'");
    where.emplace(k, at(file, kv.first));
  }
  return p;
}

// A case whose parameters are single values is one case; a parameter given a list of values
// expands it into one case per value (the cartesian product over its lists, the last fastest).
std::vector<Params> read_case(const std::filesystem::path& file, const YAML::Node& n,
                              std::map<std::string, std::string>& where) {
  if (!n || n.IsNull()) return {Params{}};
  if (!n.IsMap()) throw Error(at(file, n) + ": 'a case' must be a mapping of parameter: value");
  std::vector<Params> out{Params{}};
  for (const auto& kv : n) {
    const std::string k = scalar(file, kv.first, "a parameter name");
    where.emplace(k, at(file, kv.first));
    std::vector<std::string> values;
    if (kv.second.IsSequence()) {
      for (const auto& v : kv.second) values.push_back(scalar(file, v, "a value of parameter '" + k + "'"));
      if (values.empty()) throw Error(at(file, kv.first) + ": parameter '" + k + "' has no values");
    } else {
      values.push_back(scalar(file, kv.second, "parameter '" + k + "'"));
    }
    std::vector<Params> next;
    for (const auto& base : out)
      for (const auto& v : values) {
        next.push_back(base);
        next.back()[k] = v;
      }
    out = std::move(next);
  }
  return out;
}

// YAML leaves a repeated key to the parser (the second silently wins in most); a spec refuses it.
void check_unique_keys(const std::filesystem::path& file, const YAML::Node& n) {
  if (n.IsSequence()) {
    for (const auto& item : n) check_unique_keys(file, item);
  } else if (n.IsMap()) {
    std::map<std::string, std::string> seen;
    for (const auto& kv : n) {
      if (kv.first.IsScalar()) {
        const auto [it, fresh] = seen.emplace(kv.first.Scalar(), at(file, kv.first));
        if (!fresh)
          throw Error(at(file, kv.first) + ": key '" + kv.first.Scalar() + "' appears twice in one mapping (first at " +
                      it->second + ")");
      }
      check_unique_keys(file, kv.second);
    }
  }
}

}  // namespace

std::string Point::key() const {
  std::string k;
  for (const auto& [name, value] : params) k += (k.empty() ? "" : ";") + name + "=" + value;
  return k;
}

std::string Spec::location(const std::string& param) const {
  auto it = where.find(param);
  return it == where.end() ? path.string() : it->second;
}

std::vector<Point> Spec::points() const {
  std::vector<Params> base = cases.empty() ? std::vector<Params>{Params{}} : cases;
  std::vector<Point> out;
  for (const auto& c : base) {
    std::vector<std::size_t> idx(sweep.size(), 0);
    while (true) {
      Point p;
      p.params = fixed;
      for (const auto& [k, v] : c) p.params[k] = v;
      for (std::size_t a = 0; a < sweep.size(); ++a) p.params[sweep[a].first] = sweep[a].second[idx[a]];
      out.push_back(std::move(p));
      // Odometer over the axes, the last axis fastest; a carry out of the first axis ends the case.
      bool carry = true;
      for (std::size_t a = sweep.size(); carry && a > 0;) {
        --a;
        if (++idx[a] < sweep[a].second.size())
          carry = false;
        else
          idx[a] = 0;
      }
      if (carry) break;
    }
  }
  return out;
}

Spec parse_spec(const std::string& text, const std::filesystem::path& path) {
  Spec s;
  s.path = path;
  s.text = text;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(path.string() + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": malformed YAML: " + e.msg);
  }
  if (!root.IsMap()) throw Error(path.string() + ": a spec must be a YAML mapping (name, scenario, fixed, sweep, ...)");
  check_unique_keys(path, root);
  static const std::set<std::string> kKeys = {"name", "description", "scenario", "fixed", "cases", "sweep", "plots"};
  for (const auto& kv : root) {
    const std::string k = scalar(path, kv.first, "a key");
    if (!kKeys.count(k))
      throw Error(at(path, kv.first) + ": unknown key '" + k +
                  "' (known: name, description, scenario, fixed, cases, sweep, plots)");
  }
  s.name = root["name"] ? scalar(path, root["name"], "name") : path.stem().string();
  if (s.name.empty() || s.name.find_first_of("/\\ ") != std::string::npos)
    throw Error(at(path, root["name"]) + ": name '" + s.name + "' must be a plain file name");
  if (root["description"]) s.description = scalar(path, root["description"], "description");
  if (!root["scenario"]) throw Error(path.string() + ": missing key 'scenario'");
  s.scenario = scalar(path, root["scenario"], "scenario");
  s.where["scenario"] = at(path, root["scenario"]);

  s.fixed = read_params(path, root["fixed"], "fixed", s.where);
  std::set<std::string> seen;
  for (const auto& [k, _] : s.fixed) seen.insert(k);

  if (const auto cases = root["cases"]) {
    if (!cases.IsSequence()) throw Error(at(path, cases) + ": 'cases' must be a list of parameter mappings");
    std::set<std::string> case_keys;
    for (const auto& c : cases) {
      const auto expanded = read_case(path, c, s.where);
      for (const auto& [k, _] : expanded.front()) {
        if (seen.count(k)) throw Error(at(path, c) + ": parameter '" + k + "' is set in 'fixed' and in a case");
        case_keys.insert(k);
      }
      s.cases.insert(s.cases.end(), expanded.begin(), expanded.end());
    }
    if (s.cases.empty()) throw Error(at(path, cases) + ": 'cases' is empty");
    seen.insert(case_keys.begin(), case_keys.end());
  }

  if (const auto sweep = root["sweep"]) {
    if (!sweep.IsMap()) throw Error(at(path, sweep) + ": 'sweep' must map each axis to a list of values");
    for (const auto& kv : sweep) {
      const std::string k = scalar(path, kv.first, "an axis name");
      s.where.emplace(k, at(path, kv.first));
      if (seen.count(k)) throw Error(at(path, kv.first) + ": axis '" + k + "' is also set in 'fixed' or a case");
      seen.insert(k);
      std::vector<std::string> values;
      if (kv.second.IsSequence()) {
        for (const auto& v : kv.second) values.push_back(scalar(path, v, "a value of axis '" + k + "'"));
      } else {
        values.push_back(scalar(path, kv.second, "axis '" + k + "'"));
      }
      if (values.empty()) throw Error(at(path, kv.first) + ": axis '" + k + "' has no values");
      s.sweep.emplace_back(k, std::move(values));
    }
  }

  if (const auto plots = root["plots"]) {
    if (!plots.IsSequence()) throw Error(at(path, plots) + ": 'plots' must be a list");
    std::set<std::string> names;
    for (const auto& p : plots) {
      if (!p.IsMap() || !p["kind"]) throw Error(at(path, p) + ": each plot needs at least a 'kind'");
      nlohmann::json j = to_json(path, p);
      if (!j.contains("name")) j["name"] = j["kind"];
      const std::string n = j["name"].is_string() ? j["name"].get<std::string>() : j["name"].dump();
      if (!names.insert(n).second) throw Error(at(path, p) + ": two plots are named '" + n + "'");
      j["name"] = n;
      j["_where"] = at(path, p);
      s.plots.push_back(std::move(j));
    }
  }
  return s;
}

Spec load_spec(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    const auto specs = list_stems(project_root() / "experiments", ".yaml");
    throw Error("spec file '" + path.string() + "' not found (specs in experiments/: " + join(specs, ", ") + ")");
  }
  return parse_spec(read_text_file(path), path);
}

}  // namespace inferlab
