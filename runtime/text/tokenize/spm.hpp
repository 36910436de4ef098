// SentencePiece's BPE encoding, for vocabularies that come as pieces with
// scores and types (GGUF tokenizer.ggml.model "llama"): the text is
// normalized (spaces spelled "▁", a "▁" in front), split into characters
// with user-defined pieces kept whole, and the adjacent pair whose merged
// piece scores highest is merged first. Pieces of type UNUSED are split back
// into the pair that formed them, a character outside the vocabulary becomes
// its <0xXX> byte pieces, or else one unk for a run of them — all as
// libsentencepiece's bpe_model.cc and SentencePieceProcessor::Encode do.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/text/tokenize/merge.hpp"
#include "runtime/text/tokenize/tokenizer_data.hpp"

namespace lathe::text {

// Numbered as sentencepiece_model.proto and GGUF's token_type number them.
enum class PieceType : uint8_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct SpmPiece {
  std::string text;
  float score = 0;
  PieceType type = PieceType::Normal;
};

struct SpmOptions {
  bool add_dummy_prefix = true;           // "▁" in front of every text
  bool remove_extra_whitespaces = false;  // trim spaces and squeeze runs of them
};

class SpmModel {
 public:
  // Throws std::invalid_argument naming a piece defined twice.
  SpmModel(const std::vector<SpmPiece>& pieces, SpmOptions options);

  void encode(std::string_view text, std::vector<int32_t>& out) const;
  std::string normalize(std::string_view text) const;

 private:
  int32_t piece_to_id(std::string_view piece) const;  // unk (or -1) when absent
  void resegment(std::string_view piece,
                 const std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>>& rev,
                 std::vector<std::pair<std::string_view, int32_t>>& out) const;

  StringMap pieces_;    // normal, user-defined and unused pieces: those merges may form
  StringMap reserved_;  // control, unknown and byte pieces
  std::vector<float> scores_;
  std::vector<PieceType> types_;
  std::array<std::vector<std::string>, 256> user_defined_;  // by first byte, longest first
  int32_t unk_ = -1;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_;
  SpmOptions options_;
};

class SpmEncoder final : public detail::TextEncoder {
 public:
  explicit SpmEncoder(SpmModel model) : model_(std::move(model)) {}
  // Every piece of text gets its own dummy prefix, as it would from
  // libsentencepiece (and llama.cpp, after a special token).
  void encode(std::string_view text, bool, std::vector<int32_t>& out) const override { model_.encode(text, out); }

 private:
  SpmModel model_;
};

}  // namespace lathe::text
