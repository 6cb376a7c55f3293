#pragma once
// File helpers shared by every layer: JSON with file:line:column errors, and atomic writes
// (a temporary file in the same folder, then rename) so a result file is never half-written.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace inferlab {

std::string read_text_file(const std::filesystem::path& path);
// Parses a JSON file; a syntax error throws inferlab::Error "FILE:LINE:COL: malformed JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& path);
// Writes content to path through a temporary file in the same directory and a rename.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// The records of a CSV text (RFC 4180: fields in double quotes may hold commas, newlines and doubled
// quotes), each with the 1-based line it starts on. An unterminated or stray quote throws
// inferlab::Error "ORIGIN:LINE: malformed CSV: ...".
struct CsvRecord {
  std::size_t line = 0;
  std::vector<std::string> fields;
};
std::vector<CsvRecord> parse_csv_records(const std::string& text, const std::string& origin);

// The whole of `text` as an integer, or as a finite number; nullopt when it is anything else
// (empty, trailing characters, out of range).
std::optional<int64_t> parse_integer(const std::string& text);
std::optional<double> parse_number(const std::string& text);

// "LINE:COL" of a byte offset in text (both 1-based).
std::string line_col_of_offset(std::string_view text, std::size_t offset);

// Runs `command` through the shell; its standard output goes to *output (trailing newlines trimmed).
// Returns the exit status, or -1 when it could not be run or was killed.
int run_command(const std::string& command, std::string* output);
// 'text' quoted for the shell.
std::string shell_quote(const std::string& text);

}  // namespace inferlab
