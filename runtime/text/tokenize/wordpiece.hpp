// Hugging Face's WordPiece model (BERT, MiniLM, bge: model.type "WordPiece"
// in tokenizer.json). A word is cut greedily from the left, each time into
// the longest piece of the vocabulary, pieces after the first spelled with
// the continuing prefix ("##ing"). A word that cannot be cut all the way, or
// that is longer than max_chars characters, is one unk token, whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenize/merge.hpp"

namespace lathe::text {

struct WordPieceOptions {
  std::string continuing_prefix = "##";
  // Before a word's first piece: llama.cpp's GGUF BERT vocabularies spell
  // word starts "▁word" and continuations bare ("ing"), with prefix "▁" and
  // continuing_prefix "" (its converter's phantom space).
  std::string word_prefix;
  size_t max_chars = 100;  // max_input_chars_per_word
  int32_t unk = 0;         // the unk token's id
};

class WordPieceModel {
 public:
  WordPieceModel(StringMap vocab, WordPieceOptions options) : vocab_(std::move(vocab)), options_(std::move(options)) {}

  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  StringMap vocab_;
  WordPieceOptions options_;
};

}  // namespace lathe::text
