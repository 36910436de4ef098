// libFuzzer target for the chat-template interpreter: any bytes in, as a
// checkpoint's Jinja template, must parse or throw lathe::Error; a parsed
// template renders a fixed conversation (with and without the generation
// prompt, with tools and extra variables) or throws lathe::Error. A crash,
// a sanitizer report, a hang (the interpreter bounds nesting, recursion,
// loops and output), any other exception is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 chat_template`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/text/jinja/chat_template.hpp"

using namespace lathe;
using ojson = nlohmann::ordered_json;

namespace {

const ojson& messages() {
  static const ojson m = ojson::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "4", "tool_calls": [
      {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "content": "{\"sum\": 4}"},
    {"role": "user", "content": [{"type": "text", "text": "And 3 + 3?"}]}
  ])");
  return m;
}

const ojson& extra() {
  static const ojson e = ojson::parse(R"({
    "tools": [{"type": "function", "function": {"name": "add", "description": "a + b",
               "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}],
    "enable_thinking": false, "date_string": "26 Jul 2024"
  })");
  return e;
}

}  // namespace

void lathe::fuzz::chat_template(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    const text::ChatTemplate t = text::ChatTemplate::parse(source, "fuzz.jinja");
    for (const bool generation_prompt : {false, true}) {
      try {
        (void)t.render_chat(messages(), generation_prompt, "<s>", "</s>");
      } catch (const Error&) {
      }
    }
    try {
      (void)t.render_chat(messages(), true, "<|begin_of_text|>", "<|eot_id|>", extra());
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::chat_template)
