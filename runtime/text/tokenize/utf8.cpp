#include "runtime/text/tokenize/utf8.hpp"

#include <cstdint>

namespace lathe::text {

namespace {

// The lead byte's sequence length and the range its first continuation byte
// must fall in (the narrow ranges exclude overlongs, surrogates and code
// points above U+10FFFF), as in the Unicode standard's table 3-7.
struct Lead {
  uint8_t length = 0;
  uint8_t lo = 0x80, hi = 0xBF;
};

Lead lead_of(uint8_t b) {
  if (b < 0x80) return {1};
  if (b >= 0xC2 && b <= 0xDF) return {2};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b >= 0xE1 && b <= 0xEC) return {3};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xEE && b <= 0xEF) return {3};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0};
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const Lead lead = lead_of(static_cast<uint8_t>(s[i]));
  if (lead.length == 0 || i + lead.length > s.size()) return 0;
  for (size_t k = 1; k < lead.length; ++k) {
    const auto c = static_cast<uint8_t>(s[i + k]);
    const uint8_t lo = k == 1 ? lead.lo : 0x80, hi = k == 1 ? lead.hi : 0xBF;
    if (c < lo || c > hi) return 0;
  }
  return lead.length;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

char32_t utf8_decode(std::string_view s, size_t i, size_t len) {
  const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<uint8_t>(s[i + k])); };
  switch (len) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last three bytes can belong to an unfinished character.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const auto b = static_cast<uint8_t>(s[start]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const Lead lead = lead_of(b);
    if (lead.length <= back) return n;  // complete, ASCII, or an invalid byte
    for (size_t k = 1; k < back; ++k) {
      const auto c = static_cast<uint8_t>(s[start + k]);
      const uint8_t lo = k == 1 ? lead.lo : 0x80, hi = k == 1 ? lead.hi : 0xBF;
      if (c < lo || c > hi) return n;  // can never complete: show it as it is
    }
    return start;
  }
  return n;
}

}  // namespace lathe::text
