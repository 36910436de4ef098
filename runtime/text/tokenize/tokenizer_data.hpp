// What every Tokenizer holds, whatever it was loaded from; the loaders
// (hf.cpp, sentencepiece.cpp, gguf_vocab.cpp) fill it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::text::detail {

enum class TokenKind : uint8_t {
  Normal,
  Special,  // control tokens: matched whole in text (when parsing specials), skippable in decode
  Added,    // non-special added / user-defined tokens: matched whole in text
  Byte,     // <0xXX>: one raw byte
  Unknown,
  Unused,  // ids no token has (holes), and SentencePiece UNUSED pieces
};

struct Token {
  std::string text;   // as the vocabulary spells it
  std::string bytes;  // what it decodes to
  TokenKind kind = TokenKind::Unused;
};

// Turns text that holds no added token into ids.
class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  // at_start: the text begins the input (Metaspace's prepend_scheme "first").
  virtual void encode(std::string_view text, bool at_start, std::vector<int32_t>& out) const = 0;
};

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false, rstrip = false;  // also swallow the whitespace before / after
  bool single_word = false;             // only where no word character touches it
};

// A piece of the input: plain text, or one added token.
struct Fragment {
  std::string_view text;
  int32_t id = -1;  // the added token, or -1 for text
  bool at_start = false;
};

class AddedMatcher {
 public:
  AddedMatcher() = default;
  explicit AddedMatcher(std::vector<AddedToken> tokens);
  // Leftmost-longest matching, as Hugging Face's AddedVocabulary does.
  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  std::vector<AddedToken> tokens_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // indices into tokens_, longest first
};

struct TokenizerData {
  std::string description;
  std::vector<Token> tokens;  // by id
  AddedMatcher added;
  std::unique_ptr<const TextEncoder> encoder;
  std::vector<int32_t> prefix, suffix;  // what add_special adds
  std::optional<int32_t> bos, eos, pad;
  bool strip_leading_space = false;  // the first decoded token drops one leading ' '
  // WordPiece: a first decoded token spelled with this prefix ("##ing")
  // decodes as its text, prefix and all.
  std::string continuing_prefix;
};

// Fills tokens[].bytes for SentencePiece-style spellings: "▁" (or
// `replacement`) is a space, <0xXX> pieces of kind Byte one byte; other kinds
// keep their text.
void spell_spm_bytes(std::vector<Token>& tokens, std::string_view replacement);

// A serialized SentencePiece ModelProto's normalizer_spec flags (each true
// unless the model says otherwise).
struct SentencePieceNormalizer {
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
};
SentencePieceNormalizer sentencepiece_normalizer(std::string_view model_proto);
// Its pieces' types, in id order: SentencePiece's ModelProto numbering
// (NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6), which
// llama.cpp's token types share.
std::vector<int32_t> sentencepiece_piece_types(std::string_view model_proto);

}  // namespace lathe::text::detail
