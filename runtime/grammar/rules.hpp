// A parsed grammar as the matcher walks it (Grammar::Impl): every rule's
// alternatives as sequences of elements in one array, each sequence ended
// by an End element, so that a position (an index into the array) is a
// place inside an alternative and position + 1 what follows it.
// Repetitions and groups are rules of their own here (gbnf.cpp makes them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/grammar/grammar.hpp"

namespace lathe::grammar {

enum class Kind : uint8_t {
  End,    // the end of an alternative
  Class,  // one code point of classes[value] (a literal's character too)
  Rule,   // rules[value]
};

struct Element {
  Kind kind;
  uint32_t value;
};

// Inclusive.
struct Range {
  uint32_t lo, hi;
  auto operator<=>(const Range&) const = default;
};

// A set of code points: the union of ranges[first, first + count) (sorted,
// disjoint, not adjacent), or its complement when negated. `.` is the
// complement of nothing.
struct CharClass {
  bool negated = false;
  uint32_t first = 0, count = 0;
  uint64_t ascii[2] = {0, 0};  // bit c: whether code point c < 128 is in the set
  bool empty = false;          // no well-formed code point is in it (a class of surrogates)
};

struct Grammar::Impl {
  std::vector<Element> elements;
  // Rule r's alternatives begin at alternatives[first_alternative[r] ..
  // first_alternative[r + 1]) (positions in elements).
  std::vector<uint32_t> alternatives;
  std::vector<uint32_t> first_alternative;
  std::vector<CharClass> classes;
  std::vector<Range> ranges;
  uint32_t root = 0;
  Limits limits;
  // The stacks before any text (the matcher's start, made once).
  std::shared_ptr<const Matcher::State> start;

  size_t rules() const { return first_alternative.size() - 1; }

  bool matches(uint32_t cls, uint32_t cp) const {
    const CharClass& c = classes[cls];
    if (cp < 128) return (c.ascii[cp >> 6] >> (cp & 63)) & 1;
    return contains(c, cp) != c.negated;
  }

  // Whether some code point of [lo, hi] is in class `cls`, and whether all
  // of them are.
  bool intersects(uint32_t cls, uint32_t lo, uint32_t hi) const;
  bool covers(uint32_t cls, uint32_t lo, uint32_t hi) const;

  // Whether the ranges of `c` hold `cp` (negation aside).
  bool contains(const CharClass& c, uint32_t cp) const;
};

}  // namespace lathe::grammar
