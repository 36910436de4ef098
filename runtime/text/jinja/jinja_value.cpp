#include "runtime/text/jinja/jinja_value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text::jinja {

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  return Value(std::shared_ptr<const ListData>(std::make_shared<ListData>(ListData{std::move(items), tuple})));
}

Value Value::dict(std::vector<std::pair<std::string, Value>> items) {
  return Value(std::shared_ptr<const DictData>(std::make_shared<DictData>(DictData{std::move(items)})));
}

Value Value::make_namespace(DictData attrs) { return Value(std::make_shared<NamespaceData>(NamespaceData{std::move(attrs)})); }

Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn) {
  return Value(std::shared_ptr<const Callable>(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)})));
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      // Python's ints have no bound; beyond int64 the nearest double serves.
      if (u > static_cast<uint64_t>(INT64_MAX)) return number(static_cast<double>(u));
      return integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<std::string, Value>> items;
      items.reserve(j.size());
      for (const auto& [k, v] : j.items()) items.emplace_back(k, from_json(v));
      return dict(std::move(items));
    }
    default: return undefined();  // binary and discarded values do not come from parsed JSON
  }
}

int64_t Value::as_int() const {
  if (kind() == Kind::Bool) return as_bool() ? 1 : 0;
  return std::get<int64_t>(v_);
}

double Value::as_double() const {
  if (kind() == Kind::Float) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return !as_list().items.empty();
    case Kind::Dict: return !as_dict().items.empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest round-trip digits, then Python's layout: positional for
  // exponents -4 … 15, scientific with a two-digit exponent otherwise.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t point = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= point) return out + digits + std::string(point - digits.size(), '0') + ".0";
  return out + digits.substr(0, point) + "." + digits.substr(point);
}

namespace {

// Python's repr of a str: single quotes unless the text holds ' and no ".
std::string python_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string sequence_repr(const ListData& list) {
  std::string out = list.tuple ? "(" : "[";
  for (size_t i = 0; i < list.items.size(); ++i) {
    if (i) out += ", ";
    out += list.items[i].repr();
  }
  if (list.tuple && list.items.size() == 1) out += ",";
  return out + (list.tuple ? ")" : "]");
}

std::string mapping_repr(const DictData& dict) {
  std::string out = "{";
  for (size_t i = 0; i < dict.items.size(); ++i) {
    if (i) out += ", ";
    out += python_string_repr(dict.items[i].first) + ": " + dict.items[i].second.repr();
  }
  return out + "}";
}

}  // namespace

std::string Value::str() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::String: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(as_int());
    case Kind::Float: return python_float(as_double());
    case Kind::String: return python_string_repr(as_string());
    case Kind::List: return sequence_repr(as_list());
    case Kind::Dict: return mapping_repr(as_dict());
    case Kind::Namespace: return "<Namespace " + mapping_repr(as_namespace().attrs) + ">";
    case Kind::Callable: return "<function " + as_callable().name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return as_list().tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "";
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == K::Float || b.kind() == K::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      const auto& x = a.as_list().items;
      const auto& y = b.as_list().items;
      return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), equal);
    }
    case K::Dict: {
      const auto& x = a.as_dict();
      const auto& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    case K::Namespace: return &a.as_namespace() == &b.as_namespace();
    case K::Callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

namespace {

// Python's json.dumps escapes: the two-character forms for " \\ \n \r \t \b \f,
// \u00XX for other control characters, and (ensure_ascii) \uXXXX for every
// character beyond ASCII, as a surrogate pair above the BMP.
void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const char* short_form = c == '"'    ? "\\\""
                             : c == '\\' ? "\\\\"
                             : c == '\n'  ? "\\n"
                             : c == '\r'  ? "\\r"
                             : c == '\t'  ? "\\t"
                             : c == '\b'  ? "\\b"
                             : c == '\f'  ? "\\f"
                                          : nullptr;
    if (short_form) {
      out += short_form;
      ++i;
      continue;
    }
    if (c >= 0x20 && (c < 0x80 || !ensure_ascii)) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    char32_t cp = c;
    size_t len = 1;
    if (c >= 0x80) {
      len = utf8_sequence_length(s, i);
      cp = len ? utf8_decode(s, i, len) : 0xFFFD;  // an invalid byte shows as U+FFFD
      if (!len) len = 1;
    }
    char hex[16];
    if (cp >= 0x10000) {
      const char32_t v = cp - 0x10000;
      std::snprintf(hex, sizeof hex, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
    } else {
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(cp));
    }
    out += hex;
    i += len;
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int depth);

void json_newline(std::string& out, const JsonOptions& o, int depth) {
  if (o.indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(o.indent) * static_cast<size_t>(depth), ' ');
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  if (depth > 256) throw std::invalid_argument("too deeply nested");
  const std::string item_sep = !o.item_separator.empty() ? o.item_separator : (o.indent < 0 ? ", " : ",");
  const std::string key_sep = !o.key_separator.empty() ? o.key_separator : ": ";
  using K = Value::Kind;
  switch (v.kind()) {
    case K::None: out += "null"; return;
    case K::Bool: out += v.as_bool() ? "true" : "false"; return;
    case K::Int: out += std::to_string(v.as_int()); return;
    case K::Float: {
      const double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float(d);
      return;
    }
    case K::String: json_string(out, v.as_string(), o.ensure_ascii); return;
    case K::List: {
      const auto& items = v.as_list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        json_newline(out, o, depth + 1);
        json_value(out, items[i], o, depth + 1);
      }
      json_newline(out, o, depth);
      out += ']';
      return;
    }
    case K::Dict:
    case K::Namespace: {
      const DictData& dict = v.kind() == K::Dict ? v.as_dict() : v.as_namespace().attrs;
      if (v.kind() == K::Namespace) throw std::invalid_argument("Object of type Namespace is not JSON serializable");
      if (dict.items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : dict.items) entries.push_back(&entry);
      if (o.sort_keys) std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        json_newline(out, o, depth + 1);
        json_string(out, entries[i]->first, o.ensure_ascii);
        out += key_sep;
        json_value(out, entries[i]->second, o, depth + 1);
      }
      json_newline(out, o, depth);
      out += '}';
      return;
    }
    case K::Undefined:
    case K::Callable: throw std::invalid_argument("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_value(out, v, options, 0);
  return out;
}

}  // namespace lathe::text::jinja
