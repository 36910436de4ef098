// libFuzzer target for the GGUF reader: any bytes in, as a .gguf file, must
// either open or throw lathe::Error. An opened file is walked as the loaders
// walk it: every metadata value through each typed getter, every tensor
// found by name and its bytes read (dequantized when small), the
// architecture check, the checkpoint's shape, the vocabulary
// (Tokenizer::from_gguf, which encodes and decodes a fixed text) and the
// chat template. lathe::Error from any of those is an answer; a crash, a
// sanitizer report, a hang, any other exception, a tensor whose bytes are
// not its size, or ids that do not decode is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 gguf`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/text/jinja/chat_template.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/quant.hpp"

using namespace lathe;
using lathe::fuzz::finding;
using namespace lathe::weights;

namespace {

void walk(const GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    (void)gguf_type_name(value.type());
    (void)file.string(key);
    (void)file.integer(key);
    (void)file.number(key);
    (void)file.string_array(key);
  }
  for (const TensorInfo& info : file.tensors()) {
    if (file.find(info.name) == nullptr) finding("a listed tensor is not found by its name");
    const auto bytes = file.data(info);
    if (bytes.size() != info.bytes) finding("a tensor's bytes are not its size");
    unsigned sum = 0;
    if (!bytes.empty()) sum += static_cast<unsigned>(bytes.front()) + static_cast<unsigned>(bytes.back());
    (void)sum;
    int64_t elements = 1;
    for (const int64_t d : info.shape) elements *= d;
    const BlockFormat block = block_format(info.dtype);
    if (block.elements > 1 && elements <= 4096) {
      std::vector<float> values(static_cast<size_t>(elements));
      dequantize(info.dtype, bytes, values);
    }
  }
  (void)metadata_problems(file, {64, 2, 4, 2, 16, 128});
}

void vocabulary(const GgufFile& file) {
  const text::Tokenizer tokenizer = text::Tokenizer::from_gguf(file);
  const std::vector<int32_t> ids = tokenizer.encode("Hello world's 123  <s> テスト\n\xff", true);
  (void)tokenizer.decode(ids);
  (void)tokenizer.decode(ids, true);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) finding("encode() gave an id outside the vocabulary");
    (void)tokenizer.token_text(id);
    (void)tokenizer.token_bytes(id);
  }
}

}  // namespace

void lathe::fuzz::gguf(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "model.gguf");
  try {
    const GgufFile file(path);
    walk(file);
    try {
      vocabulary(file);
    } catch (const Error&) {
    }
    try {
      (void)text::find_chat_template(file);
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  try {
    Checkpoint checkpoint(path);
    (void)checkpoint.shape();
    (void)checkpoint.misfit("fuzz", 64, 2);
    (void)checkpoint.match_names(std::vector<std::string>{"token_embd.weight", "output_norm.weight"});
  } catch (const Error&) {
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::gguf)
