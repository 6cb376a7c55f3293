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
  std::vector<std::vector<std::string>> records;
  std::vector<std::size_t> record_lines;
  std::vector<std::string> rec;
  std::string field;
  bool in_quotes = false, field_started = false;
  std::size_t line = 1, record_line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      if (field_started) throw Error(origin + ":" + std::to_string(line) + ": malformed CSV: stray quote");
      in_quotes = field_started = true;
    } else if (c == ',') {
      rec.push_back(field);
      field.clear();
      field_started = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      rec.push_back(field);
      field.clear();
      field_started = false;
      records.push_back(std::move(rec));
      record_lines.push_back(record_line);
      rec.clear();
      record_line = ++line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (in_quotes) throw Error(origin + ":" + std::to_string(record_line) + ": malformed CSV: unterminated quote");
  if (field_started || !rec.empty()) {
    rec.push_back(field);
    records.push_back(std::move(rec));
    record_lines.push_back(record_line);
  }
  ResultTable t;
  if (records.empty()) return t;
  t.columns = records[0];
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() == 1 && records[r][0].empty()) continue;  // blank line
    if (records[r].size() != t.columns.size())
      throw Error(origin + ":" + std::to_string(record_lines[r]) + ": malformed CSV: " +
                  std::to_string(records[r].size()) + " fields where the header has " +
                  std::to_string(t.columns.size()));
    std::map<std::string, std::string> row;
    for (std::size_t c = 0; c < t.columns.size(); ++c) row[t.columns[c]] = records[r][c];
    t.rows.push_back(std::move(row));
  }
  return t;
}

ResultTable read_csv(const std::filesystem::path& path) { return parse_csv(read_text_file(path), path.string()); }

nlohmann::json rows_to_json(const std::vector<Row>& rows) {
  auto out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, v] : r) {
      if (v == "true" || v == "false") {
        o[k] = v == "true";
        continue;
      }
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (!v.empty() && end && *end == '\0' && std::isfinite(d)) {
        if (d == std::floor(d) && std::fabs(d) < 9.0e15 && v.find_first_of(".eE") == std::string::npos)
          o[k] = static_cast<int64_t>(d);
        else
          o[k] = d;
      }
      else if (v.empty())
        o[k] = nullptr;
      else
        o[k] = v;
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace inferlab
