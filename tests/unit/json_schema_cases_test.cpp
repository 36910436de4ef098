// JSON Schema into GBNF through the grammar engine: the acceptance table
// tests/data/grammar/schema_cases.json, an array of {"name", "schema",
// "valid": [documents], "invalid": [documents]}. Each schema compiled, its
// GBNF parsed, each valid document accepted whole (accept, then can_end;
// whole and byte by byte) and no invalid one. And the compiler's limits
// against the engine's: a grammar the compiler returns always parses.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/json_schema.hpp"
#include "tests/harness/temp_files.hpp"

using lathe::grammar::Grammar;
using lathe::grammar::Matcher;

namespace {

bool accepted_whole(const std::shared_ptr<const Grammar>& grammar, const std::string& document) {
  Matcher matcher(grammar);
  return matcher.accept(document) && matcher.can_end();
}

bool accepted_bytewise(const std::shared_ptr<const Grammar>& grammar, const std::string& document) {
  Matcher matcher(grammar);
  for (char c : document)
    if (!matcher.accept(std::string(1, c))) return false;
  return matcher.can_end();
}

}  // namespace

TEST_CASE("json schema: the acceptance table through the grammar engine") {
  const auto cases = nlohmann::ordered_json::parse(
      lathe::test::read_file(std::string(LATHE_SOURCE_DIR) + "/tests/data/grammar/schema_cases.json"));
  REQUIRE(cases.is_array());
  int valid = 0, invalid = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    CAPTURE(name);
    const std::string gbnf = lathe::grammar::schema_to_gbnf(c.at("schema"), name);
    CAPTURE(gbnf);
    const std::shared_ptr<const Grammar> grammar = Grammar::parse(gbnf, name);
    for (const auto& d : c.at("valid")) {
      const std::string document = d.get<std::string>();
      CAPTURE(document);
      CHECK(accepted_whole(grammar, document));
      CHECK(accepted_bytewise(grammar, document));
      ++valid;
    }
    for (const auto& d : c.at("invalid")) {
      const std::string document = d.get<std::string>();
      CAPTURE(document);
      CHECK_FALSE(accepted_whole(grammar, document));
      ++invalid;
    }
  }
  MESSAGE(cases.size() << " schemas, " << valid << " valid and " << invalid << " invalid documents");
}

TEST_CASE("json schema: json_object's grammar through the grammar engine") {
  const std::shared_ptr<const Grammar> grammar = Grammar::parse(lathe::grammar::json_object_gbnf(), "json_object");
  for (const char* document : {"{}", "{\"a\":[1,{\"b\":null}],\"c\":\"d\"}", "{\n  \"a\": true\n}"}) {
    CAPTURE(document);
    CHECK(accepted_whole(grammar, document));
  }
  for (const char* document : {"[]", "1", "\"x\"", "{", "{\"a\":1,}", " {}", "{}\n"}) {
    CAPTURE(document);
    CHECK_FALSE(accepted_whole(grammar, document));
  }
}

namespace {

// The largest n for which make(n) compiles (n from 1, doubling, then
// halving the gap); its grammar, which must parse.
template <typename Make>
std::string largest_compiled(Make make, int& n) {
  const auto compiles = [&](int k) {
    try {
      lathe::grammar::schema_to_gbnf(make(k), "limit");
      return true;
    } catch (const lathe::Error&) {
      return false;
    }
  };
  int lo = 1, hi = 2;
  REQUIRE(compiles(lo));
  while (compiles(hi)) lo = hi, hi *= 2;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (compiles(mid) ? lo : hi) = mid;
  }
  n = lo;
  return lathe::grammar::schema_to_gbnf(make(lo), "limit");
}

}  // namespace

TEST_CASE("json schema: grammars at the edge of the compiler's limits parse") {
  using ordered_json = nlohmann::ordered_json;
  const auto object_of = [](int n, const auto& property) {
    ordered_json s = {{"type", "object"}, {"properties", ordered_json::object()}, {"required", ordered_json::array()}};
    for (int i = 0; i < n; ++i) {
      s["properties"]["p" + std::to_string(i)] = property(i);
      s["required"].push_back("p" + std::to_string(i));
    }
    return s;
  };
  const std::vector<std::pair<std::string, std::function<ordered_json(int)>>> families = {
      // Rules: strings of wide bounds (chunked repetitions), each its own.
      {"wide strings",
       [&](int n) {
         return object_of(n, [](int i) { return ordered_json{{"type", "string"}, {"maxLength", 1024 - i}}; });
       }},
      // Elements: repetitions spelled out inline.
      {"exact lengths",
       [&](int n) {
         return object_of(n, [](int i) {
           return ordered_json{{"type", "string"}, {"minLength", 1024 - i}, {"maxLength", 1024 - i}};
         });
       }},
      // Bytes: long enum strings.
      {"long enums",
       [](int n) {
         ordered_json values = ordered_json::array();
         for (int i = 0; i < n; ++i) values.push_back(std::string(500, 'a' + i % 26) + std::to_string(i));
         return ordered_json{{"enum", values}};
       }},
      // Rules and nesting: optional members and the trie of long keys that extra members avoid.
      {"optional members and long keys",
       [](int n) {
         ordered_json s = {{"type", "object"}, {"properties", ordered_json::object()}};
         for (int i = 0; i < n; ++i) s["properties"][std::string(60, 'k') + std::to_string(i)] = {{"type", "integer"}};
         return s;
       }},
      // Depth: arrays in arrays.
      {"nesting",
       [](int n) {
         ordered_json s = {{"type", "integer"}, {"minimum", -123456789012345678}, {"maximum", 987654321098765432}};
         for (int i = 0; i < n; ++i) s = {{"type", "array"}, {"items", s}, {"maxItems", 1000}};
         return s;
       }},
  };
  for (const auto& family : families) {
    const std::string& name = family.first;
    const auto& make = family.second;
    CAPTURE(name);
    int n = 0;
    const std::string gbnf = largest_compiled(make, n);
    CAPTURE(n);
    std::shared_ptr<const Grammar> grammar;
    CHECK_NOTHROW(grammar = Grammar::parse(gbnf, name));
    if (grammar) MESSAGE(name << ": " << n << " compile, " << grammar->rules() << " rules, " << gbnf.size() << " bytes");
  }
}

TEST_CASE("json schema: wide bounds written in chunks stay unambiguous enough") {
  const auto grammar = Grammar::parse(
      lathe::grammar::schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type": "string", "maxLength": 1000})"), "s"), "s");
  Matcher matcher(grammar);
  size_t most = 0;
  REQUIRE(matcher.accept("\""));
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(matcher.accept("x"));
    most = std::max(most, matcher.stacks());
  }
  CHECK(!matcher.accept("x"));
  CHECK(matcher.accept("\""));
  CHECK(matcher.can_end());
  CHECK(most <= 8);
  MESSAGE("at most " << most << " parse stacks");
}
