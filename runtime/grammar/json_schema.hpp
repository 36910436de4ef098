// JSON Schema into a grammar (issue 47): what OpenAI's `response_format`
// ({"type": "json_schema"}, {"type": "json_object"}) and a tool's
// `parameters` ask of the output, as GBNF for Grammar::parse (grammar.hpp),
// whose documents are exactly the JSON texts the schema validates (within
// the whitespace the grammar allows between tokens: bounded, so that a
// model cannot spin on spaces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace lathe::grammar {

struct SchemaLimits {
  int max_depth = 32;           // nesting of schemas ($ref expansions included)
  size_t max_rules = 2048;      // rules the grammar may take
  size_t max_enum = 1024;       // values of one enum
  int64_t max_items = 1024;     // minItems / maxItems bounds spelled out
  int64_t max_length = 1024;    // minLength / maxLength bounds spelled out
};

// Any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

// `schema` as GBNF (its root rule `root`). OpenAI's strict-mode subset:
// type (a name or a list), object with properties, required and
// additionalProperties, array with items, minItems and maxItems, string
// with minLength and maxLength, number, integer (minimum, maximum,
// exclusiveMinimum, exclusiveMaximum), boolean, null, enum, const, anyOf,
// $ref into $defs or definitions (recursion included), descriptions and
// titles ignored. Throws lathe::Error(InvalidArgument) reading
// "NAME: at /json/pointer: what is not supported" for any other keyword
// (naming it), a $ref it cannot resolve, a malformed schema or a limit
// passed.
std::string schema_to_gbnf(const nlohmann::json& schema, const std::string& name, const SchemaLimits& limits = {});
// The same, keeping the order of the schema's keys. nlohmann::json sorts an
// object's keys, so through the overload above an object's properties come
// out in alphabetical order; a schema parsed as ordered_json keeps them in
// the order the schema lists them (what OpenAI's strict mode promises).
std::string schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& name,
                           const SchemaLimits& limits = {});

// The schema's rules without `root`: its documents are the rule `rule` (a
// GBNF name, none of the shared primitives'), and no rule is named `root`,
// so that a grammar may embed the documents in text of its own by adding a
// `root` that refers to `rule` (a tool call's markers around its JSON).
std::string schema_rules_gbnf(const nlohmann::ordered_json& schema, const std::string& name, const std::string& rule,
                              const SchemaLimits& limits = {});

}  // namespace lathe::grammar
