#pragma once
// Figures are drawn by plots/plot.py (python3 + matplotlib) from a results CSV and one plot entry
// of a spec; each plot becomes BASE.png and BASE.svg.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace inferlab {

// A python3 that imports matplotlib: $INFERLAB_PYTHON, the one found at configure time, python3,
// /usr/bin/python3. Throws inferlab::Error naming the package to install when none has it.
std::string plot_python();

// Draws one plot; returns the PNG path. Throws inferlab::Error with the script's output on failure.
std::filesystem::path draw_plot(const std::filesystem::path& csv, const nlohmann::json& plot,
                                const std::filesystem::path& out_base);

// Draws every plot of a spec into figures_dir/<name>-<plot>.{png,svg}; returns the PNGs.
// All plots are attempted; failures are reported together in one inferlab::Error afterwards.
std::vector<std::filesystem::path> draw_plots(const std::filesystem::path& csv, const std::vector<nlohmann::json>& plots,
                                              const std::filesystem::path& figures_dir, const std::string& name);

}  // namespace inferlab
