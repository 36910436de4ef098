// The "Precompiled" normalizer of SentencePiece-converted tokenizer.json
// files (T5, XLM-RoBERTa, ALBERT): SentencePiece's precompiled_charsmap, a
// Darts double-array trie over UTF-8 keys whose values are offsets into a
// blob of NUL-terminated replacements. Laid out as
//   u32 (little-endian) trie_bytes | u32 units[trie_bytes / 4] | replacements
// A unit holds a label (bits 0–7, bit 31 set on value units), a has-leaf
// flag (bit 8), an offset to its children (bits 10–31, shifted by 8 more
// when bit 9 is set), or in a value unit the value (bits 0–30).
//
// Normalization follows tokenizers' Precompiled normalizer, odd as it is:
// text goes by extended grapheme clusters; a cluster shorter than 6 bytes
// that any key prefixes is replaced whole by the value of the shortest such
// key; otherwise each character is looked up alone the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::text {

class PrecompiledCharsmap {
 public:
  // `blob`: the decoded precompiled_charsmap. Throws std::invalid_argument
  // when it is shorter than its trie or its replacements are not UTF-8.
  explicit PrecompiledCharsmap(std::string_view blob);

  // Valid UTF-8 runs are normalized; invalid bytes stay as they are.
  std::string normalize(std::string_view text) const;
  // The replacement for the shortest key that prefixes `chunk`, if any.
  std::optional<std::string_view> transform(std::string_view chunk) const;

 private:
  std::vector<uint32_t> units_;
  std::string replacements_;
};

// Standard base64 (RFC 4648, '=' padding); nullopt when `text` is not.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace lathe::text
