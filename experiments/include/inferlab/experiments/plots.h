#pragma once
// Figures are drawn by plots/plot.py (python3 + matplotlib) from a results CSV and one plot entry
// of a spec; each plot becomes BASE.png and BASE.svg.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inferlab/sim/error.h"

namespace inferlab {

// A python3 that imports matplotlib: $INFERLAB_PYTHON, the one found at configure time, python3,
// /usr/bin/python3. Throws inferlab::Error naming the package to install when none has it.
std::string plot_python();

// A python3 to run the scripts of plots/ that need no matplotlib (checking plot entries, the HTML report):
// $INFERLAB_PYTHON, the one found at configure time, python3; empty when there is none.
std::string script_python();

// Checks a spec's plot entries against the rows a run is about to write (csv_text: the results as
// they will be written), with plots/plot.py --check: a known kind, its fields, the columns it names,
// rows left after its filters. Throws inferlab::Error listing every problem with the spec line.
// Needs only python3 (not matplotlib); without any python3 there is nothing to check with.
void check_plots(const std::string& csv_text, const std::vector<nlohmann::json>& plots);

// The drawing was interrupted (Ctrl-C reached plot.py): the results are complete, the figures not.
struct PlotsInterrupted : Error {
  using Error::Error;
};

// Draws one plot; returns the PNG path. Throws inferlab::Error with the script's output on failure,
// PlotsInterrupted when plot.py was interrupted.
std::filesystem::path draw_plot(const std::filesystem::path& csv, const nlohmann::json& plot,
                                const std::filesystem::path& out_base);

// Draws every plot of a spec into figures_dir/<name>-<plot>.{png,svg}; returns the PNGs.
// All plots are attempted; failures are reported together in one inferlab::Error afterwards.
std::vector<std::filesystem::path> draw_plots(const std::filesystem::path& csv, const std::vector<nlohmann::json>& plots,
                                              const std::filesystem::path& figures_dir, const std::string& name);

}  // namespace inferlab
