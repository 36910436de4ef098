// UTF-8 a byte at a time, for the grammar's parser and its matcher: a token
// may end inside a code point (byte-level BPE splits them), so the matcher
// keeps the bytes of an unfinished one and asks which code points they may
// still become. Well-formed sequences only (Unicode's table 3-7): no
// overlong forms, no surrogates, nothing above U+10FFFF.
//
// (runtime/text/tokenize/utf8.hpp decodes whole strings for the tokenizers;
// the matcher needs the unfinished state, and lathe_grammar does not link
// lathe_text.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lathe::grammar::utf8 {

// The bytes of a code point begun and not finished, packed: byte i in bits
// 8i..8i+7 (at most 3), their count in bits 24..31; 0 when none.
using Partial = uint32_t;

// Length (1–4) of the sequence `lead` starts; 0 for a byte that starts none
// (a continuation byte, C0, C1, F5–FF).
inline int length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

inline int count(Partial p) { return static_cast<int>(p >> 24); }
inline uint8_t lead(Partial p) { return static_cast<uint8_t>(p & 0xFF); }

// A sequence begun by `lead_byte` (length(lead_byte) >= 2).
inline Partial begin(uint8_t lead_byte) { return (uint32_t{1} << 24) | lead_byte; }

// Whether `byte` may come next after the bytes of `p`.
inline bool follows(Partial p, uint8_t byte) {
  if (byte < 0x80 || byte > 0xBF) return false;
  if (count(p) != 1) return true;
  switch (lead(p)) {
    case 0xE0: return byte >= 0xA0;  // else overlong
    case 0xED: return byte <= 0x9F;  // else a surrogate
    case 0xF0: return byte >= 0x90;  // else overlong
    case 0xF4: return byte <= 0x8F;  // else above U+10FFFF
    default: return true;
  }
}

// Whether one more byte finishes the code point.
inline bool last(Partial p) { return count(p) + 1 == length(lead(p)); }

// `p` with `byte` appended (follows(p, byte) holds, last(p) does not).
inline Partial add(Partial p, uint8_t byte) {
  const int n = count(p);
  return ((p & 0xFFFFFF) | (uint32_t{byte} << (8 * n))) | (static_cast<uint32_t>(n + 1) << 24);
}

// The bits the bytes of `p` carry, the lead's and the continuations'.
inline uint32_t value(Partial p) {
  const int n = count(p), len = length(lead(p));
  uint32_t v = lead(p) & (0x7Fu >> len);
  for (int i = 1; i < n; ++i) v = (v << 6) | ((p >> (8 * i)) & 0x3F);
  return v;
}

// The code point `byte` finishes (follows(p, byte) and last(p) hold).
inline uint32_t finish(Partial p, uint8_t byte) { return (value(p) << 6) | (byte & 0x3F); }

// What follows `byte` after `p` (0: between code points): the bytes of the
// code point unfinished, 0 when it ends one, -1 when it breaks UTF-8.
inline int64_t next(Partial p, uint8_t byte) {
  if (p == 0) return byte < 0x80 ? 0 : length(byte) >= 2 ? int64_t{begin(byte)} : -1;
  if (!follows(p, byte)) return -1;
  return last(p) ? 0 : int64_t{add(p, byte)};
}

// The well-formed sequence at s[i…]: its code point and length (0 when
// none starts there).
struct Decoded {
  uint32_t cp = 0;
  size_t length = 0;
};
inline Decoded decode(std::string_view s, size_t i) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) return {c, 1};
  if (length(c) == 0) return {};
  for (Partial p = begin(c); ++i < s.size();) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if (!follows(p, b)) break;
    if (last(p)) return {finish(p, b), static_cast<size_t>(length(c))};
    p = add(p, b);
  }
  return {};
}

// The code points an unfinished `p` may still become: [lo, hi], every one
// of them well formed.
struct Interval {
  uint32_t lo, hi;
};
inline Interval interval(Partial p) {
  const int remaining = length(lead(p)) - count(p);
  Interval r{value(p) << (6 * remaining), 0};
  r.hi = r.lo | ((uint32_t{1} << (6 * remaining)) - 1);
  if (count(p) == 1) {  // the second byte's bounds (follows) are the interval's
    r.lo = std::max(r.lo, remaining == 2 ? 0x800u : remaining == 3 ? 0x10000u : 0x80u);
    r.hi = std::min(r.hi, lead(p) == 0xED ? 0xD7FFu : 0x10FFFFu);
  }
  return r;
}

}  // namespace lathe::grammar::utf8
