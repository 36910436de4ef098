#include "runtime/serve/openai.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <map>
#include <random>
#include <semaphore>
#include <string_view>
#include <thread>

#include "runtime/error.hpp"
#include "runtime/generate/constraint.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/serve/data_url.hpp"

namespace lathe::serve {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

std::string error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "server_overloaded";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = "") {
  throw ApiError(400, message, param, code);
}

// body[key] when present and not null.
const json* field(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_in(const json& body, const char* key, double low, double high, double fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_number()) bad(key, std::string(key) + " must be a number");
  const double x = v->get<double>();
  if (!(x >= low && x <= high))
    bad(key, std::string(key) + " " + v->dump() + " is out of range: it must be in [" + dump(json(low)) + ", " +
                 dump(json(high)) + "]");
  return x;
}

int64_t integer_in(const json& body, const char* key, int64_t low, int64_t high, int64_t fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) bad(key, std::string(key) + " must be an integer");
  // An unsigned beyond int64 is out of range as written, not wrapped to a negative.
  const bool beyond = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  const int64_t x = beyond ? 0 : v->get<int64_t>();
  if (beyond || x < low || x > high)
    bad(key, std::string(key) + " " + v->dump() + " is out of range: it must be in [" + std::to_string(low) + ", " +
                 std::to_string(high) + "]");
  return x;
}

bool boolean(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return false;
  if (!v->is_boolean()) bad(key, std::string(key) + " must be true or false");
  return v->get<bool>();
}

// A chat request's image part: where it stands (for messages) and its URL.
struct ImagePart {
  std::string param;
  const std::string* url;
};

// A message's content as the chat template is given it: a string, or an
// array of {"type": "text", "text": …} parts (and, for a vision model,
// {"type": "image_url", "image_url": {"url": …}} parts, each added to
// `images`). A text model's template gets the parts' text joined; a vision
// model's gets the parts, each image as {"type": "image"}, as its
// processor's template is given them (a string as one text part).
json message_content(const json& content, size_t index, const Model& model, std::vector<ImagePart>& images) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  const bool parts = model.images != nullptr;
  if (content.is_null()) return parts ? json::array() : json("");
  if (content.is_string()) return parts ? json::array({{{"type", "text"}, {"text", content}}}) : content;
  if (!content.is_array()) bad(param, param + " must be a string or an array of content parts");
  std::string text;
  json out = json::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string at = param + "[" + std::to_string(j) + "]";
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>()
                                 : std::string();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) bad(at + ".text", at + ".text must be a string");
      text += part["text"].get<std::string>();
      out.push_back({{"type", "text"}, {"text", part["text"]}});
    } else if (type == "image_url") {
      if (!model.images) bad(at, at + ": this model takes no images (its spec has no [vision] splice)");
      const json* image = part.contains("image_url") ? &part["image_url"] : nullptr;
      if (!image || !image->is_object() || !image->contains("url") || !(*image)["url"].is_string())
        bad(at + ".image_url", at + ".image_url must be an object with a string url");
      if (const json* detail = field(*image, "detail");
          detail && !(detail->is_string() && (*detail == "auto" || *detail == "low" || *detail == "high")))
        bad(at + ".image_url.detail", at + ".image_url.detail must be \"auto\", \"low\" or \"high\"");
      images.push_back({at + ".image_url.url", &(*image)["url"].get_ref<const std::string&>()});
      out.push_back({{"type", "image"}});
    } else {
      bad(at, at + ": only parts of type \"text\"" + std::string(model.images ? " and \"image_url\"" : "") +
                  " are supported");
    }
  }
  return parts ? out : json(text);
}

// The prompt's ids, or none when it has more than `limit` tokens: a prompt
// far over the context is not encoded whole (a body of megabytes would take
// as many ids, and the tokenizer's working memory with them). Growing
// prefixes, cut before a space, are encoded first; one that already has
// more than the limit (with a margin for the tokens a cut may split) decides.
// A prompt that fits is always encoded whole, so its ids are exact.
std::optional<std::vector<int32_t>> encode_within(const text::Tokenizer& tokenizer, std::string_view text,
                                                  int64_t limit, int64_t& at_least) {
  constexpr int64_t kCutMargin = 16;
  size_t prefix = static_cast<size_t>(std::max<int64_t>(limit, 512)) * 8;
  while (prefix < text.size()) {
    size_t cut = prefix;
    while (cut > prefix / 2 && !(std::isspace(static_cast<unsigned char>(text[cut])) &&
                                 !std::isspace(static_cast<unsigned char>(text[cut - 1]))))
      --cut;
    if (cut == prefix / 2) cut = prefix;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    const std::vector<int32_t> ids = tokenizer.encode(text.substr(0, cut), /*add_special=*/true);
    if (static_cast<int64_t>(ids.size()) > limit + kCutMargin) {
      at_least = static_cast<int64_t>(ids.size()) - kCutMargin;
      return std::nullopt;
    }
    prefix *= 4;
  }
  std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/true);
  if (static_cast<int64_t>(ids.size()) > limit) {
    at_least = static_cast<int64_t>(ids.size());
    return std::nullopt;
  }
  return ids;
}

[[noreturn]] void prompt_too_long(bool chat, int64_t context, int64_t at_least) {
  bad(chat ? "messages" : "prompt",
      "This model's maximum context length is " + std::to_string(context) + " tokens. However, your " +
          (chat ? "messages" : "prompt") + " resulted in " + (at_least > context ? "more than " : "") +
          std::to_string(at_least > context ? context : at_least) + " tokens, which leaves no room for the completion.",
      "context_length_exceeded");
}

// The images being decoded at once across the server's handlers: each holds
// up to limits.max_pixels · 3 bytes of pixels and the resize's buffers
// (some 200 MB at the bounds), so the memory of image parts in flight is
// bounded by this, not by the HTTP threads. Decoding takes milliseconds to
// a second; a handler waits its turn.
std::counting_semaphore<8>& decode_slots() {
  static std::counting_semaphore<8> slots(std::clamp<std::ptrdiff_t>(std::thread::hardware_concurrency(), 1, 8));
  return slots;
}

// The request's images decoded, preprocessed and unfolded into the tower's
// input (each distinct URL once), and the prompt's markers expanded into
// their rows. Throws ApiError naming the part at fault.
void splice_images(const std::vector<ImagePart>& parts, const Model& model, GenerationRequest& r) {
  const ImageSupport& support = *model.images;
  // The template wrote another count: it does not place images so.
  if (const size_t markers = text::count_markers(support.link, r.prompt); markers != parts.size())
    bad("messages", "the chat template: the prompt holds " + std::to_string(markers) + " image marker(s) (token " +
                        std::to_string(support.link.marker) + ") for " + std::to_string(parts.size()) +
                        " image(s): each image goes where a marker is");
  if (support.max_images > 0 && static_cast<int64_t>(parts.size()) > support.max_images)
    bad("messages", std::to_string(parts.size()) + " images: this model's sequences hold " +
                        std::to_string(support.max_images) + " at most");
  PromptImages& images = r.images;
  std::map<std::string_view, uint32_t> seen;  // an image sent twice is decoded and encoded once
  std::vector<plan::ImageGrid> grids;         // each marker's, in order
  for (const ImagePart& part : parts) {
    const auto [it, fresh] = seen.emplace(*part.url, static_cast<uint32_t>(images.inputs.size()));
    images.order.push_back(it->second);
    if (fresh) {
      try {
        const DataUrl url = parse_data_url(*part.url, static_cast<size_t>(support.limits.max_file_bytes));
        if (!url.media_type.empty() && url.media_type.rfind("image/", 0) != 0)
          throw Error(ErrorKind::InvalidArgument, "a data: URL of " + printable(url.media_type, 64) + ", not an image");
        decode_slots().acquire();
        struct Release {
          ~Release() { decode_slots().release(); }
        } release;
        images.inputs.push_back(text::image_input(support.link, support.preprocess,
                                                  image::decode(url.bytes, part.param, support.limits),
                                                  support.row_floats, part.param));
      } catch (const Error& e) {
        const std::string message = e.what();
        bad(part.param, message.rfind(part.param, 0) == 0 ? message : part.param + ": " + message);
      }
    }
    grids.push_back(images.inputs[it->second].grid);
  }
  // A cross-attention decoder's markers stay: its layers read the images.
  if (support.link.cross) {
    images.cross = true;
    images.marker = support.link.marker;
    return;
  }
  text::ExpandedPrompt expanded = text::expand_markers(support.link, r.prompt, grids);
  r.prompt = std::move(expanded.ids);
  images.at = std::move(expanded.at);
  images.starts = std::move(expanded.starts);
  images.whole = support.link.two_way;
}

// An assistant message's `tool_calls` as the chat template is given them,
// as transformers gives them: {"id", "type": "function", "function":
// {"name", "arguments"}} with the arguments (OpenAI's JSON text) parsed.
ojson message_tool_calls(const json& calls, const std::string& message) {
  const std::string param = message + ".tool_calls";
  if (!calls.is_array()) bad(param, param + " must be an array");
  if (calls.size() > kMaxTools) bad(param, param + " holds more than " + std::to_string(kMaxTools) + " calls");
  ojson out = ojson::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const json& c = calls[j];
    const std::string at = param + "[" + std::to_string(j) + "]";
    if (!c.is_object()) bad(at, at + " must be an object");
    const json* id = field(c, "id");
    if (id && !id->is_string()) bad(at + ".id", at + ".id must be a string");
    if (const json* type = field(c, "type"); type && *type != "function")
      bad(at + ".type", at + ".type must be \"function\"");
    const json* function = field(c, "function");
    if (!function || !function->is_object()) bad(at + ".function", at + ".function must be an object");
    const json* name = field(*function, "name");
    if (!name || !name->is_string()) bad(at + ".function.name", at + ".function.name must be a string");
    const json* arguments = field(*function, "arguments");
    std::optional<ojson> parsed = ojson::object();
    if (arguments) {
      if (!arguments->is_string()) bad(at + ".function.arguments", at + ".function.arguments must be a string (JSON text)");
      parsed = bounded_json(arguments->get_ref<const std::string&>());
      if (!parsed) bad(at + ".function.arguments", at + ".function.arguments is not JSON text");
    }
    ojson call = ojson::object();
    if (id) call["id"] = ojson(*id);
    call["type"] = "function";
    call["function"] = {{"name", ojson(*name)}, {"arguments", std::move(*parsed)}};
    out.push_back(std::move(call));
  }
  return out;
}

// `tools`: the request's tools as the chat template is given them (null: none).
void chat_prompt(const json& body, const Model& model, GenerationRequest& r, const ojson& tools) {
  const json* messages = field(body, "messages");
  if (!messages) bad("messages", "Missing required parameter: 'messages'", "missing_required_parameter");
  if (!messages->is_array() || messages->empty()) bad("messages", "messages must be a non-empty array");
  ojson rendered = ojson::array();
  std::vector<ImagePart> images;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(at, at + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(at + ".role", at + ".role must be a string");
    ojson message = ojson::object();
    message["role"] = ojson(m["role"]);
    // (By reference: `images` points into the body's URLs.)
    static const json kNone;
    const auto content = m.find("content");
    message["content"] = ojson(message_content(content == m.end() ? kNone : *content, i, model, images));
    if (const json* calls = field(m, "tool_calls")) message["tool_calls"] = message_tool_calls(*calls, at);
    if (const json* id = field(m, "tool_call_id")) {
      if (!id->is_string()) bad(at + ".tool_call_id", at + ".tool_call_id must be a string");
      message["tool_call_id"] = ojson(*id);
    }
    rendered.push_back(std::move(message));
  }
  if (!model.chat_template)
    throw ApiError(400, "this model's checkpoint has no chat template: use /v1/completions", "messages");
  // Each image takes its expanded rows (prefix, features, suffix) where its
  // marker stands: bounded before anything is decoded or rendered (images
  // of variable sizes at the largest).
  const int64_t image_rows =
      !model.images             ? 0
      : model.images->link.cross ? static_cast<int64_t>(images.size())  // the markers stay, a row each
                                 : static_cast<int64_t>(images.size()) * model.images->link.expanded_rows();
  const int64_t marker_rows = static_cast<int64_t>(images.size());
  if (image_rows > model.context - 1) prompt_too_long(true, model.context, image_rows);
  std::string prompt;
  try {
    prompt = model.chat_template->render_chat(rendered, true, model.bos_token, model.eos_token,
                                              tools.is_null() ? ojson::object() : ojson{{"tools", tools}});
  } catch (const Error& e) {
    // The message starts with the template's origin, a file of the server's
    // that is no business of the client's.
    std::string message = e.what();
    const std::string& name = model.chat_template->name();
    if (!name.empty() && message.rfind(name, 0) == 0) message = "the chat template" + message.substr(name.size());
    // The template's raise_exception: the conversation is not one it takes.
    if (e.kind() == ErrorKind::InvalidArgument) bad("messages", message);
    throw ApiError(500, "the chat template failed: " + message);
  }
  int64_t at_least = 0;
  const int64_t expansion = image_rows - marker_rows;  // what the markers add once expanded
  std::optional<std::vector<int32_t>> encoded =
      encode_within(*model.tokenizer, prompt, model.context - 1 - expansion, at_least);
  if (!encoded) prompt_too_long(true, model.context, at_least + expansion);
  std::vector<int32_t> ids = std::move(*encoded);
  // A template that writes the BOS itself, tokenized with the BOS the
  // vocabulary adds: one is enough (llama.cpp warns and keeps both).
  const std::optional<int32_t> bos = model.tokenizer->bos();
  if (bos && ids.size() >= 2 && ids[0] == *bos && ids[1] == *bos) ids.erase(ids.begin());
  r.prompt = std::move(ids);
  if (model.images) splice_images(images, model, r);
}

std::vector<int32_t> completion_prompt(const json& body, const Model& model) {
  const json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "Missing required parameter: 'prompt'", "missing_required_parameter");
  const json* p = prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    int64_t at_least = 0;
    std::optional<std::vector<int32_t>> ids =
        encode_within(*model.tokenizer, p->get_ref<const std::string&>(), model.context - 1, at_least);
    if (!ids) prompt_too_long(false, model.context, at_least);
    return std::move(*ids);
  }
  if (p->is_array() && !p->empty() && std::all_of(p->begin(), p->end(), [](const json& x) { return x.is_number_integer(); })) {
    std::vector<int32_t> ids;
    for (const json& x : *p) {
      const int64_t id = x.get<int64_t>();
      if (id < 0 || id >= model.tokenizer->vocab_size())
        bad("prompt", "prompt token " + std::to_string(id) + " is outside the vocabulary (" +
                          std::to_string(model.tokenizer->vocab_size()) + " tokens)");
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  }
  if (p->is_array() && p->size() > 1)
    bad("prompt", "only one prompt per request is supported (a string or an array of token ids)");
  bad("prompt", "prompt must be a string, an array of one string, or an array of token ids");
}

// logit_bias: {"<token id>": bias in [-100, 100], …}, at most 300 tokens
// (OpenAI's), each id in the model's vocabulary.
std::vector<std::pair<int32_t, float>> logit_bias(const json& body, const Model& model) {
  std::vector<std::pair<int32_t, float>> out;
  const json* b = field(body, "logit_bias");
  if (!b || b->is_null()) return out;
  if (!b->is_object()) bad("logit_bias", "logit_bias must be an object of token ids to biases");
  if (b->size() > 300) bad("logit_bias", "logit_bias names " + std::to_string(b->size()) + " tokens; at most 300");
  const int64_t vocab = model.vocab > 0 ? model.vocab : static_cast<int64_t>(model.tokenizer->vocab_size());
  for (const auto& [key, value] : b->items()) {
    int64_t id = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || key.empty() || id < 0 || id >= vocab)
      bad("logit_bias", "logit_bias: \"" + key.substr(0, 32) + "\" is not a token id of the vocabulary [0, " +
                            std::to_string(vocab) + ")");
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
      bad("logit_bias", "logit_bias: the bias of token " + key + " must be a number in [-100, 100]");
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(value.get<double>()));
  }
  return out;
}

std::vector<std::string> stop_strings(const json& body) {
  const json* stop = field(body, "stop");
  if (!stop) return {};
  std::vector<std::string> out;
  if (stop->is_string()) out.push_back(stop->get<std::string>());
  else if (stop->is_array() && stop->size() <= 4 && std::all_of(stop->begin(), stop->end(), [](const json& s) {
             return s.is_string();
           }))
    for (const json& s : *stop) out.push_back(s.get<std::string>());
  else
    bad("stop", "stop must be a string or an array of at most 4 strings");
  for (const std::string& s : out)
    if (s.empty()) bad("stop", "stop strings must not be empty");
  return out;
}

std::string token_string(const text::Tokenizer& tokenizer, int32_t id) { return std::string(tokenizer.token_bytes(id)); }

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

// The logprobs object of a choice for these events (tokens only).
json logprobs_json(const CompletionParams& p, const text::Tokenizer& tokenizer, const std::vector<TokenEvent>& events,
                   int64_t offset) {
  if (p.request.top_logprobs < 0) return nullptr;
  if (p.chat) {
    json content = json::array();
    for (const TokenEvent& e : events) {
      if (e.token < 0) continue;
      const std::string t = token_string(tokenizer, e.token);
      json top = json::array();
      for (const TokenLogprob& alt : e.top) {
        const std::string a = token_string(tokenizer, alt.token);
        top.push_back({{"token", a}, {"logprob", alt.logprob}, {"bytes", bytes_of(a)}});
      }
      content.push_back({{"token", t}, {"logprob", e.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenEvent& e : events) {
    if (e.token < 0) continue;
    const std::string t = token_string(tokenizer, e.token);
    tokens.push_back(t);
    logprobs.push_back(e.logprob);
    json top = json::object();
    for (const TokenLogprob& alt : e.top) top[token_string(tokenizer, alt.token)] = alt.logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// `calls`: the answer held tool calls ("tool_calls", unless max_tokens cut it).
json finish_reason(const Finish* f, bool calls = false) {
  if (!f) return nullptr;
  return f->reason == "length" ? "length" : calls ? "tool_calls" : "stop";
}

// A tool call of a response (`whole`) or its first delta in a stream
// (arguments "", `index` its place).
json tool_call_json(const CompletionParams& p, const ToolCall& call, size_t index, bool whole) {
  json out = {{"id", tool_call_id(p.tool_format)},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", whole ? call.arguments : std::string()}}}};
  if (!whole) out["index"] = index;
  return out;
}

// The SAX pass of parse_json_body: counts the nesting depth and keeps the
// path of keys and indices to the value being read, for the message.
class DepthCheck final : public nlohmann::json_sax<json> {
 public:
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t& k) override {
    path_.back().key = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    if (e.id == 406) {  // a number beyond a double: out_of_range.406
      const std::string at = where();
      bad(at, (at.empty() ? std::string("a number") : at) + " is out of range: it does not fit in a double");
    }
    throw ApiError(400, "We could not parse the JSON body of your request: " + std::string(e.what()) + " (byte " +
                            std::to_string(position) + ")");
  }

 private:
  struct Level {
    bool array;
    int64_t index = -1;
    std::string key;
  };
  bool value() {
    if (!path_.empty() && path_.back().array) ++path_.back().index;
    return true;
  }
  bool open(bool array) {
    value();
    if (path_.size() >= static_cast<size_t>(kMaxJsonDepth))
      throw ApiError(400, "the request body nests arrays and objects more than " + std::to_string(kMaxJsonDepth) +
                              " deep" + (where().empty() ? std::string() : " (at " + where() + ")"));
    path_.push_back(Level{array, -1, {}});
    return true;
  }
  bool close() {
    path_.pop_back();
    return true;
  }
  // messages[0].content[2], as OpenAI names a field in `param`.
  std::string where() const {
    std::string out;
    for (const Level& l : path_) {
      if (l.array) {
        if (l.index >= 0) out += "[" + std::to_string(l.index) + "]";
      } else if (!l.key.empty()) {
        out += (out.empty() ? "" : ".") + printable(l.key, 64);
      }
    }
    return out;
  }
  std::vector<Level> path_;
};

}  // namespace

std::string printable(std::string_view value, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(value.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (value.size() > n) out += "…";
  return out;
}

json parse_json_body(const std::string& body) {
  DepthCheck check;
  json::sax_parse(body, &check);
  try {
    return json::parse(body);
  } catch (const json::exception& e) {  // not reached: the SAX pass read the same text
    throw ApiError(400, std::string("We could not parse the JSON body of your request: ") + e.what());
  }
}

json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", error_type(status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json ApiError::body() const { return error_body(status, what(), param, code); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

// A request body's object and its `model`, which names this server's or is absent.
void check_object_and_model(const json& body, const Model& model) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "model must be a string");
    if (m->get<std::string>() != model.name)
      throw ApiError(404, "The model '" + printable(m->get<std::string>()) + "' does not exist; this server serves '" +
                              model.name + "'",
                     "model", "model_not_found");
  }
}

// The keys a JSON schema in a request may hold, all its objects' together
// (a response_format's schema, or every tool's): far more than any schema
// the compiler takes (SchemaLimits), and few enough that keeping each
// object's keys in order (a linear search each) stays cheap.
constexpr size_t kMaxSchemaKeys = 8192;

// The value at `path` (keys from the body's top) as the request's text
// writes it, its objects' keys in their order (the parsed body sorts them,
// and a schema's property order is the output's: OpenAI's structured
// outputs write keys as the schema lists them; a chat template writes tools
// as given). Re-reads `raw`, skipping everything off that path as it goes;
// null where the path holds nothing. More than kMaxSchemaKeys keys under
// it: a 400 naming `param`, whose message calls the value `what`.
ojson ordered_field(std::string_view raw, std::span<const std::string_view> path, const std::string& param,
                    const std::string& what) {
  const int depth_of_field = static_cast<int>(path.size());
  size_t keys = 0;
  ojson::parser_callback_t keep = [&](int depth, ojson::parse_event_t event, ojson& parsed) {
    if (event != ojson::parse_event_t::key) return true;
    if (depth > depth_of_field) {  // inside the field: everything, bounded
      if (++keys > kMaxSchemaKeys) bad(param, what + " holds more than " + std::to_string(kMaxSchemaKeys) + " keys");
      return true;
    }
    // On the path (its parents were kept only where they matched).
    return parsed.is_string() && parsed.get_ref<const std::string&>() == path[static_cast<size_t>(depth - 1)];
  };
  ojson doc;
  try {
    doc = ojson::parse(raw.begin(), raw.end(), keep, /*allow_exceptions=*/true);
  } catch (const ojson::exception&) {
    return nullptr;  // (the body parsed as JSON before: not reached)
  }
  const ojson* at = &doc;
  for (std::string_view key : path) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[std::string(key)];
  }
  return *at;
}

// response_format.json_schema.schema in the request's order.
ojson ordered_schema(std::string_view raw) {
  static constexpr std::string_view path[] = {"response_format", "json_schema", "schema"};
  return ordered_field(raw, path, "response_format", "response_format.json_schema.schema");
}

// What `response_format` ({"type": "text" | "json_object" | "json_schema"})
// or llama.cpp's `grammar` (GBNF text) asks the output to be: null for any
// text. A grammar or schema the server cannot take is a 400 naming its line
// and column, or the schema's keyword. `raw`, the body's text, gives a
// schema's key order (ordered_schema); empty: the parsed body's.
std::shared_ptr<const grammar::Grammar> output_grammar(const json& body, std::string_view raw) {
  const json* format = field(body, "response_format");
  const json* gbnf = field(body, "grammar");
  std::string type = "text";
  if (format) {
    if (!format->is_object()) bad("response_format", "response_format must be an object");
    const json* t = field(*format, "type");
    if (!t || !t->is_string()) bad("response_format", "response_format.type must be a string");
    type = t->get<std::string>();
    if (type != "text" && type != "json_object" && type != "json_schema")
      bad("response_format", "response_format.type must be \"text\", \"json_object\" or \"json_schema\", not \"" +
                                 printable(type, 64) + "\"");
  }
  if (gbnf && type != "text") bad("grammar", "grammar and a response_format other than text exclude each other");
  try {
    if (gbnf) {
      if (!gbnf->is_string()) bad("grammar", "grammar must be a string (GBNF)");
      return text::compile_grammar(text::GrammarSource::Gbnf, gbnf->get<std::string>(), "grammar");
    }
    if (type == "json_object") return text::compile_grammar(text::GrammarSource::JsonObject, "", "response_format");
    if (type == "json_schema") {
      const json* js = field(*format, "json_schema");
      if (!js || !js->is_object()) bad("response_format", "response_format.json_schema must be an object");
      const json* name = field(*js, "name");
      if (name && !name->is_string()) bad("response_format", "response_format.json_schema.name must be a string");
      if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean())
        bad("response_format", "response_format.json_schema.strict must be a boolean");
      const json* schema = field(*js, "schema");
      if (schema && !schema->is_object() && !schema->is_boolean())
        bad("response_format", "response_format.json_schema.schema must be an object");
      // OpenAI's: a schema is optional (any JSON then).
      nlohmann::ordered_json ordered = raw.empty() || !schema ? nullptr : ordered_schema(raw);
      if (ordered.is_null()) ordered = schema ? nlohmann::ordered_json(*schema) : nlohmann::ordered_json::object();
      return text::compile_grammar(text::GrammarSource::JsonSchema, ordered.dump(), "response_format.json_schema.schema");
    }
  } catch (const Error& e) {
    bad(gbnf ? "grammar" : "response_format", e.what());
  }
  return nullptr;
}

// A function's name as OpenAI takes it: 1 to 64 of [a-zA-Z0-9_-].
bool function_name(const json* name) {
  if (!name || !name->is_string()) return false;
  const std::string& n = name->get_ref<const std::string&>();
  return !n.empty() && n.size() <= kMaxToolName && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// What a chat request's `tools`, `tool_choice` and `parallel_tool_calls`
// ask: the tools the chat template is given (null: none), whether the
// answer is read for calls (p.tool_format, p.parallel_tool_calls), and for
// tool_choice "required" or a named function the grammar that forces a
// call (p.request.grammar; `grammar` and `response_format` exclude it).
// `raw`, the body's text, keeps the tools' key order.
ojson tool_use(const json& body, bool chat, const Model& model, std::string_view raw, CompletionParams& p) {
  // The deprecated function calling: refused (its empty forms pass).
  if (const json* v = field(body, "functions"); v && !(v->is_array() && v->empty()))
    bad("functions", "functions (the deprecated function calling) is not supported: use tools");
  if (const json* v = field(body, "function_call"); v && !(v->is_string() && *v == "none"))
    bad("function_call", "function_call (the deprecated function calling) is not supported: use tool_choice");
  const json* tools = field(body, "tools");
  if (tools && !tools->is_array())
    bad("tools", "tools must be an array of {\"type\": \"function\", \"function\": {\"name\", …}}");
  const bool any = tools && !tools->empty();
  if (any && !chat) bad("tools", "tools are for /v1/chat/completions");
  if (any && tools->size() > kMaxTools)
    bad("tools", "tools holds " + std::to_string(tools->size()) + " tools; at most " + std::to_string(kMaxTools));
  std::vector<std::string> names;
  for (size_t i = 0; any && i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) bad(at, at + " must be an object");
    if (const json* type = field(t, "type"); !type || *type != "function")
      bad(at + ".type", at + ".type must be \"function\"");
    const json* function = field(t, "function");
    if (!function || !function->is_object()) bad(at + ".function", at + ".function must be an object");
    const json* name = field(*function, "name");
    if (!function_name(name))
      bad(at + ".function.name", at + ".function.name must be 1 to " + std::to_string(kMaxToolName) +
                                     " letters, digits, underscores and dashes");
    if (std::find(names.begin(), names.end(), name->get<std::string>()) != names.end())
      bad(at + ".function.name", at + ".function.name: another tool is named '" + name->get<std::string>() + "'");
    names.push_back(name->get<std::string>());
    if (const json* d = field(*function, "description"); d && !d->is_string())
      bad(at + ".function.description", at + ".function.description must be a string");
    if (const json* s = field(*function, "parameters"); s && !s->is_object())
      bad(at + ".function.parameters", at + ".function.parameters must be an object (a JSON schema)");
    if (const json* s = field(*function, "strict"); s && !s->is_boolean())
      bad(at + ".function.strict", at + ".function.strict must be a boolean");
  }
  std::string choice = any ? "auto" : "none", forced;
  if (const json* c = field(body, "tool_choice")) {
    const char* what = "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": …}}";
    if (c->is_string()) {
      choice = c->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") bad("tool_choice", what);
    } else if (c->is_object()) {
      const json* type = field(*c, "type");
      const json* function = field(*c, "function");
      const json* name = function && function->is_object() ? field(*function, "name") : nullptr;
      if (!type || *type != "function" || !name || !name->is_string()) bad("tool_choice", what);
      choice = "function";
      forced = name->get<std::string>();
      if (std::find(names.begin(), names.end(), forced) == names.end())
        bad("tool_choice", "tool_choice names the function '" + printable(forced, 64) + "', which no tool is");
    } else {
      bad("tool_choice", what);
    }
  }
  if (const json* parallel = field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) bad("parallel_tool_calls", "parallel_tool_calls must be true or false");
    p.parallel_tool_calls = parallel->get<bool>();
  }
  const bool force = choice == "required" || choice == "function";
  if (!any) {
    if (force) bad("tool_choice", "tool_choice \"" + choice + "\" needs tools");
    return nullptr;
  }
  static constexpr std::string_view path[] = {"tools"};
  ojson ordered = raw.empty() ? nullptr : ordered_field(raw, path, "tools", "tools");
  if (ordered.is_null()) ordered = ojson(*tools);
  // "none": the template is given the tools (as OpenAI's model is told of
  // them), and the answer is content. No template: chat_prompt says so.
  if (choice == "none" || !model.chat_template) return ordered;
  if (model.tool_format == ToolFormat::None)
    bad("tools", "this model's chat template teaches no tool-call format this server reads (<tool_call> "
                 "(Hermes, Qwen), Llama 3's JSON with name and parameters, Mistral's [TOOL_CALLS]): its calls "
                 "could not be read back (tool_choice \"none\" gives the template the tools alone)");
  if (p.request.grammar) {
    const char* other = field(body, "grammar") ? "grammar" : "response_format";
    bad(other, std::string(other) + " and tools (with a tool_choice other than \"none\") exclude each other");
  }
  p.tool_format = model.tool_format;
  if (force) {
    std::vector<ojson> functions;
    std::vector<size_t> indices;
    for (size_t i = 0; i < names.size(); ++i) {
      if (choice == "function" && names[i] != forced) continue;
      functions.push_back(ordered[i]["function"]);
      indices.push_back(i);
    }
    try {
      p.request.grammar = tool_call_grammar(model.tool_format, functions, indices, p.parallel_tool_calls);
    } catch (const Error& e) {
      // "tools[i].function.parameters: at …" names the field at fault.
      const std::string message = e.what();
      const size_t colon = message.find(": ");
      bad(message.rfind("tools[", 0) == 0 && colon != std::string::npos ? message.substr(0, colon) : "tools", message);
    }
  }
  return ordered;
}

}  // namespace

CompletionParams parse_completion(const json& body, bool chat, const Model& model, std::string_view raw) {
  check_object_and_model(body, model);
  CompletionParams p;
  p.chat = chat;
  p.n = static_cast<int32_t>(integer_in(body, "n", 1, kMaxChoices, 1));
  p.request.grammar = output_grammar(body, raw);
  const ojson tools = tool_use(body, chat, model, raw, p);
  p.stream = boolean(body, "stream");
  if (const json* o = field(body, "stream_options")) {
    if (!o->is_object()) bad("stream_options", "stream_options must be an object");
    p.include_usage = boolean(*o, "include_usage");
  }

  text::SamplingOptions& s = p.request.sampling;
  s.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, 1));
  s.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, 1));
  if (s.top_p == 0) bad("top_p", "top_p must be above 0");
  s.top_k = static_cast<int32_t>(integer_in(body, "top_k", 0, INT32_MAX, 0));
  s.min_p = static_cast<float>(number_in(body, "min_p", 0, 1, 0));
  if (s.min_p == 1) bad("min_p", "min_p must be below 1");
  s.presence_penalty = static_cast<float>(number_in(body, "presence_penalty", -2, 2, 0));
  s.frequency_penalty = static_cast<float>(number_in(body, "frequency_penalty", -2, 2, 0));
  s.repetition_penalty = 1;
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "seed must be an integer");
    // Any 64-bit pattern is a seed: a negative one is taken as its two's complement.
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  } else {
    s.seed = std::random_device{}();
  }
  p.request.stop = stop_strings(body);
  s.logit_bias = logit_bias(body, model);

  if (chat) {
    const bool logprobs = boolean(body, "logprobs");
    const int64_t top = integer_in(body, "top_logprobs", 0, 20, 0);
    if (field(body, "top_logprobs") && !logprobs)
      bad("top_logprobs", "top_logprobs needs logprobs: true");
    p.request.top_logprobs = logprobs ? static_cast<int32_t>(top) : -1;
  } else {
    p.request.top_logprobs = static_cast<int32_t>(integer_in(body, "logprobs", 0, 5, -1));
  }

  if (chat) chat_prompt(body, model, p.request, tools);
  else p.request.prompt = completion_prompt(body, model);
  const int64_t prompt = static_cast<int64_t>(p.request.prompt.size());
  const char* prompt_param = chat ? "messages" : "prompt";
  if (prompt == 0) bad(prompt_param, "the prompt encodes to no tokens");
  if (prompt >= model.context) prompt_too_long(chat, model.context, prompt);
  // OpenAI's defaults: 16 new tokens for completions, the rest of the context for chat.
  const char* max_key = chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const int64_t fallback = chat ? model.context - prompt : std::min<int64_t>(16, model.context - prompt);
  const int64_t max_tokens = integer_in(body, max_key, 1, INT32_MAX, fallback);
  if (prompt + max_tokens > model.context)
    bad(max_key,
        "This model's maximum context length is " + std::to_string(model.context) + " tokens. However, you requested " +
            std::to_string(prompt + max_tokens) + " tokens (" + std::to_string(prompt) + " in the " + prompt_param +
            ", " + std::to_string(max_tokens) + " in the completion). Please reduce the length of the " + prompt_param +
            " or completion.",
        "context_length_exceeded");
  p.request.max_tokens = static_cast<int32_t>(max_tokens);
  return p;
}

namespace {

// One input of /v1/embeddings: a string, or an array of ids.
std::vector<int32_t> embedding_input(const json& item, const Model& model, size_t index, bool several) {
  const std::string which = several ? "input[" + std::to_string(index) + "]" : "input";
  std::vector<int32_t> ids;
  if (item.is_string()) {
    if (!model.tokenizer) bad("input", "this server has no tokenizer: send token ids (arrays of integers)");
    int64_t at_least = 0;
    std::optional<std::vector<int32_t>> encoded =
        encode_within(*model.tokenizer, item.get_ref<const std::string&>(), model.context, at_least);
    if (!encoded)
      bad("input", which + " is at least " + std::to_string(at_least) + " tokens; this model's maximum context length is " +
                       std::to_string(model.context) + " tokens",
          "context_length_exceeded");
    ids = std::move(*encoded);
  } else if (item.is_array() && std::all_of(item.begin(), item.end(), [](const json& x) { return x.is_number_integer(); })) {
    if (static_cast<int64_t>(item.size()) > model.context)
      bad("input", which + " is " + std::to_string(item.size()) + " tokens; this model's maximum context length is " +
                       std::to_string(model.context) + " tokens",
          "context_length_exceeded");
    const int64_t vocab = model.vocab > 0 ? model.vocab : model.tokenizer ? model.tokenizer->vocab_size() : 0;
    for (const json& x : item) {
      const bool beyond = x.is_number_unsigned() && x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
      const int64_t id = beyond ? -1 : x.get<int64_t>();
      if (id < 0 || id >= vocab)
        bad("input", which + ": token " + (beyond ? x.dump() : std::to_string(id)) + " is outside the vocabulary (" +
                         std::to_string(vocab) + " tokens)");
      ids.push_back(static_cast<int32_t>(id));
    }
  } else {
    bad("input", "input must be a string, an array of strings, an array of token ids or an array of arrays of token ids");
  }
  if (ids.empty()) bad("input", which + " is empty");
  return ids;
}

}  // namespace

EmbeddingParams parse_embeddings(const json& body, const Model& model, int64_t width) {
  check_object_and_model(body, model);
  EmbeddingParams p;
  if (const json* f = field(body, "encoding_format")) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      bad("encoding_format", "encoding_format must be \"float\" or \"base64\"");
    p.base64 = *f == "base64";
  }
  if (const json* d = field(body, "dimensions")) {
    if (!d->is_number_integer() || d->get<int64_t>() != width)
      bad("dimensions", "dimensions other than the model's " + std::to_string(width) +
                            " are not supported (the model's vectors are not truncatable)");
  }
  const json* input = field(body, "input");
  if (!input) bad("input", "Missing required parameter: 'input'", "missing_required_parameter");
  // An array of strings or of id arrays is several inputs; a string or one
  // array of ids is one.
  const bool several = input->is_array() && !input->empty() &&
                       std::all_of(input->begin(), input->end(), [](const json& x) { return x.is_string() || x.is_array(); });
  if (input->is_array() && input->empty()) bad("input", "input is empty");
  if (several && input->size() > kMaxEmbeddingInputs)
    bad("input", "input holds " + std::to_string(input->size()) + " inputs; at most " +
                     std::to_string(kMaxEmbeddingInputs) + " are allowed");
  const auto add = [&](const json& item, size_t index) {
    p.inputs.push_back(embedding_input(item, model, index, several));
    p.tokens += static_cast<int64_t>(p.inputs.back().size());
    if (p.tokens > kMaxEmbeddingTokens)
      bad("input", "the inputs are over " + std::to_string(kMaxEmbeddingTokens) + " tokens in all; send fewer a request");
  };
  if (several)
    for (size_t i = 0; i < input->size(); ++i) add((*input)[i], i);
  else
    add(*input, 0);
  return p;
}

json embeddings_response(const EmbeddingParams& p, const std::string& model, const std::vector<std::vector<float>>& vectors) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    if (p.base64) {
      // The f32 values' bytes, little-endian, as numpy's frombuffer(…, "float32") reads them.
      std::string bytes;
      for (const float v : vectors[i]) {
        uint32_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((bits >> (8 * b)) & 0xFF));
      }
      item["embedding"] = base64_encode(std::as_bytes(std::span(bytes)));
    } else {
      item["embedding"] = vectors[i];
    }
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", p.tokens}, {"total_tokens", p.tokens}}}};
}

json usage_json(const Finish& f) { return usage_json(std::vector<Finish>{f}); }

json usage_json(const std::vector<Finish>& choices) {
  int64_t completion = 0;
  for (const Finish& f : choices) completion += f.completion_tokens;
  const Finish& first = choices.front();
  return {{"prompt_tokens", first.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", first.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens}}}};
}

json completion_response(const CompletionParams& p, const ResponseHeader& h, const text::Tokenizer& tokenizer,
                         const std::string& text, const std::vector<TokenEvent>& events, const Finish& finish) {
  json choice = {{"index", 0}};
  ToolCallParser::Output read;
  if (p.tool_format != ToolFormat::None) read = parse_tool_calls(p.tool_format, text, p.parallel_tool_calls);
  if (!read.calls.empty()) {
    // OpenAI's: content null where the answer is calls alone.
    json calls = json::array();
    for (size_t i = 0; i < read.calls.size(); ++i) calls.push_back(tool_call_json(p, read.calls[i], i, true));
    choice["message"] = {{"role", "assistant"},
                         {"content", read.content.empty() ? json(nullptr) : json(read.content)},
                         {"tool_calls", std::move(calls)}};
  } else if (p.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs_json(p, tokenizer, events, 0);
  choice["finish_reason"] = finish_reason(&finish, !read.calls.empty());
  return {{"id", h.id},
          {"object", p.chat ? "chat.completion" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(finish)}};
}

json stream_chunk(const CompletionParams& p, const ResponseHeader& h, const text::Tokenizer& tokenizer,
                  const std::vector<TokenEvent>& events, const Finish* finish, bool role) {
  std::string text;
  for (const TokenEvent& e : events) text += e.text;
  json choice = {{"index", 0}};
  if (p.chat) {
    choice["delta"] = json::object();
    if (role) choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    else if (!finish) choice["delta"]["content"] = text;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = events.empty() ? json(nullptr) : logprobs_json(p, tokenizer, events, 0);
  choice["finish_reason"] = finish_reason(finish);
  return {{"id", h.id},
          {"object", p.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({choice})}};
}

void ToolCallStream::add(std::vector<json>& out, const CompletionParams& p, const ResponseHeader& h,
                         const text::Tokenizer& tokenizer, const std::vector<TokenEvent>& events,
                         ToolCallParser::Output read) {
  const bool logprobs = p.request.top_logprobs >= 0 &&
                        std::any_of(events.begin(), events.end(), [](const TokenEvent& e) { return e.token >= 0; });
  if (!read.content.empty() || logprobs) {
    json chunk = stream_chunk(p, h, tokenizer, events, nullptr);
    chunk["choices"][0]["delta"]["content"] = read.content;
    out.push_back(std::move(chunk));
  }
  for (const ToolCall& call : read.calls) {
    const size_t index = static_cast<size_t>(calls_++);
    json first = stream_chunk(p, h, tokenizer, {}, nullptr);
    first["choices"][0]["delta"] = {{"tool_calls", json::array({tool_call_json(p, call, index, false)})}};
    out.push_back(std::move(first));
    json arguments = stream_chunk(p, h, tokenizer, {}, nullptr);
    arguments["choices"][0]["delta"] = {
        {"tool_calls", json::array({{{"index", index}, {"function", {{"arguments", call.arguments}}}}})}};
    out.push_back(std::move(arguments));
  }
}

std::vector<json> ToolCallStream::chunks(const CompletionParams& p, const ResponseHeader& h,
                                         const text::Tokenizer& tokenizer, const std::vector<TokenEvent>& events) {
  std::string text;
  for (const TokenEvent& e : events) text += e.text;
  std::vector<json> out;
  add(out, p, h, tokenizer, events, parser_.feed(text));
  return out;
}

std::vector<json> ToolCallStream::finish(const CompletionParams& p, const ResponseHeader& h,
                                         const text::Tokenizer& tokenizer, const Finish& finish) {
  std::vector<json> out;
  add(out, p, h, tokenizer, {}, parser_.finish());
  json last = stream_chunk(p, h, tokenizer, {}, &finish);
  last["choices"][0]["finish_reason"] = finish_reason(&finish, calls_ > 0);
  out.push_back(std::move(last));
  return out;
}

}  // namespace lathe::serve
