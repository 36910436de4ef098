// The merge loop both BPE flavours share. A word starts as a list of
// symbols (characters, or bytes that start none); the best adjacent pair is
// merged into one symbol again and again until no pair may merge. Hugging
// Face's BPE ranks pairs by their line in the merges list, SentencePiece's
// by the score of the merged piece; both break ties by the leftmost pair.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lathe::text {

// Hash maps from token text that a string_view can query without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct MergeSymbol {
  uint32_t begin = 0, end = 0;  // bytes [begin, end) of the word
  int32_t id = -1;              // token id; -1 when the symbol is no token
  int32_t prev = -1, next = -1;
  bool alive = true;
  bool frozen = false;  // never merged (SentencePiece's user-defined symbols)
};

struct MergeChoice {
  double priority;  // lower merges first
  int32_t id;       // the merged token
};

// Symbols of `word`, one per UTF-8 character (an invalid byte is one symbol),
// linked in order; ids are left at -1 for the caller to fill.
std::vector<MergeSymbol> character_symbols(std::string_view word);

// `choose(left, right)` returns the MergeChoice for a pair of live adjacent
// symbols, or nullopt when they do not merge. It is asked again about the new
// neighbours of every merged symbol.
template <typename Choose>
void merge_symbols(std::vector<MergeSymbol>& symbols, Choose&& choose) {
  struct Candidate {
    double priority;
    int32_t left, right;
    uint32_t right_end;  // a stale candidate's right symbol has grown or died
    int32_t id;
  };
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.priority > b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& l = symbols[left];
    const MergeSymbol& r = symbols[right];
    if (l.frozen || r.frozen) return;
    if (const std::optional<MergeChoice> c = choose(l, r)) queue.push({c->priority, left, right, r.end, c->id});
  };
  for (size_t i = 1; i < symbols.size(); ++i) consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    MergeSymbol& l = symbols[c.left];
    MergeSymbol& r = symbols[c.right];
    if (!l.alive || !r.alive || l.next != c.right || r.end != c.right_end) continue;
    l.end = r.end;
    l.id = c.id;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    r.alive = false;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
}

}  // namespace lathe::text
