// libFuzzer target for the server's request bodies: any bytes in, as the
// body of POST /v1/completions, /v1/chat/completions and /v1/embeddings, are
// parsed (parse_json_body: nesting bounded before any tree is built) and
// read into the request (parse_completion, for both endpoints, against the
// demo model's SentencePiece tokenizer and chat template, a context of 256,
// and for chat against the tiny LLaVA's, whose messages take image parts,
// and against Qwen2.5's chat template, which teaches tool calls (tools,
// tool_choice, messages' tool_calls, a forced call's grammar);
// parse_embeddings against the same tokenizer as an encoder's, and the
// response of zero vectors written in the format asked for). An
// ApiError is an answer (the client's 4xx), as is Error(InvalidArgument),
// which the server answers with 400. A crash, a sanitizer report, a hang,
// any other exception (the server would answer 500, or die), or an accepted
// request whose prompt and max_tokens do not fit the context is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 http`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/serve/openai.hpp"
#include "runtime/text/jinja/chat_template.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "tests/harness/tiny_llava.hpp"

using namespace lathe;
using namespace lathe::serve;
using lathe::fuzz::finding;

namespace {

const Model& demo() {
  static const text::Tokenizer tokenizer =
      text::Tokenizer::from_sentencepiece(LATHE_SOURCE_DIR "/models/demo/tokenizer.model");
  static const text::ChatTemplateSource source = *text::find_chat_template(LATHE_SOURCE_DIR "/models/demo");
  static const text::ChatTemplate chat_template = text::ChatTemplate::parse(source.text, source.origin);
  static const Model model{"demo", &tokenizer, &chat_template, source.bos_token, source.eos_token, 256};
  return model;
}

// The demo's tokenizer under Qwen2.5's chat template, which teaches tool
// calls (tests/data/chat_templates): `tools`, `tool_choice` and messages'
// `tool_calls` read, and a forced call's grammar compiled.
const Model& tools() {
  static const text::ChatTemplate chat_template = text::ChatTemplate::parse(
      [] {
        std::ifstream in(LATHE_SOURCE_DIR "/tests/data/chat_templates/qwen2.5-instruct.jinja", std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }(),
      "qwen2.5-instruct.jinja");
  static const Model model = [] {
    Model m = demo();
    m.chat_template = &chat_template;
    m.bos_token = "";
    m.eos_token = "<|im_end|>";
    m.tool_format = ToolFormat::Hermes;
    return m;
  }();
  return model;
}

// The tiny LLaVA's (tests/data/vision/tiny-llava): chat messages with image
// parts, decoded within the image target's smaller limits.
const Model& tiny_llava() {
  static test::TinyLlava tiny;
  static const Model model = [] {
    tiny.support.limits = {int64_t{1} << 20, 4096, int64_t{1} << 20};
    return tiny.model();
  }();
  return model;
}

// An accepted request's images, as the scheduler will read them: each
// marker's rows of the prompt, each distinct image's input rows.
void check_images(const GenerationRequest& r, const Model& model) {
  const PromptImages& images = r.images;
  if (!model.images) {
    if (!images.order.empty() || !images.at.empty() || !images.inputs.empty()) finding("images for a text model");
    return;
  }
  if (images.starts.size() != images.order.size() + 1 || images.starts.back() != images.at.size())
    finding("image rows miscounted");
  for (size_t i = 0; i + 1 < images.starts.size(); ++i)
    if (images.starts[i + 1] - images.starts[i] != 16) finding("an image of other rows than the tower's 16");
  const plan::VisionLink& link = model.images->link;
  const int64_t image_token = link.image_token >= 0 ? link.image_token : link.marker;
  for (size_t i = 0; i < images.at.size(); ++i)
    if (images.at[i] < 0 || images.at[i] >= static_cast<int64_t>(r.prompt.size()) ||
        (i > 0 && images.at[i] <= images.at[i - 1]) || r.prompt[static_cast<size_t>(images.at[i])] != image_token)
      finding("an image row that is not a marker's row of the prompt");
  for (const uint32_t k : images.order)
    if (k >= images.inputs.size()) finding("an image order past the inputs");
  for (const text::ImageInput& input : images.inputs)
    if (input.rows.size() != 17 * 48 || input.grid != plan::ImageGrid{1, 16})
      finding("an image input of another size than the tower's");
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
  for (const auto& [chat, m] : {std::pair{false, &model}, std::pair{true, &model}, std::pair{true, &tiny_llava()},
                                std::pair{true, &tools()}}) {
    try {
      const CompletionParams p = parse_completion(json, chat, *m, body);
      const GenerationRequest& r = p.request;
      if (r.prompt.empty() || r.max_tokens < 1 || static_cast<int64_t>(r.prompt.size()) + r.max_tokens > m->context)
        finding("an accepted request does not fit the context");
      for (const int32_t id : r.prompt)
        if (id < 0 || id >= m->tokenizer->vocab_size()) finding("a prompt id outside the vocabulary");
      check_images(r, *m);
      (void)dump(json);
    } catch (const ApiError& e) {
      if (e.status < 400 || e.status >= 500) finding("an ApiError that is not a 4xx");
      (void)dump(e.body());
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::InvalidArgument) finding(e.what());  // the server would answer 500
    }
  }
  // An accepted embeddings request: every input 1 … context ids of the
  // vocabulary, at most the inputs and tokens OpenAI allows.
  try {
    const EmbeddingParams p = parse_embeddings(json, model, 8);
    if (p.inputs.empty() || p.inputs.size() > kMaxEmbeddingInputs || p.tokens > kMaxEmbeddingTokens)
      finding("an accepted embeddings request over the limits");
    int64_t tokens = 0;
    for (const std::vector<int32_t>& input : p.inputs) {
      if (input.empty() || static_cast<int64_t>(input.size()) > model.context) finding("an input outside 1 … context ids");
      for (const int32_t id : input)
        if (id < 0 || id >= model.tokenizer->vocab_size()) finding("an input id outside the vocabulary");
      tokens += static_cast<int64_t>(input.size());
    }
    if (tokens != p.tokens) finding("the usage does not count the inputs' ids");
    (void)dump(embeddings_response(p, model.name, std::vector<std::vector<float>>(p.inputs.size(), std::vector<float>(8))));
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) finding("an embeddings ApiError that is not a 4xx");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidArgument) finding(e.what());
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::http)
