// Constrained decoding between logits and the sampler (runtime/generate/
// constraint.hpp): on random logits, whatever the seed, the text sampled
// through a grammar's mask is one of its documents, the end comes only
// where the text is whole, and bad grammars are refused by name.
#include "runtime/generate/constraint.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "runtime/error.hpp"
#include "runtime/generate/sampler.hpp"

using namespace lathe;
using namespace lathe::text;

namespace {

// A small byte-level vocabulary: JSON's punctuation and literals, a few
// words and digits, multi-character tokens that cross JSON's tokens, and an
// end token (id 0, no bytes) as a tokenizer's EOS is.
std::shared_ptr<const GrammarVocabulary> json_vocabulary() {
  std::vector<std::string> bytes = {"",      "{",     "}",      "[",   "]",    ":",    ",",       "\"",    " ",
                                    "\n",    "  ",    "true",   "fal", "se",   "null", "0",       "1",     "7",
                                    "42",    "-",     ".",      "5e",  "e",    "+",    "name",    "age",   "tags",
                                    "red",   "green", "blue",   "a",   "b",    "é",    "\xc3",    "\xa9",  "\\",
                                    "\\n",   "\":",   "\",",    "{\"", "\"}",  "\"]",  "[\"",     ", \"",  "\": ",
                                    "}]",    "x",     "Ann",    "99",  "100",  "101",  "{\"name", "ok",    "\"ok\""};
  for (char c = ' '; c <= '~'; ++c) bytes.emplace_back(1, c);  // every ASCII character spelled, as a byte-level vocabulary does
  grammar::Vocabulary trie(bytes);
  return std::make_shared<const GrammarVocabulary>(GrammarVocabulary{std::move(bytes), std::move(trie)});
}

// Samples from random logits through the constraint until it ends (the end
// token, or a document nothing may follow) or `limit` tokens: the text.
std::string sample_text(const std::shared_ptr<const grammar::Grammar>& g,
                        const std::shared_ptr<const GrammarVocabulary>& v, uint64_t seed, int limit, bool& ended) {
  Constraint c(g, v, {0});
  SamplingOptions o;
  o.temperature = 1;
  o.seed = seed;
  Sampler sampler(o);
  std::mt19937_64 rng(seed * 7919 + 1);
  std::normal_distribution<float> normal(0, 3);
  std::string text;
  ended = false;
  for (int step = 0; step < limit; ++step) {
    std::vector<float> logits(v->bytes.size());
    for (float& l : logits) l = normal(rng);
    c.mask(logits);
    const int32_t token = sampler.sample(logits);
    if (token == 0) {
      CHECK(c.complete());
      ended = true;
      break;
    }
    c.accept(token);
    text += v->bytes[static_cast<size_t>(token)];
    if (c.finished()) {
      ended = true;
      break;
    }
  }
  return text;
}

}  // namespace

TEST_CASE("constraint: a JSON schema's documents, whatever the random logits") {
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "color": {"enum": ["red", "green", "blue"]},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
      "ok": {"type": "boolean"}
    },
    "required": ["name", "age", "color", "tags", "ok"],
    "additionalProperties": false
  })";
  const auto g = compile_grammar(GrammarSource::JsonSchema, schema, "schema");
  const auto v = json_vocabulary();
  int whole = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    bool ended = false;
    const std::string text = sample_text(g, v, seed, 400, ended);
    CAPTURE(seed);
    CAPTURE(text);
    if (!ended) continue;  // cut by the limit: a prefix, not a document
    ++whole;
    const nlohmann::json doc = nlohmann::json::parse(text);  // throws (fails) if not JSON
    REQUIRE(doc.is_object());
    CHECK(doc.size() == 5);
    CHECK(doc.at("name").is_string());
    CHECK(doc.at("age").is_number_integer());
    CHECK(doc.at("age").get<int64_t>() >= 0);
    CHECK(doc.at("age").get<int64_t>() <= 120);
    const std::string color = doc.at("color").get<std::string>();
    CHECK((color == "red" || color == "green" || color == "blue"));
    CHECK(doc.at("tags").is_array());
    CHECK(doc.at("tags").size() <= 3);
    CHECK(doc.at("ok").is_boolean());
  }
  CHECK(whole >= 12);  // most seeds end within the limit
}

TEST_CASE("constraint: the end only where the text is whole, and nothing after a finished document") {
  const auto g = compile_grammar(GrammarSource::Gbnf, "root ::= \"[\" (\"1\" | \"42\")? \"]\"\n", "gbnf");
  const auto v = json_vocabulary();
  Constraint c(g, v, {0});
  std::vector<float> logits(v->bytes.size(), 0.0f);
  c.mask(logits);
  CHECK(logits[0] == -std::numeric_limits<float>::infinity());  // "" is no document
  CHECK(logits[3] == 0.0f);                                      // "["
  CHECK(logits[1] == -std::numeric_limits<float>::infinity());   // "{"
  c.accept(3);
  std::fill(logits.begin(), logits.end(), 0.0f);
  c.mask(logits);
  CHECK(logits[16] == 0.0f);  // "1"
  CHECK(logits[18] == 0.0f);  // "42"
  CHECK(logits[17] == -std::numeric_limits<float>::infinity());  // "7"
  CHECK(logits[4] == 0.0f);   // "]"
  CHECK_THROWS_AS(c.accept(17), Error);
  c.accept(18);
  CHECK_FALSE(c.complete());
  c.accept(4);
  CHECK(c.complete());
  CHECK(c.finished());
}

TEST_CASE("constraint: JSON mode gives an object") {
  const auto g = compile_grammar(GrammarSource::JsonObject, "", "response_format");
  const auto v = json_vocabulary();
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    bool ended = false;
    const std::string text = sample_text(g, v, seed, 300, ended);
    CAPTURE(text);
    // (Exponents past a double's range are JSON all the same: made small
    // for nlohmann, which refuses them.)
    if (ended) CHECK(nlohmann::json::parse(std::regex_replace(text, std::regex("[eE][-+]?[0-9]+"), "e0")).is_object());
  }
}

TEST_CASE("constraint: a grammar the vocabulary cannot spell is refused at the step") {
  const auto g = compile_grammar(GrammarSource::Gbnf, "root ::= \"\u20ac\"\n", "gbnf");  // € : no token spells it
  Constraint c(g, json_vocabulary(), {0});
  std::vector<float> logits(json_vocabulary()->bytes.size(), 0.0f);
  CHECK_THROWS_WITH_AS(c.mask(logits), doctest::Contains("allows no token"), Error);
}

TEST_CASE("constraint: bad grammars and schemas are named") {
  CHECK_THROWS_WITH_AS(compile_grammar(GrammarSource::JsonSchema, "{\"type\": ", "--json-schema"),
                       doctest::Contains("--json-schema: not JSON"), Error);
  CHECK_THROWS_WITH_AS(compile_grammar(GrammarSource::Gbnf, "root ::= \"a\"\nx ::= [\n", "g.gbnf"),
                       doctest::Contains("g.gbnf:2:"), Error);
  CHECK_THROWS_WITH_AS(
      compile_grammar(GrammarSource::JsonSchema, R"({"type": "string", "pattern": "^a+$"})", "schema.json"),
      doctest::Contains("pattern"), Error);
}
