// Chat templates (runtime/text/jinja/chat_template.hpp): the real templates of
// Llama 3.3, Qwen2.5, Qwen3, Gemma 2 and SmolLM2 rendered byte for byte as
// Python's jinja2 renders them under transformers' settings
// (tests/data/chat_templates/expected.json, written by
// tests/tools/chat_template_expected.py), each construct of the supported
// Jinja2 subset on a small template whose output was checked against
// jinja2, the errors (parse errors at line:column, runtime errors at a line,
// raise_exception), the bounds on hostile templates, finding a checkpoint's
// template, and the demo model's template.
#include "runtime/text/jinja/chat_template.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/error.hpp"
#include "runtime/weights/gguf.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::text;
using ojson = nlohmann::ordered_json;

namespace {

const std::string kDataDir = std::string(LATHE_SOURCE_DIR) + "/tests/data/chat_templates/";

// Renders `source` with the variables given as JSON text.
std::string render(const std::string& source, const std::string& variables = "{}") {
  return ChatTemplate::parse(source).render(ojson::parse(variables));
}

Error error_of(const std::string& source, const std::string& variables = "{}") {
  try {
    render(source, variables);
  } catch (const Error& e) {
    return e;
  }
  FAIL("no lathe::Error was thrown for " << source);
  return Error(ErrorKind::InvalidArgument, "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("real chat templates render as jinja2 renders them") {
  const ojson expected = ojson::parse(test::read_file(kDataDir + "expected.json"));
  int compared = 0;
  for (const auto& [file, cases] : expected["templates"].items()) {
    const ChatTemplate t = ChatTemplate::parse(test::read_file(kDataDir + file), file);
    for (const ojson& c : cases) {
      CAPTURE(file);
      CAPTURE(c["case"].get<std::string>());
      const auto run = [&] {
        return t.render_chat(c["messages"], c["add_generation_prompt"].get<bool>(), c["bos_token"].get<std::string>(),
                             c["eos_token"].get<std::string>(), c["extra"]);
      };
      if (c.contains("output")) {
        CHECK(run() == c["output"].get<std::string>());
      } else if (c["error"]["kind"] == "raise_exception") {
        try {
          run();
          FAIL("no error");
        } catch (const Error& e) {
          CHECK(e.kind() == ErrorKind::InvalidArgument);
          CHECK(contains(e.what(), c["error"]["message"].get<std::string>()));
        }
      } else {
        CHECK_THROWS_AS(run(), Error);
      }
      ++compared;
    }
  }
  CHECK(compared >= 70);
}

TEST_CASE("whitespace control: trim_blocks, lstrip_blocks, - and +") {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it.
  CHECK(render("{% if true %}\n  yes\n{% endif %}\nend") == "  yes\nend");
  CHECK(render("<ul>\n    {% for x in [1, 2] %}\n    <li>{{ x }}</li>\n    {% endfor %}\n</ul>") ==
        "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>");
  // Not after {{ }}: only block and comment tags strip.
  CHECK(render("  {{ 1 }}\n  {# c #}\nx") == "  1\nx");
  CHECK(render("a  {%- if true -%}  \n b {%- endif %}") == "ab");
  CHECK(render("a\n  {%+ if true %}x{% endif +%}\nb") == "a\n  x\nb");
  CHECK(render("{{- ' a ' -}}  \n  {{ 'b' }}") == " a b");
  // Text before a tag on the same line is kept, and one trailing newline of the source is dropped.
  CHECK(render("x {% if true %}y{% endif %}\n") == "x y");
  CHECK(render("line\r\nnext\r\n\n") == "line\nnext\n");
}

TEST_CASE("if, elif, else and the ternary") {
  const std::string t = "{% if n > 2 %}big{% elif n == 2 %}two{% else %}small{% endif %}";
  CHECK(render(t, R"({"n": 3})") == "big");
  CHECK(render(t, R"({"n": 2})") == "two");
  CHECK(render(t, R"({"n": 1})") == "small");
  CHECK(render("{{ 'a' if x else 'b' }}|{{ 'a' if x }}|", R"({"x": false})") == "b||");
}

TEST_CASE("for loops: loop variables, else, filters, unpacking, break and continue") {
  CHECK(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.length }}"
               "{{ 'F' if loop.first }}{{ 'L' if loop.last }};{% endfor %}",
               R"({"xs": ["a", "b", "c"]})") == "1033F;2123;3213L;");
  CHECK(render("{% for x in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}") == "1,3,5,7,9");
  CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})") == "b=1;a=2;");
  CHECK(render("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"x": 1, "y": 2}})") == "xy");
  CHECK(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}"
               "{% endfor %}") == "0134");
  CHECK(render("{% for x in 'héllo'[::-1] %}{{ x }}.{% endfor %}") == "o.l.l.é.h.");
  CHECK(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}{{ loop.cycle('a', 'b') }}{% endfor %}") == "a1b2a");
  CHECK(render("{% for x in undefined_name %}x{% endfor %}") == "");
}

TEST_CASE("scoping: set in a loop stays in its iteration, namespace carries out") {
  CHECK(render("{% set a = 5 %}{% for x in [1, 2, 3] %}{% if loop.first %}{% set a = 1 %}{% endif %}{{ a }}{% endfor %}{{ a }}") ==
        "1555");
  CHECK(render("{% set ns = namespace(found=false, n=0) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}"
               "{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}") == "True 6");
  CHECK(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}") == "21");
  CHECK(render("{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]") == "[x2]");
}

TEST_CASE("macros") {
  CHECK(render("{% macro m(a, b=2) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{% set c = 9 %}{{ m(1) }}{{ m(1, b=3) }}") == "[129][139]");
  CHECK(render("{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(3) }}") == "321");
}

TEST_CASE("literals, printing and operators follow Python") {
  CHECK(render("{{ (1, 2) }}{{ [1, 'a', none, true, 1.5, {'k': \"v'\"}] }}{{ 1e20 }} {{ 0.1 + 0.2 }} {{ 3 / 2 }} {{ 7 // 2 }} "
               "{{ -7 % 3 }} {{ 2 ** 10 }} {{ 1_000 }} {{ None }} {{ True }}") ==
        "(1, 2)[1, 'a', None, True, 1.5, {'k': \"v'\"}]1e+20 0.30000000000000004 1.5 3 2 1024 1000 None True");
  CHECK(render("{{ 'a\\tb\\n\\u00e9\\x41' }}|{{ \"it's\" 'adjacent' }}") == "a\tb\né\x41|it'sadjacent");
  CHECK(render("{{ 'x\\é\\😀' }}") == "x\\xe9\\U0001f600");  // jinja2's unicode-escape decoding
  CHECK(render("{{ 'a' ~ 1 ~ none ~ x }}|{{ 'ab' * 2 }}|{{ [1] + [2] }}") == "a1None|abab|[1, 2]");
  CHECK(render("{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 'x' not in ['x'] }} {{ 1 == 1.0 }} {{ 'k' in {'k': 1} }}") ==
        "True True False True True");
  CHECK(render("{{ not 0 and 'y' or 'n' }} {{ [] or 'empty' }} {{ -x | abs }}", R"({"x": 4})") == "y empty 4");
  CHECK(render("{{ s[1:3] }}{{ s[-1] }}{{ s[::2] }}{{ l[1:] }}{{ l[-2] }}", R"({"s": "héllo", "l": [1, 2, 3]})") ==
        "élohlo[2, 3]2");
}

TEST_CASE("attributes, items and undefined") {
  const std::string m = R"({"m": {"role": "user", "content": "hi", "n": null}})";
  CHECK(render("{{ m.role }}{{ m['content'] }}[{{ m.missing }}]{{ m.missing is defined }}{{ m.missing is not defined }}", m) ==
        "userhi[]FalseTrue");
  CHECK(render("{{ m.n is none }}{{ m.n.x is defined }}{{ m.get('role') }}{{ m.get('x', 'd') }}", m) == "TrueFalseuserd");
  CHECK(render("{{ 'y' if m.missing else 'n' }}{{ m.missing | default('dflt') }}{{ '' | default('e', true) }}", m) ==
        "ndflte");
  CHECK(contains(error_of("{{ nothing.attr }}").what(), "chat template:1: 'nothing' is undefined"));
}

TEST_CASE("tests") {
  CHECK(render("{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 'x' is sequence }}{{ 1.5 is number }}"
               "{{ true is boolean }}{{ true is true }}{{ false is false }}{{ 1 is boolean }}{{ 3 is divisibleby 3 }}"
               "{{ 2 is even }}{{ 'x' is equalto 'x' }}{{ 5 is gt 3 }}{{ 'ab' is lower }}") ==
        "TrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrue");
}

TEST_CASE("filters") {
  CHECK(render("{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ [1, 2] | length }}|{{ 'héllo' | count }}|{{ 'aBc' | upper }}"
               "{{ 'aBc' | lower }}|{{ 'hello world' | capitalize }}|{{ 'hello big-world' | title }}") ==
        "x|hi|2|5|ABCabc|Hello world|Hello Big-World");
  CHECK(render("{{ 'a-b-c' | replace('-', '+') }}|{{ ['a', 'b'] | join(', ') }}|{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}"
               "|{{ 3 | string }}{{ '42' | int + 1 }}{{ '2.5' | float }}|{{ 'ab' | list }}|{{ [3, 1, 3, 'A', 'a'] | unique | list }}"
               "|{{ [1, 2] | reverse | list }}|{{ '<b>' | safe }}") ==
        "a+b+c|a, b|13|3432.5|['a', 'b']|[3, 1, 'A']|[2, 1]|<b>");
  CHECK(render("{{ d | items | list }}|{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}",
               R"({"d": {"b": "é\"\n", "a": [1, 2.0, null, true]}})") ==
        "[('b', 'é\"\\n'), ('a', [1, 2.0, None, True])]|{\"b\": \"é\\\"\\n\", \"a\": [1, 2.0, null, true]}|"
        "{\n  \"b\": \"é\\\"\\n\",\n  \"a\": [\n    1,\n    2.0,\n    null,\n    true\n  ]\n}|[]");
  CHECK(render("{{ d | tojson(sort_keys=true, separators=[',', ':']) }}{{ 'é' | tojson(ensure_ascii=true) }}",
               R"({"d": {"b": 1, "a": 2}})") == "{\"a\":2,\"b\":1}\"\\u00e9\"");
  const std::string people = R"({"p": [{"name": "a", "tool": true}, {"name": "b", "tool": false}, {"name": "c"}]})";
  CHECK(render("{{ p | selectattr('tool') | map(attribute='name') | join }}|{{ p | rejectattr('tool') | map(attribute='name') | list }}"
               "|{{ p | selectattr('name', 'equalto', 'c') | list | length }}|{{ ['a', 'b', 'code'] | reject('equalto', 'code') | join(',') }}"
               "|{{ ['a', 'b'] | map('upper') | join }}",
               people) == "a|['b', 'c']|1|a,b|AB");
  CHECK(render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'x\\ny' | indent(2, true) }}") == "a\n  b\n\n  c|  x\n  y");
}

TEST_CASE("string and dict methods") {
  CHECK(render("{{ '  x \\n'.strip() }}|{{ '\\n\\nx'.lstrip('\\n') }}|{{ 'x--'.rstrip('-') }}|{{ 'a b  c'.split() }}"
               "|{{ 'a</think>b'.split('</think>')[-1] }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}"
               "|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'hello world'.title() }}") ==
        "x|x|x|['a', 'b', 'c']|b|TrueTrue|ABab|bXb|Hello World");
  CHECK(render("{{ d.keys() | list }}{{ d.values() | list }}{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}",
               R"({"d": {"x": 1, "y": 2}})") == "['x', 'y'][1, 2]x1y2");
}

TEST_CASE("parse errors name the line and column") {
  const auto message = [](const std::string& source) { return std::string(error_of(source).what()); };
  CHECK(message("line one\n{{ x + }}") == "chat template:2:8: expected an expression, found '}}'");
  CHECK(message("{% if x %}\nnever closed") == "chat template:2:13: unexpected end of the template: expected 'elif'");
  CHECK(message("{% endfor %}") == "chat template:1:4: unexpected 'endfor' with no open block it could close");
  CHECK(message("{% frobnicate %}") == "chat template:1:4: unknown tag 'frobnicate'");
  CHECK(message("ab {{ 'unclosed }}") == "chat template:1:7: string is not closed");
  CHECK(message("{# no end") == "chat template:1:1: comment {# … is not closed by #}");
  CHECK(message("{{ x $ y }}") == "chat template:1:6: unexpected character '$'");
  CHECK(message("{% break %}") == "chat template:1:4: 'break' outside a for loop");
  CHECK(error_of("{{ x").kind() == ErrorKind::BadFile);
}

TEST_CASE("runtime errors name the line, raise_exception names the template's message") {
  Error e = error_of("a\nb\n{{ x | frobnicate }}");
  CHECK(e.kind() == ErrorKind::BadFile);
  CHECK(std::string(e.what()) == "chat template:3: unknown filter 'frobnicate'");
  CHECK(std::string(error_of("\n{{ 'a' + 1 }}").what()) == "chat template:2: unsupported operand types for +: 'str' and 'int'");
  CHECK(std::string(error_of("{{ x is frobnicated }}").what()) == "chat template:1: unknown test 'frobnicated'");
  CHECK(std::string(error_of("{{ x is defined 'x' }}").what()) == "chat template:1: test 'defined' takes no arguments");
  CHECK(std::string(error_of("{{ 1 // 0 }}").what()) == "chat template:1: integer division or modulo by zero");
  e = error_of("\n\n{% if true %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}");
  CHECK(e.kind() == ErrorKind::InvalidArgument);
  CHECK(std::string(e.what()) == "chat template:3: Only user and assistant roles are supported!");
}

TEST_CASE("hostile templates stop with an error instead of hanging or crashing") {
  CHECK(contains(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").what(), "more than 64 deep"));
  CHECK(contains(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").what(),
                 "10 million loop iterations"));
  CHECK(contains(error_of("{{ range(10 ** 9) }}").what(), "range() is longer"));
  CHECK(contains(error_of("{{ 'x' * 10 ** 12 }}").what(), "too long"));
  CHECK(contains(error_of("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}").what(), "nests deeper"));
  CHECK(contains(error_of("{{ 2 ** 64 }}").what(), "integer overflow"));
  // An argument of the wrong type is an error, not a crash (found by mutating the real templates).
  CHECK(contains(error_of("{{ x | tojson(ind4) }}", R"({"x": 1})").what(), "indent must be an integer, not undefined"));
  CHECK(contains(error_of("{{ 'a' | indent(1.5) }}").what(), "width must be an integer or a string"));
  CHECK(render("{{ strftime_now('%Y') | length }}") == "4");
}

TEST_CASE("finding a Hugging Face checkpoint's template") {
  test::TempDir dir("lathe-chat-template-test");
  CHECK_FALSE(find_chat_template(dir.dir.string()).has_value());
  test::write_file(dir.file("tokenizer_config.json"),
                   R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "chat_template": "{{ bos_token }}hi"})");
  auto found = find_chat_template(dir.file("tokenizer.json"));
  REQUIRE(found.has_value());
  CHECK(found->text == "{{ bos_token }}hi");
  CHECK(found->bos_token == "<s>");
  CHECK(found->eos_token == "</s>");
  CHECK(contains(found->origin, "tokenizer_config.json chat_template"));

  test::write_file(dir.file("tokenizer_config.json"),
                   R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  CHECK(find_chat_template(dir.dir.string())->text == "D");
  // A processor's chat_template.json over the tokenizer's; a .jinja over both.
  test::write_file(dir.file("chat_template.json"), R"({"chat_template": "P"})");
  CHECK(find_chat_template(dir.dir.string())->text == "P");
  CHECK(contains(find_chat_template(dir.dir.string())->origin, "chat_template.json chat_template"));
  test::write_file(dir.file("chat_template.jinja"), "J");
  CHECK(find_chat_template(dir.dir.string())->text == "J");
  std::filesystem::remove(dir.file("chat_template.jinja"));
  test::write_file(dir.file("chat_template.json"), R"({"template": "P"})");
  CHECK_THROWS_WITH_AS(find_chat_template(dir.dir.string()), doctest::Contains("with a chat_template"), Error);
  std::filesystem::remove(dir.file("chat_template.json"));

  test::write_file(dir.file("chat_template.jinja"), "");
  std::filesystem::remove(dir.file("chat_template.jinja"));
  test::write_file(dir.file("tokenizer_config.json"), R"({"chat_template": 3})");
  CHECK_THROWS_WITH_AS(find_chat_template(dir.dir.string()), doctest::Contains("chat_template must be a string"), Error);
}

TEST_CASE("finding a GGUF file's template") {
  test::TempDir dir("lathe-chat-template-test");
  const std::string path = dir.file("model.gguf");
  weights::write_gguf(path,
                      {{"tokenizer.chat_template", std::string("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}")},
                       {"tokenizer.ggml.tokens", weights::GgufValue::strings({"<unk>", "<s>", "</s>"})},
                       {"tokenizer.ggml.bos_token_id", uint32_t{1}},
                       {"tokenizer.ggml.eos_token_id", uint32_t{2}}},
                      {});
  const auto found = find_chat_template(weights::GgufFile(path));
  REQUIRE(found.has_value());
  const ChatTemplate t = ChatTemplate::parse(found->text, found->origin);
  CHECK(t.render_chat(ojson::parse(R"([{"role": "user", "content": "hi"}])"), false, found->bos_token, found->eos_token) ==
        "<s>hi</s>");
}

TEST_CASE("the demo model's template renders a conversation") {
  const auto found = find_chat_template(std::string(LATHE_SOURCE_DIR) + "/models/demo");
  REQUIRE(found.has_value());
  CHECK(found->bos_token == "<s>");
  CHECK(found->eos_token == "</s>");
  const ChatTemplate t = ChatTemplate::parse(found->text, found->origin);
  const ojson messages = ojson::parse(R"([
    {"role": "system", "content": "Answer in the words of the King James Bible."},
    {"role": "user", "content": "Who made the heaven and the earth?"},
    {"role": "assistant", "content": "In the beginning God created the heaven and the earth."},
    {"role": "user", "content": "And the light?"}])");
  // As jinja2 renders it (tests/tools/chat_template_expected.py's environment).
  CHECK(t.render_chat(messages, true, found->bos_token, found->eos_token) ==
        "<s>Answer in the words of the King James Bible.\n\n### User:\nWho made the heaven and the earth?\n\n"
        "### Assistant:\nIn the beginning God created the heaven and the earth.</s>\n\n### User:\nAnd the light?\n\n"
        "### Assistant:\n");
  CHECK_THROWS_WITH_AS(t.render_chat(ojson::parse(R"([{"role": "tool", "content": "x"}])"), true, "<s>", "</s>"),
                       doctest::Contains("the demo model has no tool turns"), Error);
}
