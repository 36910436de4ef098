// libFuzzer target for JSON Schema into GBNF (runtime/grammar/json_schema.cpp):
// any bytes in, parsed as JSON (input that is not JSON is skipped), as a
// request's schema, must either compile or throw Error(InvalidArgument)
// whose message holds no control byte (it never echoes the schema raw). A
// grammar it returns begins with its root rule and is one rule a line. A
// crash, a sanitizer report, a hang, any other exception or a broken
// promise is a finding.
//
// Seeds: each schema of tests/data/grammar/schema_cases.json, one a file
// (lathe_fuzz_seeds).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz.hpp"
#include "runtime/error.hpp"
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
}

LATHE_FUZZ_TARGET(lathe::fuzz::json_schema)
