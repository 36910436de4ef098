// An image part's URL (runtime/serve/data_url.hpp): data: URLs of base64
// in every form a client writes them, and each refusal saying what is wrong.
#include "runtime/serve/data_url.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/error.hpp"

using namespace lathe;
using namespace lathe::serve;

namespace {

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

std::string encode(std::string_view s) { return base64_encode(std::as_bytes(std::span(s.data(), s.size()))); }

}  // namespace

TEST_SUITE("serve") {

TEST_CASE("data URLs: base64 payloads of any length, the media type and its parameters") {
  CHECK(encode("") == "");
  CHECK(encode("f") == "Zg==");
  CHECK(encode("fo") == "Zm8=");
  CHECK(encode("foo") == "Zm9v");
  CHECK(encode("foobar") == "Zm9vYmFy");
  const std::vector<std::string> texts = {"f", "fo", "foo", "foob", "fooba", "foobar", std::string("\0\xff\x80", 3)};
  for (const std::string& text : texts) {
    CAPTURE(text);
    const DataUrl url = parse_data_url("data:image/png;base64," + encode(text), 100);
    CHECK(url.media_type == "image/png");
    CHECK(url.bytes == bytes_of(text));
  }
  CHECK(parse_data_url("DATA:Image/JPEG;charset=x;BASE64,Zm9v", 3).media_type == "image/jpeg");
  CHECK(parse_data_url("data:;base64,Zm9v", 3).media_type.empty());
  CHECK(parse_data_url("data:;base64,Zm9v", 3).bytes == bytes_of("foo"));
}

TEST_CASE("data URLs: every other URL and every malformed one refused, saying why") {
  const auto refusal = [](std::string_view url, size_t max = 1000) {
    try {
      parse_data_url(url, max);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal("https://example.com/cat.png") ==
        "only data: URLs of base64 images are taken (the server fetches nothing), not https: URLs");
  CHECK(refusal("file:///etc/passwd") ==
        "only data: URLs of base64 images are taken (the server fetches nothing), not file: URLs");
  CHECK(refusal("") == "only data: URLs of base64 images are taken (the server fetches nothing)");
  CHECK(refusal("da\x01ta:x") == "only data: URLs of base64 images are taken (the server fetches nothing)");
  CHECK(refusal("data:image/png;base64") == "a data: URL needs a ',' before its payload");
  CHECK(refusal("data:image/png,hello") == "a data: URL's payload must be base64 (\"data:image/png;base64,…\")");
  CHECK(refusal("data:image;base64,Zm9v") == "a data: URL's media type must be type/subtype (\"image/png\")");
  CHECK(refusal("data:image/png;x;base64,Zm9v") == "a data: URL's parameters must be ;name=value");
  CHECK(refusal("data:image/png;base64,") == "a data: URL's payload is empty");
  CHECK(refusal("data:image/png;base64,Zm9") == "a data: URL's base64 payload must be a multiple of 4 characters long");
  CHECK(refusal("data:image/png;base64,Zm9v\nZm9v") ==
        "a data: URL's base64 payload must be a multiple of 4 characters long");
  CHECK(refusal("data:image/png;base64,Zm=v") ==
        "a data: URL's payload is not base64 (A–Z, a–z, 0–9, + and /, with '=' padding only at its end)");
  CHECK(refusal("data:image/png;base64,Zm9v_-9v").find("is not base64") != std::string::npos);
  // The bound holds before anything is decoded.
  CHECK(refusal("data:image/png;base64,Zm9vYmFy", 5) == "a data: URL's payload is 6 bytes, over the 5 an image may have");
  CHECK(refusal("data:image/png;base64,Zm9vYg==", 4) == "accepted");
  CHECK(refusal("data:image/png;base64,Zm9vYmE=", 4) == "a data: URL's payload is 5 bytes, over the 4 an image may have");
}

}  // TEST_SUITE("serve")
