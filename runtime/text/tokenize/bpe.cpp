#include "runtime/text/tokenize/bpe.hpp"

#include <cstdio>

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

std::vector<MergeSymbol> character_symbols(std::string_view word) {
  std::vector<MergeSymbol> symbols;
  symbols.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const size_t n = utf8_unit_length(word, i);
    MergeSymbol s;
    s.begin = static_cast<uint32_t>(i);
    s.end = static_cast<uint32_t>(i + n);
    s.prev = static_cast<int32_t>(symbols.size()) - 1;
    s.next = i + n < word.size() ? static_cast<int32_t>(symbols.size()) + 1 : -1;
    symbols.push_back(s);
    i += n;
  }
  return symbols;
}

namespace {
uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
}  // namespace

BpeModel::BpeModel(StringMap vocab, const std::vector<BpeMerge>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    merges_.try_emplace(pair_key(m.left, m.right), static_cast<uint32_t>(rank), m.merged);
  }
  byte_ids_.fill(-1);
  if (options_.byte_fallback) {
    for (unsigned b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (const auto id = find(name)) byte_ids_[b] = *id;
    }
  }
}

std::optional<int32_t> BpeModel::find(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = find(word)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<MergeSymbol> symbols = character_symbols(word);
  for (MergeSymbol& s : symbols) {
    if (const auto id = find(word.substr(s.begin, s.end - s.begin))) s.id = *id;
  }
  merge_symbols(symbols, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<MergeChoice> {
    if (l.id < 0 || r.id < 0) return std::nullopt;
    const auto it = merges_.find(pair_key(l.id, r.id));
    if (it == merges_.end()) return std::nullopt;
    return MergeChoice{static_cast<double>(it->second.first), it->second.second};
  });

  bool previous_unk = false;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const MergeSymbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      previous_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (uint32_t k = s.begin; k < s.end; ++k) all = all && byte_ids_[static_cast<uint8_t>(word[k])] >= 0;
      if (all) {
        for (uint32_t k = s.begin; k < s.end; ++k) out.push_back(byte_ids_[static_cast<uint8_t>(word[k])]);
        previous_unk = false;
        continue;
      }
    }
    if (!options_.unk) continue;
    if (!(options_.fuse_unk && previous_unk)) out.push_back(*options_.unk);
    previous_unk = true;
  }
}

}  // namespace lathe::text
