#include "inferlab/experiments/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"

namespace inferlab {
namespace {

std::string quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}
std::string num(int64_t v) { return std::to_string(v); }

void ResultTable::add(const Row& row) {
  std::map<std::string, std::string> r;
  for (const auto& [k, v] : row) {
    if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
    r[k] = v;
  }
  rows.push_back(std::move(r));
}

std::string ResultTable::to_csv() const {
  std::string out;
  for (std::size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + quote(columns[i]);
  out += "\n";
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      auto it = r.find(columns[i]);
      out += (i ? "," : "") + (it == r.end() ? std::string() : quote(it->second));
    }
    out += "\n";
  }
  return out;
}

std::vector<const std::map<std::string, std::string>*> ResultTable::where(const std::string& column,
                                                                           const std::string& value) const {
  std::vector<const std::map<std::string, std::string>*> out;
  for (const auto& r : rows) {
    auto it = r.find(column);
    if (it != r.end() && it->second == value) out.push_back(&r);
  }
  return out;
}

ResultTable parse_csv(const std::string& text, const std::string& origin) {
  const std::vector<CsvRecord> records = parse_csv_records(text, origin);
  ResultTable t;
  if (records.empty()) return t;
  t.columns = records[0].fields;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& fields = records[r].fields;
    if (fields.size() == 1 && fields[0].empty()) continue;  // blank line
    if (fields.size() != t.columns.size())
      throw Error(origin + ":" + std::to_string(records[r].line) + ": malformed CSV: " + std::to_string(fields.size()) +
                  " fields where the header has " + std::to_string(t.columns.size()));
    std::map<std::string, std::string> row;
    for (std::size_t c = 0; c < t.columns.size(); ++c) row[t.columns[c]] = fields[c];
    t.rows.push_back(std::move(row));
  }
  return t;
}

ResultTable read_csv(const std::filesystem::path& path) { return parse_csv(read_text_file(path), path.string()); }

nlohmann::json cell_json(const std::string& v) {
  if (v == "true" || v == "false") return v == "true";
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (!v.empty() && end && *end == '\0' && std::isfinite(d)) {
    if (d == std::floor(d) && std::fabs(d) < 9.0e15 && v.find_first_of(".eE") == std::string::npos)
      return static_cast<int64_t>(d);
    return d;
  }
  if (v.empty()) return nullptr;
  return v;
}

nlohmann::json rows_to_json(const std::vector<Row>& rows) {
  auto out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, v] : r) o[k] = cell_json(v);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace inferlab
