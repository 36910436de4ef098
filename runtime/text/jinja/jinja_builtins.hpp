// The filters, tests, methods and global functions chat templates call,
// each as jinja2 (and, for tojson, raise_exception and strftime_now,
// transformers) defines it. jinja_render.cpp calls them and adds the
// template line to the errors they throw.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/text/jinja/jinja_value.hpp"

namespace lathe::text::jinja {

// A runtime error in the template (a bad operand, an unknown filter): the
// renderer turns it into lathe::Error naming the template and line.
struct RenderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// raise_exception(message) in the template: the conversation is not one
// the template accepts.
struct RaisedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Filters that call tests or other filters by name (select, map, …) get
// them through this, so that builtins stay free of the renderer.
Value apply_filter(const std::string& name, const Value& subject, CallArgs& args);
bool apply_test(const std::string& name, const Value& subject, CallArgs& args);

// A method of a str, dict or list (x.strip(), d.items(), …), bound to its
// object; nullopt when the type has no method of that name.
std::optional<Value> bound_method(const Value& object, const std::string& name);

// range, namespace, dict, raise_exception, strftime_now; nullopt for others.
std::optional<Value> global_function(std::string_view name);

// Python's len(): characters of a str, items of a list or dict.
int64_t length(const Value& v);
// Python's value[index] and value[start:stop:step] for str (by character) and lists.
Value item(const Value& object, const Value& key);
Value slice(const Value& object, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step);
// The items a for loop or filter walks: a list's items, a dict's keys, a
// str's characters; nothing for undefined.
std::vector<Value> iterate(const Value& v);
// Python's <, for the comparison operators and sort.
bool less(const Value& a, const Value& b);
// x in container.
bool contains(const Value& container, const Value& x);
// getattr as jinja2 does it for a.b: a method, else the dict item or namespace attribute, else undefined.
Value attribute(const Value& object, const std::string& name);

}  // namespace lathe::text::jinja
