#include "runtime/serve/tool_calls.hpp"

#include <optional>
#include <random>

#include "runtime/error.hpp"
#include "runtime/grammar/json_schema.hpp"

namespace lathe::serve {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kSpace = " \t\r\n";
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>", kMistralMarker = "[TOOL_CALLS]";

// The nesting a call's JSON may have: nlohmann's parser recurses, and the
// text is the model's.
constexpr int kMaxCallDepth = 64;
constexpr size_t kMaxNameBytes = 256;

std::string_view trimmed(std::string_view s) {
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// No deeper than kMaxCallDepth (strings skipped), so that parsing is safe.
bool shallow(std::string_view s) {
  int depth = 0;
  bool string = false, escaped = false;
  for (const char c : s) {
    if (string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') string = false;
    } else if (c == '"') {
      string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxCallDepth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

// {"name": "f", "arguments" or "parameters": {…} (or a string of JSON text
// of an object)}: a call; nullopt for anything else.
std::optional<ToolCall> read_call(const ojson& v) {
  if (!v.is_object()) return std::nullopt;
  const auto name = v.find("name");
  if (name == v.end() || !name->is_string()) return std::nullopt;
  const std::string& n = name->get_ref<const std::string&>();
  if (n.empty() || n.size() > kMaxNameBytes) return std::nullopt;
  auto args = v.find("arguments");
  if (args == v.end()) args = v.find("parameters");
  ojson arguments = ojson::object();
  if (args != v.end()) {
    if (args->is_string()) {
      std::optional<ojson> parsed = bounded_json(args->get_ref<const std::string&>());
      if (!parsed) return std::nullopt;
      arguments = std::move(*parsed);
    } else {
      arguments = *args;
    }
  }
  if (!arguments.is_object()) return std::nullopt;
  return ToolCall{n, arguments.dump(-1, ' ', false, ojson::error_handler_t::replace)};
}

std::optional<ToolCall> read_call_text(std::string_view text) {
  std::optional<ojson> v = bounded_json(text);
  return v ? read_call(*v) : std::nullopt;
}

// The longest end of `s` that is a proper beginning of `marker`.
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ojson> bounded_json(std::string_view text) {
  if (!shallow(text)) return std::nullopt;
  ojson v = ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

ToolFormat detect_tool_format(std::string_view source) {
  if (source.find(kMistralMarker) != std::string_view::npos) return ToolFormat::Mistral;
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolFormat::Hermes;
  if (source.find(kPythonTag) != std::string_view::npos || source.find("\"parameters\"") != std::string_view::npos)
    return ToolFormat::Llama3;
  return ToolFormat::None;
}

const char* tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::Hermes: return "hermes (<tool_call>)";
    case ToolFormat::Llama3: return "llama3 (a JSON object with name and parameters)";
    case ToolFormat::Mistral: return "mistral ([TOOL_CALLS])";
    case ToolFormat::None: break;
  }
  return "none";
}

void ToolCallParser::release(Output& out, std::string_view text) {
  if (after_call_) {
    const size_t begin = text.find_first_not_of(kSpace);
    if (begin == std::string_view::npos) return;  // whitespace after a call
    text.remove_prefix(begin);
    after_call_ = false;
  }
  const size_t last = text.find_last_not_of(kSpace);
  if (last == std::string_view::npos) {
    spaces_ += text;
    return;
  }
  out.content += spaces_;
  out.content.append(text.substr(0, last + 1));
  spaces_.assign(text.substr(last + 1));
}

void ToolCallParser::call(Output& out, ToolCall c) {
  spaces_.clear();  // whitespace before a call
  after_call_ = true;
  if (!parallel_ && calls_ > 0) return;
  ++calls_;
  out.calls.push_back(std::move(c));
}

void ToolCallParser::hermes(Output& out) {
  for (;;) {
    const std::string_view marker = inside_ ? kHermesClose : kHermesOpen;
    // (From where the last look stopped: a long call is not searched again.)
    const size_t from = scanned_ >= marker.size() ? scanned_ - marker.size() + 1 : 0;
    const size_t at = held_.find(marker, from);
    if (at == std::string::npos) {
      scanned_ = held_.size();
      if (inside_) return;
      const size_t keep = partial_marker(held_, kHermesOpen);
      release(out, std::string_view(held_).substr(0, held_.size() - keep));
      held_.erase(0, held_.size() - keep);
      scanned_ = held_.size();
      return;
    }
    if (!inside_) {
      release(out, std::string_view(held_).substr(0, at));
      opening_spaces_ = std::move(spaces_);  // dropped if a call follows
      spaces_.clear();
    } else if (std::optional<ToolCall> c = read_call_text(std::string_view(held_).substr(0, at))) {
      call(out, std::move(*c));
    } else {  // not a call: its text is content
      release(out, opening_spaces_ + std::string(kHermesOpen) + held_.substr(0, at) + std::string(kHermesClose));
    }
    held_.erase(0, at + marker.size());
    scanned_ = 0;
    inside_ = !inside_;
  }
}

ToolCallParser::Output ToolCallParser::feed(std::string_view text) {
  Output out;
  if (format_ == ToolFormat::None) {
    out.content.assign(text);
    return out;
  }
  held_.append(text);
  if (format_ == ToolFormat::Hermes) {
    hermes(out);
    return out;
  }
  if (whole_ == Whole::Undecided) {
    // The answer is a call where it starts with the marker or the JSON's
    // first character; text before that decides nothing.
    const std::string_view s = trimmed(held_);
    const std::string_view marker = format_ == ToolFormat::Llama3 ? kPythonTag : kMistralMarker;
    const char opener = format_ == ToolFormat::Llama3 ? '{' : '[';
    if (!s.empty())
      whole_ = starts_with(s, marker) || s[0] == opener ? Whole::Call
               : starts_with(marker, s)                  ? Whole::Undecided
                                                         : Whole::Content;
  }
  if (whole_ == Whole::Content) {
    release(out, held_);
    held_.clear();
  }
  return out;
}

ToolCallParser::Output ToolCallParser::finish() {
  Output out;
  if (format_ == ToolFormat::Hermes) {
    if (!inside_) {
      release(out, held_);
    } else if (std::optional<ToolCall> c = read_call_text(held_)) {  // a call the text ended in, unclosed
      call(out, std::move(*c));
    } else {
      release(out, opening_spaces_ + std::string(kHermesOpen) + held_);
    }
  } else if (format_ != ToolFormat::None) {
    std::string_view s = trimmed(held_);
    const std::string_view marker = format_ == ToolFormat::Llama3 ? kPythonTag : kMistralMarker;
    if (starts_with(s, marker)) s = trimmed(s.substr(marker.size()));
    std::vector<ToolCall> calls;
    if (whole_ == Whole::Call) {
      if (std::optional<ojson> v = bounded_json(s)) {
        const bool list = v->is_array() && format_ == ToolFormat::Mistral;
        for (const ojson& item : list ? *v : ojson::array({*v})) {
          std::optional<ToolCall> c = read_call(item);
          if (!c) {
            calls.clear();
            break;
          }
          calls.push_back(std::move(*c));
        }
      }
    }
    if (calls.empty()) release(out, held_);
    for (ToolCall& c : calls) call(out, std::move(c));
  }
  held_.clear();
  if (calls_ == 0) out.content += spaces_;  // an answer without calls, byte for byte
  spaces_.clear();
  return out;
}

ToolCallParser::Output parse_tool_calls(ToolFormat format, std::string_view text, bool parallel) {
  ToolCallParser parser(format, parallel);
  ToolCallParser::Output out = parser.feed(text);
  ToolCallParser::Output rest = parser.finish();
  out.content += rest.content;
  for (ToolCall& c : rest.calls) out.calls.push_back(std::move(c));
  return out;
}

std::string tool_call_id(ToolFormat format) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = format == ToolFormat::Mistral ? "" : "call_";
  for (int i = 0, n = format == ToolFormat::Mistral ? 9 : 24; i < n; ++i) id += kAlphabet[pick(random)];
  return id;
}

namespace {

// A schema moved to `prefix` (a JSON pointer "#/…") of a larger one: its
// references, "#…", made to point where it now stands. Only the keywords
// that hold schemas are walked (a `const` holding "$ref" is data).
void rebase_refs(ojson& schema, const std::string& prefix) {
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string()) {
      const std::string target = value.get<std::string>();
      if (!target.empty() && target[0] == '#') value = prefix + target.substr(1);
    } else if (key == "properties" || key == "$defs" || key == "definitions") {
      if (value.is_object())
        for (ojson& sub : value) rebase_refs(sub, prefix);
    } else if (key == "items" || key == "additionalProperties") {
      rebase_refs(value, prefix);
    } else if (key == "anyOf" || key == "oneOf" || key == "allOf") {
      if (value.is_array())
        for (ojson& sub : value) rebase_refs(sub, prefix);
    }
  }
}

ojson parameters_of(const ojson& function) {
  const auto p = function.find("parameters");
  if (p == function.end() || p->is_null())
    return {{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
  return *p;
}

}  // namespace

std::shared_ptr<const grammar::Grammar> tool_call_grammar(ToolFormat format, const std::vector<ojson>& functions,
                                                          const std::vector<size_t>& indices, bool parallel) {
  if (format == ToolFormat::None || functions.empty())
    throw Error(ErrorKind::InvalidArgument, "tools: no tool-call format or no function to force");
  const std::string arguments = format == ToolFormat::Llama3 ? "parameters" : "arguments";
  // The call object of each function, in the order the format writes it.
  const auto call_schema = [&](const ojson& function, const std::string& at) {
    ojson parameters = parameters_of(function);
    rebase_refs(parameters, at + "/properties/" + arguments);
    ojson properties = ojson::object();
    properties["name"] = {{"const", function.at("name")}};
    properties[arguments] = std::move(parameters);
    return ojson{{"type", "object"},
                 {"properties", std::move(properties)},
                 {"required", {"name", arguments}},
                 {"additionalProperties", false}};
  };
  ojson schema;
  if (functions.size() == 1) {
    schema = call_schema(functions[0], "#");
  } else {
    schema["anyOf"] = ojson::array();
    for (size_t i = 0; i < functions.size(); ++i)
      schema["anyOf"].push_back(call_schema(functions[i], "#/anyOf/" + std::to_string(i)));
  }
  std::string rules;
  try {
    rules = grammar::schema_rules_gbnf(schema, "tools", "call");
  } catch (const Error&) {
    // Which function's schema: each alone, for a message in its own terms.
    for (size_t i = 0; i < functions.size(); ++i)
      grammar::schema_to_gbnf(parameters_of(functions[i]),
                              "tools[" + std::to_string(i < indices.size() ? indices[i] : i) + "].function.parameters");
    throw;
  }
  std::string root;
  switch (format) {
    case ToolFormat::Hermes:
      root = R"(root ::= "<tool_call>\n" call "\n</tool_call>")";
      if (parallel) root += R"( ( "\n<tool_call>\n" call "\n</tool_call>" )*)";
      break;
    case ToolFormat::Llama3:
      root = "root ::= call";
      break;
    case ToolFormat::Mistral:
      root = parallel ? R"(root ::= "[" call ( ", " call )* "]")" : R"(root ::= "[" call "]")";
      break;
    case ToolFormat::None: break;
  }
  return grammar::Grammar::parse(root + "\n" + rules, "tools (as a grammar)");
}

}  // namespace lathe::serve
