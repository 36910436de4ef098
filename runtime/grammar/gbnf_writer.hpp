// GBNF written by code (json_schema.cpp compiles a schema into it): a
// grammar's rules as expression trees, printed as the GBNF text
// Grammar::parse reads (grammar.hpp) together with what that parser will
// make of it (its rules, elements, nesting and repetition counts, for its
// Limits), and the checks a grammar must pass before a matcher runs it:
// every rule derives some finite text, none reaches itself before reading
// a character (left recursion).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace lathe::grammar::gbnf {

constexpr int64_t kUnbounded = -1;

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

struct Expr {
  enum class Kind { Literal, Class, Ref, Seq, Alt, Repeat };
  Kind kind = Kind::Seq;   // an empty Seq: the empty text
  std::string text;        // Literal: UTF-8; Ref: the rule's name
  Ranges ranges;           // Class
  bool negated = false;    // Class
  std::vector<Expr> items;  // Seq, Alt; Repeat: the one repeated
  int64_t min = 0, max = 0;  // Repeat (max kUnbounded: no bound)
};

Expr lit(std::string text);
Expr ref(std::string name);
Expr cls(Ranges ranges, bool negated = false);
bool is_empty(const Expr& e);
// Nested sequences flattened, empty parts dropped, adjacent literals joined.
Expr seq(std::vector<Expr> items);
Expr alt(std::vector<Expr> items);
// item{min,max}; a wide bounded span is written in chunks (see the .cpp).
Expr repeat(Expr item, int64_t min, int64_t max);
inline Expr optional(Expr item) { return repeat(std::move(item), 0, 1); }
inline Expr many(Expr item) { return repeat(std::move(item), 0, kUnbounded); }

// `ranges` less the code points of `out`.
Ranges without(const Ranges& ranges, const std::set<char32_t>& out);

struct Rule {
  std::string name;
  Expr body;
};

// The rules as GBNF, a line each in the order given, and what the engine's
// parser makes of them, counted as it counts: a rule for each named rule,
// group and optional copy of a repetition (x{m,n}: m copies inline and
// n - m rules; x*: one rule), an element for each character of a literal,
// each class and each reference, repetitions spelled out.
struct Printed {
  std::string text;
  uint64_t rules = 0;
  uint64_t elements = 0;
  int depth = 0;       // nesting of groups
  int64_t repeat = 0;  // the largest m or n of {m,n}
};
Printed print(const std::vector<const Rule*>& rules);

// Checks over `rules`, in which every reference names one of them.
// The rules that `root` reaches.
std::vector<bool> reachable(const std::vector<Rule>& rules, const std::string& root);
// Among `used`, the last rule that derives no finite text, if any.
std::optional<size_t> endless(const std::vector<Rule>& rules, const std::vector<bool>& used);
// Among `used`, a rule that reaches itself before reading a character.
std::optional<size_t> left_recursive(const std::vector<Rule>& rules, const std::vector<bool>& used);

}  // namespace lathe::grammar::gbnf
