#pragma once
// Verbs kept in files of their own (cli/merge.cpp, cli/compare.cpp, cli/report.cpp): each adds its
// subcommand and options to the app and returns what runs it once the command line is parsed.
#include <functional>

#include <CLI/CLI.hpp>

namespace inferlab::cli {

struct Verb {
  CLI::App* command = nullptr;
  std::function<int()> run;  // the exit status; inferlab::Error for bad input, as every verb
};

Verb add_merge_verb(CLI::App& app, bool& json);
Verb add_compare_verb(CLI::App& app, bool& json);
Verb add_report_verb(CLI::App& app, bool& json);

}  // namespace inferlab::cli
