#pragma once
// Result rows and their CSV form. A row is an ordered list of (column, text); a table keeps the
// columns in order of first appearance. Numbers are written with 10 significant digits.
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace inferlab {

using Row = std::vector<std::pair<std::string, std::string>>;

std::string num(double v);  // "%.10g", "nan"/"inf" spelled out
std::string num(int64_t v);

struct ResultTable {
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;

  void add(const Row& row);
  std::string to_csv() const;
  // Rows whose `column` equals value.
  std::vector<const std::map<std::string, std::string>*> where(const std::string& column, const std::string& value) const;
};

// Reads a CSV written by to_csv (RFC 4180 quoting). Malformed input throws inferlab::Error with file:line.
ResultTable read_csv(const std::filesystem::path& path);
ResultTable parse_csv(const std::string& text, const std::string& origin);

// Rows as JSON objects; cells that parse fully as numbers become numbers, "true"/"false" booleans.
nlohmann::json rows_to_json(const std::vector<Row>& rows);
// One cell as rows_to_json writes it: a number, a boolean, null (empty) or the text.
nlohmann::json cell_json(const std::string& cell);

}  // namespace inferlab
