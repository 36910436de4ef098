// libFuzzer target for an image part's URL (runtime/serve/data_url.cpp):
// any bytes in, as the URL of a chat message's image_url part, must either
// parse to a payload of at most the bound, whose media type is empty or a
// lower-case type/subtype, and which base64_encode writes back to a URL
// that parses to the same bytes; or throw Error(InvalidArgument) whose
// message holds no control byte (it never echoes the input raw). A crash,
// a sanitizer report, a hang, any other exception or a broken promise is a
// finding.
//
// Seeds: tests/fuzz/corpus/data_url/.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/serve/data_url.hpp"

using lathe::fuzz::finding;

void lathe::fuzz::data_url(const uint8_t* data, size_t size) {
  constexpr size_t kMax = 4096;
  const std::string_view url(reinterpret_cast<const char*>(data), size);
  try {
    const serve::DataUrl parsed = serve::parse_data_url(url, kMax);
    if (parsed.bytes.size() > kMax) finding("a payload over the bound");
    if (parsed.bytes.empty()) finding("an empty payload accepted");
    const std::string& type = parsed.media_type;
    if (!type.empty() && (type.find('/') == std::string::npos ||
                          std::any_of(type.begin(), type.end(), [](char c) { return c >= 'A' && c <= 'Z'; })))
      finding("a media type that is not a lower-case type/subtype");
    const std::string again =
        "data:" + type + ";base64," + serve::base64_encode(std::as_bytes(std::span(parsed.bytes)));
    if (serve::parse_data_url(again, kMax).bytes != parsed.bytes) finding("base64_encode does not round-trip");
  } catch (const lathe::Error& e) {
    if (e.kind() != lathe::ErrorKind::InvalidArgument) finding("an error that is not InvalidArgument");
    const std::string_view message = e.what();
    if (std::any_of(message.begin(), message.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      finding("a message with a control byte (the input echoed raw)");
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::data_url)
