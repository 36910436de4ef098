// An image part's URL as the server takes it: a `data:` URL (RFC 2397)
// whose payload is base64, e.g. "data:image/png;base64,iVBORw0KGgo…". The
// server fetches nothing, so every other URL is refused. Untrusted input
// (tests/fuzz/data_url_fuzz.cpp): every bound is checked before the
// payload is decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::serve {

struct DataUrl {
  std::string media_type;      // "image/png", lower-cased; "" where the URL names none
  std::vector<uint8_t> bytes;  // the payload, decoded
};

// Reads `url`: "data:" (any case), a media type of the form type/subtype
// with optional ";name=value" parameters, then ";base64," and the standard
// base64 alphabet with its '=' padding (no line breaks, no URL-safe
// alphabet). Throws Error(InvalidArgument), its message saying what is
// wrong (never quoting more than the URL's first bytes), for another
// scheme, a payload not in base64, or one that would decode to more than
// `max_bytes`.
DataUrl parse_data_url(std::string_view url, size_t max_bytes);

// Standard base64 with '=' padding (an embedding's bytes, a test's image).
std::string base64_encode(std::span<const std::byte> bytes);

}  // namespace lathe::serve
