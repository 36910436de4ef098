// JSON Schema into GBNF through the grammar engine: the acceptance table
// tests/data/grammar/schema_cases.json, an array of {"name", "schema",
// "valid": [documents], "invalid": [documents]}. Each schema compiled, its
// GBNF parsed, each valid document accepted whole (accept, then can_end;
// whole and byte by byte) and no invalid one.
#include <doctest/doctest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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
