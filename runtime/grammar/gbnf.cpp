// GBNF text into a Grammar (the dialect: grammar.hpp, docs/grammar.md).
// One pass over the text builds every rule's alternatives as elements
// (rules.hpp); a group becomes a rule of its own, and a repetition copies
// its item and adds rules the way llama.cpp rewrites them:
//   x{m,n} → x…x (m times) R(n-m)   R(1) ::= x |   R(k) ::= x R(k-1) |
//   x{m,}  → x…x (m times) S        S ::= x S |
//   x*     → S;   x+ → x S;   x? → R(1)
// so that matching needs no counters. Then the checks that need every
// rule: none used and never defined, a root, no left recursion.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/grammar/engine.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/rules.hpp"
#include "runtime/grammar/utf8.hpp"

namespace lathe::grammar {

namespace {

constexpr size_t kNone = SIZE_MAX;
constexpr int64_t kUnbounded = -1;

// A rule as the text is read.
struct Draft {
  std::vector<Element> body;  // its alternatives, each ended by an End element
  size_t defined = kNone;     // a named rule: where its name is defined
  size_t used = kNone;        // where it is first referenced
  uint32_t owner = 0;         // the named rule it was written in (itself when named)
  std::string_view name;      // a named rule's
  size_t star = kNone;        // an unbounded repetition's rule: where its operator is
  std::string_view op;        // and the operator ("*", "{2,}")
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::string code_point_name(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

// A rule's name for a message, cut short.
std::string quoted(std::string_view name) {
  constexpr size_t kMax = 64;
  return "'" + std::string(name.substr(0, kMax)) + (name.size() > kMax ? "…'" : "'");
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, const Limits& limits)
      : text_(text), file_(file), limits_(limits) {}

  std::unique_ptr<Grammar::Impl> parse();

 private:
  [[noreturn]] void fail(size_t at, const std::string& message) const;
  std::string describe(size_t at) const;
  std::string location(size_t at) const;
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_space(bool newlines);

  void rule();
  std::vector<Element> alternatives(uint32_t owner, int depth);
  void sequence(std::vector<Element>& body, uint32_t owner, bool nested, int depth);
  uint32_t character(size_t opened, const char* what);
  uint32_t hex(int digits, size_t escape);
  void literal(std::vector<Element>& body);
  void char_class(std::vector<Element>& body);
  void postfix(std::vector<Element>& body, size_t item, uint32_t owner, bool nested);
  int64_t count();
  void repeat(std::vector<Element>& body, size_t item, int64_t min, int64_t max, uint32_t owner,
              std::string_view op);

  uint32_t reference(std::string_view name, size_t at);
  uint32_t new_rule(uint32_t owner, size_t at);
  void grow(size_t elements, size_t at);
  uint32_t class_of(bool negated, std::vector<Range> ranges);

  std::unique_ptr<Grammar::Impl> build();
  void refuse_left_recursion(const Grammar::Impl& g) const;

  std::string_view text_;
  const std::string& file_;
  Limits limits_;
  size_t pos_ = 0;
  std::vector<Draft> rules_;
  std::unordered_map<std::string_view, uint32_t> by_name_;
  size_t elements_ = 0;
  std::vector<CharClass> classes_;
  std::vector<Range> ranges_;
  std::map<std::pair<bool, std::vector<Range>>, uint32_t> class_ids_;
};

std::string Parser::location(size_t at) const {
  at = std::min(at, text_.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) {  // a column per code point
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

void Parser::fail(size_t at, const std::string& message) const {
  throw Error(ErrorKind::InvalidArgument, file_ + ":" + location(at) + ": " + message);
}

// What is at `at`, for a message (never the raw byte when it is not printable).
std::string Parser::describe(size_t at) const {
  if (at >= text_.size()) return "the end of the text";
  const uint8_t c = static_cast<uint8_t>(text_[at]);
  if (c == '\n' || c == '\r') return "the end of the line";
  if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
  if (const utf8::Decoded d = utf8::decode(text_, at); d.length > 1) return code_point_name(d.cp);
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
  return buf;
}

void Parser::skip_space(bool newlines) {
  while (!at_end()) {
    const char c = peek();
    if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
      ++pos_;
    } else if (c == '#') {
      while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
    } else {
      break;
    }
  }
}

std::unique_ptr<Grammar::Impl> Parser::parse() {
  if (text_.size() > limits_.max_bytes)
    fail(0, "the grammar is " + std::to_string(text_.size()) + " bytes, over max_bytes (" +
                std::to_string(limits_.max_bytes) + ")");
  skip_space(true);
  while (!at_end()) {
    rule();
    skip_space(true);
  }
  // Rules used and never defined: the first use in the text.
  size_t undefined = kNone;
  for (const Draft& r : rules_)
    if (!r.name.empty() && r.defined == kNone && (undefined == kNone || r.used < rules_[undefined].used))
      undefined = static_cast<size_t>(&r - rules_.data());
  if (undefined != kNone)
    fail(rules_[undefined].used, "rule " + quoted(rules_[undefined].name) + " is used but never defined");
  if (!by_name_.contains("root")) fail(0, "no rule 'root' (the rule a document must match)");
  return build();
}

void Parser::rule() {
  const size_t start = pos_;
  while (!at_end() && is_name_char(peek())) ++pos_;
  if (pos_ == start) fail(pos_, "expected a rule name, found " + describe(pos_));
  const std::string_view name = text_.substr(start, pos_ - start);
  skip_space(false);
  if (text_.substr(pos_, 3) != "::=")
    fail(pos_, "expected '::=' after the rule name " + quoted(name) + ", found " + describe(pos_));
  pos_ += 3;
  const uint32_t id = reference(name, start);
  Draft& r = rules_[id];
  if (r.defined != kNone)
    fail(start, "rule " + quoted(name) + " is defined twice (first at " + location(r.defined) + ")");
  r.defined = start;
  skip_space(true);
  std::vector<Element> body = alternatives(id, 0);
  rules_[id].body = std::move(body);
  // A rule ends at the end of a line where its alternatives are complete.
  if (at_end() || peek() == '\n' || peek() == '\r') return;
  if (text_.substr(pos_, 3) == "::=")
    fail(pos_, "unexpected '::=': the rule before it is not complete (a '|' at the end of a line continues a rule)");
  fail(pos_, "unexpected " + describe(pos_));
}

// Alternatives up to what no sequence takes (a newline at the top level,
// ')' in a group, or anything unexpected: the caller says).
std::vector<Element> Parser::alternatives(uint32_t owner, int depth) {
  std::vector<Element> body;
  const bool nested = depth > 0;
  sequence(body, owner, nested, depth);
  while (peek() == '|') {
    body.push_back({Kind::End, 0});
    ++pos_;
    skip_space(true);
    sequence(body, owner, nested, depth);
  }
  body.push_back({Kind::End, 0});
  return body;
}

void Parser::sequence(std::vector<Element>& body, uint32_t owner, bool nested, int depth) {
  size_t item = kNone;  // where the last item's elements begin in body: what a repetition repeats
  while (!at_end()) {
    const char c = peek();
    const size_t at = pos_;
    if (c == '"') {
      item = body.size();
      literal(body);
    } else if (c == '[') {
      item = body.size();
      char_class(body);
    } else if (c == '.') {
      item = body.size();
      ++pos_;
      grow(1, at);
      body.push_back({Kind::Class, class_of(true, {})});
    } else if (is_name_char(c)) {
      while (!at_end() && is_name_char(peek())) ++pos_;
      item = body.size();
      grow(1, at);
      body.push_back({Kind::Rule, reference(text_.substr(at, pos_ - at), at)});
    } else if (c == '(') {
      if (depth + 1 > limits_.max_depth)
        fail(at, "groups nested deeper than max_depth (" + std::to_string(limits_.max_depth) + ")");
      const uint32_t group = new_rule(owner, at);
      ++pos_;
      skip_space(true);
      std::vector<Element> inner = alternatives(owner, depth + 1);
      rules_[group].body = std::move(inner);
      if (at_end()) fail(at, "'(' is never closed");
      if (peek() != ')') fail(pos_, "expected ')' to close the '(' at " + location(at) + ", found " + describe(pos_));
      ++pos_;
      item = body.size();
      grow(1, at);
      body.push_back({Kind::Rule, group});
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (item == kNone) fail(at, std::string("'") + c + "' has nothing before it to repeat");
      postfix(body, item, owner, nested);
      continue;  // postfix skips the space after it
    } else {
      break;
    }
    skip_space(nested);
  }
}

// A repetition operator after the item at body[item…].
void Parser::postfix(std::vector<Element>& body, size_t item, uint32_t owner, bool nested) {
  const size_t at = pos_;
  const char c = text_[pos_++];
  int64_t min = 0, max = kUnbounded;
  if (c == '+') {
    min = 1;
  } else if (c == '?') {
    max = 1;
  } else if (c == '{') {
    skip_space(nested);
    min = count();
    skip_space(nested);
    if (peek() == '}') {
      max = min;
    } else if (peek() == ',') {
      ++pos_;
      skip_space(nested);
      if (peek() >= '0' && peek() <= '9') {
        const size_t n = pos_;
        max = count();
        if (max < min)
          fail(n, "the repetition's maximum (" + std::to_string(max) + ") is below its minimum (" +
                      std::to_string(min) + ")");
        skip_space(nested);
      }
      if (peek() != '}') fail(pos_, "expected '}' to close the '{' at " + location(at) + ", found " + describe(pos_));
    } else {
      fail(pos_, "expected ',' or '}' in the repetition, found " + describe(pos_));
    }
    ++pos_;
  }
  repeat(body, item, min, max, owner, text_.substr(at, pos_ - at));
  skip_space(nested);
}

int64_t Parser::count() {
  const size_t start = pos_;
  int64_t n = 0;
  while (!at_end() && peek() >= '0' && peek() <= '9') {
    n = std::min<int64_t>(n * 10 + (peek() - '0'), limits_.max_repeat + 1);
    ++pos_;
  }
  if (pos_ == start) fail(pos_, "expected a number in the repetition, found " + describe(pos_));
  if (n > limits_.max_repeat)
    fail(start, "the repetition count " + std::string(text_.substr(start, std::min<size_t>(pos_ - start, 24))) +
                    " is over max_repeat (" + std::to_string(limits_.max_repeat) + ")");
  return n;
}

void Parser::repeat(std::vector<Element>& body, size_t item, int64_t min, int64_t max, uint32_t owner,
                    std::string_view op) {
  const size_t at = static_cast<size_t>(op.data() - text_.data());
  const std::vector<Element> x(body.begin() + static_cast<std::ptrdiff_t>(item), body.end());
  body.resize(item);
  elements_ -= x.size();  // counted again as copies
  for (int64_t i = 0; i < min; ++i) {
    grow(x.size(), at);
    body.insert(body.end(), x.begin(), x.end());
  }
  // Each rule added: x, then what follows it, or nothing.
  const auto optional = [&](uint32_t id, uint32_t then) {
    std::vector<Element> r = x;
    grow(x.size() + (then != kBottom), at);
    if (then != kBottom) r.push_back({Kind::Rule, then});
    r.push_back({Kind::End, 0});
    r.push_back({Kind::End, 0});
    rules_[id].body = std::move(r);
  };
  uint32_t last = kBottom;
  if (max == kUnbounded) {
    last = new_rule(owner, at);
    rules_[last].star = at;
    rules_[last].op = op;
    optional(last, last);
  } else {
    for (int64_t k = min; k < max; ++k) {
      const uint32_t id = new_rule(owner, at);
      optional(id, last);
      last = id;
    }
  }
  if (last != kBottom) {
    grow(1, at);
    body.push_back({Kind::Rule, last});
  }
}

// One character of a literal or a class: an escape or a UTF-8 sequence.
uint32_t Parser::character(size_t opened, const char* what) {
  if (at_end()) fail(opened, std::string("unterminated ") + what);
  const size_t at = pos_;
  const uint8_t c = static_cast<uint8_t>(text_[pos_]);
  if (c == '\n' || c == '\r') fail(opened, std::string("unterminated ") + what + " (a line ends inside it; write \\n)");
  if (c == '\\') {
    ++pos_;
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\':
      case '"':
      case '[':
      case ']': return static_cast<uint8_t>(e);
      case 'x': return hex(2, at);
      case 'u': return hex(4, at);
      case 'U': return hex(8, at);
      default: fail(at, "unknown escape '\\' followed by " + describe(at + 1));
    }
  }
  const utf8::Decoded d = utf8::decode(text_, pos_);
  if (d.length == 0) fail(at, "invalid UTF-8 in the grammar");
  pos_ += d.length;
  return d.cp;
}

uint32_t Parser::hex(int digits, size_t escape) {
  uint32_t v = 0;
  for (int i = 0; i < digits; ++i, ++pos_) {
    const char c = peek();
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0)
      fail(escape,
           "the escape \\" + std::string(1, text_[escape + 1]) + " needs " + std::to_string(digits) + " hex digits");
    v = v * 16 + static_cast<uint32_t>(d);
  }
  if (v > 0x10FFFF) fail(escape, "the escape's code point is beyond U+10FFFF");
  return v;
}

void Parser::literal(std::vector<Element>& body) {
  const size_t opened = pos_++;
  while (true) {
    if (!at_end() && peek() == '"') break;
    const size_t at = pos_;
    const uint32_t cp = character(opened, "literal");
    if (cp >= 0xD800 && cp <= 0xDFFF)
      fail(at, "a literal's " + code_point_name(cp) + " is a surrogate, which UTF-8 text never holds");
    grow(1, at);
    body.push_back({Kind::Class, class_of(false, {{cp, cp}})});
  }
  ++pos_;
}

void Parser::char_class(std::vector<Element>& body) {
  const size_t opened = pos_++;
  const bool negated = peek() == '^';
  if (negated) ++pos_;
  std::vector<Range> ranges;
  while (true) {
    if (!at_end() && peek() == ']') break;
    const size_t at = pos_;
    const uint32_t lo = character(opened, "character class");
    uint32_t hi = lo;
    if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
      ++pos_;
      hi = character(opened, "character class");
      if (hi < lo)
        fail(at, "the range " + code_point_name(lo) + "-" + code_point_name(hi) + " ends before it begins");
    }
    ranges.push_back({lo, hi});
  }
  if (ranges.empty()) fail(opened, "an empty character class");
  ++pos_;
  grow(1, opened);
  body.push_back({Kind::Class, class_of(negated, std::move(ranges))});
}

uint32_t Parser::reference(std::string_view name, size_t at) {
  const auto [it, inserted] = by_name_.try_emplace(name, 0);
  if (inserted) {
    it->second = new_rule(static_cast<uint32_t>(rules_.size()), at);
    rules_[it->second].name = name;
  }
  Draft& r = rules_[it->second];
  r.used = std::min(r.used, at);
  return it->second;
}

uint32_t Parser::new_rule(uint32_t owner, size_t at) {
  if (rules_.size() >= limits_.max_rules)
    fail(at, "more than max_rules (" + std::to_string(limits_.max_rules) +
                 ") rules (those groups and repetitions make count too)");
  rules_.push_back({});
  rules_.back().owner = owner;
  return static_cast<uint32_t>(rules_.size() - 1);
}

void Parser::grow(size_t elements, size_t at) {
  elements_ += elements;
  if (elements_ > limits_.max_elements)
    fail(at, "more than max_elements (" + std::to_string(limits_.max_elements) +
                 ") elements (repetitions expanded)");
}

uint32_t Parser::class_of(bool negated, std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  }
  const auto [it, inserted] = class_ids_.try_emplace({negated, merged}, static_cast<uint32_t>(classes_.size()));
  if (!inserted) return it->second;
  CharClass c;
  c.negated = negated;
  c.first = static_cast<uint32_t>(ranges_.size());
  c.count = static_cast<uint32_t>(merged.size());
  for (const Range& r : merged)
    for (uint32_t cp = r.lo; cp <= std::min(r.hi, 127u); ++cp) c.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
  if (negated) c.ascii[0] = ~c.ascii[0], c.ascii[1] = ~c.ascii[1];
  ranges_.insert(ranges_.end(), merged.begin(), merged.end());
  classes_.push_back(c);
  return it->second;
}

std::unique_ptr<Grammar::Impl> Parser::build() {
  auto g = std::make_unique<Grammar::Impl>();
  g->limits = limits_;
  g->root = by_name_.at("root");
  for (const Draft& r : rules_) {
    g->first_alternative.push_back(static_cast<uint32_t>(g->alternatives.size()));
    bool begins = true;
    for (const Element& e : r.body) {
      if (begins) g->alternatives.push_back(static_cast<uint32_t>(g->elements.size()));
      g->elements.push_back(e);
      begins = e.kind == Kind::End;
    }
  }
  g->first_alternative.push_back(static_cast<uint32_t>(g->alternatives.size()));
  g->classes = std::move(classes_);
  g->ranges = std::move(ranges_);
  for (uint32_t i = 0; i < g->classes.size(); ++i)
    g->classes[i].empty = !g->intersects(i, 0, 0xD7FF) && !g->intersects(i, 0xE000, 0x10FFFF);
  refuse_left_recursion(*g);
  Engine engine(*g);
  const Engine::Cursor start = engine.start();
  if (!start.alive())
    fail(0, "the grammar's start already needs more than max_stacks (" + std::to_string(limits_.max_stacks) +
                ") parse stacks");
  g->start = engine.save(start);
  return g;
}

// A rule that can reach itself without consuming a character would make
// the matcher push it forever. Which rules can match nothing (a worklist:
// each alternative of rules only waits for its rules to become nullable),
// then a cycle among "r can begin with s" edges.
void Parser::refuse_left_recursion(const Grammar::Impl& g) const {
  const size_t n = g.rules();
  std::vector<char> nullable(n, 0);
  std::vector<uint32_t> waiting(g.alternatives.size(), 0), done;
  std::vector<std::vector<uint32_t>> waiters(n);  // rule → alternatives waiting for it (once per occurrence)
  std::vector<uint32_t> rule_of(g.alternatives.size());
  const auto becomes_nullable = [&](uint32_t r) {
    if (!nullable[r]) done.push_back(r);
    nullable[r] = 1;
  };
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t k = g.first_alternative[r]; k < g.first_alternative[r + 1]; ++k) {
      rule_of[k] = r;
      uint32_t refs = 0;
      bool consumes = false;
      for (uint32_t p = g.alternatives[k]; g.elements[p].kind != Kind::End; ++p) {
        if (g.elements[p].kind == Kind::Class) {
          consumes = true;
        } else {
          waiters[g.elements[p].value].push_back(k);
          ++refs;
        }
      }
      if (consumes) {
        waiting[k] = UINT32_MAX;
      } else if ((waiting[k] = refs) == 0) {
        becomes_nullable(r);
      }
    }
  for (size_t i = 0; i < done.size(); ++i)
    for (uint32_t k : waiters[done[i]])
      if (waiting[k] != UINT32_MAX && --waiting[k] == 0) becomes_nullable(rule_of[k]);

  std::vector<std::vector<uint32_t>> begins(n);  // r → the rules it can begin with
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t k = g.first_alternative[r]; k < g.first_alternative[r + 1]; ++k)
      for (uint32_t p = g.alternatives[k]; g.elements[p].kind == Kind::Rule; ++p) {
        begins[r].push_back(g.elements[p].value);
        if (!nullable[g.elements[p].value]) break;
      }

  // Depth first, without recursion; a rule met again while it is on the
  // path closes a cycle.
  std::vector<uint8_t> state(n, 0);  // 0 unseen, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;  // rule, next edge
  std::vector<uint32_t> cycle;
  for (uint32_t s = 0; s < n && cycle.empty(); ++s) {
    if (state[s]) continue;
    path.push_back({s, 0});
    state[s] = 1;
    while (!path.empty() && cycle.empty()) {
      auto& [r, next] = path.back();
      if (next == begins[r].size()) {
        state[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t t = begins[r][next++];
      if (state[t] == 1) {
        size_t i = path.size();
        while (path[i - 1].first != t) --i;
        for (--i; i < path.size(); ++i) cycle.push_back(path[i].first);
      } else if (state[t] == 0) {
        state[t] = 1;
        path.push_back({t, 0});
      }
    }
  }
  if (cycle.empty()) return;

  // A cycle of a repetition's own rules alone: it repeats what can match nothing.
  const bool written = std::any_of(cycle.begin(), cycle.end(), [&](uint32_t r) { return !rules_[r].name.empty(); });
  if (!written)
    for (uint32_t r : cycle)
      if (rules_[r].star != kNone)
        fail(rules_[r].star, "'" + std::string(rules_[r].op.substr(0, 32)) + "' repeats what can match nothing: rule " +
                                 quoted(rules_[rules_[r].owner].name) +
                                 " would loop without consuming a character (left recursion)");
  // Else the rules as written, from the one defined first.
  std::vector<uint32_t> named;
  for (uint32_t r : cycle)
    if (named.empty() || named.back() != rules_[r].owner) named.push_back(rules_[r].owner);
  while (named.size() > 1 && named.back() == named.front()) named.pop_back();
  const auto first = std::min_element(named.begin(), named.end(),
                                      [&](uint32_t a, uint32_t b) { return rules_[a].defined < rules_[b].defined; });
  std::rotate(named.begin(), first, named.end());
  std::string chain;
  for (uint32_t r : named) chain += std::string(rules_[r].name.substr(0, 64)) + " → ";
  chain += std::string(rules_[named.front()].name.substr(0, 64));
  fail(rules_[named.front()].defined, "rule " + quoted(rules_[named.front()].name) + " is left-recursive: " + chain +
                                          " can happen without consuming a character");
}

}  // namespace

std::shared_ptr<const Grammar> Grammar::parse(std::string_view gbnf, const std::string& name, const Limits& limits) {
  return std::make_shared<const Grammar>(Parser(gbnf, name, limits).parse());
}

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;
size_t Grammar::rules() const { return impl_->rules(); }
const Limits& Grammar::limits() const { return impl_->limits; }

}  // namespace lathe::grammar
