#include "inferlab/sim/io.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "inferlab/sim/error.h"

namespace inferlab {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<int64_t> parse_integer(const std::string& text) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return int64_t(v);
}

std::optional<double> parse_number(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string line_col_of_offset(std::string_view text, std::size_t offset) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    const std::size_t off = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    const auto pos = what.find("parse error");
    throw Error(path.string() + ":" + line_col_of_offset(text, off) + ": malformed JSON: " +
                (pos == std::string::npos ? what : what.substr(pos)));
  }
}

std::vector<CsvRecord> parse_csv_records(const std::string& text, const std::string& origin) {
  std::vector<CsvRecord> records;
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
      records.push_back(CsvRecord{record_line, std::move(rec)});
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
    records.push_back(CsvRecord{record_line, std::move(rec)});
  }
  return records;
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  namespace fs = std::filesystem;
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  fs::create_directories(dir);
  const fs::path tmp = dir / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + tmp.string());
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("write failed for " + path.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot replace " + path.string() + ": " + ec.message());
  }
}

int run_command(const std::string& command, std::string* output) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return -1;
  std::string out;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (output) *output = std::move(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string shell_quote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace inferlab
