// JSON Schema into GBNF (json_schema.hpp; docs/grammar.md, "JSON Schema").
//
// A schema compiles into rules of gbnf_writer.hpp's expressions, one named
// rule a schema unless the schema is a shared primitive (`string`,
// `integer`, any `value` …). The rules are then checked as a whole — every
// rule derives some finite text, none reaches itself before reading a
// character (left recursion), the grammar engine's limits hold — and
// printed as GBNF. Whitespace: every token of the JSON text but the last is
// followed by `ws` (nothing, one space, or a newline and up to 20 spaces or
// tabs), so that exactly one bounded run stands between two tokens and none
// before or after the document.
#include "runtime/grammar/json_schema.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/grammar/gbnf_writer.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/utf8.hpp"

namespace lathe::grammar {
namespace {

using Json = nlohmann::ordered_json;

using gbnf::alt;
using gbnf::cls;
using gbnf::Expr;
using gbnf::is_empty;
using gbnf::kUnbounded;
using gbnf::lit;
using gbnf::many;
using gbnf::optional;
using gbnf::Ranges;
using gbnf::ref;
using gbnf::repeat;
using gbnf::seq;
using gbnf::without;
using Kind = Expr::Kind;

const Ranges kHex = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
Expr digit() { return cls({{'0', '9'}}); }
Expr hex(int64_t n) { return repeat(cls(kHex), n, n); }

// ---------------------------------------------------------------------------
// Messages.

// Text from the schema inside a message: control bytes escaped, cut to
// `max` bytes (at a character's start), so that a message never echoes the
// input raw or whole.
std::string shown(std::string_view s, size_t max = 64) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::max<size_t>(utf8::decode(s, i).length, 1);
    if (out.size() + n > max) {
      out += "…";
      break;
    }
    const auto b = static_cast<unsigned char>(s[i]);
    if (n == 1 && (b < 0x20 || b == 0x7F || b >= 0x80)) {
      static const char* const kDigits = "0123456789ABCDEF";
      out += {'\\', 'x', kDigits[b >> 4], kDigits[b & 0xF]};
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  return out;
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// A pointer in a message: its last 200 bytes at most (the keyword at fault
// is at the end).
std::string shown_pointer(const std::string& pointer) {
  if (pointer.empty()) return "(root)";
  constexpr size_t kMax = 200;
  if (pointer.size() <= kMax) return shown(pointer, kMax * 4);
  size_t start = pointer.size() - kMax;
  while (start < pointer.size() && (static_cast<unsigned char>(pointer[start]) & 0xC0) == 0x80) ++start;
  return "…" + shown(std::string_view(pointer).substr(start), kMax * 4);
}

// Rule names: GBNF's [a-zA-Z0-9-], a run of anything else one '-'.
std::string sanitized(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (ok) {
      out += c;
    } else if (out.empty() || out.back() != '-') {
      out += '-';
    }
  }
  while (out.size() > 1 && out.back() == '-') out.pop_back();
  return out;
}

// The shared primitives, printed last in this order when used.
const std::vector<std::string> kBuiltins = {"value", "object", "array",  "string", "char",
                                            "escape", "number", "integer", "boolean", "ws"};

// Keywords that say nothing of which documents are valid.
const std::set<std::string, std::less<>> kIgnored = {"description", "title",      "$schema",    "$id",
                                                     "default",     "examples",   "$comment",   "deprecated",
                                                     "readOnly",    "writeOnly"};
const std::set<std::string, std::less<>> kKnown = {
    "$ref",      "$defs",     "definitions", "type",      "enum",      "const",   "anyOf",   "oneOf",
    "allOf",     "properties", "required",   "additionalProperties", "items", "minItems", "maxItems",
    "minLength", "maxLength", "minimum",     "maximum",   "exclusiveMinimum", "exclusiveMaximum"};
const std::vector<std::string> kNumericBounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::vector<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};

constexpr int64_t kMaxBound = 1'000'000'000'000'000'000;  // integer bounds: ±10^18

// ---------------------------------------------------------------------------
// The compiler.

class Compiler {
 public:
  // `rule`: the document's rule. Another than `root` leaves the name
  // `root` to a grammar that embeds the schema's documents.
  Compiler(const Json& root, std::string name, const SchemaLimits& limits, std::string rule = "root")
      : root_(root), name_(std::move(name)), limits_(limits), rule_(std::move(rule)) {
    for (const std::string& b : kBuiltins) taken_.insert(b);
    if (rule_ != "root") taken_.insert("root");
  }

  std::string compile_root() {
    const size_t slot = reserve(rule_, "");
    refs_["#"] = rules_[slot].name;
    compile(root_, "", rules_[slot].name, 0, slot);
    return finish();
  }

 private:
  // What the compiler keeps of each rule beside it.
  struct Made {
    std::string pointer;  // the schema it stands for (errors)
    bool builtin = false;
  };

  [[noreturn]] void fail(const std::string& pointer, const std::string& what) const {
    throw Error(ErrorKind::InvalidArgument, name_ + ": at " + shown_pointer(pointer) + ": " + what);
  }
  [[noreturn]] void fail_grammar(const std::string& what) const {
    throw Error(ErrorKind::InvalidArgument, name_ + ": " + what);
  }
  [[noreturn]] void unsupported(const std::string& pointer, const std::string& keyword,
                                const std::string& why = "") const {
    fail(pointer + "/" + pointer_token(keyword), "keyword '" + shown(keyword) + "' is not supported" + why);
  }

  // ---- rules

  std::string unique_name(const std::string& hint) {
    std::string base = sanitized(hint);
    if (base.empty() || base == "-") base = "x";
    if (base.size() > 80) base.resize(80);
    std::string name = base;
    for (int n = 2; taken_.count(name); ++n) name = base + "-" + std::to_string(n);
    taken_.insert(name);
    return name;
  }

  size_t reserve(const std::string& hint, const std::string& pointer) {
    if (rules_.size() >= limits_.max_rules)
      fail(pointer, "the grammar passes max_rules (" + std::to_string(limits_.max_rules) + ")");
    rules_.push_back({unique_name(hint), Expr{}});
    made_.push_back({pointer, false});
    return rules_.size() - 1;
  }

  Expr fill(size_t slot, Expr body) {
    rules_[slot].body = std::move(body);
    return ref(rules_[slot].name);
  }

  // A rule for a finished body; one already made with the same body (a
  // maxLength that many properties share …) serves again.
  Expr define(const std::string& hint, const std::string& pointer, Expr body) {
    const gbnf::Rule probe = {"", body};
    const std::string key = gbnf::print({&probe}).text;
    if (const auto same = bodies_.find(key); same != bodies_.end()) return ref(same->second);
    const Expr made = fill(reserve(hint, pointer), std::move(body));
    bodies_[key] = made.text;
    return made;
  }

  // A schema's expression where it is used: its rule (`slot` when given),
  // or a reference or literal as it is.
  Expr place(Expr body, const std::string& hint, const std::string& pointer, std::optional<size_t> slot) {
    if (slot) return fill(*slot, std::move(body));
    if (body.kind == Kind::Ref || body.kind == Kind::Literal) return body;
    return define(hint, pointer, std::move(body));
  }

  Expr ws() { return builtin("ws"); }

  Expr builtin(const std::string& name) {
    if (builtins_.count(name)) return ref(name);
    builtins_.insert(name);
    const size_t slot = rules_.size();
    rules_.push_back({name, Expr{}});
    made_.push_back({"", true});
    Expr body;
    if (name == "ws") {
      body = optional(alt({lit(" "), seq({lit("\n"), repeat(cls({{'\t', '\t'}, {' ', ' '}}), 0, 20)})}));
    } else if (name == "value") {
      body = alt({builtin("object"), builtin("array"), builtin("string"), builtin("number"), lit("true"),
                  lit("false"), lit("null")});
    } else if (name == "object") {
      body = object_of(builtin("string"), builtin("value"));
    } else if (name == "array") {
      body = array_of(builtin("value"), 0, kUnbounded);
    } else if (name == "string") {
      body = seq({lit("\""), many(builtin("char")), lit("\"")});
    } else if (name == "char") {
      body = alt({cls({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true), builtin("escape")});
    } else if (name == "escape") {
      body = seq({lit("\\"), escape_body({}, {})});
    } else if (name == "number") {
      body = seq({optional(lit("-")), alt({lit("0"), seq({cls({{'1', '9'}}), many(digit())})}),
                  optional(seq({lit("."), repeat(digit(), 1, kUnbounded)})),
                  optional(seq({cls({{'E', 'E'}, {'e', 'e'}}), optional(cls({{'+', '+'}, {'-', '-'}})),
                                repeat(digit(), 1, kUnbounded)}))});
    } else if (name == "integer") {
      body = integer_range(std::nullopt, std::nullopt);
    } else if (name == "boolean") {
      body = alt({lit("true"), lit("false")});
    }
    rules_[slot].body = std::move(body);
    return ref(name);
  }

  // What follows a JSON string's backslash, less the single-letter escapes
  // `letters` and the \uXXXX spellings `units` (four lower-case hex digits
  // beginning "00", as a canonical dump writes control characters). A
  // \uXXXX is never a lone surrogate: a high one is followed by a low one.
  Expr escape_body(const std::set<char32_t>& letters, const std::set<std::string>& units) {
    const Ranges singles = without({{'"', '"'}, {'/', '/'}, {'\\', '\\'}, {'b', 'b'}, {'f', 'f'},
                                    {'n', 'n'}, {'r', 'r'}, {'t', 't'}},
                                   letters);
    const Expr pair = seq({cls({{'D', 'D'}, {'d', 'd'}}), cls({{'8', '9'}, {'A', 'B'}, {'a', 'b'}}), hex(2), lit("\\u"),
                           cls({{'D', 'D'}, {'d', 'd'}}), cls({{'C', 'F'}, {'c', 'f'}}), hex(2)});
    const Expr low_bmp = seq({cls({{'D', 'D'}, {'d', 'd'}}), cls({{'0', '7'}}), hex(2)});
    Expr code;
    if (units.empty()) {
      code = alt({seq({cls({{'0', '9'}, {'A', 'C'}, {'E', 'F'}, {'a', 'c'}, {'e', 'f'}}), hex(3)}), low_bmp, pair});
    } else {
      // "00XX" less the units' XX; everything else as usual.
      std::map<char32_t, std::set<char32_t>> seconds;
      for (const std::string& u : units) seconds[static_cast<unsigned char>(u[2])].insert(static_cast<unsigned char>(u[3]));
      std::set<char32_t> firsts;
      for (const auto& [first, rest] : seconds) firsts.insert(first);
      std::vector<Expr> after00 = {seq({cls(without(kHex, firsts)), hex(1)})};
      for (const auto& [first, rest] : seconds)
        after00.push_back(seq({lit(std::string(1, static_cast<char>(first))), cls(without(kHex, rest))}));
      code = alt({seq({lit("0"), cls({{'1', '9'}, {'A', 'F'}, {'a', 'f'}}), hex(2)}), seq({lit("00"), alt(after00)}),
                  seq({cls({{'1', '9'}, {'A', 'C'}, {'E', 'F'}, {'a', 'c'}, {'e', 'f'}}), hex(3)}), low_bmp, pair});
    }
    std::vector<Expr> alts;
    if (!singles.empty()) alts.push_back(cls(singles));
    alts.push_back(seq({lit("u"), std::move(code)}));
    return alt(std::move(alts));
  }

  // "{" ws ( key ws ":" ws value ws ( "," ws key ws ":" ws value ws )* )? "}"
  Expr object_of(const Expr& key, const Expr& value) {
    const Expr member = seq({key, ws(), lit(":"), ws(), value, ws()});
    return seq({lit("{"), ws(), optional(seq({member, many(seq({lit(","), ws(), member}))})), lit("}")});
  }

  Expr array_of(const Expr& item, int64_t min, int64_t max) {
    if (max == 0) return seq({lit("["), ws(), lit("]")});
    const Expr first = seq({item, ws()});
    const Expr more = repeat(seq({lit(","), ws(), item, ws()}), std::max<int64_t>(min - 1, 0),
                             max == kUnbounded ? kUnbounded : max - 1);
    Expr inner = seq({first, more});
    return seq({lit("["), ws(), min == 0 ? optional(std::move(inner)) : std::move(inner), lit("]")});
  }

  // ---- strings and values

  // The canonical JSON spelling of a string (nlohmann's dump: \" \\ \b \f
  // \n \r \t, \u00XX for the other control characters, the rest as UTF-8).
  std::string spelled(const std::string& s, const std::string& pointer) const {
    try {
      return Json(s).dump(-1, ' ', false, Json::error_handler_t::strict);
    } catch (const nlohmann::json::exception&) {
      fail(pointer, "a string that is not valid UTF-8");
    }
  }

  // An enum's or a const's value, spelled canonically, with whitespace
  // between its tokens as anywhere else.
  Expr value_expr(const Json& v, const std::string& pointer, int depth) {
    if (depth > limits_.max_depth)
      fail(pointer, "the value nests deeper than max_depth (" + std::to_string(limits_.max_depth) + ")");
    switch (v.type()) {
      case Json::value_t::null: return lit("null");
      case Json::value_t::boolean: return lit(v.get<bool>() ? "true" : "false");
      case Json::value_t::number_float:
        if (!std::isfinite(v.get<double>())) fail(pointer, "a number that is not finite");
        return lit(v.dump());
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned: return lit(v.dump());
      case Json::value_t::string: return lit(spelled(v.get_ref<const std::string&>(), pointer));
      case Json::value_t::array: {
        std::vector<Expr> parts = {lit("["), ws()};
        for (size_t i = 0; i < v.size(); ++i) {
          if (i > 0) parts.insert(parts.end(), {lit(","), ws()});
          parts.insert(parts.end(), {value_expr(v[i], pointer + "/" + std::to_string(i), depth + 1), ws()});
        }
        parts.push_back(lit("]"));
        return seq(std::move(parts));
      }
      case Json::value_t::object: {
        std::vector<Expr> parts = {lit("{"), ws()};
        bool first = true;
        for (const auto& [key, item] : v.items()) {
          if (!first) parts.insert(parts.end(), {lit(","), ws()});
          first = false;
          const std::string at = pointer + "/" + pointer_token(key);
          parts.insert(parts.end(),
                       {lit(spelled(key, at)), ws(), lit(":"), ws(), value_expr(item, at, depth + 1), ws()});
        }
        parts.push_back(lit("}"));
        return seq(std::move(parts));
      }
      default: fail(pointer, "a value that JSON cannot hold");
    }
  }

  // ---- numbers

  // Every canonical decimal spelling of the same length between a and b
  // (a <= b): the common prefix, then the first digit that differs: a's
  // own (the rest from a's up), those between (any rest), b's own (the
  // rest up to b's).
  Expr same_length(const std::string& a, const std::string& b) {
    size_t k = 0;
    while (k < a.size() && a[k] == b[k]) ++k;
    if (k == a.size()) return lit(a);
    const std::string ra = a.substr(k + 1), rb = b.substr(k + 1);
    const auto r = static_cast<int64_t>(ra.size());
    char low = a[k], high = b[k];
    std::vector<Expr> alts;
    if (ra.find_first_not_of('0') != std::string::npos) {
      alts.push_back(seq({lit(std::string(1, low)), same_length(ra, std::string(ra.size(), '9'))}));
      ++low;
    }
    Expr top;
    if (rb.find_first_not_of('9') != std::string::npos) {
      top = seq({lit(std::string(1, high)), same_length(std::string(rb.size(), '0'), rb)});
      --high;
    }
    if (low == high) alts.push_back(seq({lit(std::string(1, low)), repeat(digit(), r, r)}));
    if (low < high)
      alts.push_back(seq({cls({{static_cast<char32_t>(low), static_cast<char32_t>(high)}}), repeat(digit(), r, r)}));
    if (!is_empty(top)) alts.push_back(std::move(top));
    return seq({lit(a.substr(0, k)), alt(std::move(alts))});
  }

  // The non-negative integers from lo to hi (none: no bound), canonical.
  Expr natural_range(uint64_t lo, std::optional<uint64_t> hi) {
    const std::string los = std::to_string(lo);
    const auto width = static_cast<int64_t>(los.size());
    if (!hi) {
      std::vector<Expr> alts;
      if (lo == 0) {
        alts.push_back(lit("0"));
      } else if (los.find_first_not_of('0', 1) != std::string::npos || los[0] != '1') {
        alts.push_back(same_length(los, std::string(los.size(), '9')));
        alts.push_back(seq({cls({{'1', '9'}}), repeat(digit(), width, kUnbounded)}));
        return alt(std::move(alts));
      }
      // lo is 0, 1 or a power of ten: every number of lo's width or more.
      alts.push_back(seq({cls({{'1', '9'}}), repeat(digit(), std::max<int64_t>(width - 1, 0), kUnbounded)}));
      return alt(std::move(alts));
    }
    std::vector<Expr> alts;
    uint64_t floor = 0, ceiling = 9;  // the d-digit numbers: [floor, ceiling]
    for (int64_t d = 1; d <= static_cast<int64_t>(std::to_string(*hi).size()); ++d) {
      if (d > 1) {
        floor = ceiling + 1;
        ceiling = floor * 10 - 1;
      }
      const uint64_t a = std::max(lo, floor), b = std::min(*hi, ceiling);
      if (a <= b) alts.push_back(same_length(std::to_string(a), std::to_string(b)));
    }
    return alt(std::move(alts));
  }

  // The integers from lo to hi (none: no bound), canonical: no "-0", no
  // leading zero, no fraction or exponent.
  Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<Expr> alts;
    if (!lo || *lo < 0) {
      const uint64_t magnitude_lo = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
      std::optional<uint64_t> magnitude_hi;
      if (lo) magnitude_hi = static_cast<uint64_t>(-*lo);
      alts.push_back(seq({lit("-"), natural_range(magnitude_lo, magnitude_hi)}));
    }
    if (!hi || *hi >= 0) {
      std::optional<uint64_t> top;
      if (hi) top = static_cast<uint64_t>(*hi);
      alts.push_back(natural_range(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0, top));
    }
    return alt(std::move(alts));
  }

  // A bound as an integer: ceil for a lower one, floor for an upper one;
  // `exclusive` moves it one further in.
  int64_t integer_bound(const Json& v, bool lower, bool exclusive, const std::string& pointer) const {
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(kMaxBound))
        fail(pointer, shown(v.dump()) + " is beyond the integer bounds supported (±10^18)");
      double n = lower ? std::ceil(d) : std::floor(d);
      if (exclusive && n == d) n += lower ? 1 : -1;
      return static_cast<int64_t>(n);
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxBound))
      fail(pointer, shown(v.dump()) + " is beyond the integer bounds supported (±10^18)");
    const int64_t n = v.get<int64_t>();
    if (n > kMaxBound || n < -kMaxBound)
      fail(pointer, shown(v.dump()) + " is beyond the integer bounds supported (±10^18)");
    return exclusive ? n + (lower ? 1 : -1) : n;
  }

  Expr integer_schema(const Json& s, const std::string& ptr) {
    std::optional<int64_t> lo, hi;
    const auto tighten = [](std::optional<int64_t>& bound, int64_t n, bool lower) {
      bound = !bound ? n : lower ? std::max(*bound, n) : std::min(*bound, n);
    };
    for (const std::string& k : kNumericBounds) {
      if (!s.contains(k)) continue;
      const Json& v = s[k];
      const bool lower = k == "minimum" || k == "exclusiveMinimum";
      const std::string at = ptr + "/" + k;
      if (v.is_boolean()) {  // draft 4: a modifier of minimum / maximum
        const char* of = lower ? "minimum" : "maximum";
        if (v.get<bool>() && s.contains(of)) tighten(lower ? lo : hi, integer_bound(s[of], lower, true, at), lower);
        continue;
      }
      const bool exclusive = k.rfind("exclusive", 0) == 0;
      tighten(lower ? lo : hi, integer_bound(v, lower, exclusive, at), lower);
    }
    if (!lo && !hi) return builtin("integer");
    if (lo && hi && *lo > *hi) fail(ptr, "no integer lies within the bounds: no document matches");
    return integer_range(lo, hi);
  }

  // ---- schemas

  // A non-negative integer keyword (minLength …): its value, or `absent`.
  int64_t count(const Json& s, const std::string& key, const std::string& ptr, int64_t absent,
                int64_t limit = -1, const char* limit_name = nullptr) const {
    if (!s.contains(key)) return absent;
    const Json& v = s[key];
    const std::string at = ptr + "/" + key;
    double d = 0;
    if (v.is_number_unsigned() || v.is_number_integer()) {
      d = v.is_number_unsigned() ? static_cast<double>(v.get<uint64_t>()) : static_cast<double>(v.get<int64_t>());
    } else if (v.is_number_float()) {
      d = v.get<double>();
    } else {
      fail(at, "'" + key + "' must be a non-negative integer");
    }
    if (!(d >= 0) || d != std::floor(d)) fail(at, "'" + key + "' must be a non-negative integer");
    if (limit >= 0 && d > static_cast<double>(limit))
      fail(at, shown(v.dump()) + " passes " + limit_name + " (" + std::to_string(limit) + ")");
    return static_cast<int64_t>(d);
  }

  // The keywords a schema holds: unknown ones refused, the forms of the
  // known ones checked.
  void check_keywords(const Json& s, const std::string& ptr) const {
    for (const auto& [key, v] : s.items()) {
      if (kIgnored.count(key)) continue;
      if (!kKnown.count(key)) unsupported(ptr, key);
      const std::string at = ptr + "/" + pointer_token(key);
      const std::string& name = key;  // (Clang 14 captures no structured binding)
      const auto must = [&](bool ok, const char* what) {
        if (!ok) fail(at, "'" + name + "' must be " + what);
      };
      if (key == "$ref") must(v.is_string(), "a string");
      if (key == "$defs" || key == "definitions" || key == "properties") must(v.is_object(), "an object");
      if (key == "anyOf" || key == "oneOf" || key == "allOf") must(v.is_array() && !v.empty(), "a non-empty array");
      if (key == "enum") must(v.is_array(), "an array");
      if (key == "type") must(v.is_string() || v.is_array(), "a string or an array of strings");
      if (key == "additionalProperties") must(v.is_object() || v.is_boolean(), "a schema");
      if (key == "items") must(v.is_object() || v.is_boolean() || v.is_array(), "a schema");
      if (key == "required") must(v.is_array(), "an array of strings");
      if (key == "minimum" || key == "maximum") must(v.is_number(), "a number");
      if (key == "exclusiveMinimum" || key == "exclusiveMaximum") must(v.is_number() || v.is_boolean(), "a number");
    }
  }

  // The first keyword of `s`, in the schema's order, that constrains the
  // document and is not among `allowed`.
  static std::optional<std::string> sibling(const Json& s, const std::set<std::string>& allowed) {
    for (const auto& [key, v] : s.items()) {
      if (kIgnored.count(key) || key == "$defs" || key == "definitions" || allowed.count(key)) continue;
      return key;
    }
    return std::nullopt;
  }

  void only_beside(const Json& s, const std::string& ptr, const std::string& keyword,
                   const std::set<std::string>& allowed) const {
    std::set<std::string> with = allowed;
    with.insert(keyword);
    if (const auto other = sibling(s, with)) unsupported(ptr, *other, " beside '" + keyword + "'");
  }

  // `s` as an expression: a reference to its rule (in `slot` when given,
  // else a new one named from `hint`) or to a shared primitive.
  Expr compile(const Json& s, const std::string& ptr, const std::string& hint, int depth,
               std::optional<size_t> slot = std::nullopt) {
    if (depth > limits_.max_depth)
      fail(ptr, "the schema nests deeper than max_depth (" + std::to_string(limits_.max_depth) + ")");
    const auto done = [&](Expr body) { return place(std::move(body), hint, ptr, slot); };
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(ptr, "the schema false matches no document");
      return done(builtin("value"));
    }
    if (!s.is_object()) fail(ptr, "a schema must be an object or a boolean");
    check_keywords(s, ptr);

    if (s.contains("$ref")) {
      only_beside(s, ptr, "$ref", {});
      return done(reference(s["$ref"].get<std::string>(), ptr + "/$ref", depth));
    }
    if (s.contains("allOf")) {
      only_beside(s, ptr, "allOf", {});
      if (s["allOf"].size() > 1) unsupported(ptr, "allOf", " with more than one schema");
      return compile(s["allOf"][0], ptr + "/allOf/0", hint, depth + 1, slot);
    }
    for (const char* key : {"anyOf", "oneOf"}) {  // oneOf as anyOf: see docs/grammar.md
      if (!s.contains(key)) continue;
      only_beside(s, ptr, key, {});
      const size_t own = slot ? *slot : reserve(hint, ptr);
      std::vector<Expr> alts;
      const std::string base = rules_[own].name;
      for (size_t i = 0; i < s[key].size(); ++i)
        alts.push_back(compile(s[key][i], ptr + "/" + key + "/" + std::to_string(i), base + "-" + std::to_string(i),
                               depth + 1));
      return fill(own, alt(std::move(alts)));
    }
    if (s.contains("enum") || s.contains("const")) return done(enumeration(s, ptr, depth));
    return typed(s, ptr, hint, depth, slot);
  }

  // enum / const (beside `type` only): the values of the types allowed.
  Expr enumeration(const Json& s, const std::string& ptr, int depth) {
    if (s.contains("enum") && s.contains("const")) unsupported(ptr, "const", " beside 'enum'");
    const std::string keyword = s.contains("enum") ? "enum" : "const";
    only_beside(s, ptr, keyword, {"type"});
    const std::vector<std::string> types = allowed_types(s, ptr);
    const std::string at = ptr + "/" + keyword;
    Json values = keyword == "enum" ? s["enum"] : Json::array({s["const"]});
    if (values.size() > limits_.max_enum)
      fail(at, std::to_string(values.size()) + " values pass max_enum (" + std::to_string(limits_.max_enum) + ")");
    std::vector<Expr> alts;
    std::set<std::string> seen;
    for (size_t i = 0; i < values.size(); ++i) {
      const Json& v = values[i];
      const std::string vat = keyword == "enum" ? at + "/" + std::to_string(i) : at;
      if (!std::any_of(types.begin(), types.end(), [&](const std::string& t) { return is_of_type(v, t); })) continue;
      Expr e = value_expr(v, vat, depth + 1);
      std::string key;
      try {
        key = v.dump(-1, ' ', false, Json::error_handler_t::strict);
      } catch (const nlohmann::json::exception&) {
        fail(vat, "a string that is not valid UTF-8");
      }
      if (seen.insert(key).second) alts.push_back(std::move(e));
    }
    if (alts.empty()) fail(at, "no value of the types allowed: no document matches");
    return alt(std::move(alts));
  }

  static bool is_of_type(const Json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "number") return v.is_number();
    if (type == "integer")
      return v.is_number_integer() || v.is_number_unsigned() ||
             (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()));
    if (type == "boolean") return v.is_boolean();
    return v.is_null();
  }

  // The types `type` allows, in its order (every type where absent).
  std::vector<std::string> allowed_types(const Json& s, const std::string& ptr) const {
    if (!s.contains("type")) return {"object", "array", "string", "number", "boolean", "null"};
    const Json& t = s["type"];
    std::vector<std::string> types;
    const Json list = t.is_array() ? t : Json::array({t});
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = ptr + "/type" + (t.is_array() ? "/" + std::to_string(i) : "");
      if (!list[i].is_string()) fail(at, "a type must be a string");
      const std::string& name = list[i].get_ref<const std::string&>();
      if (std::find(kTypes.begin(), kTypes.end(), name) == kTypes.end())
        fail(at, "'" + shown(name) + "' is not a JSON Schema type");
      if (std::find(types.begin(), types.end(), name) == types.end()) types.push_back(name);
    }
    if (types.empty()) fail(ptr + "/type", "no type: no document matches");
    return types;
  }

  // The schema by its types: the alternatives of each.
  Expr typed(const Json& s, const std::string& ptr, const std::string& hint, int depth, std::optional<size_t> slot) {
    std::vector<std::string> types = allowed_types(s, ptr);
    const bool number = std::find(types.begin(), types.end(), "number") != types.end();
    if (number) {
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
      for (const std::string& k : kNumericBounds)
        if (s.contains(k)) unsupported(ptr, k, " for type 'number' (only for 'integer')");
    }
    const auto has = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
    };
    const bool plain_object =
        !has({"properties", "required"}) && (!s.contains("additionalProperties") || s["additionalProperties"] == true);
    const bool plain_array = !has({"minItems", "maxItems"}) && (!s.contains("items") || s["items"] == true);
    const bool plain_string = !has({"minLength", "maxLength"});
    const bool plain_integer = !has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"});
    // The shared primitives, where nothing narrows them.
    if (types.size() == 6 && plain_object && plain_array && plain_string) return place(builtin("value"), hint, ptr, slot);
    if (types.size() == 1) {
      const std::string& t = types.front();
      if ((t == "object" && plain_object) || (t == "array" && plain_array) || (t == "string" && plain_string) ||
          t == "number" || (t == "integer" && plain_integer) || t == "boolean")
        return place(builtin(t), hint, ptr, slot);
    }
    // A rule whose children are schemas is made first (its children are
    // named after it); one of primitives only when its body is known.
    const bool children = std::any_of(types.begin(), types.end(), [&](const std::string& t) {
      return (t == "object" && !plain_object) || t == "array";
    });
    std::optional<size_t> own = slot;
    if (children && !own) own = reserve(hint, ptr);
    const std::string base = own ? rules_[*own].name : hint;
    std::vector<Expr> alts;
    for (const std::string& t : types) {
      if (t == "object") {
        alts.push_back(plain_object ? builtin("object") : object_schema(s, ptr, base, depth));
      } else if (t == "array") {
        alts.push_back(array_schema(s, ptr, base, depth));
      } else if (t == "string") {
        alts.push_back(string_schema(s, ptr));
      } else if (t == "number") {
        alts.push_back(builtin("number"));
      } else if (t == "integer") {
        alts.push_back(integer_schema(s, ptr));
      } else if (t == "boolean") {
        alts.push_back(builtin("boolean"));
      } else {
        alts.push_back(lit("null"));
      }
    }
    return place(alt(std::move(alts)), hint, ptr, own);
  }

  Expr string_schema(const Json& s, const std::string& ptr) {
    const int64_t min = count(s, "minLength", ptr, 0, limits_.max_length, "max_length");
    const int64_t max = count(s, "maxLength", ptr, kUnbounded, limits_.max_length, "max_length");
    if (min == 0 && max == kUnbounded) return builtin("string");
    if (max != kUnbounded && min > max)
      fail(ptr, "minLength (" + std::to_string(min) + ") is above maxLength (" + std::to_string(max) +
                    "): no document matches");
    return seq({lit("\""), repeat(builtin("char"), min, max), lit("\"")});
  }

  Expr array_schema(const Json& s, const std::string& ptr, const std::string& base, int depth) {
    const int64_t min = count(s, "minItems", ptr, 0, limits_.max_items, "max_items");
    int64_t max = count(s, "maxItems", ptr, kUnbounded, limits_.max_items, "max_items");
    if (max != kUnbounded && min > max)
      fail(ptr, "minItems (" + std::to_string(min) + ") is above maxItems (" + std::to_string(max) +
                    "): no document matches");
    Expr item = builtin("value");
    if (s.contains("items")) {
      const Json& items = s["items"];
      if (items.is_array()) fail(ptr + "/items", "'items' as an array of schemas (tuples) is not supported");
      if (items == false) {
        if (min > 0) fail(ptr + "/items", "'items' is false and minItems is above 0: no document matches");
        max = 0;
      } else {
        item = compile(items, ptr + "/items", base + "-item", depth + 1);
      }
    }
    return array_of(item, min, max);
  }

  // An object: the listed properties in the schema's order, each optional
  // one skippable, then (where additionalProperties allows) other members.
  Expr object_schema(const Json& s, const std::string& ptr, const std::string& base, int depth) {
    struct Member {
      std::string key;
      Expr kv;  // "\"key\"" ws ":" ws value
      bool required = false;
    };
    std::vector<Member> members;
    if (s.contains("properties")) {
      for (const auto& [key, sub] : s["properties"].items()) {
        const std::string at = ptr + "/properties/" + pointer_token(key);
        Expr value = compile(sub, at, base + "-" + key, depth + 1);
        members.push_back({key, seq({lit(spelled(key, at)), ws(), lit(":"), ws(), std::move(value)}), false});
      }
    }
    if (s.contains("required")) {
      const Json& required = s["required"];
      for (size_t i = 0; i < required.size(); ++i) {
        const std::string at = ptr + "/required/" + std::to_string(i);
        if (!required[i].is_string()) fail(at, "'required' must be an array of strings");
        const std::string& key = required[i].get_ref<const std::string&>();
        const auto m = std::find_if(members.begin(), members.end(), [&](const Member& x) { return x.key == key; });
        if (m == members.end())
          fail(at, "required property '" + shown(key) + "' is not among the properties (not supported)");
        m->required = true;
      }
    }
    std::optional<Expr> extra;  // key ws ":" ws value, of a member not listed
    const Json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (!additional || *additional != false) {
      Expr value = builtin("value");
      if (additional && !additional->is_boolean())
        value = compile(*additional, ptr + "/additionalProperties", base + "-extra", depth + 1);
      std::vector<std::string> keys;
      for (const Member& m : members) keys.push_back(m.key);
      extra = seq({other_key(keys, ptr, base), ws(), lit(":"), ws(), std::move(value)});
    }
    const auto comma = [&](const Expr& kv) { return seq({lit(","), ws(), kv, ws()}); };
    const Expr extras = extra ? many(comma(*extra)) : Expr{};

    std::vector<Expr> parts = {lit("{"), ws()};
    const auto first = std::find_if(members.begin(), members.end(), [](const Member& m) { return m.required; });
    if (first != members.end()) {
      // The optional members before the first required one end with a
      // comma; every member after it begins with one.
      for (auto m = members.begin(); m != first; ++m) parts.push_back(optional(seq({m->kv, ws(), lit(","), ws()})));
      parts.insert(parts.end(), {first->kv, ws()});
      for (auto m = first + 1; m != members.end(); ++m)
        parts.push_back(m->required ? comma(m->kv) : optional(comma(m->kv)));
      parts.push_back(extras);
    } else if (!members.empty() || extra) {
      // Every member optional: the first present decides the rest, each
      // after it optional in turn (tails[i]: the members from i on).
      const size_t n = members.size();
      std::vector<Expr> tails(n + 1);
      std::vector<size_t> slots(n);
      for (size_t i = 1; i < n; ++i) slots[i] = reserve(base + "-tail-" + members[i].key, ptr);
      tails[n] = extras;
      for (size_t i = n; i-- > 1;) tails[i] = fill(slots[i], seq({optional(comma(members[i].kv)), tails[i + 1]}));
      std::vector<Expr> firsts;
      for (size_t i = 0; i < n; ++i) firsts.push_back(seq({members[i].kv, ws(), tails[i + 1]}));
      if (extra) firsts.push_back(seq({*extra, ws(), extras}));
      parts.push_back(optional(alt(std::move(firsts))));
    }
    parts.push_back(lit("}"));
    return seq(std::move(parts));
  }

  // A member key of an object that is none of its listed keys (as spelled:
  // see docs/grammar.md), as a trie of the listed keys' canonical spellings
  // unit by unit (a character, or an escape), each node either ending the
  // key (where no listed key ends) or going on by a unit no listed key
  // has there, then anything, or by one that one has.
  struct KeyTrie {
    bool end = false;
    std::map<std::string, KeyTrie> next;
  };

  Expr other_key(const std::vector<std::string>& keys, const std::string& ptr, const std::string& base) {
    if (keys.empty()) return builtin("string");
    KeyTrie root;
    for (const std::string& key : keys) {
      const std::string s = spelled(key, ptr);
      const std::string_view body = std::string_view(s).substr(1, s.size() - 2);
      KeyTrie* node = &root;
      for (size_t i = 0; i < body.size();) {
        size_t n = std::max<size_t>(utf8::decode(body, i).length, 1);
        if (body[i] == '\\') n = body[i + 1] == 'u' ? 6 : 2;
        node = &node->next[std::string(body.substr(i, n))];
        i += n;
      }
      node->end = true;
    }
    const size_t slot = reserve(base + "-extra-key", ptr);
    const std::string name = rules_[slot].name;  // a copy: key_trie adds rules
    return fill(slot, seq({lit("\""), key_trie(root, name, 0, ptr), lit("\"")}));
  }

  Expr key_trie(const KeyTrie& node, const std::string& name, int level, const std::string& ptr) {
    if (level == 8) {  // a rule of its own: the engine bounds how deep groups nest
      const size_t slot = reserve(name, ptr);
      return fill(slot, key_trie(node, name, 0, ptr));
    }
    std::set<char32_t> plain, letters;
    std::set<std::string> units;
    for (const auto& [unit, child] : node.next) {
      if (unit[0] != '\\') {
        plain.insert(utf8::decode(unit, 0).cp);
      } else if (unit[1] == 'u') {
        units.insert(unit.substr(2));
      } else {
        letters.insert(static_cast<unsigned char>(unit[1]));
      }
    }
    Ranges excluded = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    for (char32_t c : plain) excluded.emplace_back(c, c);
    Expr escape = letters.empty() && units.empty() ? builtin("escape") : seq({lit("\\"), escape_body(letters, units)});
    std::vector<Expr> alts = {seq({alt({cls(excluded, true), std::move(escape)}), many(builtin("char"))})};
    for (const auto& [unit, child] : node.next) alts.push_back(seq({lit(unit), key_trie(child, name, level + 1, ptr)}));
    Expr a = alt(std::move(alts));
    return node.end ? a : optional(std::move(a));
  }

  // A $ref into this document: its rule, compiled at the first reference.
  Expr reference(const std::string& target, const std::string& ptr, int depth) {
    if (const auto found = refs_.find(target); found != refs_.end()) return ref(found->second);
    if (target.empty() || target[0] != '#')
      fail(ptr, "'" + shown(target) + "': only references within the schema ('#/$defs/…') are supported");
    // The fragment, percent-decoded, is a JSON pointer.
    std::string pointer;
    for (size_t i = 1; i < target.size(); ++i) {
      const auto hex_value = [&](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      if (target[i] == '%' && i + 2 < target.size() && hex_value(target[i + 1]) >= 0 &&
          hex_value(target[i + 2]) >= 0) {
        pointer += static_cast<char>(hex_value(target[i + 1]) * 16 + hex_value(target[i + 2]));
        i += 2;
      } else {
        pointer += target[i];
      }
    }
    if (!pointer.empty() && pointer[0] != '/')
      fail(ptr, "'" + shown(target) + "' does not resolve (anchors are not supported)");
    const Json* node = &root_;
    std::string last = "root";
    for (size_t start = 1; start <= pointer.size() && !pointer.empty();) {
      size_t end = pointer.find('/', start);
      if (end == std::string::npos) end = pointer.size();
      std::string token;
      for (size_t i = start; i < end; ++i) {
        if (pointer[i] == '~' && i + 1 < end && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
          token += pointer[++i] == '0' ? '~' : '/';
        } else {
          token += pointer[i];
        }
      }
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() && token.size() < 10 &&
                 token.find_first_not_of("0123456789") == std::string::npos && std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        fail(ptr, "'" + shown(target) + "' does not resolve");
      }
      last = token;
      start = end + 1;
    }
    const size_t slot = reserve(last, pointer);
    const std::string name = rules_[slot].name;  // a copy: compile adds rules
    refs_[target] = name;
    compile(*node, pointer, name, depth + 1, slot);
    return ref(name);
  }

  // ---- the grammar as a whole

  std::string finish() {
    const std::vector<bool> used = gbnf::reachable(rules_, rules_.front().name);
    if (const auto i = gbnf::endless(rules_, used))
      fail(made_[*i].pointer, "no finite document matches the schema (it recurses without end)");
    if (const auto i = gbnf::left_recursive(rules_, used))
      fail(made_[*i].pointer, "the schema refers to itself before any token of the document (left recursion)");
    // root, the schema's rules in the order made, the primitives.
    std::vector<const gbnf::Rule*> order;
    for (size_t i = 0; i < rules_.size(); ++i)
      if (used[i] && !made_[i].builtin) order.push_back(&rules_[i]);
    for (const std::string& b : kBuiltins) {
      for (size_t i = 0; i < rules_.size(); ++i)
        if (used[i] && made_[i].builtin && rules_[i].name == b) order.push_back(&rules_[i]);
    }
    const gbnf::Printed shape = gbnf::print(order);
    const std::string& out = shape.text;
    const Limits engine;
    if (shape.rules > limits_.max_rules)
      fail_grammar("the grammar passes max_rules (" + std::to_string(limits_.max_rules) + "): it takes " +
                   std::to_string(shape.rules) + " rules, groups and repetitions");
    if (shape.rules > engine.max_rules)
      fail_grammar("the grammar passes the engine's max_rules (" + std::to_string(engine.max_rules) + ")");
    if (out.size() > engine.max_bytes)
      fail_grammar("the grammar passes the engine's max_bytes (" + std::to_string(engine.max_bytes) + ")");
    if (shape.elements > engine.max_elements)
      fail_grammar("the grammar passes the engine's max_elements (" + std::to_string(engine.max_elements) + ")");
    if (shape.depth > engine.max_depth)
      fail_grammar("the grammar passes the engine's max_depth (" + std::to_string(engine.max_depth) + ")");
    if (shape.repeat > engine.max_repeat)
      fail_grammar("the grammar passes the engine's max_repeat (" + std::to_string(engine.max_repeat) + ")");
    return out;
  }

  const Json& root_;
  std::string name_;
  SchemaLimits limits_;
  std::string rule_;
  std::vector<gbnf::Rule> rules_;
  std::vector<Made> made_;  // beside rules_
  std::set<std::string> taken_;
  std::set<std::string> builtins_;
  std::map<std::string, std::string> refs_;  // $ref → its rule
  std::map<std::string, std::string> bodies_;  // define()'s rules: body as GBNF → name
};

}  // namespace

std::string json_object_gbnf() {
  static const std::string gbnf = [] {
    const Json schema = {{"type", "object"}};
    return Compiler(schema, "json_object", {}).compile_root();
  }();
  return gbnf;
}

std::string schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& name,
                           const SchemaLimits& limits) {
  return Compiler(schema, name, limits).compile_root();
}

std::string schema_rules_gbnf(const nlohmann::ordered_json& schema, const std::string& name, const std::string& rule,
                             const SchemaLimits& limits) {
  if (rule.empty() || rule == "root" || sanitized(rule) != rule || rule.size() > 80 ||
      std::find(kBuiltins.begin(), kBuiltins.end(), rule) != kBuiltins.end())
    throw Error(ErrorKind::InvalidArgument, name + ": '" + shown(rule) + "' cannot name the schema's rule");
  return Compiler(schema, name, limits, rule).compile_root();
}

std::string schema_to_gbnf(const nlohmann::json& schema, const std::string& name, const SchemaLimits& limits) {
  return schema_to_gbnf(nlohmann::ordered_json(schema), name, limits);
}

}  // namespace lathe::grammar
