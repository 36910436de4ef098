#include "runtime/text/jinja/jinja_builtins.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text::jinja {
namespace {

// Bounds that keep a hostile template from exhausting memory.
constexpr int64_t kMaxRange = 1'000'000;
constexpr size_t kMaxString = size_t{64} << 20;

// --- strings as Python sees them: sequences of characters ------------------

// Byte offsets of each character of s, plus s.size() at the end.
std::vector<size_t> char_offsets(std::string_view s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size(); i += utf8_unit_length(s, i)) at.push_back(i);
  at.push_back(s.size());
  return at;
}

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> cps;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    cps.push_back(n ? utf8_decode(s, i, n) : 0xDC00 + static_cast<unsigned char>(s[i]));  // lone byte: a surrogate escape
    i += n ? n : 1;
  }
  return cps;
}

std::string from_code_points(const std::vector<char32_t>& cps) {
  std::string s;
  for (char32_t c : cps) {
    if (c >= 0xDC80 && c <= 0xDCFF) {
      s += static_cast<char>(c - 0xDC00);
    } else {
      utf8_append(s, c);
    }
  }
  return s;
}

// str.isspace() for the characters chat text holds.
bool py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

std::string map_case(std::string_view s, const std::function<char32_t(char32_t, size_t)>& f) {
  std::vector<char32_t> cps = code_points(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    if (cps[i] < 0xDC80 || cps[i] > 0xDCFF) cps[i] = f(cps[i], i);
  }
  return from_code_points(cps);
}

char32_t upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
bool is_cased_letter(char32_t c) { return upper(c) != c || lower(c) != c; }

// str.strip / lstrip / rstrip: `chars` null strips whitespace.
std::string strip(std::string_view s, const Value* chars, bool left, bool right) {
  std::vector<char32_t> cps = code_points(s);
  std::vector<char32_t> set;
  if (chars && chars->is_string()) set = code_points(chars->as_string());
  auto strippable = [&](char32_t c) {
    return chars && chars->is_string() ? std::find(set.begin(), set.end(), c) != set.end() : py_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strippable(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strippable(cps[e - 1])) --e;
  }
  return from_code_points(std::vector<char32_t>(cps.begin() + static_cast<ptrdiff_t>(b), cps.begin() + static_cast<ptrdiff_t>(e)));
}

// str.split(sep=None, maxsplit=-1).
Value split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<Value> parts;
  if (sep && sep->is_string()) {
    const std::string& d = sep->as_string();
    if (d.empty()) throw RenderError("split: empty separator");
    size_t from = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t at = s.find(d, from);
      if (at == std::string::npos) break;
      parts.push_back(Value::string(s.substr(from, at - from)));
      from = at + d.size();
    }
    parts.push_back(Value::string(s.substr(from)));
    return Value::list(std::move(parts));
  }
  // Runs of whitespace separate; none at either end.
  const std::vector<char32_t> cps = code_points(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && py_space(cps[i])) ++i;
    if (i == cps.size()) break;
    size_t j = i;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t e = cps.size();
      while (e > i && py_space(cps[e - 1])) --e;
      parts.push_back(Value::string(from_code_points({cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(e)})));
      break;
    }
    while (j < cps.size() && !py_space(cps[j])) ++j;
    parts.push_back(Value::string(from_code_points({cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(j)})));
    i = j;
  }
  return Value::list(std::move(parts));
}

std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` between characters and at both ends.
    const std::vector<size_t> at = char_offsets(s);
    int64_t n = 0;
    for (size_t k = 0; k + 1 < at.size(); ++k) {
      if (count < 0 || n < count) {
        out += with;
        ++n;
      }
      out.append(s, at[k], at[k + 1] - at[k]);
    }
    if (count < 0 || n < count) out += with;
    return out;
  }
  size_t from = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t hit = s.find(old, from);
    if (hit == std::string::npos) break;
    out.append(s, from, hit - from);
    out += with;
    from = hit + old.size();
    if (out.size() > kMaxString) throw RenderError("replace: the result is too long");
  }
  out.append(s, from);
  return out;
}

// str.capitalize(): first character upper, the rest lower.
std::string capitalize(std::string_view s) {
  return map_case(s, [](char32_t c, size_t i) { return i == 0 ? upper(c) : lower(c); });
}

// jinja2's title filter: words begin after spaces and - ( { [ <.
std::string title_filter(std::string_view s) {
  bool start = true;
  return map_case(s, [&](char32_t c, size_t) {
    const bool boundary = py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    const char32_t r = boundary ? c : start ? upper(c) : lower(c);
    start = boundary;
    return r;
  });
}

// str.title(): a letter after a cased letter is lower, any other upper.
std::string title_method(std::string_view s) {
  bool previous_cased = false;
  return map_case(s, [&](char32_t c, size_t) {
    const char32_t r = previous_cased ? lower(c) : upper(c);
    previous_cased = is_cased_letter(c);
    return r;
  });
}

// str.splitlines() for \n, \r\n and \r.
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t from = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    lines.push_back(s.substr(from, i - from));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    from = i + 1;
  }
  if (from < s.size()) lines.push_back(s.substr(from));
  return lines;
}

// --- arguments ---------------------------------------------------------------

// Positional-or-keyword arguments by name, as Python binds them.
class Args {
 public:
  Args(const std::string& fn, CallArgs& args, std::vector<std::string_view> names) : fn_(fn) {
    if (args.positional.size() > names.size())
      throw RenderError(fn + "() takes at most " + std::to_string(names.size()) + " arguments (" +
                        std::to_string(args.positional.size()) + " given)");
    bound_.resize(names.size());
    for (size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
    for (auto& [key, value] : args.keyword) {
      const auto it = std::find(names.begin(), names.end(), key);
      if (it == names.end()) throw RenderError(fn + "() got an unexpected keyword argument '" + key + "'");
      bound_[static_cast<size_t>(it - names.begin())] = &value;
    }
  }
  const Value* get(size_t i) const { return bound_[i]; }
  const Value& need(size_t i, std::string_view what) const {
    if (!bound_[i]) throw RenderError(fn_ + "() is missing its argument " + std::string(what));
    return *bound_[i];
  }
  std::string string(size_t i, std::string_view what) const {
    const Value& v = need(i, what);
    if (!v.is_string()) throw RenderError(fn_ + "(): " + std::string(what) + " must be a string, not " + v.type_name());
    return v.as_string();
  }
  int64_t integer(size_t i, int64_t fallback) const {
    const Value* v = bound_[i];
    if (!v || v->is_none()) return fallback;
    if (!v->is_int()) throw RenderError(fn_ + "(): expected an integer, not " + v->type_name());
    return v->as_int();
  }
  bool flag(size_t i, bool fallback) const { return bound_[i] ? bound_[i]->truthy() : fallback; }

 private:
  std::string fn_;
  std::vector<const Value*> bound_;
};

const std::string& need_string(const Value& v, const std::string& what) {
  if (!v.is_string()) throw RenderError(what + " needs a string, not " + v.type_name());
  return v.as_string();
}

// The string a filter works on: str(x) (jinja2's soft_str).
std::string text_of(const Value& v) { return v.str(); }

// A dotted attribute path as selectattr and map take it: "function.name".
Value attribute_path(const Value& v, const std::string& path) {
  Value current = v;
  size_t from = 0;
  while (true) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = numeric && current.is_list() ? item(current, Value::integer(std::stoll(part))) : attribute(current, part);
    if (current.is_undefined() || dot == std::string::npos) return current;
    from = dot + 1;
  }
}

// --- filters -------------------------------------------------------------------

Value filter_tojson(const Value& v, CallArgs& args) {
  Args a("tojson", args, {"indent", "ensure_ascii", "separators", "sort_keys"});
  JsonOptions o;
  if (const Value* indent = a.get(0); indent && !indent->is_none()) {
    if (!indent->is_int()) throw RenderError("tojson: indent must be an integer, not " + indent->type_name());
    o.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
  }
  o.ensure_ascii = a.flag(1, false);
  if (const Value* sep = a.get(2); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().items.size() != 2 || !sep->as_list().items[0].is_string() ||
        !sep->as_list().items[1].is_string())
      throw RenderError("tojson: separators must be two strings");
    o.item_separator = sep->as_list().items[0].as_string();
    o.key_separator = sep->as_list().items[1].as_string();
  }
  o.sort_keys = a.flag(3, false);
  try {
    return Value::string(to_json(v, o));
  } catch (const std::invalid_argument& e) {
    throw RenderError(std::string("tojson: ") + e.what());
  }
}

Value filter_join(const Value& v, CallArgs& args) {
  Args a("join", args, {"d", "attribute"});
  const std::string sep = a.get(0) ? text_of(*a.get(0)) : "";
  std::string out;
  bool first = true;
  for (const Value& item_value : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += text_of(a.get(1) ? attribute_path(item_value, text_of(*a.get(1))) : item_value);
  }
  return Value::string(std::move(out));
}

Value filter_default(const Value& v, CallArgs& args) {
  Args a("default", args, {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (a.flag(1, false) && !v.truthy());
  if (!use_default) return v;
  return a.get(0) ? *a.get(0) : Value::string("");
}

Value filter_int(const Value& v, CallArgs& args) {
  Args a("int", args, {"default", "base"});
  const Value fallback = a.get(0) ? *a.get(0) : Value::integer(0);
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.kind() == Value::Kind::Float) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return fallback;
  const std::string s = strip(v.as_string(), nullptr, true, true);
  try {
    size_t used = 0;
    const int64_t i = std::stoll(s, &used, static_cast<int>(a.integer(1, 10)));
    if (used == s.size()) return Value::integer(i);
    const double d = std::stod(s, &used);
    if (used == s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
  } catch (const std::exception&) {
  }
  return fallback;
}

Value filter_float(const Value& v, CallArgs& args) {
  Args a("float", args, {"default"});
  const Value fallback = a.get(0) ? *a.get(0) : Value::number(0.0);
  if (v.is_number()) return Value::number(v.as_double());
  if (!v.is_string()) return fallback;
  const std::string s = strip(v.as_string(), nullptr, true, true);
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return Value::number(d);
  } catch (const std::exception&) {
  }
  return fallback;
}

Value filter_indent(const Value& v, CallArgs& args) {
  Args a("indent", args, {"width", "first", "blank"});
  std::string pad = "    ";
  if (const Value* w = a.get(0); w && !w->is_string() && !w->is_int())
    throw RenderError("indent: width must be an integer or a string, not " + w->type_name());
  if (const Value* w = a.get(0)) pad = w->is_string() ? w->as_string() : std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 256)), ' ');
  const std::vector<std::string> lines = split_lines(text_of(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    const bool indent_this = i > 0 && (a.flag(2, false) || !lines[i].empty());
    out += (indent_this ? pad : "") + lines[i];
  }
  if (a.flag(1, false)) out = pad + out;
  return Value::string(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value filter_select(const Value& v, CallArgs& args, bool by_attribute, bool keep) {
  std::vector<Value> kept;
  size_t first_test_arg = by_attribute ? 1 : 0;
  std::string attr;
  if (by_attribute) {
    if (args.positional.empty()) throw RenderError("selectattr needs an attribute name");
    attr = need_string(args.positional[0], "selectattr's attribute");
  }
  std::string test_name;
  if (args.positional.size() > first_test_arg) test_name = need_string(args.positional[first_test_arg], "the test name");
  CallArgs test_args;
  for (size_t i = first_test_arg + 1; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
  test_args.keyword = args.keyword;
  for (const Value& x : iterate(v)) {
    const Value subject = by_attribute ? attribute_path(x, attr) : x;
    CallArgs call = test_args;
    const bool pass = test_name.empty() ? subject.truthy() : apply_test(test_name, subject, call);
    if (pass == keep) kept.push_back(x);
  }
  return Value::list(std::move(kept));
}

Value filter_map(const Value& v, CallArgs& args) {
  std::vector<Value> out;
  const Value* attr = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [key, value] : args.keyword) {
    if (key == "attribute") attr = &value;
    if (key == "default") fallback = &value;
  }
  if (attr) {
    for (const Value& x : iterate(v)) {
      Value got = attribute_path(x, text_of(*attr));
      out.push_back(got.is_undefined() && fallback ? *fallback : got);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) throw RenderError("map needs a filter name or attribute=");
  const std::string name = need_string(args.positional[0], "map's filter name");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& x : iterate(v)) {
    CallArgs call = rest;
    out.push_back(apply_filter(name, x, call));
  }
  return Value::list(std::move(out));
}

// Strings compare without case unless case_sensitive, as jinja2's sort and unique do.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(map_case(v.as_string(), [](char32_t c, size_t) { return lower(c); }));
  return v;
}

Value filter_unique(const Value& v, CallArgs& args) {
  Args a("unique", args, {"case_sensitive", "attribute"});
  std::vector<Value> out, seen;
  for (const Value& x : iterate(v)) {
    const Value key = sort_key(a.get(1) ? attribute_path(x, text_of(*a.get(1))) : x, a.flag(0, false));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) continue;
    seen.push_back(key);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value filter_sort(const Value& v, CallArgs& args) {
  Args a("sort", args, {"reverse", "case_sensitive", "attribute"});
  std::vector<Value> items = iterate(v);
  const bool cs = a.flag(1, false);
  const std::string attr = a.get(2) ? text_of(*a.get(2)) : "";
  auto key = [&](const Value& x) { return sort_key(attr.empty() ? x : attribute_path(x, attr), cs); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
  if (a.flag(0, false)) std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value filter_items(const Value& v) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw RenderError("items needs a mapping, not " + v.type_name());
  std::vector<Value> out;
  for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::list({Value::string(k), x}, true));
  return Value::list(std::move(out));
}

Value first_or_last(const Value& v, bool first) {
  if (v.is_string()) {
    const int64_t n = length(v);
    return n == 0 ? Value::undefined() : item(v, Value::integer(first ? 0 : n - 1));
  }
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined();
  return first ? items.front() : items.back();
}

Value filter_round(const Value& v, CallArgs& args) {
  Args a("round", args, {"precision", "method"});
  if (!v.is_number()) throw RenderError("round needs a number, not " + v.type_name());
  const double scale = std::pow(10.0, static_cast<double>(a.integer(0, 0)));
  const std::string method = a.get(1) ? text_of(*a.get(1)) : "common";
  const double x = v.as_double() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
  return Value::number(r / scale);
}

using Filter = std::function<Value(const Value&, CallArgs&)>;

// Filters that take no arguments.
Value no_args(const std::string& name, CallArgs& args, const std::function<Value()>& f) {
  if (!args.positional.empty() || !args.keyword.empty()) throw RenderError(name + " takes no arguments");
  return f();
}

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = [] {
    std::map<std::string, Filter, std::less<>> t;
    t["tojson"] = filter_tojson;
    t["join"] = filter_join;
    t["default"] = t["d"] = filter_default;
    t["int"] = filter_int;
    t["float"] = filter_float;
    t["indent"] = filter_indent;
    t["select"] = [](const Value& v, CallArgs& a) { return filter_select(v, a, false, true); };
    t["reject"] = [](const Value& v, CallArgs& a) { return filter_select(v, a, false, false); };
    t["selectattr"] = [](const Value& v, CallArgs& a) { return filter_select(v, a, true, true); };
    t["rejectattr"] = [](const Value& v, CallArgs& a) { return filter_select(v, a, true, false); };
    t["map"] = filter_map;
    t["unique"] = filter_unique;
    t["sort"] = filter_sort;
    t["round"] = filter_round;
    t["trim"] = [](const Value& v, CallArgs& args) {
      Args a("trim", args, {"chars"});
      return Value::string(strip(text_of(v), a.get(0), true, true));
    };
    t["replace"] = [](const Value& v, CallArgs& args) {
      Args a("replace", args, {"old", "new", "count"});
      return Value::string(replace(text_of(v), text_of(a.need(0, "old")), text_of(a.need(1, "new")), a.integer(2, -1)));
    };
    t["length"] = t["count"] = [](const Value& v, CallArgs& a) {
      return no_args("length", a, [&] { return Value::integer(length(v)); });
    };
    t["upper"] = [](const Value& v, CallArgs& a) {
      return no_args("upper", a, [&] { return Value::string(map_case(text_of(v), [](char32_t c, size_t) { return upper(c); })); });
    };
    t["lower"] = [](const Value& v, CallArgs& a) {
      return no_args("lower", a, [&] { return Value::string(map_case(text_of(v), [](char32_t c, size_t) { return lower(c); })); });
    };
    t["capitalize"] = [](const Value& v, CallArgs& a) { return no_args("capitalize", a, [&] { return Value::string(capitalize(text_of(v))); }); };
    t["title"] = [](const Value& v, CallArgs& a) { return no_args("title", a, [&] { return Value::string(title_filter(text_of(v))); }); };
    t["string"] = [](const Value& v, CallArgs& a) { return no_args("string", a, [&] { return Value::string(text_of(v)); }); };
    t["safe"] = [](const Value& v, CallArgs& a) { return no_args("safe", a, [&] { return v; }); };
    t["list"] = [](const Value& v, CallArgs& a) { return no_args("list", a, [&] { return Value::list(iterate(v)); }); };
    t["items"] = [](const Value& v, CallArgs& a) { return no_args("items", a, [&] { return filter_items(v); }); };
    t["first"] = [](const Value& v, CallArgs& a) { return no_args("first", a, [&] { return first_or_last(v, true); }); };
    t["last"] = [](const Value& v, CallArgs& a) { return no_args("last", a, [&] { return first_or_last(v, false); }); };
    t["reverse"] = [](const Value& v, CallArgs& a) {
      return no_args("reverse", a, [&] {
        if (v.is_string()) return slice(v, std::nullopt, std::nullopt, -1);
        std::vector<Value> items = iterate(v);
        std::reverse(items.begin(), items.end());
        return Value::list(std::move(items));
      });
    };
    t["abs"] = [](const Value& v, CallArgs& a) {
      return no_args("abs", a, [&] {
        if (v.kind() == Value::Kind::Float) return Value::number(std::fabs(v.as_double()));
        if (!v.is_int()) throw RenderError("abs needs a number, not " + v.type_name());
        if (v.as_int() == INT64_MIN) throw RenderError("abs: integer overflow");
        return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
      });
    };
    return t;
  }();
  return table;
}

// --- tests -----------------------------------------------------------------------

using Test = std::function<bool(const Value&, CallArgs&)>;

const Value& test_arg(const std::string& name, CallArgs& args) {
  if (args.positional.empty()) throw RenderError("test '" + name + "' needs an argument");
  return args.positional[0];
}

const std::map<std::string, Test, std::less<>>& tests() {
  static const std::map<std::string, Test, std::less<>> table = [] {
    using K = Value::Kind;
    std::map<std::string, Test, std::less<>> t;
    t["defined"] = [](const Value& v, CallArgs&) { return !v.is_undefined(); };
    t["undefined"] = [](const Value& v, CallArgs&) { return v.is_undefined(); };
    t["none"] = [](const Value& v, CallArgs&) { return v.is_none(); };
    t["boolean"] = [](const Value& v, CallArgs&) { return v.kind() == K::Bool; };
    t["true"] = [](const Value& v, CallArgs&) { return v.kind() == K::Bool && v.as_bool(); };
    t["false"] = [](const Value& v, CallArgs&) { return v.kind() == K::Bool && !v.as_bool(); };
    t["integer"] = [](const Value& v, CallArgs&) { return v.kind() == K::Int; };
    t["float"] = [](const Value& v, CallArgs&) { return v.kind() == K::Float; };
    t["number"] = [](const Value& v, CallArgs&) { return v.is_number(); };
    t["string"] = [](const Value& v, CallArgs&) { return v.is_string(); };
    t["mapping"] = [](const Value& v, CallArgs&) { return v.is_dict(); };
    t["iterable"] = [](const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); };
    t["sequence"] = [](const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict(); };
    t["callable"] = [](const Value& v, CallArgs&) { return v.kind() == K::Callable; };
    t["odd"] = [](const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 != 0; };
    t["even"] = [](const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 == 0; };
    t["lower"] = [](const Value& v, CallArgs&) {
      return v.is_string() && map_case(v.as_string(), [](char32_t c, size_t) { return lower(c); }) == v.as_string();
    };
    t["upper"] = [](const Value& v, CallArgs&) {
      return v.is_string() && map_case(v.as_string(), [](char32_t c, size_t) { return upper(c); }) == v.as_string();
    };
    t["divisibleby"] = [](const Value& v, CallArgs& a) {
      const Value& d = test_arg("divisibleby", a);
      if (!v.is_int() || !d.is_int() || d.as_int() == 0) throw RenderError("divisibleby needs integers and a divisor other than 0");
      return v.as_int() % d.as_int() == 0;
    };
    t["eq"] = t["equalto"] = t["=="] = [](const Value& v, CallArgs& a) { return equal(v, test_arg("eq", a)); };
    t["ne"] = t["!="] = [](const Value& v, CallArgs& a) { return !equal(v, test_arg("ne", a)); };
    t["lt"] = t["lessthan"] = t["<"] = [](const Value& v, CallArgs& a) { return less(v, test_arg("lt", a)); };
    t["gt"] = t["greaterthan"] = t[">"] = [](const Value& v, CallArgs& a) { return less(test_arg("gt", a), v); };
    t["le"] = t["<="] = [](const Value& v, CallArgs& a) { return !less(test_arg("le", a), v); };
    t["ge"] = t[">="] = [](const Value& v, CallArgs& a) { return !less(v, test_arg("ge", a)); };
    t["in"] = [](const Value& v, CallArgs& a) { return contains(test_arg("in", a), v); };
    t["sameas"] = [](const Value& v, CallArgs& a) {
      const Value& o = test_arg("sameas", a);
      // `is` on None, True and False, the singletons templates compare with.
      return v.kind() == o.kind() && (v.is_none() || (v.kind() == K::Bool && v.as_bool() == o.as_bool()));
    };
    return t;
  }();
  return table;
}

// --- methods ---------------------------------------------------------------------

std::optional<Value> string_method(const std::string& s, const std::string& name, CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Args a(name, args, {"chars"});
    return Value::string(strip(s, a.get(0) && !a.get(0)->is_none() ? a.get(0) : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    Args a(name, args, {"sep", "maxsplit"});
    return split(s, a.get(0) && !a.get(0)->is_none() ? a.get(0) : nullptr, a.integer(1, -1));
  }
  if (name == "startswith" || name == "endswith") {
    Args a(name, args, {"prefix"});
    const Value& p = a.need(0, "prefix");
    std::vector<Value> options = p.is_list() ? p.as_list().items : std::vector<Value>{p};
    for (const Value& o : options) {
      const std::string& x = need_string(o, name);
      if (name == "startswith" ? s.starts_with(x) : s.ends_with(x)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "upper") return Value::string(map_case(s, [](char32_t c, size_t) { return upper(c); }));
  if (name == "lower") return Value::string(map_case(s, [](char32_t c, size_t) { return lower(c); }));
  if (name == "title") return Value::string(title_method(s));
  if (name == "capitalize") return Value::string(capitalize(s));
  if (name == "replace") {
    Args a(name, args, {"old", "new", "count"});
    return Value::string(replace(s, a.string(0, "old"), a.string(1, "new"), a.integer(2, -1)));
  }
  if (name == "find" || name == "count") {
    Args a(name, args, {"sub"});
    const std::string sub = a.string(0, "sub");
    if (name == "find") {
      const size_t at = s.find(sub);
      return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(char_offsets(s.substr(0, at)).size() - 1));
    }
    if (sub.empty()) return Value::integer(length(Value::string(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    Args a(name, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& x : iterate(a.need(0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += need_string(x, "str.join");
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    std::vector<Value> lines;
    for (std::string& l : split_lines(s)) lines.push_back(Value::string(std::move(l)));
    return Value::list(std::move(lines));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace") {
    const std::vector<char32_t> cps = code_points(s);
    auto ok = [&](char32_t c) {
      if (name == "isspace") return py_space(c);
      if (name == "isdigit") return c >= '0' && c <= '9';
      return is_cased_letter(c);
    };
    return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), ok));
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const DictData& d, const std::string& name, CallArgs& args) {
  if (name == "items") return filter_items(Value::dict(d.items));
  if (name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) out.push_back(name == "keys" ? Value::string(k) : v);
    return Value::list(std::move(out));
  }
  if (name == "get") {
    Args a(name, args, {"key", "default"});
    const Value& key = a.need(0, "key");
    const Value* found = key.is_string() ? d.find(key.as_string()) : nullptr;
    if (found) return *found;
    return a.get(1) ? *a.get(1) : Value::none();
  }
  return std::nullopt;
}

std::optional<Value> list_method(const ListData& l, const std::string& name, CallArgs& args) {
  if (name == "index" || name == "count") {
    Args a(name, args, {"value"});
    const Value& x = a.need(0, "value");
    int64_t n = 0;
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (!equal(l.items[i], x)) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") throw RenderError(x.repr() + " is not in list");
    return Value::integer(n);
  }
  return std::nullopt;
}

bool has_method(const Value& object, const std::string& name) {
  static const std::vector<std::string> kString = {"strip",   "lstrip",     "rstrip", "split", "startswith", "endswith",
                                                   "upper",   "lower",      "title",  "capitalize", "replace", "find",
                                                   "count",   "join",       "splitlines", "isdigit", "isalpha", "isspace"};
  static const std::vector<std::string> kDict = {"items", "keys", "values", "get"};
  static const std::vector<std::string> kList = {"index", "count"};
  const std::vector<std::string>* names = object.is_string() ? &kString : object.is_dict() ? &kDict : object.is_list() ? &kList : nullptr;
  return names && std::find(names->begin(), names->end(), name) != names->end();
}

// --- global functions ---------------------------------------------------------------

Value range(CallArgs& args) {
  if (!args.keyword.empty()) throw RenderError("range() takes no keyword arguments");
  std::vector<int64_t> n;
  for (const Value& v : args.positional) {
    if (!v.is_int()) throw RenderError("range() needs integers, not " + v.type_name());
    n.push_back(v.as_int());
  }
  if (n.empty() || n.size() > 3) throw RenderError("range() takes 1 to 3 arguments");
  const int64_t start = n.size() == 1 ? 0 : n[0];
  const int64_t stop = n.size() == 1 ? n[0] : n[1];
  const int64_t step = n.size() == 3 ? n[2] : 1;
  if (step == 0) throw RenderError("range() step must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) throw RenderError("range() is longer than " + std::to_string(kMaxRange));
    out.push_back(Value::integer(i));
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return Value::list(std::move(out));
}

// namespace(x=…) and dict(x=…): keyword arguments, after an optional dict.
DictData keyword_dict(const std::string& fn, CallArgs& args) {
  DictData d;
  if (args.positional.size() > 1) throw RenderError(fn + "() takes at most one positional argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict()) throw RenderError(fn + "() needs a mapping, not " + args.positional[0].type_name());
    d = args.positional[0].as_dict();
  }
  for (auto& [k, v] : args.keyword) {
    // Clang 14 (the fuzz build's) cannot capture a structured binding.
    const auto& key = k;
    auto it = std::find_if(d.items.begin(), d.items.end(), [&](const auto& e) { return e.first == key; });
    if (it != d.items.end()) {
      it->second = v;
    } else {
      d.items.emplace_back(k, v);
    }
  }
  return d;
}

Value strftime_now(CallArgs& args) {
  Args a("strftime_now", args, {"format"});
  const std::string format = a.string(0, "format");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
  if (n == 0 && !format.empty()) throw RenderError("strftime_now: the format gives no text or more than 512 bytes");
  return Value::string(std::string(buf, n));
}

}  // namespace

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args) {
  const auto& table = filters();
  const auto it = table.find(name);
  if (it == table.end()) throw RenderError("unknown filter '" + name + "'");
  return it->second(subject, args);
}

bool apply_test(const std::string& name, const Value& subject, CallArgs& args) {
  const auto& table = tests();
  const auto it = table.find(name);
  if (it == table.end()) throw RenderError("unknown test '" + name + "'");
  static const std::vector<std::string_view> kWithArgument = {"divisibleby", "eq", "equalto", "==", "ne", "!=", "lt",
                                                              "lessthan", "<", "gt", "greaterthan", ">", "le", "<=",
                                                              "ge", ">=", "in", "sameas"};
  const bool takes_argument = std::find(kWithArgument.begin(), kWithArgument.end(), name) != kWithArgument.end();
  if (args.positional.size() + args.keyword.size() > (takes_argument ? 1u : 0u))
    throw RenderError("test '" + name + "' takes " + (takes_argument ? "one argument" : "no arguments"));
  return it->second(subject, args);
}

std::optional<Value> bound_method(const Value& object, const std::string& name) {
  if (!has_method(object, name)) return std::nullopt;
  return Value::callable(object.type_name() + "." + name, [object, name](CallArgs& args) {
    std::optional<Value> r = object.is_string() ? string_method(object.as_string(), name, args)
                             : object.is_dict() ? dict_method(object.as_dict(), name, args)
                                                : list_method(object.as_list(), name, args);
    return *r;
  });
}

std::optional<Value> global_function(std::string_view name) {
  if (name == "range") return Value::callable("range", range);
  if (name == "namespace")
    return Value::callable("namespace", [](CallArgs& a) { return Value::make_namespace(keyword_dict("namespace", a)); });
  if (name == "dict") return Value::callable("dict", [](CallArgs& a) { return Value::dict(keyword_dict("dict", a).items); });
  if (name == "raise_exception") {
    return Value::callable("raise_exception", [](CallArgs& a) -> Value {
      throw RaisedError(a.positional.empty() ? std::string("raise_exception") : a.positional[0].str());
    });
  }
  if (name == "strftime_now") return Value::callable("strftime_now", strftime_now);
  return std::nullopt;
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(char_offsets(v.as_string()).size() - 1);
    case Value::Kind::List: return static_cast<int64_t>(v.as_list().items.size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.as_dict().items.size());
    default: throw RenderError("object of type '" + v.type_name() + "' has no len()");
  }
}

Value item(const Value& object, const Value& key) {
  if (object.is_dict()) {
    if (key.is_string()) {
      if (const Value* found = object.as_dict().find(key.as_string())) return *found;
      return Value::undefined(key.as_string());
    }
    return Value::undefined();
  }
  if (object.kind() == Value::Kind::Namespace && key.is_string()) return attribute(object, key.as_string());
  if (object.is_list() || object.is_string()) {
    if (!key.is_int()) {
      if (key.is_string()) return attribute(object, key.as_string());
      throw RenderError("indices must be integers, not " + key.type_name());
    }
    const int64_t n = length(object);
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined();
    if (object.is_list()) return object.as_list().items[static_cast<size_t>(i)];
    const std::vector<size_t> at = char_offsets(object.as_string());
    const size_t k = static_cast<size_t>(i);
    return Value::string(object.as_string().substr(at[k], at[k + 1] - at[k]));
  }
  if (object.is_undefined()) throw RenderError("'" + object.undefined_name() + "' is undefined");
  return Value::undefined();
}

Value slice(const Value& object, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step) {
  if (!object.is_list() && !object.is_string()) {
    if (object.is_undefined()) throw RenderError("'" + object.undefined_name() + "' is undefined");
    throw RenderError("'" + object.type_name() + "' object is not subscriptable");
  }
  const int64_t n = length(object);
  const int64_t s = step.value_or(1);
  if (s == 0) throw RenderError("slice step cannot be zero");
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) x += n;
    if (s > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, s > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, s > 0 ? n : -1);
  std::vector<int64_t> picks;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) picks.push_back(i);
  if (object.is_list()) {
    std::vector<Value> out;
    for (int64_t i : picks) out.push_back(object.as_list().items[static_cast<size_t>(i)]);
    return Value::list(std::move(out), object.as_list().tuple);
  }
  const std::vector<size_t> at = char_offsets(object.as_string());
  std::string out;
  for (int64_t i : picks) out.append(object.as_string(), at[static_cast<size_t>(i)], at[static_cast<size_t>(i) + 1] - at[static_cast<size_t>(i)]);
  return Value::string(std::move(out));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list().items;
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& entry : v.as_dict().items) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      const std::vector<size_t> at = char_offsets(v.as_string());
      for (size_t k = 0; k + 1 < at.size(); ++k) chars.push_back(Value::string(v.as_string().substr(at[k], at[k + 1] - at[k])));
      return chars;
    }
    default: throw RenderError("'" + v.type_name() + "' object is not iterable");
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw RenderError("'<' is not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool contains(const Value& container, const Value& x) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!x.is_string()) throw RenderError("'in <string>' requires a string as left operand, not " + x.type_name());
      return container.as_string().find(x.as_string()) != std::string::npos;
    case Value::Kind::List: {
      const auto& items = container.as_list().items;
      return std::any_of(items.begin(), items.end(), [&](const Value& i) { return equal(i, x); });
    }
    case Value::Kind::Dict: return x.is_string() && container.as_dict().find(x.as_string()) != nullptr;
    default: throw RenderError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) throw RenderError("'" + object.undefined_name() + "' is undefined");
  if (std::optional<Value> method = bound_method(object, name)) return *method;
  if (object.is_dict()) {
    if (const Value* found = object.as_dict().find(name)) return *found;
  } else if (object.kind() == Value::Kind::Namespace) {
    if (const Value* found = object.as_namespace().attrs.find(name)) return *found;
  }
  return Value::undefined(name);
}

}  // namespace lathe::text::jinja
