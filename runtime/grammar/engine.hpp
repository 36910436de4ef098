// The matcher's machinery, shared by Matcher::accept and Vocabulary::allowed
// so that both decide a byte the same way.
//
// A parse stack is a list of positions (rules.hpp): the top one is the
// element the next character must match, the ones below where each
// enclosing rule goes on once the one above it is done. Stacks are kept
// normalized: every top is a character class, or the stack is empty (the
// root is complete). Stacks are nodes {position, parent} interned in an
// arena, so that equal stacks are one id, pushing is one lookup and
// stacks share their bottoms; a set of stacks is a sorted list of ids,
// interned too. A step from a set on a code point depends only on which
// tops match it (the stack after a match does not depend on the code
// point), so the engine caches steps by (set, which tops matched), and
// steps from a set on a byte in a table: a walk over a vocabulary's trie
// computes each distinct step once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/rules.hpp"
#include "runtime/grammar/utf8.hpp"

namespace lathe::grammar {

// The bottom of every stack, and the top of an empty one.
inline constexpr uint32_t kBottom = UINT32_MAX;

struct Matcher::State {
  struct Node {
    uint32_t position, parent;  // parent: an index into nodes (before this one), or kBottom
  };
  std::vector<Node> nodes;
  std::vector<uint32_t> tops;  // each stack's top (an index into nodes, or kBottom for an empty stack)
  utf8::Partial partial = 0;   // the bytes of a code point the text left unfinished
};

// Lists of uint32 interned: equal lists, one id (0, 1, 2, … in order of
// arrival).
class Interner {
 public:
  uint32_t intern(std::span<const uint32_t> key);
  std::span<const uint32_t> operator[](uint32_t id) const {
    return {data_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
  }
  uint32_t size() const { return static_cast<uint32_t>(offsets_.size() - 1); }

 private:
  std::vector<uint32_t> data_;
  std::vector<uint32_t> offsets_{0};
  std::vector<uint64_t> hashes_;
  std::vector<uint32_t> slots_;  // ids by hash (open addressing), kBottom where free
};

class Engine {
 public:
  // Where a text has led: a set of stacks (-1 when none survived) and the
  // bytes of an unfinished code point.
  struct Cursor {
    int32_t set = -1;
    utf8::Partial partial = 0;
    bool alive() const { return set >= 0; }
  };

  explicit Engine(const Grammar::Impl& grammar);

  // The stacks before any text (dead when they pass max_stacks).
  Cursor start();
  Cursor load(const Matcher::State& state);
  std::shared_ptr<const Matcher::State> save(Cursor cursor);

  // The cursor after one more byte (dead when no stack takes it, the byte
  // breaks UTF-8, or the stacks would pass max_stacks).
  Cursor step(Cursor cursor, uint8_t byte) {
    if (!cursor.alive()) return cursor;
    if (cursor.partial == 0) {
      const size_t slot = static_cast<size_t>(cursor.set) * 256 + byte;
      int32_t next = table_[slot];
      if (next == kUnknown) table_[slot] = next = first_byte(cursor.set, byte);
      if (next < 0) return {};
      return byte < 0x80 ? Cursor{next, 0} : Cursor{cursor.set, utf8::begin(byte)};
    }
    return continuation(cursor, byte);
  }

  std::span<const uint32_t> stacks(int32_t set) const { return sets_[static_cast<uint32_t>(set)]; }

  // Where steps from a set on many bytes all lead, or kApart when they do
  // not all lead to one set (-1, dead, is one): on the ASCII bytes of
  // `ascii` (bit b), and on every well-formed non-ASCII code point (a
  // sequence of them cut short is then alive too). Inside a JSON string:
  // nearly every byte, back to the same set.
  static constexpr int32_t kApart = -3;
  int32_t common_step(int32_t set, const uint64_t ascii[2]);
  int32_t non_ascii_step(int32_t set);

 private:
  static constexpr int32_t kUnknown = -2;

  uint32_t node(uint32_t position, uint32_t parent) {
    const uint32_t key[2] = {position, parent};
    return nodes_.intern(key);
  }
  uint32_t position(uint32_t node) const { return nodes_[node][0]; }
  uint32_t parent(uint32_t node) const { return nodes_[node][1]; }

  int32_t first_byte(int32_t set, uint8_t byte);
  Cursor continuation(Cursor cursor, uint8_t byte);
  int32_t advance(int32_t set, uint32_t cp);
  bool viable(int32_t set, utf8::Interval interval) const;

  // One step's closure: begin(), then close() each stack the step leaves
  // (pushing rules until every top is a class), then finish() interns the
  // set (-1 when empty or past the bounds).
  void begin();
  void close(uint32_t stack);
  void after_match(uint32_t top);
  int32_t finish();

  const Grammar::Impl& grammar_;
  Interner nodes_;  // {position, parent}
  Interner sets_;   // sorted tops
  std::vector<int32_t> table_;  // [set][byte]: a step's set, a lead byte's own set, -1 dead, kUnknown
  struct MaskKey {
    int32_t set;
    uint64_t mask;
    bool operator==(const MaskKey&) const = default;
  };
  struct MaskHash {
    size_t operator()(const MaskKey& k) const { return (k.mask * 0x9E3779B97F4A7C15ull) ^ static_cast<size_t>(k.set); }
  };
  std::unordered_map<MaskKey, int32_t, MaskHash> by_mask_;  // (set, tops that matched) → the step's set
  std::vector<int32_t> non_ascii_;  // by set: non_ascii_step, or kUnknown
  // The closure's scratch.
  std::vector<uint32_t> seen_;  // node → the stamp of the closure that reached it
  uint32_t stamp_ = 0;
  bool bottom_seen_ = false, over_ = false;
  size_t work_ = 0;
  std::vector<uint32_t> todo_, out_, tops_;
};

}  // namespace lathe::grammar
