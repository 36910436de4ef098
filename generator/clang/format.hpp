// Formatting of generated C++ with Clang's libFormat, in process.
#pragma once

#include <string>

namespace lathe::clang {

// How format_cpp treats the rows of long tables (see below).
enum class TableRows {
  Keep,  // as they are, one a line (fast)
  Format,  // through libFormat like the rest (for tests of Keep)
};

// `code` formatted in Google style with a 120-column limit; includes keep
// their order. `file_name` is the name the file will have: it picks the
// language, and every `#line N "<file_name>"` directive (a directive that
// hands attribution back to the file itself) is renumbered to the line after
// it, since formatting can move lines. Directives naming other files (the
// spec) are kept as they are.
//
// Tables — `... = {` at column 0, then 16 or more rows `    {…},` that fit in
// 120 columns but are too wide to share a line (58 characters or more), then
// `};` — take ~50 ms of libFormat for a 300-tensor manifest only to stay one
// row a line. With TableRows::Keep their rows are kept as they are (taken as
// formatted already) and the rest is formatted around them.
//
// Throws std::runtime_error when libFormat fails.
std::string format_cpp(const std::string& code, const std::string& file_name, TableRows rows = TableRows::Keep);

}  // namespace lathe::clang
