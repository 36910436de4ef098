// The values a chat template computes with (runtime/text/jinja/chat_template.hpp).
// They follow Python's types as jinja2 sees them: the JSON data a template
// is given (None, bool, int, float, str, list, dict with keys in insertion
// order), plus what only a template makes: undefined, tuples, namespaces and
// callables (macros, global functions, bound methods).
// Data is immutable once built (transformers renders in an
// ImmutableSandboxedEnvironment), so lists and dicts share their contents;
// only a namespace changes, through `{% set ns.x = … %}`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace lathe::text::jinja {

class Value;

// A name that has no value. `name` is what the template called it, for the
// message of an error that uses it ("'foo' is undefined").
struct Undefined {
  std::string name;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // prints as (a, b) rather than [a, b]
};

// Keys in insertion order, as Python's dict keeps them (tojson writes them
// so). Lookups are linear: chat messages have a handful of keys.
struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
};

// namespace(…): the one mutable value.
struct NamespaceData {
  DictData attrs;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() : v_(Undefined{}) {}
  static Value undefined(std::string name = {}) { return Value(Undefined{std::move(name)}); }
  static Value none() { return Value(nullptr); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  static Value string(std::string s) { return Value(std::move(s)); }
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(std::vector<std::pair<std::string, Value>> items);
  static Value make_namespace(DictData attrs);
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn);
  // JSON data as Python's json.loads would give it (keys keep their order).
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_int() const { return kind() == Kind::Int || kind() == Kind::Bool; }  // bool is an int in Python
  bool is_number() const { return is_int() || kind() == Kind::Float; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const;  // Int or Bool
  double as_double() const;  // any number
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ListData& as_list() const { return *std::get<std::shared_ptr<const ListData>>(v_); }
  const DictData& as_dict() const { return *std::get<std::shared_ptr<const DictData>>(v_); }
  NamespaceData& as_namespace() const { return *std::get<std::shared_ptr<NamespaceData>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }

  // Python's bool(x); undefined is false.
  bool truthy() const;
  // str(x) as jinja2 prints it: None → "None", True → "True", a list as
  // Python's repr, undefined → "".
  std::string str() const;
  // repr(x): strings quoted, as inside a printed list.
  std::string repr() const;
  // Python's type name, for error messages: "str", "int", "list", "dict", …
  std::string type_name() const;

 private:
  using Variant = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
                               std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                               std::shared_ptr<NamespaceData>, std::shared_ptr<const Callable>>;
  template <typename T>
  explicit Value(T v) : v_(std::move(v)) {}
  Variant v_;
};

// Python's ==: 1 == 1.0 == True, lists and dicts by content.
bool equal(const Value& a, const Value& b);

// Python's float repr: the shortest text that reads back the same double,
// "1.0", "0.1", "1e-05", "1e+16", "inf", "nan".
std::string python_float(double d);

// json.dumps(x, ensure_ascii, indent, separators, sort_keys) as transformers'
// tojson filter calls it. indent < 0: none (one line). Throws std::invalid_argument
// naming the type for what JSON cannot hold (undefined, a callable).
struct JsonOptions {
  int indent = -1;
  std::string item_separator, key_separator;  // empty: json.dumps's defaults
  bool ensure_ascii = false;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);

}  // namespace lathe::text::jinja
