#include "generator/import/toml_doc.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace lathe::importer {
namespace {

constexpr size_t kCommentColumn = 22;  // "hidden = 576          # hidden_size"

// Comments are single lines: a newline inside one would end the comment.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// TOML keys: bare when they are [A-Za-z0-9_-]+, else quoted.
std::string key_text(const std::string& key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  return bare ? key : toml_string(key);
}

// "a.b c" → a."b c": each dotted part of a table name as a key.
std::string table_text(const std::string& name) {
  std::string out;
  size_t begin = 0;
  while (true) {
    const size_t dot = name.find('.', begin);
    out += key_text(name.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) break;
    out += '.';
    begin = dot + 1;
  }
  return out;
}

}  // namespace

std::string TomlValue::text() const {
  struct Visitor {
    std::string operator()(const std::string& s) const { return toml_string(s); }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return toml_float(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::vector<bool>& items) const {
      std::string out = "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + std::string(items[i] ? "true" : "false");
      return out + "]";
    }
    std::string operator()(const std::vector<std::string>& items) const {
      std::string out = "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + toml_string(items[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<int64_t>& items) const {
      std::string out = "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + std::to_string(items[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, v_);
}

TomlTable& TomlTable::set(const std::string& key, TomlValue value, std::string comment) {
  for (TomlEntry& e : entries_)
    if (e.value && e.key == key) {
      e.value = std::move(value);
      e.comment = std::move(comment);
      return *this;
    }
  entries_.push_back({key, std::move(value), std::move(comment)});
  return *this;
}

TomlTable& TomlTable::note(std::string comment) {
  entries_.push_back({{}, std::nullopt, std::move(comment)});
  return *this;
}

const TomlValue* TomlTable::get(std::string_view key) const {
  for (const TomlEntry& e : entries_)
    if (e.value && e.key == key) return &*e.value;
  return nullptr;
}

bool TomlTable::erase(std::string_view key) {
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const TomlEntry& e) { return e.value && e.key == key; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

bool TomlTable::has_keys() const {
  return std::any_of(entries_.begin(), entries_.end(), [](const TomlEntry& e) { return e.value.has_value(); });
}

TomlTable& TomlDoc::table(const std::string& name) {
  for (TomlTable& t : tables_)
    if (t.name() == name) return t;
  return tables_.emplace_back(name);
}

const TomlTable* TomlDoc::find(std::string_view name) const {
  for (const TomlTable& t : tables_)
    if (t.name() == name) return &t;
  return nullptr;
}

TomlTable* TomlDoc::find(std::string_view name) {
  for (TomlTable& t : tables_)
    if (t.name() == name) return &t;
  return nullptr;
}

bool TomlDoc::erase(std::string_view name) {
  const auto it = std::find_if(tables_.begin(), tables_.end(), [&](const TomlTable& t) { return t.name() == name; });
  if (it == tables_.end()) return false;
  tables_.erase(it);
  return true;
}

std::string TomlDoc::render() const {
  std::ostringstream out;
  for (const std::string& line : header_) out << (line.empty() ? "#" : "# " + one_line(line)) << "\n";
  bool first = header_.empty();
  for (const TomlTable& t : tables_) {
    if (t.entries().empty()) continue;
    if (!first) out << "\n";
    first = false;
    if (t.has_keys()) out << "[" << table_text(t.name()) << "]\n";
    for (const TomlEntry& e : t.entries()) {
      if (!e.value) {
        out << "# " << one_line(e.comment) << "\n";
        continue;
      }
      std::string line = key_text(e.key) + " = " + e.value->text();
      if (!e.comment.empty()) {
        line.append(line.size() < kCommentColumn ? kCommentColumn - line.size() : 1, ' ');
        line += "# " + one_line(e.comment);
      }
      out << line << "\n";
    }
  }
  return out.str();
}

}  // namespace lathe::importer
