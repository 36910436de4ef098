// libFuzzer target for the Hugging Face tokenizer.json loader: any bytes in,
// as a tokenizer.json, must load or throw lathe::Error. A loaded tokenizer
// encodes a fixed text (with and without its special tokens, invalid UTF-8
// included), which never throws; the ids are in the vocabulary and decode,
// and the streaming decoder's pieces add up to decode()'s text. A crash, a
// sanitizer report, a hang, any other exception or a broken promise of
// those is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 tokenizer`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

using namespace lathe;
using lathe::fuzz::finding;
using namespace lathe::text;

namespace {

constexpr std::string_view kText =
    "Hello world's 123  test\n\tcafé  <s></s><|endoftext|><unk> 日本語 🙂 \xe2\x82 \xff end";

void check(const Tokenizer& tokenizer, bool add_special, bool parse_special) {
  const std::vector<int32_t> ids = tokenizer.encode(kText, add_special, parse_special);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) finding("encode() gave an id outside the vocabulary");
    (void)tokenizer.token_text(id);
    (void)tokenizer.token_bytes(id);
    (void)tokenizer.is_special(id);
  }
  for (const bool skip : {false, true}) {
    const std::string whole = tokenizer.decode(ids, skip);
    StreamDecoder stream(tokenizer, skip);
    std::string pieces;
    for (const int32_t id : ids) pieces += stream.push(id);
    pieces += stream.flush();
    if (pieces != whole) finding("the streamed pieces are not decode()'s text");
  }
}

}  // namespace

void lathe::fuzz::tokenizer(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "tokenizer.json");
  try {
    const Tokenizer tokenizer = Tokenizer::from_hf(path);
    (void)tokenizer.description();
    (void)tokenizer.bos();
    (void)tokenizer.eos();
    check(tokenizer, true, true);
    check(tokenizer, false, false);
  } catch (const Error&) {
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::tokenizer)
