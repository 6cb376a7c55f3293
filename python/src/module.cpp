// inferlab._core: the lab's model from Python, through the same functions the CLI calls (the scenarios of
// experiments/scenarios.h, the runner, the compare table), so a notebook and `inferlab` never disagree.
// Every result comes back as plain Python: rows are dicts in column order (numbers as int or float,
// booleans, None for an empty cell); python/inferlab/__init__.py wraps these with keyword arguments,
// docstrings and pandas DataFrames. Bad input raises inferlab.Error (a ValueError) with the CLI's message.
#include <filesystem>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../../experiments/cli/describe.h"
#include "inferlab/experiments/compare.h"
#include "inferlab/experiments/results.h"
#include "inferlab/experiments/runner.h"
#include "inferlab/experiments/scenarios.h"
#include "inferlab/experiments/spec.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/paths.h"
#include "inferlab/sim/warnings.h"

namespace py = pybind11;
using namespace inferlab;

namespace {

py::object to_py(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& e : j) l.append(to_py(e));
      return std::move(l);
    }
    default: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = to_py(v);
      return std::move(d);
    }
  }
}

// A row as a dict in column order; its cells typed as the CLI's JSON types them.
py::dict row_to_py(const Row& row) {
  py::dict d;
  for (const auto& [k, v] : row) d[py::str(k)] = to_py(cell_json(v));
  return d;
}

py::list rows_to_py(const std::vector<Row>& rows) {
  py::list l;
  for (const Row& r : rows) l.append(row_to_py(r));
  return l;
}

// The rows of a results table, each with every column of the table in order.
py::list table_to_py(const ResultTable& t) {
  py::list l;
  for (const auto& r : t.rows) {
    Row row;
    for (const auto& c : t.columns) {
      auto it = r.find(c);
      row.emplace_back(c, it == r.end() ? std::string() : it->second);
    }
    l.append(row_to_py(row));
  }
  return l;
}

RunOptions run_options(const std::string& ceilings, const std::string& shard) {
  RunOptions o;
  o.progress = false;
  o.plots = false;
  o.ceilings = ceilings;
  if (!shard.empty()) o.shard = parse_shard(shard);
  return o;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "inferlab's analytic model of LLM inference (the compiled core; use the `inferlab` package)";
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      error(e.what());
    }
  });

  m.def("project_root", [] { return project_root().string(); },
        "The folder whose data/, experiments/ and plots/ the lab reads.");
  m.def("model_names", &known_models, "Names of the shipped model configs (data/models).");
  m.def("hardware_names", &known_hardware, "Names of the shipped hardware files (data/hardware).");
  m.def("spec_names", [] { return list_stems(project_root() / "experiments", ".yaml"); },
        "Names of the shipped experiment specs (experiments/*.yaml).");
  m.def("model", [](const std::string& name) { return to_py(cli::model_json(load_model(name))); }, py::arg("name"),
        "A model config (a name or the path of a Hugging Face config.json) as a dict.");
  m.def("hardware",
        [](const std::string& name, const std::string& ceilings) {
          return to_py(cli::hardware_json(load_hardware(name, ceilings)));
        },
        py::arg("name"), py::arg("ceilings") = "datasheet", "A hardware file (a name or a path) as a dict.");
  m.def("scenarios",
        [] {
          py::list l;
          for (const auto& s : scenarios()) {
            py::list params;
            for (const auto& p : s.params)
              params.append(py::dict(py::arg("name") = p.name, py::arg("default") = p.fallback, py::arg("help") = p.help));
            l.append(py::dict(py::arg("name") = s.name, py::arg("help") = s.help, py::arg("params") = params));
          }
          return l;
        },
        "The scenarios a point can be evaluated by, with their parameters and defaults.");
  m.def("evaluate",
        [](const std::string& scenario, const Params& params) {
          const Scenario& s = find_scenario(scenario);
          return rows_to_py(s.predict(complete_params(s, params)));
        },
        py::arg("scenario"), py::arg("params"),
        "The predicted rows of one point of a scenario; params maps parameter names to their text.");
  m.def("drain_warnings", &drain_warnings, "Warnings noted since the last call (a config read with an assumption).");
  m.def("spec_rows",
        [](const std::string& path, const std::string& ceilings, const std::string& shard) {
          const Spec spec = load_spec(path);
          const PredictedSpec ps = predict_spec(spec, run_options(ceilings, shard));
          py::dict d;
          d["name"] = spec.name;
          d["scenario"] = spec.scenario;
          d["description"] = spec.description;
          d["points"] = ps.given.size();
          const ResultTable t = ps.table();
          d["columns"] = t.columns;
          d["rows"] = table_to_py(t);
          d["plots"] = to_py(nlohmann::json(spec.plots));
          return d;
        },
        py::arg("path"), py::arg("ceilings") = "", py::arg("shard") = "",
        "A spec's rows, predicted in memory (nothing written).");
  m.def("run_spec",
        [](const std::string& path, const std::string& out, bool predict_only, const std::string& ceilings,
           const std::string& shard, bool plots, bool fresh) {
          const Spec spec = load_spec(path);
          RunOptions o = run_options(ceilings, shard);
          o.predict_only = predict_only;
          o.plots = plots;
          o.fresh = fresh;
          o.out_dir = out;
          const RunResult r = run_spec(spec, o, detect_gpu());
          py::dict d;
          d["csv"] = r.csv.string();
          d["provenance"] = r.provenance.string();
          std::vector<std::string> figures;
          for (const auto& f : r.figures) figures.push_back(f.string());
          d["figures"] = figures;
          d["points"] = r.points;
          d["complete"] = r.complete;
          d["mode_reason"] = r.mode_reason;
          d["rows"] = r.written ? table_to_py(read_csv(r.csv)) : py::list();
          return d;
        },
        py::arg("path"), py::arg("out"), py::arg("predict_only") = true, py::arg("ceilings") = "",
        py::arg("shard") = "", py::arg("plots") = false, py::arg("fresh") = false,
        "Runs a spec as `inferlab run` does, writing its CSV and provenance into out; returns them and the rows.");
  m.def("compare",
        [](const std::vector<std::string>& models, const std::vector<std::string>& hardware, const Params& params) {
          return rows_to_py(compare_rows(compare_entries(models, hardware, params)));
        },
        py::arg("models"), py::arg("hardware"), py::arg("params"),
        "Models or GPUs side by side: one row per (model, hardware).");
}
