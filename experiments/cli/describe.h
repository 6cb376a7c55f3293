#pragma once
// How the CLI writes numbers, models and hardware: the text and JSON its verbs share.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/linear.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"

namespace inferlab::cli {

inline constexpr double kGB = 1e9, kGiB = 1024.0 * 1024.0 * 1024.0;

std::string si(double v, const char* unit);  // "3.35 TB"
std::string seconds(double s);               // "1.2 ms"
std::string gb(double bytes);                // "2.15 GB (2.00 GiB)"
void print_json(const nlohmann::json& j);
std::string precision_text(const Precision& p, std::optional<WeightFormat> layer_weights = std::nullopt);
nlohmann::json model_json(const ModelConfig& m);
nlohmann::json hardware_json(const Hardware& h);
// One line: parameters, layers, attention (GQA-G, MLA), experts, sliding window, KV-heads override.
std::string model_summary(const ModelConfig& m);

}  // namespace inferlab::cli
