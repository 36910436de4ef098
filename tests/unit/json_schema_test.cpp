// JSON Schema into GBNF (runtime/grammar/json_schema.hpp): the grammar text
// of small schemas where the exact text says something (the object layout,
// whitespace, digit ranges, the keys an extra member may not take, rule
// names), and every refusal with its message. Which documents the grammars
// accept is json_schema_cases_test.cpp's (through the grammar engine).
#include "runtime/grammar/json_schema.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/grammar/grammar.hpp"

using lathe::grammar::json_object_gbnf;
using lathe::grammar::schema_to_gbnf;
using lathe::grammar::SchemaLimits;
using ordered_json = nlohmann::ordered_json;

namespace {

std::string gbnf(const std::string& schema, const SchemaLimits& limits = {}) {
  return schema_to_gbnf(ordered_json::parse(schema), "schema", limits);
}

// The body of one rule of `grammar` ("" when it has none of that name).
std::string rule(const std::string& grammar, const std::string& name) {
  std::istringstream in(grammar);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + " ::= ", 0) == 0) return line.substr(name.size() + 5);
  return "";
}

std::string refusal(const ordered_json& schema, const SchemaLimits& limits = {}) {
  try {
    schema_to_gbnf(schema, "schema", limits);
  } catch (const lathe::Error& e) {
    CHECK(e.kind() == lathe::ErrorKind::InvalidArgument);
    return e.what();
  }
  return "accepted";
}

std::string refusal(const char* schema, const SchemaLimits& limits = {}) {
  return refusal(ordered_json::parse(schema), limits);
}

const std::string kPrimitives =
    "char ::= [^\\x00-\\x1F\\\"\\\\] | escape\n"
    "escape ::= \"\\\\\" ( [\\\"/\\\\bfnrt] | \"u\" ( [0-9A-CE-Fa-ce-f] [0-9A-Fa-f]{3} | [Dd] [0-7] [0-9A-Fa-f]{2} | "
    "[Dd] [8-9A-Ba-b] [0-9A-Fa-f]{2} \"\\\\u\" [Dd] [C-Fc-f] [0-9A-Fa-f]{2} ) )\n";
const std::string kWs = "ws ::= ( \" \" | \"\\n\" [\\t ]{0,20} )?\n";

}  // namespace

TEST_CASE("json schema: an object of required and optional properties, whole") {
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 20, "description": "ignored"},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "email": {"type": "string"}
    },
    "required": ["name", "age"],
    "additionalProperties": false
  })";
  CHECK(gbnf(schema) ==
        "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws root-name ws \",\" ws \"\\\"age\\\"\" ws \":\" ws root-age ws "
        "( \",\" ws \"\\\"email\\\"\" ws \":\" ws string ws )? \"}\"\n"
        "root-name ::= \"\\\"\" char{0,20} \"\\\"\"\n"
        "root-age ::= [0-9] | [1-9] [0-9] | \"1\" ( [0-4] [0-9] | \"50\" )\n"
        "string ::= \"\\\"\" char* \"\\\"\"\n" +
            kPrimitives + kWs);
}

TEST_CASE("json schema: any JSON object (json_object)") {
  CHECK(json_object_gbnf() ==
        "root ::= object\n"
        "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
        "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
        "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
        "string ::= \"\\\"\" char* \"\\\"\"\n" +
            kPrimitives +
            "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [Ee] [+\\x2D]? [0-9]+ )?\n" + kWs);
  CHECK(gbnf(R"({"type": "object"})") == json_object_gbnf());
  CHECK(rule(gbnf("{}"), "root") == "value");
  CHECK(rule(gbnf("true"), "root") == "value");
}

TEST_CASE("json schema: integer bounds as exact digit ranges") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("minimum": 0, "maximum": 100)", R"([0-9] | [1-9] [0-9] | "100")"},
      {R"("minimum": -5, "maximum": 5)", R"("-" [1-5] | [0-5])"},
      {R"("minimum": 10, "maximum": 2000)", R"([1-9] [0-9] | [1-9] [0-9]{2} | "1" [0-9]{3} | "2000")"},
      {R"("minimum": -1000, "maximum": -10)", R"("-" ( [1-9] [0-9] | [1-9] [0-9]{2} | "1000" ))"},
      {R"("minimum": 37)", R"("3" [7-9] | [4-9] [0-9] | [1-9] [0-9]{2,})"},
      {R"("minimum": 100)", R"([1-9] [0-9]{2,})"},
      {R"("minimum": 0)", R"("0" | [1-9] [0-9]*)"},
      {R"("minimum": -3)", R"("-" [1-3] | "0" | [1-9] [0-9]*)"},
      {R"("maximum": 50)", R"("-" [1-9] [0-9]* | [0-9] | [1-4] [0-9] | "50")"},
      {R"("maximum": -20)", R"("-" ( [2-9] [0-9] | [1-9] [0-9]{2,} ))"},
      {R"("exclusiveMinimum": 0, "exclusiveMaximum": 10)", R"([1-9])"},
      {R"("minimum": 1.5, "maximum": 3.5)", R"([2-3])"},
      {R"("minimum": 0, "exclusiveMinimum": true, "maximum": 3)", R"([1-3])"},
      {R"("minimum": 7, "maximum": 7)", R"("7")"},
      {R"("minimum": 1000000000000000000)", R"([1-9] [0-9]{18,})"},
      {R"("minimum": 123)", R"("1" ( "2" [3-9] | [3-9] [0-9] ) | [2-9] [0-9]{2} | [1-9] [0-9]{3,})"},
  };
  for (const auto& c : cases) {
    const std::string& bounds = c.first;
    const std::string& expected = c.second;
    CAPTURE(bounds);
    CHECK(rule(gbnf(R"({"type": "integer", )" + bounds + "}"), "root") == expected);
  }
  // No bound: the shared rule, canonical spellings only (no "-0").
  const std::string plain = gbnf(R"({"type": "integer"})");
  CHECK(rule(plain, "root") == "integer");
  CHECK(rule(plain, "integer") == R"("-" [1-9] [0-9]* | "0" | [1-9] [0-9]*)");
}

TEST_CASE("json schema: optional properties keep the schema's order") {
  // Optional ones before the first required one end with a comma, those
  // after it begin with one.
  CHECK(rule(gbnf(R"({"type": "object", "additionalProperties": false, "required": ["b"],
                      "properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}}})"),
             "root") ==
        R"("{" ws ( "\"a\"" ws ":" ws "null" ws "," ws )? "\"b\"" ws ":" ws "null" ws ( "," ws "\"c\"" ws ":" ws "null" ws )? "}")");
  // None required: the first present decides, the rest follow in order.
  const std::string all = gbnf(R"({"type": "object", "additionalProperties": false,
                                    "properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}}})");
  CHECK(rule(all, "root") ==
        R"("{" ws ( "\"a\"" ws ":" ws "null" ws root-tail-b | "\"b\"" ws ":" ws "null" ws root-tail-c | "\"c\"" ws ":" ws "null" ws )? "}")");
  CHECK(rule(all, "root-tail-b") == R"(( "," ws "\"b\"" ws ":" ws "null" ws )? root-tail-c)");
  CHECK(rule(all, "root-tail-c") == R"(( "," ws "\"c\"" ws ":" ws "null" ws )?)");
  // nlohmann::json sorts an object's keys; ordered_json keeps the schema's order.
  const std::string text = R"({"type": "object", "properties": {"z": {"type": "null"}, "a": {"type": "null"}},
                               "required": ["z", "a"], "additionalProperties": false})";
  CHECK(rule(schema_to_gbnf(ordered_json::parse(text), "s"), "root") ==
        R"("{" ws "\"z\"" ws ":" ws "null" ws "," ws "\"a\"" ws ":" ws "null" ws "}")");
  CHECK(rule(schema_to_gbnf(nlohmann::json::parse(text), "s"), "root") ==
        R"("{" ws "\"a\"" ws ":" ws "null" ws "," ws "\"z\"" ws ":" ws "null" ws "}")");
}

TEST_CASE("json schema: extra members after the listed ones, under keys none of theirs") {
  const std::string g = gbnf(R"({"type": "object", "properties": {"ab": {"type": "integer"}}, "required": ["ab"]})");
  CHECK(rule(g, "root") ==
        R"("{" ws "\"ab\"" ws ":" ws integer ws ( "," ws root-extra-key ws ":" ws value ws )* "}")");
  // Any key but "ab": one that leaves the trie early, "a", or "ab" and more.
  CHECK(rule(g, "root-extra-key") ==
        R"("\"" ( ( [^\x00-\x1F\"\\a] | escape ) char* | "a" ( ( [^\x00-\x1F\"\\b] | escape ) char* | "b" ( [^\x00-\x1F\"\\] | escape ) char* )? )? "\"")");
  // Keys spelled with escapes: those escapes are what the trie excludes.
  const std::string escaped = gbnf(R"({"type": "object", "properties": {"\n": {}, "\u0001": {}}, "required": ["\n"]})");
  CHECK(rule(escaped, "root-extra-key") ==
        R"("\"" ( ( [^\x00-\x1F\"\\] | "\\" ( [\"/\\bfrt] | "u" ( "0" [1-9A-Fa-f] [0-9A-Fa-f]{2} | "00" ( [1-9A-Fa-f] [0-9A-Fa-f] | "0" [02-9A-Fa-f] ) | [1-9A-CE-Fa-ce-f] [0-9A-Fa-f]{3} | [Dd] [0-7] [0-9A-Fa-f]{2} | [Dd] [8-9A-Ba-b] [0-9A-Fa-f]{2} "\\u" [Dd] [C-Fc-f] [0-9A-Fa-f]{2} ) ) ) char* | "\\n" ( [^\x00-\x1F\"\\] | escape ) char* | "\\u0001" ( [^\x00-\x1F\"\\] | escape ) char* )? "\"")");
  // An additionalProperties schema is the extra members' values.
  CHECK(rule(gbnf(R"({"type": "object", "additionalProperties": {"type": "boolean"}})"), "root") ==
        R"("{" ws ( string ws ":" ws boolean ws ( "," ws string ws ":" ws boolean ws )* )? "}")");
  CHECK(rule(gbnf(R"({"type": "object", "additionalProperties": false})"), "root") == R"("{" ws "}")");
}

TEST_CASE("json schema: strings, arrays, enums, const, anyOf and type lists") {
  CHECK(rule(gbnf(R"({"type": "string", "minLength": 1, "maxLength": 8})"), "root") == R"("\"" char{1,8} "\"")");
  CHECK(rule(gbnf(R"({"type": "string", "minLength": 2})"), "root") == R"("\"" char{2,} "\"")");
  CHECK(rule(gbnf(R"({"type": "string", "maxLength": 0})"), "root") == R"("\"\"")");
  const std::string array = gbnf(R"({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 3})");
  CHECK(rule(array, "root") == R"("[" ws root-item ws ( "," ws root-item ws ){0,2} "]")");
  CHECK(rule(array, "root-item") == R"("\"a\"" | "\"b\"")");
  CHECK(rule(gbnf(R"({"type": "array", "items": {"type": "number"}, "minItems": 2})"), "root") ==
        R"("[" ws number ws ( "," ws number ws )+ "]")");
  CHECK(rule(gbnf(R"({"type": "array", "maxItems": 0})"), "root") == R"("[" ws "]")");
  CHECK(rule(gbnf(R"({"type": "array", "items": false})"), "root") == R"("[" ws "]")");
  // enum values in their canonical spelling, whitespace between their tokens.
  CHECK(rule(gbnf(R"({"enum": ["x\"y", 1, 2.5, null, true, [], {"k": [1]}]})"), "root") ==
        R"("\"x\\\"y\"" | "1" | "2.5" | "null" | "true" | "[" ws "]" | "{" ws "\"k\"" ws ":" ws "[" ws "1" ws "]" ws "}")");
  CHECK(rule(gbnf(R"({"type": "integer", "enum": [1, "1", 1.0, 2]})"), "root") == R"("1" | "1.0" | "2")");
  CHECK(rule(gbnf(R"({"const": "only"})"), "root") == R"("\"only\"")");
  CHECK(rule(gbnf(R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1, "maximum": 3}]})"), "root") ==
        "string | root-1");
  CHECK(rule(gbnf(R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})"), "root") == R"(boolean | "null")");
  CHECK(rule(gbnf(R"({"type": ["string", "null"], "maxLength": 2})"), "root") == R"("\"" char{0,2} "\"" | "null")");
  CHECK(rule(gbnf(R"({"type": ["integer", "number"]})"), "root") == "number");
  CHECK(rule(gbnf(R"({"allOf": [{"type": "boolean"}]})"), "root") == "boolean");
  CHECK(rule(gbnf(R"({"type": "null", "title": "t", "$schema": "x", "$id": "y", "default": null, "examples": []})"),
             "root") == R"("null")");
}

TEST_CASE("json schema: $ref, recursion and rule names") {
  const std::string tree = gbnf(R"({
    "$defs": {"tree node": {"type": "object", "additionalProperties": false, "required": ["kids"],
                            "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/tree%20node"}}}}},
    "$ref": "#/$defs/tree%20node"})");
  CHECK(rule(tree, "root") == "tree-node");
  CHECK(rule(tree, "tree-node") == R"("{" ws "\"kids\"" ws ":" ws tree-node-kids ws "}")");
  CHECK(rule(tree, "tree-node-kids") == R"("[" ws ( tree-node ws ( "," ws tree-node ws )* )? "]")");
  const std::string list = gbnf(R"({"definitions": {"l": {"anyOf": [{"type": "null"}, {"$ref": "#/definitions/m"}]},
                                                    "m": {"type": "array", "items": {"$ref": "#/definitions/l"}}},
                                    "$ref": "#/definitions/l"})");
  CHECK(rule(list, "l") == R"("null" | m)");
  CHECK(rule(list, "m") == R"("[" ws ( l ws ( "," ws l ws )* )? "]")");
  // "#" is the root itself.
  CHECK(rule(gbnf(R"({"type": "object", "properties": {"next": {"$ref": "#"}}, "additionalProperties": false})"),
             "root") == R"("{" ws ( "\"next\"" ws ":" ws root ws )? "}")");
  // Names from property paths, sanitized, never a primitive's, unique.
  const std::string names = gbnf(R"({"type": "object", "properties": {
    "first_name!": {"type": "string", "maxLength": 2},
    "string": {"type": "string", "maxLength": 3},
    "a b": {"type": "string", "maxLength": 4},
    "a-b": {"type": "string", "maxLength": 5},
    "é": {"type": "string", "maxLength": 6}}, "additionalProperties": false})");
  int n = 2;
  for (const char* name : {"root-first-name", "root-string", "root-a-b", "root-a-b-2", "root-2"})
    CHECK(rule(names, name) == R"("\"" char{0,)" + std::to_string(n++) + R"(} "\"")");
}

TEST_CASE("json schema: the documents under a rule of the caller's name, the name root left free") {
  const ordered_json schema = ordered_json::parse(R"({"type": "object", "properties": {
    "root": {"type": "string", "maxLength": 2}, "next": {"$ref": "#"}}, "additionalProperties": false})");
  const std::string rules = lathe::grammar::schema_rules_gbnf(schema, "schema", "call");
  CHECK(rule(rules, "root").empty());
  // The property "root" takes another name; "#" is the caller's rule.
  CHECK(rule(rules, "call") ==
        R"("{" ws ( "\"root\"" ws ":" ws call-root ws call-tail-next | "\"next\"" ws ":" ws call ws )? "}")");
  // Embedded by a root of the caller's.
  CHECK_NOTHROW(lathe::grammar::Grammar::parse("root ::= \"<\" call \">\"\n" + rules, "embedded"));
  for (const char* name : {"root", "string", "", "a b"})
    CHECK_THROWS_AS(lathe::grammar::schema_rules_gbnf(schema, "schema", name), lathe::Error);
}

TEST_CASE("json schema: unknown keywords refused with their pointer") {
  CHECK(refusal(R"({"type": "string", "format": "date"})") == "schema: at /format: keyword 'format' is not supported");
  CHECK(refusal(R"({"properties": {"a/b~c": {"type": "string", "pattern": "^x$"}}})") ==
        "schema: at /properties/a~1b~0c/pattern: keyword 'pattern' is not supported");
  CHECK(refusal(R"({"type": "array", "prefixItems": [{}]})") ==
        "schema: at /prefixItems: keyword 'prefixItems' is not supported");
  CHECK(refusal(R"({"type": "array", "items": {"uniqueItems": true}})") ==
        "schema: at /items/uniqueItems: keyword 'uniqueItems' is not supported");
  CHECK(refusal(R"({"anyOf": [{}, {"not": {}}]})") == "schema: at /anyOf/1/not: keyword 'not' is not supported");
  CHECK(refusal(R"({"$defs": {"a": {"if": {}}}, "$ref": "#/$defs/a"})") ==
        "schema: at /$defs/a/if: keyword 'if' is not supported");
  CHECK(refusal(R"({"type": "object", "patternProperties": {}})") ==
        "schema: at /patternProperties: keyword 'patternProperties' is not supported");
  CHECK(refusal(R"({"type": "object", "minProperties": 1})") ==
        "schema: at /minProperties: keyword 'minProperties' is not supported");
  CHECK(refusal(R"({"type": "number", "multipleOf": 2})") ==
        "schema: at /multipleOf: keyword 'multipleOf' is not supported");
  CHECK(refusal(R"({"type": "number", "minimum": 0})") ==
        "schema: at /minimum: keyword 'minimum' is not supported for type 'number' (only for 'integer')");
  CHECK(refusal(R"({"exclusiveMaximum": 0})") ==
        "schema: at /exclusiveMaximum: keyword 'exclusiveMaximum' is not supported for type 'number' (only for "
        "'integer')");
  // Keywords beside $ref, allOf, anyOf, enum that would have to be intersected.
  CHECK(refusal(R"({"$defs": {"a": {}}, "$ref": "#/$defs/a", "type": "object"})") ==
        "schema: at /type: keyword 'type' is not supported beside '$ref'");
  CHECK(refusal(R"({"allOf": [{}, {}]})") == "schema: at /allOf: keyword 'allOf' is not supported with more than one schema");
  CHECK(refusal(R"({"anyOf": [{}], "type": "string"})") == "schema: at /type: keyword 'type' is not supported beside 'anyOf'");
  CHECK(refusal(R"({"anyOf": [{}], "oneOf": [{}]})") == "schema: at /oneOf: keyword 'oneOf' is not supported beside 'anyOf'");
  CHECK(refusal(R"({"type": "string", "enum": ["a"], "maxLength": 3})") ==
        "schema: at /maxLength: keyword 'maxLength' is not supported beside 'enum'");
  CHECK(refusal(R"({"enum": [1], "const": 1})") == "schema: at /const: keyword 'const' is not supported beside 'enum'");
  CHECK(refusal(R"({"type": "array", "items": [{}]})") ==
        "schema: at /items: 'items' as an array of schemas (tuples) is not supported");
  CHECK(refusal(R"({"type": "object", "properties": {}, "required": ["x"]})") ==
        "schema: at /required/0: required property 'x' is not among the properties (not supported)");
  // What a message quotes of the schema: control bytes escaped, long text cut.
  CHECK(refusal(ordered_json{{"x\x01y", 1}}) == "schema: at /x\\x01y: keyword 'x\\x01y' is not supported");
  const std::string message = refusal(ordered_json{{std::string(300, 'k'), 1}});
  CHECK(message == "schema: at …" + std::string(200, 'k') + ": keyword '" + std::string(64, 'k') + "…' is not supported");
}

TEST_CASE("json schema: references that do not resolve") {
  CHECK(refusal(R"({"$ref": "https://example.com/s.json"})") ==
        "schema: at /$ref: 'https://example.com/s.json': only references within the schema ('#/$defs/…') are supported");
  CHECK(refusal(R"({"$ref": "#/$defs/missing"})") == "schema: at /$ref: '#/$defs/missing' does not resolve");
  CHECK(refusal(R"({"$defs": {"a": {}}, "properties": {"x": {"$ref": "#/$defs/b"}}})") ==
        "schema: at /properties/x/$ref: '#/$defs/b' does not resolve");
  CHECK(refusal(R"({"$ref": "#node"})") == "schema: at /$ref: '#node' does not resolve (anchors are not supported)");
  CHECK(refusal(R"({"$ref": 3})") == "schema: at /$ref: '$ref' must be a string");
  CHECK(refusal(R"({"$defs": {"a": 3}, "$ref": "#/$defs/a"})") ==
        "schema: at /$defs/a: a schema must be an object or a boolean");
  CHECK(refusal(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"})") ==
        "schema: at /$defs/a: the schema refers to itself before any token of the document (left recursion)");
  CHECK(refusal(R"({"anyOf": [{"type": "null"}, {"$ref": "#"}]})") ==
        "schema: at (root): the schema refers to itself before any token of the document (left recursion)");
  CHECK(refusal(R"({"$ref": "#"})") == "schema: at (root): no finite document matches the schema (it recurses without end)");
  CHECK(refusal(R"({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"})") ==
        "schema: at /$defs/a: no finite document matches the schema (it recurses without end)");
}

TEST_CASE("json schema: malformed schemas and schemas no document matches") {
  CHECK(refusal("3") == "schema: at (root): a schema must be an object or a boolean");
  CHECK(refusal("false") == "schema: at (root): the schema false matches no document");
  CHECK(refusal(R"({"properties": {"a": false}, "required": ["a"]})") ==
        "schema: at /properties/a: the schema false matches no document");
  CHECK(refusal(R"({"type": "strin"})") == "schema: at /type: 'strin' is not a JSON Schema type");
  CHECK(refusal(R"({"type": ["string", 3]})") == "schema: at /type/1: a type must be a string");
  CHECK(refusal(R"({"type": []})") == "schema: at /type: no type: no document matches");
  CHECK(refusal(R"({"type": "string", "minLength": -1})") ==
        "schema: at /minLength: 'minLength' must be a non-negative integer");
  CHECK(refusal(R"({"type": "string", "maxLength": 1.5})") ==
        "schema: at /maxLength: 'maxLength' must be a non-negative integer");
  CHECK(refusal(R"({"type": "integer", "minimum": "0"})") == "schema: at /minimum: 'minimum' must be a number");
  CHECK(refusal(R"({"properties": []})") == "schema: at /properties: 'properties' must be an object");
  CHECK(refusal(R"({"anyOf": []})") == "schema: at /anyOf: 'anyOf' must be a non-empty array");
  CHECK(refusal(R"({"required": "a"})") == "schema: at /required: 'required' must be an array of strings");
  CHECK(refusal(R"({"type": "string", "minLength": 5, "maxLength": 2})") ==
        "schema: at (root): minLength (5) is above maxLength (2): no document matches");
  CHECK(refusal(R"({"type": "array", "minItems": 3, "maxItems": 2})") ==
        "schema: at (root): minItems (3) is above maxItems (2): no document matches");
  CHECK(refusal(R"({"type": "array", "items": false, "minItems": 1})") ==
        "schema: at /items: 'items' is false and minItems is above 0: no document matches");
  CHECK(refusal(R"({"type": "integer", "minimum": 5, "maximum": 2})") ==
        "schema: at (root): no integer lies within the bounds: no document matches");
  CHECK(refusal(R"({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2})") ==
        "schema: at (root): no integer lies within the bounds: no document matches");
  CHECK(refusal(R"({"type": "integer", "minimum": 1e19})") ==
        "schema: at /minimum: 1e+19 is beyond the integer bounds supported (±10^18)");
  CHECK(refusal(R"({"enum": []})") == "schema: at /enum: no value of the types allowed: no document matches");
  CHECK(refusal(R"({"type": "string", "enum": [1, null]})") ==
        "schema: at /enum: no value of the types allowed: no document matches");
  CHECK(refusal(ordered_json{{"enum", {std::string("\xff")}}}) == "schema: at /enum/0: a string that is not valid UTF-8");
}

TEST_CASE("json schema: every limit enforced and named") {
  ordered_json deep = ordered_json::object();
  for (int i = 0; i < 40; ++i) deep = ordered_json{{"type", "array"}, {"items", deep}};
  std::string at;
  for (int i = 0; i < 33; ++i) at += "/items";
  CHECK(refusal(deep) == "schema: at " + at + ": the schema nests deeper than max_depth (32)");
  CHECK(refusal(R"({"type": "array", "items": {"type": "array"}})", {.max_depth = 1}) == "accepted");
  CHECK(refusal(R"({"type": "array", "items": {"type": "array", "items": {}}})", {.max_depth = 1}) ==
        "schema: at /items/items: the schema nests deeper than max_depth (1)");
  CHECK(refusal(R"({"enum": [[[1]]]})", {.max_depth = 2}) == "schema: at /enum/0/0/0: the value nests deeper than max_depth (2)");

  ordered_json values = ordered_json::array();
  for (int i = 0; i < 1025; ++i) values.push_back(i);
  CHECK(refusal(ordered_json{{"enum", values}}) == "schema: at /enum: 1025 values pass max_enum (1024)");
  CHECK(refusal(R"({"enum": [1, 2, 3]})", {.max_enum = 2}) == "schema: at /enum: 3 values pass max_enum (2)");

  CHECK(refusal(R"({"type": "array", "maxItems": 1025})") == "schema: at /maxItems: 1025 passes max_items (1024)");
  CHECK(refusal(R"({"type": "array", "minItems": 5})", {.max_items = 4}) == "schema: at /minItems: 5 passes max_items (4)");
  CHECK(refusal(R"({"type": "array", "maxItems": 1024})") == "accepted");
  CHECK(refusal(R"({"type": "string", "maxLength": 1025})") == "schema: at /maxLength: 1025 passes max_length (1024)");
  CHECK(refusal(R"({"type": "string", "minLength": 9})", {.max_length = 8}) ==
        "schema: at /minLength: 9 passes max_length (8)");

  // max_rules: the named rules as they are made, then every rule, group and
  // repetition of the grammar (what the engine makes a rule of each).
  ordered_json many = {{"type", "object"}, {"properties", ordered_json::object()}};
  for (int i = 0; i < 40; ++i) many["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", i}};
  CHECK(refusal(many, {.max_rules = 30}) == "schema: at /properties/p27: the grammar passes max_rules (30)");
  many["additionalProperties"] = false;
  many["required"] = {"p0"};
  CHECK(refusal(many, {.max_rules = 70}) ==
        "schema: the grammar passes max_rules (70): it takes 925 rules, groups and repetitions");

  // The engine's own limits (grammar.hpp's Limits), checked here so that
  // the compiler's output always parses.
  ordered_json long_strings = ordered_json::array();
  for (int i = 0; i < 300; ++i) long_strings.push_back(std::string(1000, 'a') + std::to_string(i));
  CHECK(refusal(ordered_json{{"enum", long_strings}}) == "schema: the grammar passes the engine's max_bytes (262144)");
  ordered_json strings = {{"type", "object"}, {"properties", ordered_json::object()}, {"required", ordered_json::array()}};
  for (int i = 0; i < 400; ++i) {
    const int n = 1000 - i;
    strings["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"minLength", n}, {"maxLength", n}};
    strings["required"].push_back("p" + std::to_string(i));
  }
  CHECK(refusal(strings) == "schema: the grammar passes the engine's max_elements (262144)");
  CHECK(refusal(R"({"type": "string", "minLength": 2000})", {.max_length = 4096}) ==
        "schema: the grammar passes the engine's max_repeat (1024)");
  CHECK(refusal(R"({"type": "string", "maxLength": 4000})", {.max_length = 4096}) == "accepted");
  // Wide bounds cost about 2√n rules, and rules of the same body are one.
  const std::string wide = gbnf(R"({"type": "object", "properties": {
    "a": {"type": "string", "maxLength": 1000}, "b": {"type": "string", "maxLength": 1000},
    "c": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 100}},
    "required": ["a", "b", "c"], "additionalProperties": false})");
  CHECK(rule(wide, "root-a") == R"("\"" ( ( char{32} ){0,30} char{0,31} | ( char{32} ){31} char{0,8} ) "\"")");
  CHECK(rule(wide, "root-b") == "");
  CHECK(rule(wide, "root") ==
        R"("{" ws "\"a\"" ws ":" ws root-a ws "," ws "\"b\"" ws ":" ws root-a ws "," ws "\"c\"" ws ":" ws root-c ws "}")");
  CHECK(rule(wide, "root-c") ==
        R"("[" ws integer ws "," ws integer ws ( ( ( "," ws integer ws ){10} ){0,8} ( "," ws integer ws ){0,9} | ( ( "," ws integer ws ){10} ){9} ( "," ws integer ws ){0,8} ) "]")");
}
