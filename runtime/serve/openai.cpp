#include "runtime/serve/openai.hpp"

#include <random>

#include "runtime/error.hpp"

namespace lathe::serve {

using nlohmann::json;

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
  const int64_t x = v->get<int64_t>();
  if (x < low || x > high)
    bad(key, std::string(key) + " " + std::to_string(x) + " is out of range: it must be in [" + std::to_string(low) +
                 ", " + std::to_string(high) + "]");
  return x;
}

bool boolean(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return false;
  if (!v->is_boolean()) bad(key, std::string(key) + " must be true or false");
  return v->get<bool>();
}

// A message's content: a string, or an array of {"type": "text", "text": …} parts.
std::string content_text(const json& content, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, param + " must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(param, param + ": only parts of type \"text\" with a string \"text\" are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<int32_t> chat_prompt(const json& body, const Model& model) {
  const json* messages = field(body, "messages");
  if (!messages) bad("messages", "Missing required parameter: 'messages'", "missing_required_parameter");
  if (!messages->is_array() || messages->empty()) bad("messages", "messages must be a non-empty array");
  json rendered = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(at, at + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(at + ".role", at + ".role must be a string");
    json message = json::object();
    message["role"] = m["role"];
    message["content"] = content_text(m.value("content", json()), i);
    rendered.push_back(std::move(message));
  }
  if (!model.chat_template)
    throw ApiError(400, "this model's checkpoint has no chat template: use /v1/completions", "messages");
  std::string prompt;
  try {
    prompt = model.chat_template->render_chat(nlohmann::ordered_json::parse(rendered.dump()), true, model.bos_token,
                                              model.eos_token);
  } catch (const Error& e) {
    // The template's raise_exception: the conversation is not one it takes.
    if (e.kind() == ErrorKind::InvalidArgument) bad("messages", e.what());
    throw ApiError(500, std::string("the chat template failed: ") + e.what());
  }
  std::vector<int32_t> ids = model.tokenizer->encode(prompt, /*add_special=*/true);
  // A template that writes the BOS itself, tokenized with the BOS the
  // vocabulary adds: one is enough (llama.cpp warns and keeps both).
  const std::optional<int32_t> bos = model.tokenizer->bos();
  if (bos && ids.size() >= 2 && ids[0] == *bos && ids[1] == *bos) ids.erase(ids.begin());
  return ids;
}

std::vector<int32_t> completion_prompt(const json& body, const Model& model) {
  const json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "Missing required parameter: 'prompt'", "missing_required_parameter");
  const json* p = prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) return model.tokenizer->encode(p->get<std::string>(), /*add_special=*/true);
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

json finish_reason(const Finish* f) {
  if (!f) return nullptr;
  return f->reason == "length" ? "length" : "stop";
}

}  // namespace

json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", error_type(status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json ApiError::body() const { return error_body(status, what(), param, code); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

CompletionParams parse_completion(const json& body, bool chat, const Model& model) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  CompletionParams p;
  p.chat = chat;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "model must be a string");
    if (m->get<std::string>() != model.name)
      throw ApiError(404, "The model '" + m->get<std::string>() + "' does not exist; this server serves '" + model.name + "'",
                     "model", "model_not_found");
  }
  if (integer_in(body, "n", 1, 1, 1) != 1) bad("n", "n must be 1");
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
    s.seed = static_cast<uint64_t>(seed->get<int64_t>());
  } else {
    s.seed = std::random_device{}();
  }
  p.request.stop = stop_strings(body);

  if (chat) {
    const bool logprobs = boolean(body, "logprobs");
    const int64_t top = integer_in(body, "top_logprobs", 0, 20, 0);
    if (field(body, "top_logprobs") && !logprobs)
      bad("top_logprobs", "top_logprobs needs logprobs: true");
    p.request.top_logprobs = logprobs ? static_cast<int32_t>(top) : -1;
  } else {
    p.request.top_logprobs = static_cast<int32_t>(integer_in(body, "logprobs", 0, 5, -1));
  }

  p.request.prompt = chat ? chat_prompt(body, model) : completion_prompt(body, model);
  const int64_t prompt = static_cast<int64_t>(p.request.prompt.size());
  const char* prompt_param = chat ? "messages" : "prompt";
  if (prompt == 0) bad(prompt_param, "the prompt encodes to no tokens");
  if (prompt >= model.context)
    bad(prompt_param,
        "This model's maximum context length is " + std::to_string(model.context) + " tokens. However, your " +
            (chat ? "messages" : "prompt") + " resulted in " + std::to_string(prompt) +
            " tokens, which leaves no room for the completion.",
        "context_length_exceeded");
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

json usage_json(const Finish& f) {
  return {{"prompt_tokens", f.prompt_tokens},
          {"completion_tokens", f.completion_tokens},
          {"total_tokens", f.prompt_tokens + f.completion_tokens}};
}

json completion_response(const CompletionParams& p, const ResponseHeader& h, const text::Tokenizer& tokenizer,
                         const std::string& text, const std::vector<TokenEvent>& events, const Finish& finish) {
  json choice = {{"index", 0}};
  if (p.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  choice["logprobs"] = logprobs_json(p, tokenizer, events, 0);
  choice["finish_reason"] = finish_reason(&finish);
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

}  // namespace lathe::serve
