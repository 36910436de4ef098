#include "runtime/text/tokenize/precompiled.hpp"

#include <utf8proc.h>

#include <stdexcept>

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

namespace {

uint32_t label(uint32_t unit) { return unit & ((1u << 31) | 0xFFu); }
bool has_leaf(uint32_t unit) { return (unit >> 8) & 1u; }
uint32_t value(uint32_t unit) { return unit & ((1u << 31) - 1); }
size_t offset(uint32_t unit) { return static_cast<size_t>(unit >> 10) << ((unit & (1u << 9)) >> 6); }

// tokenizers' Precompiled replaces a cluster whole only when it is this short.
constexpr size_t kWholeClusterBytes = 6;

}  // namespace

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob) {
  if (blob.size() < 4) throw std::invalid_argument("is shorter than its 4-byte header");
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(blob[i])); };
  const auto u32 = [&](size_t i) { return byte(i) | byte(i + 1) << 8 | byte(i + 2) << 16 | byte(i + 3) << 24; };
  const size_t count = u32(0) / 4;
  if (count > (blob.size() - 4) / 4) throw std::invalid_argument("is shorter than the trie its header announces");
  units_.reserve(count);
  for (size_t k = 0; k < count; ++k) units_.push_back(u32(4 + 4 * k));
  replacements_ = std::string(blob.substr(4 + 4 * count));
  if (!is_valid_utf8(replacements_)) throw std::invalid_argument("has replacements that are not UTF-8");
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  // Darts' common prefix search, stopped at the first (shortest) key. An
  // index outside the trie, which a well-formed charsmap never makes, ends
  // the search.
  if (units_.empty()) return std::nullopt;
  size_t pos = offset(units_[0]);
  for (const char ch : chunk) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == 0) break;
    pos ^= c;
    if (pos >= units_.size() || label(units_[pos]) != c) return std::nullopt;
    const uint32_t unit = units_[pos];
    pos ^= offset(unit);
    if (has_leaf(unit)) {
      if (pos >= units_.size()) return std::nullopt;
      const size_t at = value(units_[pos]);
      if (at >= replacements_.size()) return std::string_view();
      const size_t end = replacements_.find('\0', at);
      return std::string_view(replacements_).substr(at, end == std::string::npos ? end : end - at);
    }
  }
  return std::nullopt;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  // One extended grapheme cluster, [begin, end) of text.
  const auto cluster = [&](size_t begin, size_t end) {
    const std::string_view g = text.substr(begin, end - begin);
    if (g.size() < kWholeClusterBytes) {
      if (const auto r = transform(g)) {
        out += *r;
        return;
      }
    }
    for (size_t i = 0; i < g.size();) {
      const size_t n = utf8_unit_length(g, i);
      const std::string_view c = g.substr(i, n);
      const auto r = transform(c);
      out += r ? *r : c;
      i += n;
    }
  };
  size_t begin = 0;  // of the cluster being read
  utf8proc_int32_t state = 0;
  char32_t previous = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) {  // an invalid byte ends the cluster and stays as it is
      if (i > begin) cluster(begin, i);
      out += text[i];
      begin = ++i;
      state = 0;
      continue;
    }
    const char32_t c = utf8_decode(text, i, n);
    if (i > begin && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                                      static_cast<utf8proc_int32_t>(c), &state)) {
      cluster(begin, i);
      begin = i;
    }
    previous = c;
    i += n;
  }
  if (text.size() > begin) cluster(begin, text.size());
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
    uint32_t group = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int d = k >= 4 - pad ? 0 : digit(text[i + k]);
      if (d < 0) return std::nullopt;
      group = group << 6 | static_cast<uint32_t>(d);
    }
    out += static_cast<char>(group >> 16);
    if (pad < 2) out += static_cast<char>(group >> 8 & 0xFF);
    if (pad < 1) out += static_cast<char>(group & 0xFF);
  }
  return out;
}

}  // namespace lathe::text
