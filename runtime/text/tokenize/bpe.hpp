// Hugging Face's BPE model: a vocabulary, merges ranked by their order, and
// the options of model.type "BPE" in tokenizer.json. Words come from the
// pre-tokenizer (byte-level spelled for GPT-2-style vocabularies, "▁"-spelled
// for SentencePiece-converted ones).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/text/tokenize/merge.hpp"

namespace lathe::text {

struct BpeMerge {
  int32_t left, right, merged;
};

struct BpeOptions {
  bool ignore_merges = false;  // a word that is a token is that token (Llama 3)
  bool byte_fallback = false;  // a character outside the vocabulary becomes its <0xXX> tokens
  bool fuse_unk = false;       // a run of unknown characters is one unk token
  std::optional<int32_t> unk;  // without it, unknown characters are dropped
};

class BpeModel {
 public:
  // `merges` in rank order; a repeated pair keeps its first rank.
  BpeModel(StringMap vocab, const std::vector<BpeMerge>& merges, BpeOptions options);

  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> find(std::string_view token) const;

 private:
  StringMap vocab_;
  std::unordered_map<uint64_t, std::pair<uint32_t, int32_t>> merges_;  // left << 32 | right → (rank, merged)
  std::array<int32_t, 256> byte_ids_;                                  // <0xXX> tokens, -1 where absent
  BpeOptions options_;
};

}  // namespace lathe::text
