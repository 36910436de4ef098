// Walks a parsed template (jinja_ast.hpp) and writes its text, with jinja2's
// scoping: a for loop's body gets a fresh scope on every iteration (a `set`
// inside it is gone after the iteration, hence namespace()), if-blocks share
// their enclosing scope, a macro sees the template's top-level names as they
// are when it is called.
#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/text/jinja/jinja_ast.hpp"
#include "runtime/text/jinja/jinja_builtins.hpp"

namespace lathe::text::jinja {
namespace {

// Bounds that keep a hostile template from running forever or exhausting
// memory: loop iterations over the whole render, macro call depth and the
// size of the output.
constexpr int64_t kMaxIterations = 10'000'000;
constexpr int kMaxCallDepth = 64;
constexpr size_t kMaxOutput = size_t{64} << 20;

struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  Value* find(const std::string& name) {
    for (Frame* f = this; f; f = f->parent) {
      for (auto& [k, v] : f->vars) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  explicit Renderer(const Template& t) : template_(t) {}

  std::string run(const DictData& variables) {
    Frame root;
    root.vars = variables.items;
    root_ = &root;
    std::string out;
    try {
      exec_body(template_.body, root, out);
    } catch (const RaisedError& e) {
      throw Error(ErrorKind::InvalidArgument, where() + e.what());
    } catch (const RenderError& e) {
      throw Error(ErrorKind::BadFile, where() + e.what());
    }
    return out;
  }

 private:
  std::string where() const { return template_.name + ":" + std::to_string(line_) + ": "; }

  // The line of the node being evaluated, restored when it is done so that
  // an error after a nested call still names the right line; kept while an
  // error unwinds, so that the message names the line that threw.
  struct LineScope {
    LineScope(Renderer& r, int line) : renderer(r), saved(r.line_), unwinding(std::uncaught_exceptions()) {
      r.line_ = line;
    }
    ~LineScope() {
      if (std::uncaught_exceptions() == unwinding) renderer.line_ = saved;
    }
    Renderer& renderer;
    int saved;
    int unwinding;
  };

  // --- statements ------------------------------------------------------------

  Flow exec_body(const Body& body, Frame& frame, std::string& out) {
    for (const StmtPtr& s : body) {
      const Flow flow = exec(*s, frame, out);
      if (flow != Flow::Normal) return flow;
      if (out.size() > kMaxOutput) throw RenderError("the rendered text is longer than 64 MiB");
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s, Frame& frame, std::string& out) {
    LineScope line(*this, s.line);
    switch (s.kind) {
      case Stmt::Kind::Text: out += s.text; return Flow::Normal;
      case Stmt::Kind::Output: out += eval(*s.exprs[0], frame).str(); return Flow::Normal;
      case Stmt::Kind::If: return exec_if(s, frame, out);
      case Stmt::Kind::For: return exec_for(s, frame, out);
      case Stmt::Kind::Set: exec_set(s, frame); return Flow::Normal;
      case Stmt::Kind::SetBlock: {
        std::string captured;
        exec_body(s.bodies[0], frame, captured);
        frame.set(s.targets[0], Value::string(std::move(captured)));
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: frame.set(s.text, macro(s)); return Flow::Normal;
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
      case Stmt::Kind::Scope: return exec_body(s.bodies[0], frame, out);
    }
    return Flow::Normal;
  }

  Flow exec_if(const Stmt& s, Frame& frame, std::string& out) {
    for (size_t i = 0; i < s.exprs.size(); ++i) {
      if (eval(*s.exprs[i], frame).truthy()) return exec_body(s.bodies[i], frame, out);
    }
    if (s.bodies.size() > s.exprs.size()) return exec_body(s.bodies.back(), frame, out);
    return Flow::Normal;
  }

  // Binds `a` or `a, b` to a value (for targets and set).
  void bind(const std::vector<std::string>& targets, const Value& v, Frame& frame) {
    if (targets.size() == 1) {
      frame.set(targets[0], v);
      return;
    }
    const std::vector<Value> parts = v.is_list() ? v.as_list().items : iterate(v);
    if (parts.size() != targets.size())
      throw RenderError("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) frame.set(targets[i], parts[i]);
  }

  Value loop_object(const std::vector<Value>& items, size_t i) {
    const auto n = static_cast<int64_t>(items.size());
    const auto k = static_cast<int64_t>(i);
    return Value::dict({
        {"index", Value::integer(k + 1)},
        {"index0", Value::integer(k)},
        {"revindex", Value::integer(n - k)},
        {"revindex0", Value::integer(n - k - 1)},
        {"first", Value::boolean(k == 0)},
        {"last", Value::boolean(k == n - 1)},
        {"length", Value::integer(n)},
        {"depth", Value::integer(1)},
        {"depth0", Value::integer(0)},
        {"previtem", k > 0 ? items[i - 1] : Value::undefined("previtem")},
        {"nextitem", k + 1 < n ? items[i + 1] : Value::undefined("nextitem")},
        // loop.cycle(a, b, …) picks by index0.
        {"cycle", Value::callable("loop.cycle",
                                  [k](CallArgs& a) {
                                    if (a.positional.empty()) throw RenderError("loop.cycle needs at least one value");
                                    return a.positional[static_cast<size_t>(k) % a.positional.size()];
                                  })},
    });
  }

  Flow exec_for(const Stmt& s, Frame& frame, std::string& out) {
    std::vector<Value> items = iterate(eval(*s.exprs[0], frame));
    if (s.exprs.size() > 1) {
      // `for x in xs if cond`: filtered first, so loop.index and loop.length count only what passes.
      std::vector<Value> kept;
      for (const Value& v : items) {
        Frame f{&frame, {}};
        bind(s.targets, v, f);
        if (eval(*s.exprs[1], f).truthy()) kept.push_back(v);
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (++iterations_ > kMaxIterations) throw RenderError("the template runs more than 10 million loop iterations");
      Frame f{&frame, {}};
      f.set("loop", loop_object(items, i));
      bind(s.targets, items[i], f);
      if (exec_body(s.bodies[0], f, out) == Flow::Break) break;
    }
    if (items.empty()) {
      Frame f{&frame, {}};
      exec_body(s.bodies[1], f, out);
    }
    return Flow::Normal;
  }

  void exec_set(const Stmt& s, Frame& frame) {
    Value v = eval(*s.exprs[0], frame);
    if (s.attr.empty()) {
      bind(s.targets, v, frame);
      return;
    }
    Value* target = frame.find(s.targets[0]);
    if (!target || target->kind() != Value::Kind::Namespace)
      throw RenderError("cannot assign attribute '" + s.attr + "' of '" + s.targets[0] + "', which is not a namespace");
    NamespaceData& ns = target->as_namespace();
    for (auto& [k, old] : ns.attrs.items) {
      if (k == s.attr) {
        old = std::move(v);
        return;
      }
    }
    ns.attrs.items.emplace_back(s.attr, std::move(v));
  }

  // A macro is a callable that renders its body in a scope of its own,
  // above the template's top level.
  Value macro(const Stmt& s) {
    return Value::callable(s.text, [this, &s](CallArgs& args) {
      if (args.positional.size() > s.targets.size())
        throw RenderError("macro '" + s.text + "' takes " + std::to_string(s.targets.size()) + " arguments, not " +
                          std::to_string(args.positional.size()));
      if (++call_depth_ > kMaxCallDepth) throw RenderError("macros call each other more than 64 deep");
      Frame f{root_, {}};
      for (size_t i = 0; i < s.targets.size(); ++i) {
        if (i < args.positional.size()) {
          f.set(s.targets[i], args.positional[i]);
        } else if (s.exprs[i]) {
          f.set(s.targets[i], eval(*s.exprs[i], f));
        } else {
          f.set(s.targets[i], Value::undefined(s.targets[i]));
        }
      }
      for (auto& [key, value] : args.keyword) {
        if (std::find(s.targets.begin(), s.targets.end(), key) == s.targets.end())
          throw RenderError("macro '" + s.text + "' has no parameter '" + key + "'");
        f.set(key, value);
      }
      std::string out;
      exec_body(s.bodies[0], f, out);
      --call_depth_;
      return Value::string(std::move(out));
    });
  }

  // --- expressions -----------------------------------------------------------

  Value eval(const Expr& e, Frame& frame) {
    LineScope line(*this, e.line);
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name, frame);
      case Expr::Kind::List: {
        std::vector<Value> items;
        for (const ExprPtr& a : e.args) items.push_back(eval(*a, frame));
        return Value::list(std::move(items), e.tuple);
      }
      case Expr::Kind::Dict: return dict_literal(e, frame);
      case Expr::Kind::Attr: return attribute(eval(*e.args[0], frame), e.name);
      case Expr::Kind::Item: return item(eval(*e.args[0], frame), eval(*e.args[1], frame));
      case Expr::Kind::Slice: return slice_of(e, frame);
      case Expr::Kind::Call: return call(e, frame);
      case Expr::Kind::Filter: {
        CallArgs args = arguments(e, frame);
        return apply_filter(e.name, eval(*e.args[0], frame), args);
      }
      case Expr::Kind::Test: {
        CallArgs args = arguments(e, frame);
        return Value::boolean(apply_test(e.name, eval(*e.args[0], frame), args) != e.negated);
      }
      case Expr::Kind::Unary: return unary(e, frame);
      case Expr::Kind::Binary: return binary(e, frame);
      case Expr::Kind::Compare: return compare(e, frame);
      case Expr::Kind::Cond:
        if (eval(*e.args[1], frame).truthy()) return eval(*e.args[0], frame);
        return e.args[2] ? eval(*e.args[2], frame) : Value::undefined();
    }
    return Value::undefined();
  }

  Value lookup(const std::string& name, Frame& frame) {
    if (Value* v = frame.find(name)) return *v;
    if (std::optional<Value> f = global_function(name)) return *f;
    return Value::undefined(name);
  }

  Value dict_literal(const Expr& e, Frame& frame) {
    std::vector<std::pair<std::string, Value>> items;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      const Value key = eval(*e.args[i], frame);
      if (!key.is_string()) throw RenderError("dict keys must be strings here, not " + key.type_name());
      Value value = eval(*e.args[i + 1], frame);
      auto it = std::find_if(items.begin(), items.end(), [&](const auto& kv) { return kv.first == key.as_string(); });
      if (it != items.end()) {
        it->second = std::move(value);
      } else {
        items.emplace_back(key.as_string(), std::move(value));
      }
    }
    return Value::dict(std::move(items));
  }

  Value slice_of(const Expr& e, Frame& frame) {
    const Value object = eval(*e.args[0], frame);
    std::optional<int64_t> bounds[3];
    for (size_t i = 0; i < 3; ++i) {
      if (!e.args[i + 1]) continue;
      const Value v = eval(*e.args[i + 1], frame);
      if (v.is_none()) continue;
      if (!v.is_int()) throw RenderError("slice indices must be integers or none, not " + v.type_name());
      bounds[i] = v.as_int();
    }
    return slice(object, bounds[0], bounds[1], bounds[2]);
  }

  CallArgs arguments(const Expr& e, Frame& frame) {
    CallArgs args;
    for (size_t i = 1; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], frame));
    for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, frame));
    return args;
  }

  Value call(const Expr& e, Frame& frame) {
    const Value callee = eval(*e.args[0], frame);
    CallArgs args = arguments(e, frame);
    if (callee.kind() != Value::Kind::Callable) {
      if (callee.is_undefined()) throw RenderError("'" + callee.undefined_name() + "' is undefined");
      throw RenderError("'" + callee.type_name() + "' object is not callable");
    }
    return callee.as_callable().call(args);
  }

  Value unary(const Expr& e, Frame& frame) {
    const Value v = eval(*e.args[0], frame);
    if (e.name == "not") return Value::boolean(!v.truthy());
    if (!v.is_number()) {
      if (v.is_undefined()) throw RenderError("'" + v.undefined_name() + "' is undefined");
      throw RenderError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
    }
    if (e.name == "+") return v.kind() == Value::Kind::Float ? v : Value::integer(v.as_int());
    if (v.kind() == Value::Kind::Float) return Value::number(-v.as_double());
    if (v.as_int() == INT64_MIN) throw RenderError("integer overflow");
    return Value::integer(-v.as_int());
  }

  Value binary(const Expr& e, Frame& frame) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0], frame);
    if (op == "and") return a.truthy() ? eval(*e.args[1], frame) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1], frame);
    const Value b = eval(*e.args[1], frame);
    if (op == "~") return Value::string(a.str() + b.str());
    return arithmetic(op, a, b);
  }

  Value compare(const Expr& e, Frame& frame) {
    Value left = eval(*e.args[0], frame);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i + 1], frame);
      const std::string& op = e.ops[i];
      bool r;
      if (op == "==") r = equal(left, right);
      else if (op == "!=") r = !equal(left, right);
      else if (op == "<") r = less(left, right);
      else if (op == ">") r = less(right, left);
      else if (op == "<=") r = !less(right, left);
      else if (op == ">=") r = !less(left, right);
      else if (op == "in") r = contains(right, left);
      else r = !contains(right, left);
      if (!r) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  const Template& template_;
  Frame* root_ = nullptr;
  int line_ = 0;
  int64_t iterations_ = 0;
  int call_depth_ = 0;

 public:
  // + - * / // % ** on Python's types (jinja_render.cpp's one place for them).
  static Value arithmetic(const std::string& op, const Value& a, const Value& b);
};

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw RenderError("'" + a.undefined_name() + "' is undefined");
  if (b.is_undefined()) throw RenderError("'" + b.undefined_name() + "' is undefined");
  throw RenderError("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// str * n and list * n.
Value repeat(const Value& seq, int64_t n) {
  const int64_t count = std::max<int64_t>(n, 0);
  if (seq.is_string()) {
    if (count > 0 && seq.as_string().size() * static_cast<size_t>(count) > kMaxOutput) throw RenderError("repeated string is too long");
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  if (count > 0 && seq.as_list().items.size() * static_cast<size_t>(count) > 1'000'000) throw RenderError("repeated list is too long");
  std::vector<Value> out;
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), seq.as_list().items.begin(), seq.as_list().items.end());
  return Value::list(std::move(out), seq.as_list().tuple);
}

Value integer_arithmetic(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
  else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
  else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
  else if (op == "//" || op == "%") {
    if (y == 0) throw RenderError("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) throw RenderError("integer overflow");
    // Python floors: the remainder takes the divisor's sign.
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    r = op == "//" ? q : m;
  } else if (op == "**") {
    if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
    r = 1;
    for (int64_t i = 0; i < y && !overflow; ++i) overflow = __builtin_mul_overflow(r, x, &r);
  }
  if (overflow) throw RenderError("integer overflow");
  return Value::integer(r);
}

Value float_arithmetic(const std::string& op, double x, double y) {
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "**") return Value::number(std::pow(x, y));
  if (y == 0) throw RenderError("float division by zero");
  if (op == "/") return Value::number(x / y);
  const double q = std::floor(x / y);
  if (op == "//") return Value::number(q);
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value::number(m);
}

Value Renderer::arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (op == "/") {
      if (b.as_double() == 0) throw RenderError("division by zero");
      return Value::number(a.as_double() / b.as_double());
    }
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return integer_arithmetic(op, a.as_int(), b.as_int());
    return float_arithmetic(op, a.as_double(), b.as_double());
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    std::vector<Value> items = a.as_list().items;
    items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return Value::list(std::move(items), a.as_list().tuple);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_int()) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && a.is_int()) return repeat(b, a.as_int());
  unsupported(op, a, b);
}

}  // namespace

std::string render_template(const Template& t, const DictData& variables) { return Renderer(t).run(variables); }

}  // namespace lathe::text::jinja
