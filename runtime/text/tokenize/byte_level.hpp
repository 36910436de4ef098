// GPT-2's byte-level alphabet: every byte is spelled as one printable
// character so that a BPE vocabulary of strings covers arbitrary bytes.
// Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the 68
// others (controls, space, DEL, 0x80..0xA0, the soft hyphen 0xAD) take
// U+0100 upward in byte order, so ' ' is "Ġ" (U+0120) and '\n' is "Ċ".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::text {

// The character (as UTF-8) that spells `byte`.
const std::string& byte_level_char(uint8_t byte);
// The byte that code point `cp` spells, if it belongs to the alphabet.
std::optional<uint8_t> byte_level_byte(char32_t cp);

// Every byte of `bytes` spelled in the alphabet.
std::string byte_level_encode(std::string_view bytes);
// The bytes a byte-level token text spells. A character outside the alphabet
// (tokens that were never byte-level, such as "<|endoftext|>" written by hand)
// stands for its own UTF-8 bytes.
std::string byte_level_decode(std::string_view text);

}  // namespace lathe::text
