// Hugging Face's Unigram model (T5, XLM-RoBERTa, ALBERT: model.type
// "Unigram" in tokenizer.json): the segmentation of a word into pieces
// whose scores (log probabilities) sum highest, found by Viterbi as
// tokenizers' Unigram::encode_optimized does. A character no piece of one
// character covers may still be covered by a longer piece; where it is not,
// it becomes unk with the score min_score - 10. Adjacent unk characters fuse
// into one unk token, or with byte_fallback into the <0xXX> pieces of their
// bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenize/merge.hpp"

namespace lathe::text {

struct UnigramPiece {
  std::string text;
  double score = 0;
};

class UnigramModel {
 public:
  // Ids are the pieces' indices. A piece spelled twice is found by its last
  // id, as in tokenizers' token map. Without unk, unknown characters that no
  // byte pieces spell are dropped (tokenizers fails to encode them).
  UnigramModel(std::vector<UnigramPiece> pieces, std::optional<int32_t> unk, bool byte_fallback);

  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  StringMap ids_;
  std::vector<double> scores_;  // by id
  size_t longest_ = 0;          // bytes of the longest piece
  double unk_score_ = 0;
  std::optional<int32_t> unk_;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_;  // <0xXX> pieces, -1 where absent
};

}  // namespace lathe::text
