// The tiny LLaVA's checkpoint files as the server reads them
// (tests/data/vision/tiny-llava: a tokenizer whose token 200 is "<image>",
// a LLaVA-1.5 chat template, a CLIP processor's settings) and its tower's
// link (tests/specs/vision/tiny-llava.toml: 16 × 16 pixels in 4 × 4
// patches, a class row, 16 feature rows an image, 48 values an input row),
// for the tests and fuzz targets of a vision model's requests.
#pragma once

#include <string>

#include "runtime/image/preprocess.hpp"
#include "runtime/serve/openai.hpp"
#include "runtime/text/jinja/chat_template.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

namespace lathe::test {

struct TinyLlava {
  inline static const std::string kDir = LATHE_SOURCE_DIR "/tests/data/vision/tiny-llava";
  TinyLlava()
      : tokenizer(text::Tokenizer::from_hf(kDir + "/tokenizer.json")),
        chat_template(text::ChatTemplate::parse(text::find_chat_template(kDir)->text)) {
    support.link.channels = 3;
    support.link.patch = 4;
    support.link.image_size = 16;
    support.link.class_rows = 1;
    support.link.skip_rows = 1;
    support.link.features = 16;
    support.link.marker = 200;
    support.preprocess = image::read_preprocessor_config(kDir + "/preprocessor_config.json");
    support.row_floats = 48;
  }
  TinyLlava(const TinyLlava&) = delete;  // model() points into it
  serve::Model model(int64_t context = 160) const {
    return {"tiny-llava", &tokenizer, &chat_template, "<s>", "</s>", context, 211, false, &support};
  }
  text::Tokenizer tokenizer;
  text::ChatTemplate chat_template;
  serve::ImageSupport support;
};

}  // namespace lathe::test
