// UTF-8 helpers for the tokenizers. Tokenizer input is untrusted: nothing
// here assumes valid UTF-8, and an invalid byte is always a unit of its own.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lathe::text {

// Length (1–4) of the well-formed UTF-8 sequence that starts at s[i], or 0
// when none does there (a stray continuation byte, an overlong form, a
// surrogate, a code point above U+10FFFF, a truncated sequence).
size_t utf8_sequence_length(std::string_view s, size_t i);

// The unit that starts at s[i]: a whole character, or 1 for a byte that
// starts none. Never 0 when i < s.size().
inline size_t utf8_unit_length(std::string_view s, size_t i) {
  const size_t n = utf8_sequence_length(s, i);
  return n == 0 ? 1 : n;
}

bool is_valid_utf8(std::string_view s);

// The code point of the valid sequence of length `len` at s[i].
char32_t utf8_decode(std::string_view s, size_t i, size_t len);
void utf8_append(std::string& out, char32_t cp);

// How many leading bytes of `s` can be shown now: all of them except a
// trailing sequence that is still incomplete but may yet become a valid
// character. Streaming decoders hold that tail back until the next token.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace lathe::text
