// libFuzzer target for JSON Schema into GBNF (runtime/grammar/json_schema.cpp):
// any bytes in, parsed as JSON (input that is not JSON is skipped), as a
// request's schema, must either compile or throw Error(InvalidArgument)
// whose message holds no control byte (it never echoes the schema raw). A
// grammar it returns begins with its root rule, is one rule a line, and
// parses (Grammar::parse with its default limits: the compiler checks its
// output against them, so a refusal of its own grammar is a finding), and
// its matcher at the start can go on but not end (no document is empty). A
// crash, a sanitizer report, a hang, any other exception or a broken
// promise is a finding.
//
// Seeds: each schema of tests/data/grammar/schema_cases.json, one a file
// (lathe_fuzz_seeds).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/json_schema.hpp"

using lathe::fuzz::finding;

void lathe::fuzz::json_schema(const uint8_t* data, size_t size) {
  const auto schema = nlohmann::ordered_json::parse(data, data + size, nullptr, false);
  if (schema.is_discarded()) return;
  std::string gbnf;
  try {
    gbnf = grammar::schema_to_gbnf(schema, "schema");
  } catch (const lathe::Error& e) {
    if (e.kind() != lathe::ErrorKind::InvalidArgument) finding("an error that is not InvalidArgument");
    const std::string_view message = e.what();
    if (std::any_of(message.begin(), message.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      finding("a message with a control byte (the schema echoed raw)");
    return;
  }
  if (gbnf.rfind("root ::= ", 0) != 0) finding("a grammar that does not begin with its root rule");
  std::istringstream lines(gbnf);
  for (std::string line; std::getline(lines, line);)
    if (line.find(" ::= ") == std::string::npos) finding("a line of the grammar that is not a rule");
  std::shared_ptr<const grammar::Grammar> parsed;
  try {
    parsed = grammar::Grammar::parse(gbnf, "schema");
  } catch (const lathe::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    finding("the engine refused the compiler's grammar");
  }
  const grammar::Matcher matcher(parsed);
  if (matcher.can_end() || !matcher.can_continue()) finding("a grammar whose start can end or cannot go on");
}

LATHE_FUZZ_TARGET(lathe::fuzz::json_schema)
