// A small ordered TOML writer for the importers: tables in the order they
// were first asked for, keys in the order they were set, each value with an
// optional trailing comment naming where it came from, so that a generated
// spec reads like the hand-written ones in models/:
//
//   hidden = 576          # hidden_size
//
// It writes only what specs use (strings, integers, floats, booleans, arrays
// of booleans or strings). Floats print so that they parse back to the same
// double. Nothing here knows about specs or configs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "generator/spec/toml_text.hpp"

namespace lathe::importer {

// One value. The constructors are explicit per type so that a string literal
// never becomes a bool and an int never becomes a double.
class TomlValue {
 public:
  using Variant =
      std::variant<std::string, int64_t, double, bool, std::vector<bool>, std::vector<std::string>, std::vector<int64_t>>;

  TomlValue(const char* s) : v_(std::string(s)) {}
  TomlValue(std::string s) : v_(std::move(s)) {}
  TomlValue(int v) : v_(int64_t{v}) {}
  TomlValue(int64_t v) : v_(v) {}
  TomlValue(double v) : v_(v) {}
  TomlValue(bool v) : v_(v) {}
  TomlValue(std::vector<bool> v) : v_(std::move(v)) {}
  TomlValue(std::vector<std::string> v) : v_(std::move(v)) {}
  TomlValue(std::vector<int64_t> v) : v_(std::move(v)) {}

  const Variant& get() const { return v_; }
  // The value as TOML writes it: "576", "1e-05", "10000.0", "\"pre\"", "[true, false]".
  std::string text() const;

 private:
  Variant v_;
};

// TOML text of a float and a string (generator/spec/toml_text.hpp).
using spec::toml_float;
using spec::toml_string;

// One line of a table: a key with its value, or (key empty) a comment line.
struct TomlEntry {
  std::string key;
  std::optional<TomlValue> value;  // absent for a comment line
  std::string comment;             // without the "# "
};

class TomlTable {
 public:
  explicit TomlTable(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }  // "position.scaling"
  // Sets `key`: replaces its value and comment where it already is, or
  // appends it. Returns *this for chaining.
  TomlTable& set(const std::string& key, TomlValue value, std::string comment = {});
  // A comment line of its own, at this point of the table.
  TomlTable& note(std::string comment);

  bool has(std::string_view key) const { return get(key) != nullptr; }
  const TomlValue* get(std::string_view key) const;
  bool erase(std::string_view key);  // false when it was not there
  bool has_keys() const;             // any key, not only comments
  const std::vector<TomlEntry>& entries() const { return entries_; }

 private:
  std::string name_;
  std::vector<TomlEntry> entries_;
};

class TomlDoc {
 public:
  // A comment line at the top of the document ("# " is added).
  void header(std::string line) { header_.push_back(std::move(line)); }
  // The table named `name`, appended if it is not there yet.
  TomlTable& table(const std::string& name);
  const TomlTable* find(std::string_view name) const;
  TomlTable* find(std::string_view name);
  bool erase(std::string_view name);
  const std::vector<TomlTable>& tables() const { return tables_; }
  const std::vector<std::string>& header_lines() const { return header_; }

  // The document: header comments, then each table separated by a blank
  // line. A table with keys gets its [name] header; a table that holds only
  // comment lines prints them without a header. Comments after a value start
  // at column 23 (one space after a longer line), as in models/*.toml.
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<TomlTable> tables_;
};

}  // namespace lathe::importer
