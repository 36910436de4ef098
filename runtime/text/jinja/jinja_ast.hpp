// The parsed form of a chat template (runtime/text/jinja/chat_template.hpp): what
// jinja_parser.cpp makes of the source and jinja_render.cpp walks. Every node
// keeps the template line it came from, for the messages of runtime errors.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/text/jinja/jinja_value.hpp"

namespace lathe::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // value
    Name,     // name
    List,     // args: items (tuple: a tuple literal)
    Dict,     // args: key, value, key, value, …
    Attr,     // args[0].name
    Item,     // args[0][args[1]]
    Slice,    // args[0][args[1]:args[2]:args[3]], any of 1–3 may be null
    Call,     // args[0](args[1…], kwargs)
    Filter,   // args[0] | name(args[1…], kwargs)
    Test,     // args[0] is [not] name(args[1…])
    Unary,    // name ("-", "+", "not") args[0]
    Binary,   // args[0] name args[1]: + - * / // % ** ~ and or
    Compare,  // args[0] ops[0] args[1] ops[1] args[2] …: == != < <= > >= in "not in"
    Cond,     // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line;
  std::string name;
  Value value;
  bool tuple = false;    // List
  bool negated = false;  // Test
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ exprs[0] }}
    If,        // exprs: conditions; bodies: one per condition, then the else body if any
    For,       // targets in exprs[0] [if exprs[1]]; bodies[0] loop, bodies[1] else (may be empty)
    Set,       // targets (or targets[0].attr) = exprs[0]
    SetBlock,  // targets[0] = the text bodies[0] renders
    Macro,     // text: name; targets: parameters; exprs: their defaults (null: none); bodies[0]
    Break,
    Continue,
    Scope,  // bodies[0] rendered as it is ({% generation %}: transformers' assistant mask marker)
  };
  Kind kind;
  int line;
  std::string text;
  std::string attr;
  std::vector<std::string> targets;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

struct Template {
  std::string name;  // for messages: "tokenizer_config.json chat_template"
  Body body;
};

// Throws lathe::Error(BadFile) "<name>:<line>:<column>: <what>" for a source
// that is not a template of the supported subset.
Template parse_template(std::string_view source, const std::string& name);

// The text the template renders with these variables (jinja_render.cpp).
// Throws lathe::Error "<name>:<line>: <what>": InvalidArgument for the
// template's raise_exception(…), BadFile for any other runtime error.
std::string render_template(const Template& t, const DictData& variables);

}  // namespace lathe::text::jinja
