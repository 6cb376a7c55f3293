#pragma once
// Where a result came from: commit, date, host, GPU (or none), toolchain. Written beside every
// results file and embedded in committed measurements.
#include <string>

#include <nlohmann/json.hpp>

#include "inferlab/roofline/gpu_info.h"

namespace inferlab {

// HEAD of the project tree, "+dirty" when it has local changes (outside data/results/, which runs
// write); the build's commit "(built from)" where the tree is not a git checkout.
std::string git_commit();
// Whether the tree the binary runs in has uncommitted changes outside data/results (false without git).
bool tree_has_changes();
std::string utc_now_iso8601();   // "2026-11-22T07:31:05Z"
std::string host_name();
std::string fnv1a_hex(const std::string& text);  // 16 hex digits, to recognise an unchanged spec

nlohmann::json provenance_json(const GpuInfo& gpu);

}  // namespace inferlab
