// GBNF written by code (gbnf_writer.hpp).
#include "runtime/grammar/gbnf_writer.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "runtime/grammar/utf8.hpp"

namespace lathe::grammar::gbnf {
namespace {

using Kind = Expr::Kind;

Expr plain_repeat(Expr item, int64_t min, int64_t max) {
  if (max == 0 || is_empty(item)) return Expr{};
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = Kind::Repeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

std::string hex_escape(char prefix, uint32_t value, int digits) {
  static const char* const kDigits = "0123456789ABCDEF";
  std::string s = {'\\', prefix};
  for (int i = digits - 1; i >= 0; --i) s += kDigits[(value >> (4 * i)) & 0xF];
  return s;
}

std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += (b < 0x20 || b == 0x7F) ? hex_escape('x', b, 2) : std::string(1, c);
    }
  }
  return out + "\"";
}

// One code point inside [...]: printable ASCII as itself (the class's own
// metacharacters escaped), everything else as an escape.
std::string class_char(char32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case ']': return "\\]";
    case '[': return "\\[";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (c < 0x20 || c == 0x7F || c == '-' || c == '^') return hex_escape('x', c, 2);
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  if (c <= 0xFFFF) return hex_escape('u', c, 4);
  return hex_escape('U', c, 8);
}

// (A byte that starts no well-formed sequence counts as one; the compiler
// writes valid UTF-8 only.)
size_t code_points(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += std::max<size_t>(utf8::decode(s, i).length, 1)) ++n;
  return n;
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return std::min<uint64_t>(a + b, uint64_t{1} << 50); }
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > (uint64_t{1} << 50) / b ? uint64_t{1} << 50 : a * b;
}

class Printer {
 public:
  void rule(const Rule& r) {
    printed_.text += r.name + " ::= ";
    printed_.rules = saturating_add(printed_.rules, 1);
    printed_.elements = saturating_add(printed_.elements, print(r.body, kAlt, 0, printed_.text));
    printed_.text += "\n";
  }
  Printed done() { return std::move(printed_); }

 private:
  enum Prec { kAlt, kSeq, kAtom };

  // ( e ): a rule of its own, one element where it stands.
  uint64_t group(const Expr& e, int depth, std::string& out) {
    printed_.rules = saturating_add(printed_.rules, 1);
    printed_.depth = std::max(printed_.depth, depth + 1);
    out += "( ";
    printed_.elements = saturating_add(printed_.elements, print(e, kAlt, depth + 1, out));
    out += " )";
    return 1;
  }

  // Prints `e`; returns the elements it puts in the rule it stands in.
  uint64_t print(const Expr& e, Prec prec, int depth, std::string& out) {
    switch (e.kind) {
      case Kind::Literal: out += gbnf_literal(e.text); return code_points(e.text);
      case Kind::Ref: out += e.text; return 1;
      case Kind::Class:
        out += e.negated ? "[^" : "[";
        for (auto [lo, hi] : e.ranges) {
          out += class_char(lo);
          if (hi != lo) out += "-" + class_char(hi);
        }
        out += "]";
        return 1;
      case Kind::Seq:
      case Kind::Alt: {
        const Prec own = e.kind == Kind::Alt ? kAlt : kSeq;
        if (prec > own) return group(e, depth, out);
        uint64_t n = 0;
        for (size_t i = 0; i < e.items.size(); ++i) {
          if (i > 0) out += own == kAlt ? " | " : " ";
          n = saturating_add(n, print(e.items[i], static_cast<Prec>(own + 1), depth, out));
        }
        return n;
      }
      case Kind::Repeat: {
        const Expr& item = e.items.front();
        const bool grouped = item.kind == Kind::Seq || item.kind == Kind::Alt || item.kind == Kind::Repeat ||
                             (item.kind == Kind::Literal && code_points(item.text) > 1);
        const uint64_t x = grouped ? group(item, depth, out) : print(item, kAtom, depth, out);
        const uint64_t copies = e.max == kUnbounded ? 1 : static_cast<uint64_t>(e.max - e.min);
        printed_.rules = saturating_add(printed_.rules, copies);
        printed_.elements = saturating_add(printed_.elements, saturating_mul(copies, x + 1));
        printed_.repeat = std::max({printed_.repeat, e.min, e.max});
        if (e.min == 0 && e.max == 1) {
          out += "?";
        } else if (e.min == 0 && e.max == kUnbounded) {
          out += "*";
        } else if (e.min == 1 && e.max == kUnbounded) {
          out += "+";
        } else if (e.min == e.max) {
          out += "{" + std::to_string(e.min) + "}";
        } else {
          out += "{" + std::to_string(e.min) + "," + (e.max == kUnbounded ? "" : std::to_string(e.max)) + "}";
        }
        return saturating_add(saturating_mul(x, static_cast<uint64_t>(e.min)), copies > 0 ? 1 : 0);
      }
    }
    return 0;
  }

  Printed printed_;
};

// Which rules derive the empty text (empty) or some finite text (!empty):
// the least fixpoint.
class Derivations {
 public:
  explicit Derivations(const std::vector<Rule>& rules) : rules_(rules) {
    for (size_t i = 0; i < rules.size(); ++i) index_[rules[i].name] = i;
  }

  size_t index(const std::string& name) const { return index_.at(name); }

  std::vector<bool> fixpoint(bool empty) const {
    std::vector<bool> known(rules_.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < rules_.size(); ++i)
        if (!known[i] && derives(rules_[i].body, known, empty)) known[i] = changed = true;
    }
    return known;
  }

  bool derives(const Expr& e, const std::vector<bool>& known, bool empty) const {
    switch (e.kind) {
      case Kind::Literal: return !empty || e.text.empty();
      case Kind::Class: return !empty && !e.ranges.empty();
      case Kind::Ref: return known[index(e.text)];
      case Kind::Seq:
        return std::all_of(e.items.begin(), e.items.end(), [&](const Expr& x) { return derives(x, known, empty); });
      case Kind::Alt:
        return std::any_of(e.items.begin(), e.items.end(), [&](const Expr& x) { return derives(x, known, empty); });
      case Kind::Repeat: return e.min == 0 || derives(e.items.front(), known, empty);
    }
    return false;
  }

  // Every rule `e` refers to.
  void refs(const Expr& e, std::vector<size_t>& out) const {
    if (e.kind == Kind::Ref) out.push_back(index(e.text));
    for (const Expr& x : e.items) refs(x, out);
  }

  // The rules `e` may begin with (past what derives the empty text).
  void leftmost(const Expr& e, const std::vector<bool>& nullable, std::set<size_t>& out) const {
    switch (e.kind) {
      case Kind::Ref: out.insert(index(e.text)); return;
      case Kind::Seq:
        for (const Expr& x : e.items) {
          leftmost(x, nullable, out);
          if (!derives(x, nullable, true)) return;
        }
        return;
      case Kind::Alt:
      case Kind::Repeat:
        for (const Expr& x : e.items) leftmost(x, nullable, out);
        return;
      default: return;
    }
  }

 private:
  const std::vector<Rule>& rules_;
  std::map<std::string, size_t> index_;
};

}  // namespace

Expr lit(std::string text) {
  Expr e;
  e.kind = Kind::Literal;
  e.text = std::move(text);
  return e;
}

Expr ref(std::string name) {
  Expr e;
  e.kind = Kind::Ref;
  e.text = std::move(name);
  return e;
}

Expr cls(Ranges ranges, bool negated) {
  Expr e;
  e.kind = Kind::Class;
  e.ranges = std::move(ranges);
  e.negated = negated;
  return e;
}

bool is_empty(const Expr& e) { return e.kind == Kind::Seq && e.items.empty(); }

// A sequence: nested sequences flattened, empty parts dropped, adjacent
// literals joined.
Expr seq(std::vector<Expr> items) {
  Expr e;
  const auto append = [&e](Expr&& item) {
    if (item.kind == Kind::Literal && item.text.empty()) return;
    if (item.kind == Kind::Literal && !e.items.empty() && e.items.back().kind == Kind::Literal) {
      e.items.back().text += item.text;
      return;
    }
    e.items.push_back(std::move(item));
  };
  for (Expr& item : items) {
    if (item.kind == Kind::Seq) {
      for (Expr& part : item.items) append(std::move(part));
    } else {
      append(std::move(item));
    }
  }
  if (e.items.size() == 1) return std::move(e.items.front());
  return e;
}

Expr alt(std::vector<Expr> items) {
  Expr e;
  e.kind = Kind::Alt;
  for (Expr& item : items) {
    if (item.kind == Kind::Alt) {
      for (Expr& part : item.items) e.items.push_back(std::move(part));
    } else {
      e.items.push_back(std::move(item));
    }
  }
  if (e.items.size() == 1) return std::move(e.items.front());
  return e;
}

// x{min,max}. The engine spells x{m,n} out as n - m rules (an optional copy
// each), so a wide span is written in chunks of k = ⌈√span⌉ instead:
// x{min} then, for a count c = k·a + b of the rest, either a < q chunks
// and b < k, or q chunks and b <= r (span = k·q + r): about 2√span rules.
Expr repeat(Expr item, int64_t min, int64_t max) {
  constexpr int64_t kWidest = 64;  // spans up to this stay x{m,n}
  if (max == kUnbounded || max - min <= kWidest) return plain_repeat(std::move(item), min, max);
  const int64_t span = max - min;
  int64_t k = 1;
  while (k * k < span) ++k;
  const int64_t q = span / k, r = span % k;
  const Expr chunk = plain_repeat(item, k, k);
  Expr below = seq({plain_repeat(chunk, 0, q - 1), plain_repeat(item, 0, k - 1)});
  Expr top = seq({plain_repeat(chunk, q, q), plain_repeat(item, 0, r)});
  Expr rest = alt({std::move(below), std::move(top)});
  return seq({plain_repeat(std::move(item), min, min), std::move(rest)});
}

Ranges without(const Ranges& ranges, const std::set<char32_t>& out) {
  Ranges result;
  for (auto [lo, hi] : ranges) {
    char32_t start = lo;
    for (char32_t c : out) {
      if (c < start || c > hi) continue;
      if (c > start) result.emplace_back(start, c - 1);
      start = c + 1;
    }
    if (start <= hi && start >= lo) result.emplace_back(start, hi);
  }
  return result;
}

Printed print(const std::vector<const Rule*>& rules) {
  Printer printer;
  for (const Rule* r : rules) printer.rule(*r);
  return printer.done();
}

std::vector<bool> reachable(const std::vector<Rule>& rules, const std::string& root) {
  const Derivations d(rules);
  std::vector<bool> seen(rules.size(), false);
  std::vector<size_t> todo = {d.index(root)};
  seen[todo.front()] = true;
  while (!todo.empty()) {
    std::vector<size_t> next;
    d.refs(rules[todo.back()].body, next);
    todo.pop_back();
    for (size_t i : next) {
      if (seen[i]) continue;
      seen[i] = true;
      todo.push_back(i);
    }
  }
  return seen;
}

std::optional<size_t> endless(const std::vector<Rule>& rules, const std::vector<bool>& used) {
  const std::vector<bool> finite = Derivations(rules).fixpoint(false);
  for (size_t i = rules.size(); i-- > 0;)
    if (used[i] && !finite[i]) return i;
  return std::nullopt;
}

std::optional<size_t> left_recursive(const std::vector<Rule>& rules, const std::vector<bool>& used) {
  const Derivations d(rules);
  const std::vector<bool> nullable = d.fixpoint(true);
  std::vector<std::set<size_t>> edges(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) d.leftmost(rules[i].body, nullable, edges[i]);
  // Depth first, without recursion: 0 unseen, 1 on the path, 2 done.
  std::vector<int> state(rules.size(), 0);
  for (size_t start = 0; start < rules.size(); ++start) {
    if (state[start] || !used[start]) continue;
    std::vector<std::pair<size_t, std::set<size_t>::const_iterator>> path = {{start, edges[start].begin()}};
    state[start] = 1;
    while (!path.empty()) {
      auto& [rule, it] = path.back();
      if (it == edges[rule].end()) {
        state[rule] = 2;
        path.pop_back();
        continue;
      }
      const size_t next = *it++;
      if (state[next] == 1) return next;
      if (state[next] == 0) {
        state[next] = 1;
        path.emplace_back(next, edges[next].begin());
      }
    }
  }
  return std::nullopt;
}

}  // namespace lathe::grammar::gbnf
