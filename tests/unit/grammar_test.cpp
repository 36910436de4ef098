// The grammar engine of constrained decoding (runtime/grammar/grammar.hpp,
// docs/grammar.md): GBNF parsed or refused at LINE:COLUMN, each limit,
// left recursion, repetitions and classes by the strings they match, UTF-8
// fed a byte at a time, and Vocabulary::allowed against accept() token by
// token on random grammars.
#include "runtime/grammar/grammar.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/utf8.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::grammar;

namespace {

std::shared_ptr<const Grammar> parse(std::string_view gbnf, const Limits& limits = {}) {
  return Grammar::parse(gbnf, "g.gbnf", limits);
}

std::string refusal(std::string_view gbnf, const Limits& limits = {}) {
  try {
    parse(gbnf, limits);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    return e.what();
  }
  return "accepted";
}

// A whole document of the grammar.
bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.can_end();
}

// The strings over `alphabet` of up to `length` characters the grammar
// matches whole.
std::set<std::string> language(const std::shared_ptr<const Grammar>& g, const std::vector<std::string>& alphabet,
                               size_t length) {
  std::set<std::string> out;
  std::function<void(const Matcher&, const std::string&, size_t)> walk = [&](const Matcher& m, const std::string& s,
                                                                             size_t left) {
    if (m.can_end()) out.insert(s);
    if (left == 0) return;
    for (const std::string& c : alphabet) {
      Matcher next = m;
      if (next.accept(c)) walk(next, s + c, left - 1);
    }
  };
  walk(Matcher(g), "", length);
  return out;
}

std::set<std::string> repeat_language(std::string_view rhs) {
  return language(parse("root ::= " + std::string(rhs)), {"a", "b"}, 6);
}

std::string cp(char32_t c) {
  std::string s;
  text::utf8_append(s, c);
  return s;
}

std::string json_gbnf() { return test::read_file(std::string(LATHE_SOURCE_DIR) + "/tests/data/grammar/json.gbnf"); }

}  // namespace

TEST_CASE("grammar: parse errors name the file, line and column") {
  CHECK(refusal("root ::= \"abc") == "g.gbnf:1:10: unterminated literal");
  CHECK(refusal("root ::= \"ab\ncd\"") == "g.gbnf:1:10: unterminated literal (a line ends inside it; write \\n)");
  CHECK(refusal("root ::= [a-z") == "g.gbnf:1:10: unterminated character class");
  CHECK(refusal("root ::= \"a\\qb\"") == "g.gbnf:1:12: unknown escape '\\' followed by 'q'");
  CHECK(refusal("root ::= \"\\x4\"") == "g.gbnf:1:11: the escape \\x needs 2 hex digits");
  CHECK(refusal("root ::= [\\u12]") == "g.gbnf:1:11: the escape \\u needs 4 hex digits");
  CHECK(refusal("root ::= \"\\U00110000\"") == "g.gbnf:1:11: the escape's code point is beyond U+10FFFF");
  CHECK(refusal("root ::= \"\\uD800\"") ==
        "g.gbnf:1:11: a literal's U+D800 is a surrogate, which UTF-8 text never holds");
  CHECK(refusal("root ::= \"\xC3(\"") == "g.gbnf:1:11: invalid UTF-8 in the grammar");
  CHECK(refusal("root ::= foo") == "g.gbnf:1:10: rule 'foo' is used but never defined");
  CHECK(refusal("root ::= a b\nb ::= \"x\"\nc ::= a") == "g.gbnf:1:10: rule 'a' is used but never defined");
  CHECK(refusal("foo ::= \"a\"") == "g.gbnf:1:1: no rule 'root' (the rule a document must match)");
  CHECK(refusal("") == "g.gbnf:1:1: no rule 'root' (the rule a document must match)");
  CHECK(refusal("root ::= item+\nitem ::= \"a\" |\n    \"b\" )") == "g.gbnf:3:9: unexpected ')'");
  CHECK(refusal("root ::= (\"a\" \"b\"") == "g.gbnf:1:10: '(' is never closed");
  CHECK(refusal("root ::= (\"a\"\n  \"b\"]") == "g.gbnf:2:6: expected ')' to close the '(' at 1:10, found ']'");
  CHECK(refusal("root = \"a\"") == "g.gbnf:1:6: expected '::=' after the rule name 'root', found '='");
  CHECK(refusal("  \"a\"") == "g.gbnf:1:3: expected a rule name, found '\"'");
  CHECK(refusal("root ::= \"a\"\nroot ::= \"b\"") == "g.gbnf:2:1: rule 'root' is defined twice (first at 1:1)");
  CHECK(refusal("root ::= *\"a\"") == "g.gbnf:1:10: '*' has nothing before it to repeat");
  CHECK(refusal("root ::= \"a\" | +") == "g.gbnf:1:16: '+' has nothing before it to repeat");
  CHECK(refusal("root ::= \"a\"{3,1}") == "g.gbnf:1:16: the repetition's maximum (1) is below its minimum (3)");
  CHECK(refusal("root ::= \"a\"{,3}") == "g.gbnf:1:14: expected a number in the repetition, found ','");
  CHECK(refusal("root ::= \"a\"{2 3}") == "g.gbnf:1:16: expected ',' or '}' in the repetition, found '3'");
  CHECK(refusal("root ::= \"a\"{2,3") ==
        "g.gbnf:1:17: expected '}' to close the '{' at 1:13, found the end of the text");
  CHECK(refusal("root ::= [z-a]") == "g.gbnf:1:11: the range U+007A-U+0061 ends before it begins");
  CHECK(refusal("root ::= []") == "g.gbnf:1:10: an empty character class");
  CHECK(refusal("root ::= [^]") == "g.gbnf:1:10: an empty character class");
  // Columns count code points; what is not printable is named, never echoed.
  CHECK(refusal("root ::= \"é\" @") == "g.gbnf:1:14: unexpected '@'");
  CHECK(refusal("root ::= \"a\" \x01") == "g.gbnf:1:14: unexpected byte 0x01");
  CHECK(refusal("root ::= \"a\" \xE2\x82\xAC") == "g.gbnf:1:14: unexpected U+20AC");
  // A '|' at a line's end continues the rule: the next rule's '::=' then
  // comes inside it.
  CHECK(refusal("r ::= \"a\" |\nroot ::= r") ==
        "g.gbnf:2:6: unexpected '::=': the rule before it is not complete (a '|' at the end of a line continues a "
        "rule)");
  // A newline ends a rule where its alternatives are complete, not inside
  // a group or after '|'.
  CHECK(refusal("root ::= \"a\"\n  \"b\"") == "g.gbnf:2:3: expected a rule name, found '\"'");
  const auto g = parse("root ::= (\"a\"\n  \"b\") |\n  \"c\"  # a comment\r\n\r\nx ::= \"y\" # unused\n");
  CHECK(matches(g, "ab"));
  CHECK(matches(g, "c"));
  CHECK_FALSE(matches(g, "a"));
}

TEST_CASE("grammar: every limit is enforced, naming it and its value") {
  CHECK(refusal("root ::= \"abcdef\"", {.max_bytes = 10}) ==
        "g.gbnf:1:1: the grammar is 17 bytes, over max_bytes (10)");
  CHECK(refusal("root ::= \"abcdef\"", {.max_bytes = 17}) == "accepted");
  CHECK(refusal("root ::= (((\"a\")))", {.max_depth = 2}) == "g.gbnf:1:12: groups nested deeper than max_depth (2)");
  CHECK(refusal("root ::= ((\"a\"))", {.max_depth = 2}) == "accepted");
  CHECK(refusal("root ::= a b c\na ::= \"a\"\nb ::= \"b\"\nc ::= \"c\"", {.max_rules = 3}) ==
        "g.gbnf:1:14: more than max_rules (3) rules (those groups and repetitions make count too)");
  CHECK(refusal("root ::= \"a\"{1,4}", {.max_rules = 3}) ==
        "g.gbnf:1:13: more than max_rules (3) rules (those groups and repetitions make count too)");
  CHECK(refusal("root ::= \"abcdef\" \"ghijk\"", {.max_elements = 10}) ==
        "g.gbnf:1:24: more than max_elements (10) elements (repetitions expanded)");
  CHECK(refusal("root ::= \"ab\"{6}", {.max_elements = 10}) ==
        "g.gbnf:1:14: more than max_elements (10) elements (repetitions expanded)");
  CHECK(refusal("root ::= \"ab\"{5}", {.max_elements = 10}) == "accepted");
  CHECK(refusal("root ::= \"a\"{2000}") == "g.gbnf:1:14: the repetition count 2000 is over max_repeat (1024)");
  CHECK(refusal("root ::= \"a\"{1,1025}") == "g.gbnf:1:16: the repetition count 1025 is over max_repeat (1024)");
  CHECK(refusal("root ::= \"a\"{99999999999999999999999999999}") ==
        "g.gbnf:1:14: the repetition count 999999999999999999999999 is over max_repeat (1024)");
  CHECK(refusal("root ::= \"a\"{1024}") == "accepted");
  CHECK(refusal("root ::= \"a\" | \"b\" | \"c\" | \"d\" | \"e\"", {.max_stacks = 4}) ==
        "g.gbnf:1:1: the grammar's start already needs more than max_stacks (4) parse stacks");

  // max_stacks while matching: after n a's, each way to close them with
  // b's and c's is a stack of its own (3·2^n of them).
  const std::string ambiguous = "root ::= r\nr ::= | \"a\" r \"b\" | \"a\" r \"c\"";
  Matcher tight(parse(ambiguous, {.max_stacks = 64}));
  int taken = 0;
  while (taken < 10 && tight.accept("a")) ++taken;
  CHECK(taken == 4);
  CHECK(tight.stacks() == 48);
  CHECK(tight.accept("bcbb"));  // the refused step left the state as it was
  CHECK(tight.can_end());
  Matcher roomy(parse(ambiguous));
  CHECK(roomy.accept("aaaaaaaaaa"));
  CHECK(roomy.stacks() == 3 * 1024);
  CHECK_FALSE(roomy.accept("a"));  // 6144 > 4096
}

TEST_CASE("grammar: left recursion is refused, naming the rule") {
  CHECK(refusal("root ::= root \"a\" | \"b\"") ==
        "g.gbnf:1:1: rule 'root' is left-recursive: root → root can happen without consuming a character");
  CHECK(refusal("root ::= a\na ::= b \"x\"\nb ::= \"y\" | a") ==
        "g.gbnf:2:1: rule 'a' is left-recursive: a → b → a can happen without consuming a character");
  // Through a prefix that can match nothing.
  CHECK(refusal("root ::= ws root \"x\" | \"y\"\nws ::= \" \"*") ==
        "g.gbnf:1:1: rule 'root' is left-recursive: root → root can happen without consuming a character");
  CHECK(refusal("root ::= (\"a\"? root) | \"b\"") ==
        "g.gbnf:1:1: rule 'root' is left-recursive: root → root can happen without consuming a character");
  CHECK(refusal("root ::= x\nx ::= y? z\ny ::= \"y\"\nz ::= (\"\" | w) \"z\"\nw ::= x") ==
        "g.gbnf:2:1: rule 'x' is left-recursive: x → z → w → x can happen without consuming a character");
  // A repetition of what can match nothing loops too.
  CHECK(refusal("root ::= (\"a\"?)*") ==
        "g.gbnf:1:16: '*' repeats what can match nothing: rule 'root' would loop without consuming a character "
        "(left recursion)");
  CHECK(refusal("root ::= \"x\" ws{2,}\nws ::= \" \"*") ==
        "g.gbnf:1:16: '{2,}' repeats what can match nothing: rule 'root' would loop without consuming a character "
        "(left recursion)");
  // Recursion after a character is fine, and so is a bounded repetition of
  // what can match nothing.
  const auto right = parse("root ::= \"a\" root | \"\"\nlist ::= \"x\" (\",\" list)?\nopt ::= (\" \"?){3}");
  CHECK(matches(right, "aaaa"));
  CHECK(matches(right, ""));
  CHECK_FALSE(matches(right, "ab"));
}

TEST_CASE("grammar: repetitions match the strings they say, as the rules they expand into") {
  using S = std::set<std::string>;
  CHECK(repeat_language("\"a\"{3}") == S{"aaa"});
  CHECK(repeat_language("\"a\"{2,}") == S{"aa", "aaa", "aaaa", "aaaaa", "aaaaaa"});
  CHECK(repeat_language("\"a\"{1,3}") == S{"a", "aa", "aaa"});
  CHECK(repeat_language("\"a\"{0,2}") == S{"", "a", "aa"});
  CHECK(repeat_language("\"a\"{ 2 , 2 }") == S{"aa"});
  CHECK(repeat_language("\"a\"*") == S{"", "a", "aa", "aaa", "aaaa", "aaaaa", "aaaaaa"});
  CHECK(repeat_language("\"a\"+") == S{"a", "aa", "aaa", "aaaa", "aaaaa", "aaaaaa"});
  CHECK(repeat_language("\"a\"?") == S{"", "a"});
  CHECK(repeat_language("\"ab\"{2}") == S{"abab"});  // a literal is one item
  CHECK(repeat_language("\"a\" \"b\"*") == S{"a", "ab", "abb", "abbb", "abbbb", "abbbbb"});
  CHECK(repeat_language("(\"a\" | \"b\"){2}") == S{"aa", "ab", "ba", "bb"});
  CHECK(repeat_language("\"a\"{0} \"b\"") == S{"b"});
  CHECK(repeat_language("\"a\"{2}?") == S{"", "aa"});  // the repetition is the item
  CHECK(repeat_language("(\"a\"{2})+ \"b\"") == S{"aab", "aaaab"});
  CHECK(repeat_language("(\"a\" \"b\"?){2,3}") == S{"aa", "aab", "aba", "abab", "aaa", "aaab", "aaba", "aabab",
                                                   "abaa", "abaab", "ababa", "ababab"});
  // The rules they add: x{m,n} n - m, x{m,} one, a group one.
  CHECK(parse("root ::= \"a\"{2,5}")->rules() == 4);
  CHECK(parse("root ::= \"a\"{2,}")->rules() == 2);
  CHECK(parse("root ::= \"a\"*")->rules() == 2);
  CHECK(parse("root ::= \"a\"+")->rules() == 2);
  CHECK(parse("root ::= \"a\"?")->rules() == 2);
  CHECK(parse("root ::= \"a\"{3}")->rules() == 1);
  CHECK(parse("root ::= (\"a\" | \"b\")*")->rules() == 3);
  // A thousand of them, matched without counting.
  const auto big = parse("root ::= \"ab\"{1000,1024}");
  std::string text;
  for (int i = 0; i < 999; ++i) text += "ab";
  CHECK_FALSE(matches(big, text));
  text += "ab";
  CHECK(matches(big, text));
  for (int i = 0; i < 24; ++i) text += "ab";
  CHECK(matches(big, text));
  CHECK_FALSE(matches(big, text + "ab"));
}

TEST_CASE("grammar: classes, ranges, negation, escapes and '.'") {
  const auto g = parse("root ::= [a-z0-9_] [^\"\\\\] [\\]\\[] [\\x41-\\x43] [-a] [a-] .");
  CHECK(matches(g, "q\"]A--x") == false);  // [^"\\] refuses '"'
  CHECK(matches(g, "q']A--x"));
  CHECK(matches(g, "_\\]C-a" + cp(U'中')) == false);  // [^"\\] refuses '\'
  CHECK(matches(g, "_x[Caa" + cp(U'😀')));
  CHECK_FALSE(matches(g, "_x[Daa."));  // D is past [A-C]
  CHECK_FALSE(matches(g, "Ax[Caa."));  // A is not in [a-z0-9_]
  const auto escapes = parse("root ::= \"\\n\\r\\t\\\\\\\"\\x41\\u00e9\\U0001F600\\[\\]\"");
  CHECK(matches(escapes, "\n\r\t\\\"A" + cp(U'é') + cp(U'😀') + "[]"));
  // Negation covers code points of every length, and '.' any one of them.
  const auto not_e = parse("root ::= [^éa-c]+");
  CHECK(matches(not_e, "xyz" + cp(U'è') + cp(U'中') + cp(U'😀') + cp(0x10FFFF)));
  CHECK_FALSE(matches(not_e, "x" + cp(U'é')));
  CHECK_FALSE(matches(not_e, "b"));
  const auto dot = parse("root ::= .{3}");
  CHECK(matches(dot, "a" + cp(U'é') + cp(U'😀')));
  CHECK(matches(dot, std::string("\0\0\0", 3)));
  CHECK_FALSE(matches(dot, "ab"));
}

TEST_CASE("grammar: UTF-8 literals and classes, a token ending inside a code point") {
  const auto g = parse("root ::= \"é中😀\" [α-ω]+");
  const std::string text = cp(U'é') + cp(U'中') + cp(U'😀') + cp(U'α') + cp(U'ω');
  CHECK(matches(g, text));
  // Fed a byte at a time: every prefix is accepted, the document ends only
  // where a code point does.
  Matcher m(g);
  for (size_t i = 0; i < text.size(); ++i) {
    CAPTURE(i);
    REQUIRE(m.accept(text.substr(i, 1)));
    CHECK(m.can_end() == (i + 1 == text.size() || i + 1 == text.size() - 2));
  }
  // Split across tokens anywhere.
  Matcher split(g);
  CHECK(split.accept(text.substr(0, 3)));
  CHECK(split.accept(text.substr(3, 5)));
  CHECK(split.accept(text.substr(8)));
  CHECK(split.can_end());
  // A partial code point is taken only when some code point it may become
  // can match: α-ω is U+03B1–U+03C9 (CE B1 – CF 89); D0 begins U+0400–U+043F.
  const auto greek = parse("root ::= [α-ω]");
  Matcher lead(greek);
  CHECK(lead.accept("\xCE"));
  CHECK_FALSE(lead.can_end());
  CHECK(lead.can_continue());
  CHECK_FALSE(lead.accept("\x80"));  // CE 80 is U+0380, below α
  CHECK(lead.accept("\xB1"));
  CHECK(lead.can_end());
  CHECK_FALSE(Matcher(greek).accept("\xD0"));
  CHECK_FALSE(Matcher(greek).accept("\xCF\x8A"));  // U+03CA, past ω
  CHECK(Matcher(greek).accept("\xCF"));
  // Deeper: 4-byte code points by their second and third bytes.
  const auto emoji = parse("root ::= [\\U0001F600-\\U0001F64F]");
  CHECK(Matcher(emoji).accept("\xF0\x9F\x98"));
  CHECK_FALSE(Matcher(emoji).accept("\xF0\x9F\x97"));  // U+1F5C0–U+1F5FF
  CHECK_FALSE(Matcher(emoji).accept("\xF0\x90"));
}

TEST_CASE("grammar: invalid UTF-8 is refused, even where '.' takes anything") {
  const auto any = parse("root ::= .*");
  CHECK(Matcher(any).accept("ok " + cp(0x10FFFF) + cp(0xE000) + cp(0xD7FF) + cp(0x80) + cp(0x800) + cp(0x10000)));
  for (const char* bad : {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xED\xA0\x80",
                          "\xED\xBF\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5",
                          "\xFF", "\xC3\x41", "\xE4\xB8\x41", "a\xFE"}) {
    CAPTURE(bad);
    Matcher m(any);
    CHECK_FALSE(m.accept(bad));
  }
  // The surrogates' lead byte still begins U+D000–U+D7FF.
  Matcher ed(any);
  CHECK(ed.accept("\xED"));
  CHECK(ed.accept("\x9F\xBF"));
}

TEST_CASE("grammar: accept is all or nothing, and a copy is independent") {
  const auto g = parse("root ::= \"abc\" (\"d\" | \"é\")");
  Matcher m(g);
  CHECK_FALSE(m.accept("abx"));
  CHECK(m.accept("ab"));
  CHECK_FALSE(m.accept("cx"));
  CHECK_FALSE(m.accept("c\xC3\x80"));  // À, not é
  CHECK(m.accept(""));
  Matcher copy = m;
  CHECK(m.accept("c\xC3"));
  CHECK_FALSE(m.accept("\xA8"));
  CHECK(m.accept("\xA9"));
  CHECK(m.can_end());
  CHECK_FALSE(copy.can_end());
  CHECK(copy.accept("cd"));
  CHECK(copy.can_end());
  CHECK_THROWS_AS(Matcher(nullptr), Error);
}

TEST_CASE("grammar: can_end and can_continue") {
  const auto g = parse("root ::= \"a\" \"b\"?");
  Matcher m(g);
  CHECK_FALSE(m.can_end());
  CHECK(m.can_continue());
  CHECK(m.accept("a"));
  CHECK(m.can_end());
  CHECK(m.can_continue());
  CHECK(m.accept("b"));
  CHECK(m.can_end());
  CHECK_FALSE(m.can_continue());
  CHECK_FALSE(m.accept("b"));
  Matcher empty(parse("root ::= \"\""));
  CHECK(empty.can_end());
  CHECK_FALSE(empty.can_continue());
  CHECK(Matcher(parse("root ::= \"a\"*")).can_end());
  // A class no code point is in (only surrogates): nothing can follow.
  Matcher none(parse("root ::= [\\uD800-\\uDFFF]"));
  CHECK_FALSE(none.can_end());
  CHECK_FALSE(none.can_continue());
  CHECK_FALSE(none.accept("\xED"));
}

TEST_CASE("grammar: stacks are deduplicated after each step") {
  // x x over a's: how the a's split between the two is no stack of its own.
  Matcher m(parse("root ::= x x\nx ::= \"a\"*"));
  CHECK(m.accept(std::string(300, 'a')));
  CHECK(m.stacks() <= 3);
  CHECK(m.can_end());
  // Three a's to take next (one per alternative) and the b: after one a
  // as after a hundred.
  Matcher same(parse("root ::= (\"a\" | \"a\" | (\"a\"))+ \"b\""));
  CHECK(same.accept("a"));
  CHECK(same.stacks() == 4);
  CHECK(same.accept(std::string(99, 'a')));
  CHECK(same.stacks() == 4);
  CHECK(same.accept("b"));
  CHECK(same.can_end());
}

TEST_CASE("grammar: a JSON grammar takes JSON documents and nothing else") {
  const auto json = Grammar::parse(json_gbnf(), "json.gbnf");
  for (const char* doc : {
           "{}", "[]", "0", "-0", "1.5e10", "-12.25E-3", "true", "false", "null", "\"\"",
           " {\"a\": 1, \"b\": [true, false, null], \"c\": {\"d\": \"e\"}} ",
           "[1,2,3,[4,[5,[6]]]]", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"", "\"é中😀\"",
           "{\n  \"key\" :\t\"value\" ,\r\n  \"n\": -0.5\n}",
       }) {
    CAPTURE(doc);
    CHECK(matches(json, doc));
  }
  for (const char* doc : {
           "", "{", "{\"a\"}", "{\"a\": }", "{a: 1}", "[1,]", "[,1]", "01", "1.", ".5", "1e", "+1", "tru",
           "\"\\x\"", "\"\\u12\"", "\"a\nb\"", "{\"a\": 1,}", "nul", "[1 2]", "\"abc", "{} {}", "'a'",
       }) {
    CAPTURE(doc);
    CHECK_FALSE(matches(json, doc));
  }
  // Prefixes of documents are taken; what cannot continue one is not.
  Matcher m(json);
  CHECK(m.accept("{\"a\": [1, 2"));
  CHECK_FALSE(m.can_end());
  CHECK_FALSE(m.accept("}"));
  CHECK(m.accept("]}"));
  CHECK(m.can_end());
  CHECK(m.can_continue());  // trailing whitespace
}

TEST_CASE("grammar: the fuzz target's seeds: each grammar takes its text") {
  // tests/fuzz/corpus/grammar/: a grammar, a NUL, a document of it.
  int seeds = 0;
  const std::string dir = std::string(LATHE_SOURCE_DIR) + "/tests/fuzz/corpus/grammar";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string input = test::read_file(e.path().string());
    CAPTURE(e.path().string());
    const size_t nul = input.find('\0');
    REQUIRE(nul != std::string::npos);
    CHECK(matches(Grammar::parse(input.substr(0, nul), e.path().filename().string()), input.substr(nul + 1)));
    ++seeds;
  }
  CHECK(seeds >= 5);
}

TEST_CASE("grammar: a vocabulary's allowed tokens") {
  const std::vector<std::string> tokens = {"", "a", "a", "ab", "b", "\xC3", "\xA9", "é", "\xC3" "a", "aé", "abc",
                                           "\xFF"};
  Vocabulary vocab(tokens);
  CHECK(vocab.size() == 12);
  std::vector<uint8_t> allowed;
  Matcher m(parse("root ::= \"a\"* \"é\"?"));
  vocab.allowed(m, allowed);
  CHECK(allowed == std::vector<uint8_t>{0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0});
  // After a token that ended inside é: only its rest.
  REQUIRE(m.accept("a\xC3"));
  vocab.allowed(m, allowed);
  CHECK(allowed == std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0});
  // A finished document: nothing (the caller ends generation).
  REQUIRE(m.accept("\xA9"));
  vocab.allowed(m, allowed);
  CHECK(allowed == std::vector<uint8_t>(12, 0));
  Vocabulary moved = std::move(vocab);
  CHECK(moved.size() == 12);
}

TEST_CASE("grammar: allowed() takes a whole branch by depth only where all of it goes one way") {
  // Under "x": digits (ASCII bit 48–57) and letters (97–122), one to three
  // of them, and a few code points.
  std::vector<std::string> tokens = {"x", "xé", "x中a", "xaé"};
  for (const char c : std::string_view("0123456789abcdefghijklmnopqrstuvwxyz")) {
    tokens.push_back(std::string("x") + c);
    tokens.push_back(std::string("x") + c + "a");
    tokens.push_back(std::string("x") + c + "0z");
  }
  const Vocabulary vocab(tokens);
  for (const char* rhs : {"[0-9a-z]*", "[0-9]*", "[a-z]*", "[0-8a-y]*", "[1-9b-z]*", "[^5m]*", ".", "[0-9a-z]{0,2}",
                          "[0-9a-z]{2}", "[a-z0-9]{1,2} \"!\"", "[^\"]{0,1}", ".{0,2}", "(. | \"xx\")*"}) {
    CAPTURE(rhs);
    const auto g = parse("root ::= \"x\" " + std::string(rhs));
    Matcher m(g);
    std::vector<uint8_t> allowed;
    vocab.allowed(m, allowed);
    for (size_t id = 0; id < tokens.size(); ++id) {
      Matcher copy = m;
      CAPTURE(tokens[id]);
      CHECK(allowed[id] == copy.accept(tokens[id]));
    }
  }
}

namespace {

// A random grammar over a, b, é, 中 and 😀: rules that refer to later
// rules first (and to any after a character), classes, groups and every
// repetition. Left-recursive ones are refused by parse() and skipped.
std::string random_grammar(std::mt19937& rng) {
  const std::vector<std::string> atoms = {"\"a\"", "\"b\"", "\"ab\"", "\"é\"", "\"中\"", "\"😀\"", "\"a中\"",
                                          "[ab]", "[^a]", "[a-z]", "[é-ü]", "[^é中]", ".", "[\\x61\\u4E2D]",
                                          "[\\U0001F600-\\U0001F64F]"};
  const std::vector<std::string> postfixes = {"", "", "", "*", "+", "?", "{2}", "{1,3}", "{2,}", "{0,2}"};
  const int rules = 1 + static_cast<int>(rng() % 4);
  const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::function<std::string(int, int)> sequence = [&](int rule, int depth) {
    std::string s;
    const size_t items = 1 + pick(3);
    for (size_t i = 0; i < items; ++i) {
      const size_t kind = pick(10);
      std::string item;
      if (kind < 6 || depth > 1) {
        item = atoms[pick(atoms.size())];
      } else if (kind < 8) {
        const int target = i == 0 ? rule + 1 + static_cast<int>(pick(static_cast<size_t>(rules - rule)))
                                  : static_cast<int>(pick(static_cast<size_t>(rules)));
        item = target >= rules ? "\"b\"" : (target == 0 ? "root" : "r" + std::to_string(target));
      } else {
        item = "(" + sequence(rule, depth + 1) + " | " + sequence(rule, depth + 1) + ")";
      }
      s += (s.empty() ? "" : " ") + item + postfixes[pick(postfixes.size())];
    }
    return s;
  };
  std::string g;
  for (int r = 0; r < rules; ++r) {
    g += (r == 0 ? std::string("root") : "r" + std::to_string(r)) + " ::= ";
    if (pick(4) == 0) g += "| ";  // an empty alternative (first: a '|' at the line's end would go on)
    g += sequence(r, 0);
    if (pick(3) == 0) g += " | " + sequence(r, 0);
    g += "\n";
  }
  return g;
}

std::vector<std::string> test_vocabulary() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  const std::vector<std::string> parts = {"a", "b", "z", "\xC3", "\xA9", "\xE4", "\xB8", "\xAD", "\xF0", "\x9F",
                                          "\x98", "\x80", "\"", "é", "中", "😀"};
  for (const std::string& x : parts)
    for (const std::string& y : parts) v.push_back(x + y);
  for (const char* s : {"ab", "aba", "abab", "aé中", "é中😀", "中😀", "\xB8\xAD" "a", "\x9F\x98\x80", "\x98\x80" "b",
                        "aaaa", "bbbb", "ü", "ab\xE4", "", "a", "abc", "\xED\x9F\xBF"})
    v.push_back(s);
  // Families of ASCII only under one prefix (a branch the walk may skip whole).
  for (const char* prefix : {"bb", "é", "1"})
    for (const char c : std::string_view("019:abcmnz~ "))
      for (const char* tail : {"", "a", "b", "z"}) v.push_back(prefix + std::string(1, c) + tail);
  return v;
}

}  // namespace

TEST_CASE("grammar: allowed() is accept() token by token, on random grammars and positions") {
  std::mt19937 rng(47);
  const std::vector<std::string> tokens = test_vocabulary();
  const Vocabulary vocab(tokens);
  int grammars = 0, positions = 0, allowed_total = 0;
  for (int attempt = 0; attempt < 400 && grammars < 120; ++attempt) {
    const std::string text = random_grammar(rng);
    CAPTURE(text);
    std::shared_ptr<const Grammar> g;
    try {
      g = parse(text);
    } catch (const Error&) {
      continue;  // left recursion
    }
    ++grammars;
    Matcher m(g);
    for (int step = 0; step < 8; ++step) {
      std::vector<uint8_t> allowed;
      vocab.allowed(m, allowed);
      REQUIRE(allowed.size() == tokens.size());
      std::vector<size_t> ok;
      for (size_t id = 0; id < tokens.size(); ++id) {
        Matcher copy = m;
        const bool expected = !tokens[id].empty() && copy.accept(tokens[id]);
        CAPTURE(id);
        CAPTURE(tokens[id]);
        CHECK(allowed[id] == expected);
        if (expected) ok.push_back(id);
      }
      ++positions;
      allowed_total += static_cast<int>(ok.size());
      if (ok.empty()) break;
      REQUIRE(m.accept(tokens[ok[rng() % ok.size()]]));
    }
  }
  MESSAGE(grammars << " grammars, " << positions << " positions, " << allowed_total << " tokens allowed");
  CHECK(grammars >= 100);
  CHECK(allowed_total > 10000);
}

TEST_CASE("grammar: allowed() on the JSON grammar, through a document") {
  const auto json = Grammar::parse(json_gbnf(), "json.gbnf");
  std::vector<std::string> tokens = test_vocabulary();
  for (const char* s : {"{", "}", "{\"", "\":", "\",", " \"", "[", "]", ",", ":", " ", "\n", "  ", "true", "false",
                        "null", "0", "12", "-", ".", "e", "E+", "\\", "\\n", "\\u", "00", "e9", "\":\"", "},", "]}"})
    tokens.push_back(s);
  const Vocabulary vocab(tokens);
  const std::string doc = "{\"name\": \"Ada é中\", \"n\": [1, -2.5e3, true, null], \"o\": {\"k\": \"\\u00e9\\n\"}}";
  Matcher m(json);
  for (size_t i = 0; i <= doc.size(); ++i) {
    CAPTURE(doc.substr(0, i));
    std::vector<uint8_t> allowed;
    vocab.allowed(m, allowed);
    for (size_t id = 0; id < tokens.size(); ++id) {
      Matcher copy = m;
      CAPTURE(tokens[id]);
      CHECK(allowed[id] == (!tokens[id].empty() && copy.accept(tokens[id])));
    }
    if (i < doc.size()) REQUIRE(m.accept(doc.substr(i, 1)));
  }
  CHECK(m.can_end());
}
