#pragma once
// Typed access to JSON fields with messages that name the file and the field.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "inferlab/sim/error.h"

namespace inferlab::json_fields {

inline const nlohmann::json* find(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

inline double number(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const auto* v = find(j, key);
  if (!v) throw Error(where + ": missing field '" + key + "'");
  if (!v->is_number()) throw Error(where + ": field '" + key + "' must be a number, got " + v->dump());
  return v->get<double>();
}

inline std::optional<double> opt_number(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const auto* v = find(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw Error(where + ": field '" + key + "' must be a number, got " + v->dump());
  return v->get<double>();
}

inline double positive(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const double v = number(j, key, where);
  if (!(v > 0)) throw Error(where + ": field '" + key + "' must be positive, got " + std::to_string(v));
  return v;
}

inline std::string string(const nlohmann::json& j, const std::string& key, const std::string& where,
                          const std::string& fallback = "") {
  const auto* v = find(j, key);
  if (!v) return fallback;
  if (!v->is_string()) throw Error(where + ": field '" + key + "' must be a string, got " + v->dump());
  return v->get<std::string>();
}

}  // namespace inferlab::json_fields
