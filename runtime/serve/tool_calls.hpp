// Tool calls (issue 47): the formats chat templates teach a model for
// calling a function, read back from the model's text into OpenAI's
// `tool_calls`, and the grammar that forces one (tool_choice "required" or
// a named function) with arguments that follow the function's `parameters`
// schema.
//
//   Hermes   <tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>, one
//            after another for parallel calls (Qwen2.5, Qwen3, Hermes)
//   Llama3   {"name": "f", "parameters": {…}}, the whole answer, maybe after
//            <|python_tag|> (Llama 3.1 – 3.3: one call an answer)
//   Mistral  [TOOL_CALLS] [{"name": "f", "arguments": {…}}, …], the whole
//            answer ([TOOL_CALLS] is a control token: the text the server
//            decodes usually lacks it)
//
// Which one a model speaks is read from its chat template once, at load.
// The model's text is untrusted: the parser bounds the JSON's nesting and
// never throws on any text (tests/fuzz/tool_calls_fuzz.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.hpp"

namespace lathe::serve {

enum class ToolFormat { None, Hermes, Llama3, Mistral };

// The format a chat template's source teaches: "[TOOL_CALLS]" Mistral,
// "<tool_call>" Hermes, "<|python_tag|>" or a "parameters" key Llama 3;
// None for a template that writes no tool calls (Gemma 2's, the demo's).
ToolFormat detect_tool_format(std::string_view template_source);
const char* tool_format_name(ToolFormat format);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object, compact, keys in the model's order
};

// Reads a model's text as it comes: content that cannot be part of a tool
// call is released at once, text that may be one is held until the call is
// whole (its closing marker, or the end of the text for the whole-answer
// formats), then given as a call, or as content where it does not parse as
// one. Whitespace around calls is dropped; an answer without calls comes
// out byte for byte. `parallel` false: the calls after the first are
// dropped.
class ToolCallParser {
 public:
  ToolCallParser(ToolFormat format, bool parallel) : format_(format), parallel_(parallel) {}

  struct Output {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Output feed(std::string_view text);
  // The end of the text: what was held back.
  Output finish();

 private:
  void release(Output& out, std::string_view text);
  void call(Output& out, ToolCall c);
  void hermes(Output& out);

  ToolFormat format_;
  bool parallel_;
  std::string held_;     // text not yet given out
  std::string spaces_;   // whitespace held back: it may stand between two calls
  std::string opening_spaces_;  // Hermes: the whitespace before the call being read
  bool inside_ = false;  // Hermes: held_ is a call's text, its opening marker read
  size_t scanned_ = 0;   // Hermes: held_ holds no marker before this, but for a marker's length
  bool after_call_ = false;  // whitespace that follows is dropped
  enum class Whole { Undecided, Content, Call } whole_ = Whole::Undecided;  // Llama3, Mistral
  int64_t calls_ = 0;
};

// One JSON value, the whole of `text` (whitespace around it allowed),
// keys in their order; nullopt where it is not one or nests deeper than 64
// (the parser recurses: a call's arguments are untrusted text).
std::optional<nlohmann::ordered_json> bounded_json(std::string_view text);

// The whole text at once: feed(text) and finish().
ToolCallParser::Output parse_tool_calls(ToolFormat format, std::string_view text, bool parallel);

// An id for a call: "call_" and 24 letters and digits; Mistral's template
// takes 9 letters and digits.
std::string tool_call_id(ToolFormat format);

// The grammar of a forced call: one of `functions` (OpenAI's function
// objects {"name", "parameters"}, at least one; a missing `parameters` is
// an empty object), in the format's text, its arguments following the
// function's `parameters` schema (docs/grammar.md says which keywords it
// takes); `parallel`: one or more calls (Hermes, Mistral). Keys keep the
// order of `functions`. Throws lathe::Error(InvalidArgument) naming
// "tools[i].function.parameters" (i: the function's index in `indices`,
// beside `functions`) and the keyword at fault.
std::shared_ptr<const grammar::Grammar> tool_call_grammar(ToolFormat format,
                                                          const std::vector<nlohmann::ordered_json>& functions,
                                                          const std::vector<size_t>& indices, bool parallel);

}  // namespace lathe::serve
