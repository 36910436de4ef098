#include "runtime/serve/data_url.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/precompiled.hpp"

namespace lathe::serve {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorKind::InvalidArgument, message); }

bool token_byte(unsigned char c) {  // RFC 2045's token characters
  return c > 0x20 && c < 0x7f && std::string_view("()<>@,;:\\\"/[]?=").find(static_cast<char>(c)) == std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

DataUrl parse_data_url(std::string_view url, size_t max_bytes) {
  constexpr std::string_view kScheme = "data:";
  if (url.size() < kScheme.size() || lower(url.substr(0, kScheme.size())) != kScheme) {
    const size_t colon = url.find(':');
    const std::string scheme = colon == std::string_view::npos || colon > 16 ? std::string() : lower(url.substr(0, colon));
    const bool safe = std::all_of(scheme.begin(), scheme.end(),
                                  [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '-' || c == '.'; });
    refuse("only data: URLs of base64 images are taken (the server fetches nothing)" +
           (scheme.empty() || !safe ? std::string() : ", not " + scheme + ": URLs"));
  }
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) refuse("a data: URL needs a ',' before its payload");
  const std::string_view header = url.substr(kScheme.size(), comma - kScheme.size());
  constexpr std::string_view kBase64 = ";base64";
  if (header.size() < kBase64.size() || lower(header.substr(header.size() - kBase64.size())) != kBase64)
    refuse("a data: URL's payload must be base64 (\"data:image/png;base64,…\")");
  // The media type: type/subtype, then ;name=value parameters.
  const std::string_view params = header.substr(0, header.size() - kBase64.size());
  DataUrl out;
  size_t at = 0;
  for (bool first = true; at < params.size() || first; first = false) {
    const size_t end = std::min(params.find(';', at), params.size());
    const std::string_view piece = params.substr(at, end - at);
    const auto valid = [](std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), token_byte); };
    if (first) {
      const size_t slash = piece.find('/');
      if (!piece.empty() && (slash == std::string_view::npos || !valid(piece.substr(0, slash)) ||
                             !valid(piece.substr(slash + 1))))
        refuse("a data: URL's media type must be type/subtype (\"image/png\")");
      out.media_type = lower(piece);
    } else {
      const size_t eq = piece.find('=');
      if (eq == std::string_view::npos || !valid(piece.substr(0, eq)) || !valid(piece.substr(eq + 1)))
        refuse("a data: URL's parameters must be ;name=value");
    }
    if (end == params.size()) break;
    at = end + 1;
  }
  // The payload: its size (and so the decoded size) bounded first.
  const std::string_view payload = url.substr(comma + 1);
  if (payload.empty()) refuse("a data: URL's payload is empty");
  if (payload.size() % 4 != 0) refuse("a data: URL's base64 payload must be a multiple of 4 characters long");
  const size_t pad = payload.back() != '=' ? 0 : payload[payload.size() - 2] == '=' ? 2 : 1;
  const size_t decoded = payload.size() / 4 * 3 - pad;
  if (decoded > max_bytes)
    refuse("a data: URL's payload is " + std::to_string(decoded) + " bytes, over the " + std::to_string(max_bytes) +
           " an image may have");
  const std::optional<std::string> bytes = text::base64_decode(payload);
  if (!bytes)
    refuse("a data: URL's payload is not base64 (A–Z, a–z, 0–9, + and /, with '=' padding only at its end)");
  out.bytes.assign(bytes->begin(), bytes->end());
  return out;
}

std::string base64_encode(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  text.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t at = 0; at < bytes.size(); at += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - at);
    uint32_t group = 0;
    for (size_t b = 0; b < 3; ++b) group = (group << 8) | (b < n ? std::to_integer<uint32_t>(bytes[at + b]) : 0u);
    for (size_t c = 0; c < 4; ++c) text.push_back(c <= n ? kDigits[(group >> (18 - 6 * c)) & 0x3F] : '=');
  }
  return text;
}

}  // namespace lathe::serve
