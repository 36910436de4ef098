#include "generator/clang/format.hpp"

#include <clang/Format/Format.h>
#include <clang/Tooling/Core/Replacement.h>
#include <llvm/Support/Error.h>

#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace lathe::clang {
namespace {

constexpr unsigned kColumnLimit = 120;
// Tables shorter than this are cheap enough to go through libFormat.
constexpr size_t kMinTableRows = 16;
// Rows at least this long (with the comma, without the indent) cannot share a
// line: 4 + 58 + 1 + 58 > 120. libFormat then keeps one row a line; shorter
// rows it would pack into columns.
constexpr size_t kMinTableRowWidth = (kColumnLimit - 4 - 1) / 2 + 1;

::clang::format::FormatStyle lathe_style() {
  auto style = ::clang::format::getGoogleStyle(::clang::format::FormatStyle::LK_Cpp);
  style.ColumnLimit = kColumnLimit;
  style.Standard = ::clang::format::FormatStyle::LS_Cpp20;
  // The templates order their includes on purpose (model.hpp first in model.cpp).
  style.SortIncludes = ::clang::format::FormatStyle::SI_Never;
  return style;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// A row of a table as libFormat lays it out (Google style): four spaces, one
// braced entry with its trailing comma, within the column limit and too wide
// to share its line.
bool is_table_row(std::string_view line) {
  return line.size() <= kColumnLimit && line.size() >= 4 + kMinTableRowWidth && line.starts_with("    {") &&
         line.ends_with("},") && line.find_first_not_of(' ', 4) == 4 &&
         line.find("//") == std::string_view::npos && line.find("/*") == std::string_view::npos;
}

// Tables: `... = {` at column 0, at least kMinTableRows rows, `};`. libFormat
// spends ~6 µs a token on them (~50 ms for a 300-tensor manifest) to keep one
// row a line, so each table's rows stand aside as one placeholder while the
// rest is formatted, and come back unchanged: their text is taken as
// formatted already (the generator emits them so; a test holds it to that).
struct Tables {
  std::string code;  // with placeholders
  std::vector<std::string> rows;  // the rows of table k, for placeholder k
};

std::string placeholder(size_t k) { return "LATHE_FORMAT_TABLE_" + std::to_string(k); }

Tables set_tables_aside(const std::string& code) {
  Tables t;
  const auto lines = split_lines(code);
  for (size_t i = 0; i < lines.size(); ++i) {
    t.code.append(lines[i]);
    if (i + 1 < lines.size() || code.ends_with('\n')) t.code += '\n';
    const std::string_view line = lines[i];
    if (line.empty() || line.front() == ' ' || !line.ends_with("= {")) continue;
    size_t end = i + 1;
    while (end < lines.size() && is_table_row(lines[end])) ++end;
    if (end - (i + 1) < kMinTableRows || end == lines.size() || lines[end] != "};") continue;
    std::string rows;
    for (size_t r = i + 1; r < end; ++r) rows.append(lines[r]).append("\n");
    t.code += "    " + placeholder(t.rows.size()) + ",\n";
    t.rows.push_back(std::move(rows));
    i = end - 1;  // `};` is copied next
  }
  return t;
}

// The rows back in place of their placeholders; nullopt when one went missing.
std::optional<std::string> put_tables_back(const std::string& formatted, const std::vector<std::string>& rows) {
  if (rows.empty()) return formatted;
  std::string out;
  size_t next = 0;
  const auto lines = split_lines(formatted);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (next < rows.size() && lines[i] == "    " + placeholder(next) + ",") {
      out += rows[next++];
      continue;
    }
    out.append(lines[i]);
    if (i + 1 < lines.size() || formatted.ends_with('\n')) out += '\n';
  }
  if (next != rows.size()) return std::nullopt;
  return out;
}

// `#line N "<self>"` must name the line after it.
std::string renumber_self_line_directives(const std::string& text, const std::string& file_name) {
  const std::string tail = " \"" + file_name + "\"";
  std::string out;
  out.reserve(text.size());
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    bool renumbered = false;
    if (line.starts_with("#line ") && line.ends_with(tail) && line.size() > 6 + tail.size()) {
      const std::string_view number = line.substr(6, line.size() - 6 - tail.size());
      if (number.find_first_not_of("0123456789") == std::string_view::npos) {
        out += "#line " + std::to_string(i + 2) + tail;  // line i + 1 names line i + 2
        renumbered = true;
      }
    }
    if (!renumbered) out.append(line);
    if (i + 1 < lines.size() || text.ends_with('\n')) out += '\n';
  }
  return out;
}

std::string reformat(const std::string& code, const std::string& file_name) {
  static const auto style = lathe_style();
  const std::vector<::clang::tooling::Range> ranges{{0, static_cast<unsigned>(code.size())}};
  const auto replacements = ::clang::format::reformat(style, code, ranges, file_name);
  auto formatted = ::clang::tooling::applyAllReplacements(code, replacements);
  if (!formatted) throw std::runtime_error(file_name + ": formatting failed: " + llvm::toString(formatted.takeError()));
  return std::move(*formatted);
}

}  // namespace

std::string format_cpp(const std::string& code, const std::string& file_name, TableRows rows) {
  if (rows == TableRows::Format) return renumber_self_line_directives(reformat(code, file_name), file_name);
  const Tables tables = set_tables_aside(code);
  std::optional<std::string> formatted = put_tables_back(reformat(tables.code, file_name), tables.rows);
  if (!formatted) formatted = reformat(code, file_name);  // libFormat moved a placeholder: the slow way
  return renumber_self_line_directives(*formatted, file_name);
}

}  // namespace lathe::clang
