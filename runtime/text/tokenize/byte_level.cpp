#include "runtime/text/tokenize/byte_level.hpp"

#include <array>

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

namespace {

bool stands_for_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Table {
  std::array<std::string, 256> chars;
  std::array<int16_t, 0x100 + 68> bytes;  // code point → byte, -1 outside the alphabet
  Table() {
    bytes.fill(-1);
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      const char32_t cp = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
      utf8_append(chars[b], cp);
      bytes[cp] = static_cast<int16_t>(b);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const std::string& byte_level_char(uint8_t byte) { return table().chars[byte]; }

std::optional<uint8_t> byte_level_byte(char32_t cp) {
  if (cp >= table().bytes.size() || table().bytes[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(table().bytes[cp]);
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += byte_level_char(static_cast<uint8_t>(c));
  return out;
}

std::string byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      out += text[i++];
      continue;
    }
    if (const auto b = byte_level_byte(utf8_decode(text, i, n))) {
      out += static_cast<char>(*b);
    } else {
      out.append(text, i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace lathe::text
