// The model library's C++ API in one page: a Vulkan context, a session of
// the generated build, its checkpoint and tokenizer, then text in and text
// out with a seeded sampler. Built against the demo model
// (build/bin/example_generate); any lathe_add_model target links the same way.
//
//   build/bin/example_generate models/demo "And God said"
#include <iostream>
#include <string>

#include "runtime/error.hpp"
#include "runtime/generate/generate.hpp"
#include "runtime/model/model_info.hpp"  // lathe::model_info(): the generated build
#include "runtime/model/session.hpp"
#include "runtime/vk/device.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR PROMPT\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    lathe::vk::Context vk;  // LATHE_DEVICE, else the best device
    lathe::SessionOptions session_options;
    session_options.context = 256;  // KV-cache positions
    lathe::Session session(vk.device(), lathe::model_info(), session_options);
    session.load(dir + "/model.safetensors");  // audited against the build's manifest first
    const auto tokenizer = lathe::text::Tokenizer::from_sentencepiece(dir + "/tokenizer.model");

    // The low-level loop: prefill returns the last position's logits, the
    // sampler picks, decode feeds the pick back.
    lathe::text::SamplingOptions sampling;
    sampling.temperature = 0.7f;
    sampling.top_k = 40;
    sampling.seed = 42;
    lathe::text::Sampler sampler(sampling);
    std::vector<float> logits = session.prefill(tokenizer.encode(argv[2], /*add_special=*/true));
    lathe::text::StreamDecoder decoder(tokenizer, /*skip_special=*/true, /*start_of_text=*/false);
    std::cout << argv[2];
    for (int i = 0; i < 24; ++i) {
      const int32_t token = sampler.sample(logits);
      if (token == tokenizer.eos()) break;
      std::cout << decoder.push(token) << std::flush;
      logits = session.decode(token);
    }
    std::cout << decoder.flush() << "\n";

    // The same in one call, continuing the conversation in the cache.
    lathe::text::GenerateOptions options;
    options.max_new_tokens = 24;
    options.stop = {"\n"};
    std::cout << " And";  // generate() streams the continuation; the prompt is the caller's to show
    lathe::text::generate(session, tokenizer, sampler, " And", options,
                          [](std::string_view text) { std::cout << text << std::flush; });
    std::cout << "\n";
  } catch (const lathe::Error& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
