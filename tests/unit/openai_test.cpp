// The OpenAI request reader (runtime/serve/openai.hpp) on hostile bodies:
// nesting depth, numbers beyond their field, echoed values, prompts far over
// the context. The HTTP side of the same cases is tests/serve/hostile.cjs.
#include "runtime/serve/openai.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "runtime/generate/images.hpp"
#include "runtime/serve/data_url.hpp"
#include "tests/harness/api_error.hpp"
#include "tests/harness/tiny_llava.hpp"

using namespace lathe;
using namespace lathe::serve;
using nlohmann::json;
using lathe::test::error_of;

namespace {

const text::Tokenizer& demo_tokenizer() {
  static const text::Tokenizer t = text::Tokenizer::from_sentencepiece(LATHE_SOURCE_DIR "/models/demo/tokenizer.model");
  return t;
}

Model demo_model(int64_t context = 256) { return Model{"demo", &demo_tokenizer(), nullptr, "<s>", "</s>", context}; }

}  // namespace

TEST_CASE("openai: a body nested deeper than the limit is refused before a tree is built") {
  const int depth = 100000;
  const std::string deep = R"({"messages":[{"role":"user","content":)" + std::string(depth, '[') +
                           std::string(depth, ']') + "}]}";
  const ApiError e = error_of([&] { parse_json_body(deep); });
  CHECK(e.status == 400);
  CHECK(std::string(e.what()).find("more than 64 deep") != std::string::npos);
  CHECK(std::string(e.what()).find("messages[0].content") != std::string::npos);
  // At the limit it parses.
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  CHECK(parse_json_body(ok).is_array());
  CHECK(error_of([&] { parse_json_body("[" + ok + "]"); }).status == 400);
}

TEST_CASE("openai: malformed JSON and numbers beyond a double are 400s naming what they can") {
  CHECK(error_of([] { parse_json_body(R"({"a": [1, 2)"); }).status == 400);
  CHECK(error_of([] { parse_json_body(""); }).status == 400);
  const ApiError big = error_of([] { parse_json_body(R"({"prompt": "a", "max_tokens": 1e400})"); });
  CHECK(big.status == 400);
  CHECK(big.param == "max_tokens");
  const ApiError nested = error_of([] { parse_json_body(R"({"messages": [{"x": 1}, {"temperature": -1e999}]})"); });
  CHECK(nested.param == "messages[1].temperature");
}

TEST_CASE("openai: an integer beyond int64 is out of range as written, not wrapped") {
  const Model model = demo_model();
  const json body = parse_json_body(R"({"prompt": "And", "max_tokens": 18446744073709551615})");
  const ApiError e = error_of([&] { parse_completion(body, false, model); });
  CHECK(e.status == 400);
  CHECK(e.param == "max_tokens");
  CHECK(std::string(e.what()).find("18446744073709551615") != std::string::npos);
  CHECK(std::string(e.what()).find("-1") == std::string::npos);
  // A seed takes any 64-bit pattern.
  const json seeded = parse_json_body(R"({"prompt": "And", "seed": 18446744073709551615})");
  CHECK(parse_completion(seeded, false, model).request.sampling.seed == UINT64_MAX);
}

TEST_CASE("openai: echoed values are printable and bounded") {
  CHECK(printable("a\x01" "b\x1b[31m\\") == "a\\x01b\\x1b[31m\\x5c");
  CHECK(printable(std::string(1000, 'x'), 10) == std::string(10, 'x') + "…");
  const json body = {{"model", std::string("evil\x01") + std::string(5000, 'x')}, {"prompt", "a"}};
  const ApiError e = error_of([&] { parse_completion(body, false, demo_model()); });
  CHECK(e.status == 404);
  CHECK(std::string(e.what()).find('\x01') == std::string::npos);
  CHECK(std::string(e.what()).size() < 400);
}

TEST_CASE("openai: a prompt far over the context is refused from a prefix, one that fits is encoded exactly") {
  const Model model = demo_model(256);
  std::string words;
  while (words.size() < 200000) words += "and the LORD said unto Moses ";
  const ApiError e = error_of([&] { parse_completion(json{{"prompt", words}}, false, model); });
  CHECK(e.status == 400);
  CHECK(e.code == "context_length_exceeded");
  CHECK(std::string(e.what()).find("more than 256 tokens") != std::string::npos);
  // Just under the limit: the ids are those of encoding the whole text.
  std::string fits;
  while (demo_tokenizer().encode(fits + "and the LORD ", true).size() < 200) fits += "and the LORD ";
  const CompletionParams p = parse_completion(json{{"prompt", fits}, {"max_tokens", 8}}, false, model);
  CHECK(p.request.prompt == demo_tokenizer().encode(fits, true));
  // A long prompt of many bytes that still fits (long words) is not cut by a prefix.
  const Model wide = demo_model(100000);
  const CompletionParams q = parse_completion(json{{"prompt", words.substr(0, 20000)}, {"max_tokens", 1}}, false, wide);
  CHECK(q.request.prompt == demo_tokenizer().encode(words.substr(0, 20000), true));
}

TEST_CASE("openai: tools on completions, tool_choice without tools and functions are refused by name, empty forms pass") {
  const Model model = demo_model();
  const auto param_of = [&](const char* extra) {
    return error_of([&] { parse_completion(parse_json_body(std::string(R"({"prompt": "a", )") + extra + "}"), false, model); })
        .param;
  };
  CHECK(param_of(R"("tools": [{"type": "function", "function": {"name": "f"}}])") == "tools");
  CHECK(param_of(R"("tool_choice": "required")") == "tool_choice");
  CHECK(param_of(R"("tool_choice": "auto")").empty());
  CHECK(param_of(R"("functions": [{"name": "f"}])") == "functions");
  CHECK(param_of(R"("tools": [], "tool_choice": "none", "response_format": {"type": "text"})").empty());
}

TEST_CASE("openai: response_format and grammar become the request's grammar, bad ones are 400s naming the fault") {
  const Model model = demo_model();
  const auto parse = [&](const std::string& extra) {
    return parse_completion(parse_json_body(R"({"prompt": "a", )" + extra + "}"), false, model);
  };
  const auto error = [&](const std::string& extra) { return error_of([&] { parse(extra); }); };
  CHECK(parse(R"("response_format": {"type": "text"})").request.grammar == nullptr);
  CHECK(parse(R"("response_format": {"type": "json_object"})").request.grammar != nullptr);
  CHECK(parse(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
      "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                 "additionalProperties": false}}})")
            .request.grammar != nullptr);
  CHECK(parse(R"("grammar": "root ::= \"yes\" | \"no\"")").request.grammar != nullptr);

  const ApiError keyword = error(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": {"type": "string", "pattern": "^a$"}}})");
  CHECK(keyword.status == 400);
  CHECK(keyword.param == "response_format");
  CHECK(std::string(keyword.what()).find("pattern") != std::string::npos);
  const ApiError gbnf = error(R"("grammar": "root ::= \"a\"\nb ::= [")");
  CHECK(gbnf.param == "grammar");
  CHECK(std::string(gbnf.what()).find("grammar:2:") != std::string::npos);
  CHECK(error(R"("grammar": "root ::= undefined-rule")").param == "grammar");
  CHECK(error(R"("response_format": {"type": "xml"})").param == "response_format");
  CHECK(error(R"("response_format": "json")").param == "response_format");
  CHECK(error(R"("response_format": {"type": "json_schema"})").param == "response_format");
  CHECK(error(R"("grammar": 5)").param == "grammar");
  CHECK(error(R"("grammar": "root ::= \"a\"", "response_format": {"type": "json_object"})").param == "grammar");
}

TEST_CASE("openai: logit_bias by token id, bounded, each id in the vocabulary") {
  const Model model = demo_model();
  const auto parse = [&](const char* bias) {
    return parse_completion(parse_json_body(std::string(R"({"prompt": "a", "logit_bias": )") + bias + "}"), false, model);
  };
  const auto error = [&](const char* bias) { return error_of([&] { parse(bias); }); };
  const auto biases = parse(R"({"2": -100, "17": 5.5})").request.sampling.logit_bias;
  REQUIRE(biases.size() == 2);
  CHECK(biases[0] == std::pair<int32_t, float>{17, 5.5f});  // JSON objects come back sorted by key
  CHECK(biases[1] == std::pair<int32_t, float>{2, -100.0f});
  CHECK(parse("{}").request.sampling.logit_bias.empty());
  const std::string vocab = std::to_string(model.tokenizer->vocab_size());
  for (const char* bad : {R"([1, 2])", R"({"x": 1})", R"({"-1": 1})", R"({"2": 101})", R"({"2": "1"})", R"({" 2": 1})"}) {
    CAPTURE(bad);
    const ApiError e = error(bad);
    CHECK(e.status == 400);
    CHECK(e.param == "logit_bias");
  }
  const std::string outside = "{\"" + vocab + "\": 1}";
  CHECK(std::string(error(outside.c_str()).what()).find("[0, " + vocab + ")") != std::string::npos);
  std::string many = "{";
  for (int i = 0; i < 301; ++i) many += (i ? ", \"" : "\"") + std::to_string(i) + "\": 1";
  CHECK(std::string(error((many + "}").c_str()).what()).find("at most 300") != std::string::npos);
}

TEST_CASE("openai: embeddings inputs in every form, their limits named with the input's index") {
  const Model model = demo_model(16);
  // One string, strings, one id array, id arrays.
  EmbeddingParams p = parse_embeddings(json::parse(R"({"input": "In the beginning"})"), model, 8);
  REQUIRE(p.inputs.size() == 1);
  CHECK(p.inputs[0] == demo_tokenizer().encode("In the beginning", true));
  CHECK(p.tokens == static_cast<int64_t>(p.inputs[0].size()));
  CHECK_FALSE(p.base64);
  p = parse_embeddings(json::parse(R"({"input": ["a b", "c"], "encoding_format": "base64", "model": "demo"})"), model, 8);
  CHECK(p.inputs.size() == 2);
  CHECK(p.base64);
  p = parse_embeddings(json::parse(R"({"input": [5, 0, 17]})"), model, 8);
  REQUIRE(p.inputs.size() == 1);
  CHECK(p.inputs[0] == std::vector<int32_t>{5, 0, 17});
  p = parse_embeddings(json::parse(R"({"input": [[5, 0], [17]], "dimensions": 8})"), model, 8);
  CHECK(p.inputs == std::vector<std::vector<int32_t>>{{5, 0}, {17}});
  CHECK(p.tokens == 3);

  const auto message = [&](const char* body) {
    const ApiError e = error_of([&] { parse_embeddings(json::parse(body), model, 8); });
    CHECK(e.status == 400);
    return std::string(e.what());
  };
  CHECK(message(R"({})") == "Missing required parameter: 'input'");
  CHECK(message(R"({"input": []})") == "input is empty");
  CHECK(message(R"({"input": [[1], []]})") == "input[1] is empty");
  CHECK(message(R"({"input": [[1], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]]})") ==
        "input[1] is 17 tokens; this model's maximum context length is 16 tokens");
  CHECK(message(R"({"input": [[1, 99999]]})").find("input[0]: token 99999 is outside the vocabulary") == 0);
  CHECK(message(R"({"input": [1, -1]})").find("input: token -1 is outside the vocabulary") == 0);
  CHECK(message(R"({"input": [1, "x"]})").find("input must be a string, an array of strings") == 0);
  CHECK(message(R"({"input": "x", "encoding_format": "hex"})") == R"(encoding_format must be "float" or "base64")");
  CHECK(message(R"({"input": "x", "dimensions": 4})").find("dimensions other than the model's 8") == 0);
  CHECK(message((R"({"input": ")" + std::string(5000, 'a') + R"( b"})").c_str()).find("input is at least") == 0);
  CHECK(error_of([&] { parse_embeddings(json::parse(R"({"input": "x", "model": "other"})"), model, 8); }).status == 404);
  // More inputs than OpenAI allows a request.
  json many = {{"input", json::array()}};
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many["input"].push_back(json::array({1}));
  CHECK(error_of([&] { parse_embeddings(many, model, 8); }).status == 400);
}

TEST_CASE("openai: an embeddings response in floats and in base64 of the same little-endian f32 bytes") {
  EmbeddingParams p;
  p.inputs = {{1, 2}, {3}};
  p.tokens = 3;
  const std::vector<std::vector<float>> vectors = {{1.0f, -2.5f, 0.0f}, {0.25f, 3.0f, -1.0f}};
  const json floats = embeddings_response(p, "m", vectors);
  CHECK(floats["object"] == "list");
  CHECK(floats["model"] == "m");
  CHECK(floats["usage"] == json({{"prompt_tokens", 3}, {"total_tokens", 3}}));
  REQUIRE(floats["data"].size() == 2);
  CHECK(floats["data"][1]["index"] == 1);
  CHECK(floats["data"][1]["object"] == "embedding");
  CHECK(floats["data"][0]["embedding"] == json({1.0, -2.5, 0.0}));
  p.base64 = true;
  const json text = embeddings_response(p, "m", vectors);
  // 1.0f = 00 00 80 3f, -2.5f = 00 00 20 c0, 0.0f = 00 00 00 00: twelve bytes, sixteen digits.
  CHECK(text["data"][0]["embedding"] == "AACAPwAAIMAAAAAA");
  // 0.25f = 00 00 80 3e, 3.0f = 00 00 40 40, -1.0f = 00 00 80 bf.
  CHECK(text["data"][1]["embedding"] == "AACAPgAAQEAAAIC/");
  const json one = embeddings_response(p, "m", {{1.0f}});  // four bytes: padded
  CHECK(one["data"][0]["embedding"] == "AACAPw==");
}

namespace {

using test::TinyLlava;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string data_url(const std::string& path, const std::string& type = "image/jpeg") {
  const std::string bytes = file_bytes(path);
  return "data:" + type + ";base64," + base64_encode(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

json image_part(const std::string& url) { return {{"type", "image_url"}, {"image_url", {{"url", url}}}}; }

json chat(json content) { return {{"messages", json::array({{{"role", "user"}, {"content", std::move(content)}}})}}; }

}  // namespace

TEST_CASE("openai: a chat message's images, placed by the chat template, each distinct one decoded once") {
  const TinyLlava tiny;
  const Model model = tiny.model();
  const std::string baseline = data_url(LATHE_SOURCE_DIR "/tests/data/images/baseline.jpg");
  const std::string gray = data_url(LATHE_SOURCE_DIR "/tests/data/images/gray.jpg");
  const CompletionParams p = parse_completion(
      chat({{{"type", "text"}, {"text", "hi"}}, image_part(baseline), image_part(gray), image_part(baseline)}), true,
      model);
  const GenerationRequest& r = p.request;
  // The template writes "<image>\n" for each image, then the text: the
  // prompt holds each marker's 16 rows of the image token.
  const std::vector<int32_t> rendered = tiny.tokenizer.encode("USER: <image>\n<image>\n<image>\nhi ASSISTANT:", true);
  const text::ExpandedPrompt expanded = text::expand_markers(tiny.support.link, rendered, 3);
  CHECK(r.prompt == expanded.ids);
  CHECK(r.images.at == expanded.at);
  CHECK(r.images.starts == std::vector<size_t>{0, 16, 32, 48});
  CHECK(r.images.order == std::vector<uint32_t>{0, 1, 0});
  REQUIRE(r.images.inputs.size() == 2);
  const auto input = [&](const char* file) {
    const std::string bytes = file_bytes(std::string(LATHE_SOURCE_DIR "/tests/data/images/") + file);
    return text::image_input(tiny.support.link, tiny.support.preprocess,
                             image::decode(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), file),
                             tiny.support.row_floats, file);
  };
  CHECK(r.images.inputs[0] == input("baseline.jpg"));
  CHECK(r.images.inputs[1] == input("gray.jpg"));
  CHECK(r.images.inputs[0].rows.size() == 17 * 48);  // the class row, then 16 patches
  CHECK(r.images.inputs[0].grid == plan::ImageGrid{1, 16});

  // A text-only chat to a vision model: its template still gets parts.
  CHECK(parse_completion(chat("hi"), true, model).request.prompt == tiny.tokenizer.encode("USER: hi ASSISTANT:", true));
}

TEST_CASE("openai: image parts refused, naming the part: other URLs, bad payloads, bad images, too many") {
  const TinyLlava tiny;
  const Model model = tiny.model();
  const auto refusal = [&](const json& body, const Model& m) { return error_of([&] { parse_completion(body, true, m); }); };
  const std::string part = "messages[0].content[1].image_url.url";
  ApiError e = refusal(chat({{{"type", "text"}, {"text", "hi"}}, image_part("https://example.com/cat.png")}), model);
  CHECK(e.status == 400);
  CHECK(e.param == part);
  CHECK(std::string(e.what()) == part + ": only data: URLs of base64 images are taken (the server fetches nothing), "
                                        "not https: URLs");
  e = refusal(chat({{{"type", "text"}, {"text", "hi"}}, image_part("data:image/png;base64,@@@@")}), model);
  CHECK(e.param == part);
  CHECK(std::string(e.what()).find("is not base64") != std::string::npos);
  e = refusal(chat({{{"type", "text"}, {"text", "hi"}}, image_part("data:text/plain;base64,Zm9v")}), model);
  CHECK(std::string(e.what()) == part + ": a data: URL of text/plain, not an image");
  // A corrupt file: the decoder's message, naming the part.
  e = refusal(chat({{{"type", "text"}, {"text", "hi"}},
                    image_part(data_url(LATHE_SOURCE_DIR "/tests/data/images/bad/truncated.png", "image/png"))}),
              model);
  CHECK(e.status == 400);
  CHECK(e.param == part);
  CHECK(std::string(e.what()).rfind(part + ": ", 0) == 0);
  // A file over the bound: refused from its size.
  ImageSupport small = tiny.support;
  small.limits.max_file_bytes = 100;
  Model bounded = model;
  bounded.images = &small;
  e = refusal(chat({image_part(data_url(LATHE_SOURCE_DIR "/tests/data/images/baseline.jpg"))}), bounded);
  CHECK(std::string(e.what()).find("over the 100 an image may have") != std::string::npos);
  // More images than the context holds: refused before any is decoded
  // (these payloads are not even base64).
  json many = json::array();
  for (int i = 0; i < 11; ++i) many.push_back(image_part("data:image/png;base64,@@@@"));
  e = refusal(chat(many), model);
  CHECK(e.code == "context_length_exceeded");
  CHECK(std::string(e.what()).find("resulted in more than 160 tokens") != std::string::npos);
  // Images and text together over the context.
  e = refusal(chat({{{"type", "text"}, {"text", std::string(150, 'x')}},
                    image_part(data_url(LATHE_SOURCE_DIR "/tests/data/images/baseline.jpg"))}),
              model);
  CHECK(e.code == "context_length_exceeded");
  // The user's own "<image>": the markers and the images are not as many.
  e = refusal(chat({{{"type", "text"}, {"text", "a <image> b"}},
                    image_part(data_url(LATHE_SOURCE_DIR "/tests/data/images/baseline.jpg"))}),
              model);
  CHECK(e.param == "messages");
  CHECK(std::string(e.what()).find("the prompt holds 2 image marker(s) (token 200) for 1 image(s)") != std::string::npos);
  // A malformed part.
  e = refusal(chat({{{"type", "image_url"}, {"image_url", "data:image/png;base64,Zm9v"}}}), model);
  CHECK(e.param == "messages[0].content[0].image_url");
  e = refusal(chat({{{"type", "image_url"}, {"image_url", {{"url", "data:,"}, {"detail", "max"}}}}}), model);
  CHECK(e.param == "messages[0].content[0].image_url.detail");
  e = refusal(chat({{{"type", "audio"}}}), model);
  CHECK(std::string(e.what()) == "messages[0].content[0]: only parts of type \"text\" and \"image_url\" are supported");
  // A model without a tower takes none.
  e = refusal(chat({image_part("data:image/png;base64,Zm9v")}), demo_model());
  CHECK(e.param == "messages[0].content[0]");
  CHECK(std::string(e.what()).find("this model takes no images") != std::string::npos);
}

TEST_CASE("openai: image requests parsed at once on many threads each get their images (decoding takes turns)") {
  const TinyLlava tiny;
  const Model model = tiny.model();
  const json body = chat({image_part(data_url(LATHE_SOURCE_DIR "/tests/data/images/baseline.jpg")),
                          image_part(data_url(LATHE_SOURCE_DIR "/tests/data/images/gray.jpg"))});
  const GenerationRequest alone = parse_completion(body, true, model).request;
  std::vector<std::thread> threads;
  std::atomic<int> same = 0;
  for (int i = 0; i < 24; ++i)
    threads.emplace_back([&] {
      const GenerationRequest r = parse_completion(body, true, model).request;
      if (r.prompt == alone.prompt && r.images.inputs == alone.images.inputs) ++same;
    });
  for (std::thread& t : threads) t.join();
  CHECK(same == 24);
}

TEST_CASE("openai: a json_schema's properties keep the order the request writes them") {
  const Model model = demo_model();
  // "zeta" before "alpha": the parsed body sorts them, the output must not.
  const std::string body = R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": {"type": "object", "properties": {"zeta": {"const": 1}, "alpha": {"const": 2}},
                 "required": ["zeta", "alpha"], "additionalProperties": false}}}})";
  const CompletionParams p = parse_completion(parse_json_body(body), false, model, body);
  grammar::Matcher in_order(p.request.grammar);
  CHECK(in_order.accept(R"({"zeta": 1, "alpha": 2})"));
  CHECK(in_order.can_end());
  grammar::Matcher sorted(p.request.grammar);
  CHECK_FALSE(sorted.accept(R"({"alpha")"));
  // Without the text, the parsed body's (sorted) order.
  const CompletionParams q = parse_completion(parse_json_body(body), false, model);
  CHECK(grammar::Matcher(q.request.grammar).accept(R"({"alpha": 2, "zeta": 1})"));
  // A schema of too many keys is refused before it is kept in order.
  std::string many = R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {)";
  for (int i = 0; i < 9000; ++i) many += (i ? ", " : "") + std::string("\"k") + std::to_string(i) + "\": 1";
  many += "}}}}";
  const ApiError e = error_of([&] { parse_completion(parse_json_body(many), false, model, many); });
  CHECK(e.status == 400);
  CHECK(std::string(e.what()).find("more than 8192 keys") != std::string::npos);
}
