// libFuzzer target for the server's request bodies: any bytes in, as the
// body of POST /v1/completions and /v1/chat/completions, are parsed
// (parse_json_body: nesting bounded before any tree is built) and read into
// the request (parse_completion, for both endpoints, against the demo
// model's SentencePiece tokenizer and chat template, a context of 256). An
// ApiError is an answer (the client's 4xx), as is Error(InvalidArgument),
// which the server answers with 400. A crash, a sanitizer report, a hang,
// any other exception (the server would answer 500, or die), or an accepted
// request whose prompt and max_tokens do not fit the context is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 http`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/serve/openai.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"

using namespace lathe;
using namespace lathe::serve;

namespace {

const Model& demo() {
  static const text::Tokenizer tokenizer =
      text::Tokenizer::from_sentencepiece(LATHE_SOURCE_DIR "/models/demo/tokenizer.model");
  static const text::ChatTemplateSource source = *text::find_chat_template(LATHE_SOURCE_DIR "/models/demo");
  static const text::ChatTemplate chat_template = text::ChatTemplate::parse(source.text, source.origin);
  static const Model model{"demo", &tokenizer, &chat_template, source.bos_token, source.eos_token, 256};
  return model;
}

}  // namespace

void lathe::fuzz::http(const uint8_t* data, size_t size) {
  const Model& model = demo();
  const std::string body(reinterpret_cast<const char*>(data), size);
  nlohmann::json json;
  try {
    json = parse_json_body(body);
  } catch (const ApiError& e) {
    if (e.status != 400) finding("a body that does not parse is not a 400");
    return;
  }
  for (const bool chat : {false, true}) {
    try {
      const CompletionParams p = parse_completion(json, chat, model);
      const GenerationRequest& r = p.request;
      if (r.prompt.empty() || r.max_tokens < 1 || static_cast<int64_t>(r.prompt.size()) + r.max_tokens > model.context)
        finding("an accepted request does not fit the context");
      for (const int32_t id : r.prompt)
        if (id < 0 || id >= model.tokenizer->vocab_size()) finding("a prompt id outside the vocabulary");
      (void)dump(json);
    } catch (const ApiError& e) {
      if (e.status < 400 || e.status >= 500) finding("an ApiError that is not a 4xx");
      (void)dump(e.body());
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::InvalidArgument) finding(e.what());  // the server would answer 500
    }
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::http)
