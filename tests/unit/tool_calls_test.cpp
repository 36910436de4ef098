// Tool calls (runtime/serve/tool_calls.hpp, openai.hpp): the formats read
// from the chat templates of tests/data/chat_templates, the model's text
// read back into calls (whole and streamed a byte at a time), the grammar
// that forces a call, and the requests and responses of the OpenAI API
// that carry them. The server's side is tests/serve/tools.cjs.
#include "runtime/serve/tool_calls.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "runtime/error.hpp"
#include "runtime/serve/openai.hpp"
#include "tests/harness/api_error.hpp"
#include "tests/harness/temp_files.hpp"
#include "tests/fuzz/fuzz.hpp"

using namespace lathe;
using namespace lathe::serve;
using nlohmann::json;
using lathe::test::error_of;
using ojson = nlohmann::ordered_json;

namespace {

std::string chat_template_source(const std::string& file) {
  return lathe::test::read_file(LATHE_SOURCE_DIR "/tests/data/chat_templates/" + file);
}

// The text fed a byte at a time: the same output as all at once.
ToolCallParser::Output bytewise(ToolFormat format, std::string_view text, bool parallel) {
  ToolCallParser parser(format, parallel);
  ToolCallParser::Output out;
  const auto add = [&](ToolCallParser::Output o) {
    out.content += o.content;
    for (ToolCall& c : o.calls) out.calls.push_back(std::move(c));
  };
  for (char c : text) add(parser.feed(std::string_view(&c, 1)));
  add(parser.finish());
  return out;
}

// parse_tool_calls, checked against the bytewise parse.
ToolCallParser::Output parse(ToolFormat format, std::string_view text, bool parallel = true) {
  ToolCallParser::Output whole = parse_tool_calls(format, text, parallel);
  ToolCallParser::Output bytes = bytewise(format, text, parallel);
  CHECK(whole.content == bytes.content);
  REQUIRE(whole.calls.size() == bytes.calls.size());
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    CHECK(whole.calls[i].name == bytes.calls[i].name);
    CHECK(whole.calls[i].arguments == bytes.calls[i].arguments);
  }
  return whole;
}

}  // namespace

TEST_CASE("tool calls: the format is read from what the chat template teaches") {
  CHECK(detect_tool_format(chat_template_source("qwen2.5-instruct.jinja")) == ToolFormat::Hermes);
  CHECK(detect_tool_format(chat_template_source("qwen3.jinja")) == ToolFormat::Hermes);
  CHECK(detect_tool_format(chat_template_source("llama-3.3-instruct.jinja")) == ToolFormat::Llama3);
  CHECK(detect_tool_format(chat_template_source("gemma-2-it.jinja")) == ToolFormat::None);
  CHECK(detect_tool_format(chat_template_source("smollm2-instruct.jinja")) == ToolFormat::None);
  CHECK(detect_tool_format(lathe::test::read_file(LATHE_SOURCE_DIR "/models/demo/tokenizer_config.json")) == ToolFormat::None);
  // Mistral v0.3's: its calls after the control token [TOOL_CALLS].
  CHECK(detect_tool_format(R"({{- "[TOOL_CALLS] [" }}{%- for tool_call in message.tool_calls %})") ==
        ToolFormat::Mistral);
}

TEST_CASE("tool calls: Hermes' <tool_call> blocks, one or several, among content") {
  const auto one = parse(ToolFormat::Hermes,
                         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\xC3\xBCrich\", "
                         "\"unit\": \"celsius\"}}\n</tool_call>");
  CHECK(one.content.empty());
  REQUIRE(one.calls.size() == 1);
  CHECK(one.calls[0].name == "get_weather");
  CHECK(one.calls[0].arguments == "{\"city\":\"Z\xC3\xBCrich\",\"unit\":\"celsius\"}");  // compact, in order

  const std::string two = "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
                          "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\n";
  const auto both = parse(ToolFormat::Hermes, two);
  CHECK(both.content == "Let me look.");
  REQUIRE(both.calls.size() == 2);
  CHECK(both.calls[0].name == "a");
  CHECK(both.calls[0].arguments == R"({"x":1})");
  CHECK(both.calls[1].name == "b");
  CHECK(both.calls[1].arguments == "{}");
  // parallel_tool_calls false: the first alone.
  const auto first = parse(ToolFormat::Hermes, two, false);
  REQUIRE(first.calls.size() == 1);
  CHECK(first.calls[0].name == "a");

  // Arguments as a string of JSON, or under "parameters"; a call the text ends in, unclosed.
  CHECK(parse(ToolFormat::Hermes, R"(<tool_call>{"name": "f", "arguments": "{\"k\": [1, 2]}"}</tool_call>)")
            .calls.at(0)
            .arguments == R"({"k":[1,2]})");
  CHECK(parse(ToolFormat::Hermes, R"(<tool_call>{"name": "f", "parameters": {"k": true}})").calls.at(0).arguments ==
        R"({"k":true})");
}

TEST_CASE("tool calls: text that is no call stays content, byte for byte") {
  for (const std::string& text :
       {std::string("Paris is the capital.  \n\n"), std::string("  a <tool_call> that never closes"),
        std::string("<tool_call>not JSON</tool_call> after"), std::string("<tool_call>{\"name\": 5}</tool_call>"),
        std::string("<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>"), std::string("<tool_"),
        std::string("a </tool_call> b"), std::string(""), std::string(" \n ")}) {
    CAPTURE(text);
    const auto out = parse(ToolFormat::Hermes, text);
    CHECK(out.calls.empty());
    CHECK(out.content == text);
  }
  for (ToolFormat f : {ToolFormat::Llama3, ToolFormat::Mistral, ToolFormat::None}) {
    for (const std::string& text : {std::string("{\"a\": 1}"), std::string(" [1, 2] "), std::string("Hello, world.\n"),
                                   std::string("[TOOL_CALLS] nothing"), std::string("<|python_tag|>")}) {
      CAPTURE(text);
      const auto out = parse(f, text);
      CHECK(out.calls.empty());
      CHECK(out.content == text);
    }
  }
  // Nesting deeper than the parser allows is content, not a crash.
  const std::string deep = "<tool_call>" + std::string(100000, '[') + "</tool_call>";
  CHECK(parse(ToolFormat::Hermes, deep).content == deep);
  const std::string deep_args = R"(<tool_call>{"name": "f", "arguments": ")" + std::string(100000, '[') + "\"}</tool_call>";
  CHECK(parse(ToolFormat::Hermes, deep_args).calls.empty());
}

TEST_CASE("tool calls: Llama 3's JSON object with name and parameters is the whole answer") {
  const auto call = parse(ToolFormat::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  REQUIRE(call.calls.size() == 1);
  CHECK(call.calls[0].name == "get_weather");
  CHECK(call.calls[0].arguments == R"({"city":"Paris"})");
  CHECK(call.content.empty());
  const auto tagged = parse(ToolFormat::Llama3, "<|python_tag|>{\"name\": \"f\", \"arguments\": {}}");
  REQUIRE(tagged.calls.size() == 1);
  CHECK(tagged.calls[0].name == "f");
  // Text around the object: an answer, not a call.
  CHECK(parse(ToolFormat::Llama3, "Sure: {\"name\": \"f\", \"parameters\": {}}").calls.empty());
  CHECK(parse(ToolFormat::Llama3, "{\"name\": \"f\", \"parameters\": {}} and more").calls.empty());
}

TEST_CASE("tool calls: Mistral's [TOOL_CALLS] array, its marker kept or dropped with the control token") {
  const std::string text = R"([TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": "z"}, "id": "abcdefghi"}])";
  const auto both = parse(ToolFormat::Mistral, text);
  REQUIRE(both.calls.size() == 2);
  CHECK(both.calls[0].name == "a");
  CHECK(both.calls[1].arguments == R"({"y":"z"})");
  CHECK(both.content.empty());
  CHECK(parse(ToolFormat::Mistral, text.substr(std::string("[TOOL_CALLS] ").size())).calls.size() == 2);
  CHECK(parse(ToolFormat::Mistral, text, false).calls.size() == 1);
  // One element not a call: the whole answer is content.
  CHECK(parse(ToolFormat::Mistral, R"([{"name": "a", "arguments": {}}, 3])").calls.empty());
}

TEST_CASE("tool calls: ids are OpenAI's shape, Mistral's nine letters and digits") {
  const std::string id = tool_call_id(ToolFormat::Hermes);
  CHECK(id.rfind("call_", 0) == 0);
  CHECK(id.size() == 29);
  CHECK(tool_call_id(ToolFormat::Hermes) != id);
  const std::string mistral = tool_call_id(ToolFormat::Mistral);
  CHECK(mistral.size() == 9);
  CHECK(std::all_of(mistral.begin(), mistral.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }));
}

namespace {

const ojson kWeather = ojson::parse(R"({"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": false}})");
const ojson kTree = ojson::parse(R"({"name": "plant", "parameters": {"$defs": {"node": {"type": "object",
    "properties": {"label": {"type": "string", "maxLength": 3}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["label", "kids"], "additionalProperties": false}}, "$ref": "#/$defs/node"}})");
const ojson kNoParameters = ojson::parse(R"({"name": "now"})");

bool matches(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
  grammar::Matcher m(g);
  return m.accept(text) && m.can_end();
}

}  // namespace

TEST_CASE("tool calls: the grammar of a forced call in each format, arguments by the function's schema") {
  const auto hermes = tool_call_grammar(ToolFormat::Hermes, {kWeather, kTree, kNoParameters}, {0, 1, 2}, true);
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}})";
  const std::string tree = R"({"name": "plant", "arguments": {"label": "a", "kids": [{"label": "b", "kids": []}]}})";
  CHECK(matches(hermes, "<tool_call>\n" + weather + "\n</tool_call>"));
  CHECK(matches(hermes, "<tool_call>\n" + tree + "\n</tool_call>\n<tool_call>\n" + weather + "\n</tool_call>"));
  CHECK(matches(hermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  // Another name, arguments off the schema, text before the call: refused.
  CHECK_FALSE(matches(hermes, R"(<tool_call>
{"name": "other", "arguments": {}}
</tool_call>)"));
  CHECK_FALSE(matches(hermes, R"(<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}
</tool_call>)"));
  CHECK_FALSE(matches(hermes, R"(<tool_call>
{"name": "plant", "arguments": {"label": "abcd", "kids": []}}
</tool_call>)"));
  CHECK_FALSE(matches(hermes, "Sure. <tool_call>\n" + weather + "\n</tool_call>"));
  // One call only.
  const auto single = tool_call_grammar(ToolFormat::Hermes, {kWeather}, {0}, false);
  CHECK(matches(single, "<tool_call>\n" + weather + "\n</tool_call>"));
  CHECK_FALSE(matches(single, "<tool_call>\n" + weather + "\n</tool_call>\n<tool_call>\n" + weather + "\n</tool_call>"));
  grammar::Matcher done(single);
  CHECK(done.accept("<tool_call>\n" + weather + "\n</tool_call>"));
  CHECK_FALSE(done.can_continue());

  const auto llama = tool_call_grammar(ToolFormat::Llama3, {kWeather}, {0}, true);
  CHECK(matches(llama, R"({"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}})"));
  CHECK_FALSE(matches(llama, weather));

  const auto mistral = tool_call_grammar(ToolFormat::Mistral, {kWeather, kTree}, {0, 1}, true);
  CHECK(matches(mistral, "[" + weather + ", " + tree + "]"));
  CHECK(matches(mistral, "[" + tree + "]"));
  CHECK_FALSE(matches(tool_call_grammar(ToolFormat::Mistral, {kWeather, kTree}, {0, 1}, false),
                      "[" + weather + ", " + tree + "]"));

  // What the grammar writes, the parser reads back.
  const auto read = parse_tool_calls(ToolFormat::Hermes, "<tool_call>\n" + tree + "\n</tool_call>", true);
  REQUIRE(read.calls.size() == 1);
  CHECK(read.calls[0].arguments == R"({"label":"a","kids":[{"label":"b","kids":[]}]})");
}

TEST_CASE("tool calls: a function's schema the grammar cannot take is named by its index") {
  const ojson pattern = ojson::parse(R"({"name": "f", "parameters": {"type": "object",
      "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}}}})");
  try {
    tool_call_grammar(ToolFormat::Hermes, {kWeather, pattern}, {0, 3}, true);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    const std::string message = e.what();
    CHECK(message.rfind("tools[3].function.parameters: at /properties/code", 0) == 0);
    CHECK(message.find("'pattern'") != std::string::npos);
  }
}

namespace {

const text::Tokenizer& demo_tokenizer() {
  static const text::Tokenizer t = text::Tokenizer::from_sentencepiece(LATHE_SOURCE_DIR "/models/demo/tokenizer.model");
  return t;
}

struct TemplateModel {
  text::ChatTemplate chat_template;
  Model model;
  explicit TemplateModel(const std::string& file, std::string bos, std::string eos, ToolFormat format)
      : chat_template(text::ChatTemplate::parse(chat_template_source(file), file)),
        model{"demo", &demo_tokenizer(), &chat_template, std::move(bos), std::move(eos), 4096} {
    model.tool_format = format;
  }
};


const std::string kWeatherTool = R"({"type": "function", "function": {"name": "get_weather",
    "description": "Current weather of a city", "parameters": {"type": "object", "properties":
    {"city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}})";

CompletionParams chat(const Model& model, const std::string& fields) {
  const std::string body = R"({"messages": [{"role": "user", "content": "What is the capital of France?"}], )" + fields + "}";
  return parse_completion(parse_json_body(body), true, model, body);
}

}  // namespace

TEST_CASE("tool calls: tools, assistant calls and tool results render through the template as transformers renders them") {
  const json expected = json::parse(lathe::test::read_file(LATHE_SOURCE_DIR "/tests/data/chat_templates/expected.json"));
  for (const auto& entry : expected["templates"].items()) {
    const std::string file = entry.key();
    const json& cases = entry.value();
    CAPTURE(file);
    json round_trip;
    for (const json& c : cases)
      if (c["case"] == "tool_round_trip") round_trip = c;
    REQUIRE(round_trip.is_object());
    const ToolFormat format = detect_tool_format(chat_template_source(file));
    const TemplateModel t(file, round_trip["bos_token"], round_trip["eos_token"], format);
    // A template that teaches no format takes the tools with tool_choice "none".
    const std::string choice = format == ToolFormat::None ? R"(, "tool_choice": "none")" : "";
    // OpenAI's form: the arguments a string of JSON; the template is given them parsed, in their order.
    const std::string body = R"({"messages": [{"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Zürich\", \"unit\": \"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21.5}"}],
        "tools": [)" + kWeatherTool + "]" + choice + "}";
    if (round_trip.contains("error")) {  // the template's raise_exception: a 400
      const ApiError e = error_of([&] { parse_completion(parse_json_body(body), true, t.model, body); });
      CHECK(e.status == 400);
      CHECK(e.param == "messages");
      CHECK(std::string(e.what()).find(round_trip["error"]["message"].get<std::string>()) != std::string::npos);
      continue;
    }
    const CompletionParams p = parse_completion(parse_json_body(body), true, t.model, body);
    CHECK(p.request.prompt == demo_tokenizer().encode(round_trip["output"].get<std::string>(), true));
    CHECK(p.tool_format == format);
    CHECK(p.request.grammar == nullptr);  // "auto"
  }
}

TEST_CASE("tool calls: tool_choice none, auto, required and a named function") {
  const TemplateModel t("qwen2.5-instruct.jinja", "", "<|im_end|>", ToolFormat::Hermes);
  const std::string tools = R"("tools": [)" + kWeatherTool + R"(, {"type": "function", "function": {"name": "now"}}])";
  const CompletionParams none = chat(t.model, tools + R"(, "tool_choice": "none")");
  CHECK(none.tool_format == ToolFormat::None);
  CHECK(none.request.grammar == nullptr);
  CHECK(none.request.prompt == chat(t.model, tools).request.prompt);  // the template is given the tools still
  const CompletionParams required = chat(t.model, tools + R"(, "tool_choice": "required")");
  CHECK(required.tool_format == ToolFormat::Hermes);
  REQUIRE(required.request.grammar != nullptr);
  CHECK(matches(required.request.grammar, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  // Properties in the request's order (city before unit), not sorted.
  CHECK(matches(required.request.grammar,
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"));
  const CompletionParams named =
      chat(t.model, tools + R"(, "tool_choice": {"type": "function", "function": {"name": "now"}}, "parallel_tool_calls": false)");
  CHECK_FALSE(named.parallel_tool_calls);
  REQUIRE(named.request.grammar != nullptr);
  CHECK_FALSE(matches(named.request.grammar,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"));
  CHECK(matches(named.request.grammar, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
}

TEST_CASE("tool calls: bad tools and tool choices are 400s naming the field") {
  const TemplateModel t("qwen2.5-instruct.jinja", "", "<|im_end|>", ToolFormat::Hermes);
  const auto param_of = [&](const std::string& fields) {
    const ApiError e = error_of([&] { chat(t.model, fields); });
    CHECK(e.status == 400);
    return e.param;
  };
  const std::string weather = kWeatherTool;
  CHECK(param_of(R"("tools": {"type": "function"})") == "tools");
  CHECK(param_of(R"("tools": [)" + weather + R"(, {"type": "function", "function": {"name": "a b"}}])") ==
        "tools[1].function.name");
  CHECK(param_of(R"("tools": [)" + weather + ", " + weather + "]") == "tools[1].function.name");
  CHECK(param_of(R"("tools": [{"type": "code", "function": {"name": "f"}}])") == "tools[0].type");
  CHECK(param_of(R"("tools": [{"type": "function"}])") == "tools[0].function");
  CHECK(param_of(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])") ==
        "tools[0].function.parameters");
  CHECK(param_of(R"("tools": [{"type": "function", "function": {"name": ")" + std::string(65, 'x') + R"("}}])") ==
        "tools[0].function.name");
  CHECK(param_of(R"("tools": [)" + weather + R"(], "tool_choice": "always")") == "tool_choice");
  CHECK(param_of(R"("tools": [)" + weather + R"(], "tool_choice": {"type": "function", "function": {"name": "nope"}})") ==
        "tool_choice");
  CHECK(param_of(R"("tool_choice": "required")") == "tool_choice");
  CHECK(param_of(R"("tools": [)" + weather + R"(], "parallel_tool_calls": "yes")") == "parallel_tool_calls");
  CHECK(param_of(R"("tools": [)" + weather + R"(], "response_format": {"type": "json_object"})") == "response_format");
  CHECK(param_of(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"code": {"type": "string", "pattern": "x"}}}}}], "tool_choice": "required")") ==
        "tools[0].function.parameters");
  CHECK(param_of(R"("functions": [{"name": "f"}])") == "functions");
  CHECK(param_of(R"("function_call": "auto")") == "function_call");
  std::string many = R"("tools": [)";
  for (int i = 0; i < 129; ++i) many += (i ? ", " : "") + std::string(R"({"type": "function", "function": {"name": "f)") +
                                        std::to_string(i) + R"("}})";
  CHECK(param_of(many + "]") == "tools");
  // Assistant calls and tool results.
  const auto message_param = [&](const std::string& message) {
    const std::string body = R"({"messages": [{"role": "user", "content": "x"}, )" + message + "]}";
    return error_of([&] { parse_completion(parse_json_body(body), true, t.model, body); }).param;
  };
  CHECK(message_param(R"({"role": "assistant", "tool_calls": {}})") == "messages[1].tool_calls");
  CHECK(message_param(R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]})") ==
        "messages[1].tool_calls[0].function.arguments");
  CHECK(message_param(R"({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})") ==
        "messages[1].tool_calls[0].function.name");
  CHECK(message_param(R"({"role": "tool", "tool_call_id": 5, "content": "x"})") == "messages[1].tool_call_id");
  // A template that teaches no format: tools with calls to read back are refused; "none" passes.
  Model plain = t.model;
  plain.tool_format = ToolFormat::None;
  const ApiError no_format = error_of([&] { chat(plain, R"("tools": [)" + weather + "]"); });
  CHECK(no_format.param == "tools");
  CHECK(std::string(no_format.what()).find("teaches no tool-call format") != std::string::npos);
  CHECK(chat(plain, R"("tools": [)" + weather + R"(], "tool_choice": "none")").tool_format == ToolFormat::None);
  // Completions take no tools.
  CHECK(error_of([&] {
          parse_completion(parse_json_body(R"({"prompt": "a", "tools": [)" + weather + "]}"), false, t.model);
        }).param == "tools");
}

TEST_CASE("tool calls: a response's tool_calls and a stream's deltas in OpenAI's shape") {
  const TemplateModel t("qwen2.5-instruct.jinja", "", "<|im_end|>", ToolFormat::Hermes);
  const CompletionParams p = chat(t.model, R"("tools": [)" + kWeatherTool + "]");
  const ResponseHeader h{"chatcmpl-1", "demo", 0};
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  Finish stop{"stop", "", 10, 5};
  const json whole = completion_response(p, h, demo_tokenizer(), text, {}, stop);
  const json& choice = whole["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  CHECK(choice["message"]["content"].is_null());
  REQUIRE(choice["message"]["tool_calls"].size() == 1);
  const json& call = choice["message"]["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK(call["id"].get<std::string>().rfind("call_", 0) == 0);
  CHECK(call["function"]["name"] == "get_weather");
  CHECK(call["function"]["arguments"] == R"({"city":"Paris"})");
  // No call: the text, finish_reason as it was.
  const json plain = completion_response(p, h, demo_tokenizer(), "Paris.", {}, stop);
  CHECK(plain["choices"][0]["message"]["content"] == "Paris.");
  CHECK_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
  CHECK(plain["choices"][0]["finish_reason"] == "stop");

  // Streamed in pieces: content first, then the call's first delta and its arguments, then the finish.
  ToolCallStream stream(p);
  std::vector<json> chunks;
  const std::string streamed = "Checking.\n" + text;
  for (size_t i = 0; i < streamed.size(); i += 7) {
    TokenEvent e;
    e.token = 5;
    e.text = streamed.substr(i, 7);
    for (json& c : stream.chunks(p, h, demo_tokenizer(), {e})) chunks.push_back(std::move(c));
  }
  for (json& c : stream.finish(p, h, demo_tokenizer(), stop)) chunks.push_back(std::move(c));
  std::string content;
  std::vector<json> deltas;
  for (const json& c : chunks) {
    CHECK(c["object"] == "chat.completion.chunk");
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) deltas.push_back(d["tool_calls"][0]);
  }
  CHECK(content == "Checking.");
  REQUIRE(deltas.size() == 2);
  CHECK(deltas[0]["index"] == 0);
  CHECK(deltas[0]["type"] == "function");
  CHECK(deltas[0]["id"].get<std::string>().rfind("call_", 0) == 0);
  CHECK(deltas[0]["function"]["name"] == "get_weather");
  CHECK(deltas[0]["function"]["arguments"] == "");
  CHECK(deltas[1]["index"] == 0);
  CHECK_FALSE(deltas[1].contains("id"));
  CHECK(deltas[1]["function"]["arguments"] == R"({"city":"Paris"})");
  CHECK(chunks.back()["choices"][0]["finish_reason"] == "tool_calls");
  // Cut by max_tokens: "length" stays.
  ToolCallStream cut(p);
  cut.chunks(p, h, demo_tokenizer(), {TokenEvent{5, text, 0, {}}});
  CHECK(cut.finish(p, h, demo_tokenizer(), Finish{"length", "", 10, 5}).back()["choices"][0]["finish_reason"] == "length");
}

TEST_CASE("tool calls: the fuzz target's promises hold on its seeds") {
  int seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(LATHE_SOURCE_DIR "/tests/fuzz/corpus/tool_calls")) {
    const std::string input = lathe::test::read_file(e.path().string());
    CAPTURE(e.path().string());
    lathe::fuzz::tool_calls(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++seeds;
  }
  CHECK(seeds >= 8);
}
