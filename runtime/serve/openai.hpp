// The OpenAI API's JSON: request bodies of /v1/completions and
// /v1/chat/completions read into a CompletionParams, and of /v1/embeddings
// into an EmbeddingParams (every bad field an ApiError with the HTTP status
// and the `param` OpenAI names), and the response objects, whole or as
// stream chunks, written from the tokens or the vectors.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "runtime/generate/sampler.hpp"
#include "runtime/image/image.hpp"
#include "runtime/image/preprocess.hpp"
#include "runtime/serve/scheduler.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/text/jinja/chat_template.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

namespace lathe::serve {

// An OpenAI error object: {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
  ApiError(int http_status, const std::string& message, std::string parameter = "", std::string error_code = "")
      : std::runtime_error(message), status(http_status), param(std::move(parameter)), code(std::move(error_code)) {}
  int status;
  std::string param, code;
  nlohmann::json body() const;
};

// The body of an error response; `type` follows from the status
// (invalid_request_error, not_found_error, …).
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "",
                          const std::string& code = "");

// What a chat message's image parts need: a [vision] splice model's link
// between its tower and its decoder, the checkpoint's image processor and
// the bounds on each image's file.
struct ImageSupport {
  plan::VisionLink link;
  image::Preprocess preprocess;
  int64_t row_floats = 0;  // the tower's input rows (its plan.input_row_floats)
  // A decoder that cross-attends to the images (link.cross): the images a
  // request may hold, what its sequences' caches hold (0: no bound).
  int64_t max_images = 0;
  // OpenAI's bound on an image's file (20 MB), and at most 32 M pixels.
  image::Limits limits{int64_t{20} << 20, 16384, int64_t{1} << 25};
};

struct Model {
  std::string name;  // what `model` must say (or leave out)
  const text::Tokenizer* tokenizer = nullptr;
  const text::ChatTemplate* chat_template = nullptr;  // null: the checkpoint has none
  std::string bos_token, eos_token;                   // as the template spells them
  int64_t context = 0;                                // positions per sequence
  int64_t vocab = 0;     // the model's token ids are below this (0: the tokenizer's size)
  bool encoder = false;  // serves /v1/embeddings, not completions
  // A vision model's: chat messages may hold image parts (data: URLs), each
  // decoded and preprocessed here, its features spliced where the chat
  // template writes the image marker. Null: image parts are refused.
  const ImageSupport* images = nullptr;
  // The tool-call format the chat template teaches (detect_tool_format of
  // its source). None: requests whose tool calls would be parsed are refused.
  ToolFormat tool_format = ToolFormat::None;
};

// OpenAI's bounds on a request's tools: 128 functions, each name 1 to 64
// of [a-zA-Z0-9_-].
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolName = 64;

struct CompletionParams {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t n = 1;               // choices, each sampled with seed + i (Scheduler::submit)
  GenerationRequest request;   // the prompt's ids, sampling, max_tokens, stop, top_logprobs; a forced call's grammar
  // The answer is read for tool calls (a chat with tools, tool_choice not
  // "none"): the model's format, and whether several calls are kept
  // (parallel_tool_calls). None: the answer is content.
  ToolFormat tool_format = ToolFormat::None;
  bool parallel_tool_calls = true;
};

// The most choices (`n`) a request may ask for.
inline constexpr int32_t kMaxChoices = 16;

// The deepest nesting of arrays and objects a request body may have. An
// OpenAI request needs 4 (messages[i].content[j]); a body nested 100,000
// deep once crashed the server by recursion while the document was copied.
inline constexpr int kMaxJsonDepth = 64;

// Parses a request body: a SAX pass first, which refuses nesting deeper than
// kMaxJsonDepth before any tree is built, then the tree. Throws ApiError 400
// for malformed JSON, too deep a nesting, or a number no double holds
// (naming the field it stood in), never anything else.
nlohmann::json parse_json_body(const std::string& body);

// Reads and checks a request body (already parsed JSON). Throws ApiError.
// `raw`, the body's text, keeps a response_format JSON schema's key order
// (the parsed body's objects sort their keys; a schema's property order is
// the order of the output's keys); empty: the sorted order.
CompletionParams parse_completion(const nlohmann::json& body, bool chat, const Model& model, std::string_view raw = {});

// /v1/embeddings: each input's token ids (a string through the tokenizer,
// with its special tokens; or ids as given), and the answer's encoding.
struct EmbeddingParams {
  std::vector<std::vector<int32_t>> inputs;
  bool base64 = false;  // encoding_format "base64": each vector's f32 bytes, little-endian
  int64_t tokens = 0;   // all inputs' ids (usage)
};
// OpenAI's limits of one embeddings request: 2048 inputs, 300,000 tokens in all.
inline constexpr size_t kMaxEmbeddingInputs = 2048;
inline constexpr int64_t kMaxEmbeddingTokens = 300000;
// Reads and checks a request body: `input` a string, an array of strings,
// an array of ids or an array of arrays of ids; each input not empty and at
// most model.context tokens (naming the input's index), ids in the
// vocabulary; `encoding_format` "float" or "base64"; `dimensions` (other
// than the model's width) refused. Throws ApiError.
EmbeddingParams parse_embeddings(const nlohmann::json& body, const Model& model, int64_t width);
nlohmann::json embeddings_response(const EmbeddingParams& p, const std::string& model,
                                   const std::vector<std::vector<float>>& vectors);

// A value from a request, as an error message may quote it: control bytes
// and backslashes escaped (\xNN), cut after `max_bytes` with "…".
std::string printable(std::string_view value, size_t max_bytes = 200);

// Response objects. `id` and `created` are the same for every chunk of a stream.
struct ResponseHeader {
  std::string id, model;
  int64_t created = 0;
};
// usage of a request's choices: the prompt counted once (the first
// choice's, with its cached tokens), the completions' tokens summed.
nlohmann::json usage_json(const Finish& finish);
nlohmann::json usage_json(const std::vector<Finish>& choices);
// Non-streaming: the whole text and the events' tokens (for logprobs).
nlohmann::json completion_response(const CompletionParams& p, const ResponseHeader& h, const text::Tokenizer& tokenizer,
                                   const std::string& text, const std::vector<TokenEvent>& events, const Finish& finish);
// Streaming: one chunk for some events (their text, their logprobs), or the
// chunk carrying the finish reason (events empty, finish set), or the first
// chat chunk (the assistant role; events empty, no finish).
nlohmann::json stream_chunk(const CompletionParams& p, const ResponseHeader& h, const text::Tokenizer& tokenizer,
                            const std::vector<TokenEvent>& events, const Finish* finish, bool role = false);

// A chat stream whose answer is read for tool calls (tool_format not
// None): the text goes through a ToolCallParser; content comes as
// `content` deltas (with the events' logprobs), and each call once its text
// is whole, as OpenAI streams one: a delta {"tool_calls": [{"index", "id",
// "type": "function", "function": {"name", "arguments": ""}}]}, then one
// with {"index", "function": {"arguments"}}.
class ToolCallStream {
 public:
  explicit ToolCallStream(const CompletionParams& p) : parser_(p.tool_format, p.parallel_tool_calls) {}
  // The chunks for these events (none while their text is held back).
  std::vector<nlohmann::json> chunks(const CompletionParams& p, const ResponseHeader& h,
                                     const text::Tokenizer& tokenizer, const std::vector<TokenEvent>& events);
  // The end: what was held back, then the chunk with the finish reason
  // ("tool_calls" where a call was sent and max_tokens did not cut the answer).
  std::vector<nlohmann::json> finish(const CompletionParams& p, const ResponseHeader& h,
                                     const text::Tokenizer& tokenizer, const Finish& finish);

 private:
  void add(std::vector<nlohmann::json>& out, const CompletionParams& p, const ResponseHeader& h,
           const text::Tokenizer& tokenizer, const std::vector<TokenEvent>& events, ToolCallParser::Output output);
  ToolCallParser parser_;
  int64_t calls_ = 0;
};

// JSON text as a response carries it: invalid UTF-8 (a token cut inside a
// character) replaced by U+FFFD.
std::string dump(const nlohmann::json& j);

}  // namespace lathe::serve
