// tokenizer.json models beyond BPE: WordPiece (BERT) and Unigram (T5,
// XLM-RoBERTa), with their normalizers (BertNormalizer, Precompiled, Strip),
// pre-tokenizers (BertPreTokenizer, WhitespaceSplit) and decoders.
//
// No Hugging Face tokenizers runs here, so the expected ids are worked out
// by hand from its source (normalizers/bert.rs, pre_tokenizers/bert.rs,
// models/wordpiece/mod.rs, decoders/wordpiece.rs, models/unigram/model.rs,
// normalizers/precompiled.rs and the spm_precompiled crate); each case says
// how. The fixtures are tests/data/tokenizers/bert-wordpiece.json and
// t5-unigram.json (written by make_t5_unigram.py beside it).
#include <doctest/doctest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/pipeline.hpp"
#include "runtime/text/tokenize/precompiled.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/text/tokenize/utf8.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::text;
using namespace std::string_literals;
using nlohmann::json;
using Ids = std::vector<int32_t>;

namespace {

const std::string kFixtures = std::string(LATHE_SOURCE_DIR) + "/tests/data/tokenizers/";

json fixture(const std::string& name) { return json::parse(test::read_file(kFixtures + name)); }

// `j` written to a scratch tokenizer.json and loaded.
struct Scratch {
  test::TempDir tmp{"lathe-tokenizer-models"};
  Tokenizer load(const json& j) const {
    test::write_file(tmp.file("tokenizer.json"), j.dump());
    return Tokenizer::from_hf(tmp.file("tokenizer.json"));
  }
  // The message of the error loading `j` throws.
  std::string error(const json& j) const {
    try {
      load(j);
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK_MESSAGE(what.starts_with(tmp.file("tokenizer.json") + ": "), what);
      return what;
    }
    FAIL("no lathe::Error was thrown");
    return "";
  }
};

std::string streamed(const Tokenizer& tok, const Ids& ids, bool skip_special) {
  StreamDecoder decoder(tok, skip_special);
  std::string out;
  for (const int32_t id : ids) out += decoder.push(id);
  return out + decoder.flush();
}

// clang-format off
// bert-wordpiece.json's ids.
enum : int32_t {
  kPad = 0, kUnk, kCls, kSep, kMask, kHello, kWorld, kComma, kBang, kDot, kUn, kWant, kEd, kCafe, kNino, kS,
  kMa, kAp, kFel, kZhong, kWen, kA, kContA, kX, kApostrophe, kLetterS, kDo, kN, kContT, kDon, kT, kQuestion,
  kDollar, kInvertedQuestion, kI, kContDotAbove
};

// t5-unigram.json's ids.
enum : int32_t {
  uPad = 0, uEos, uUnk, uSpace, uThe, uSpaceA, uB, uC, uAB, uBC, uSpaceAB, uA, uFi, uEAcute, uSpaceFi, uOne,
  uSpaceB, uByteE2, uByte98, uByte83
};
// clang-format on

}  // namespace

TEST_SUITE("tokenizer") {
  TEST_CASE("BertNormalizer: cleaning, CJK spacing, accents and lowercase beyond ASCII") {
    const BertNormalizer bert;  // all four on, as bert-base-uncased
    // clean_text: NUL, U+FFFD, Cc (\x01, DEL) and Cf (soft hyphen, ZWSP)
    // go; \t \r \n and other White_Space (NBSP, U+3000) become ' '.
    CHECK(bert_normalize("\x01hel\0lo\r\n\t\xC2\xA0w\xC2\xADo\xE2\x80\x8Brld\x7F\xEF\xBF\xBD"s, bert) ==
          "hello    world");
    // handle_chinese_chars: spaces around CJK ideographs, not kana or Hangul.
    CHECK(bert_normalize("a中b", bert) == "a 中 b");
    // Kana stay; NFD (for strip_accents) spells a Hangul syllable as its jamo.
    CHECK(bert_normalize("かな한", bert) == "かな\u1112\u1161\u11AB");
    // strip_accents: NFD, then every Mn is dropped; lowercase after that.
    CHECK(bert_normalize("Éñ ÄÖÜ Crème Brûlée", bert) == "en aou creme brulee");
    // Greek and Cyrillic lowercase; the accent of ά (tonos, Mn) goes.
    CHECK(bert_normalize("ΆΒΓ ДЖ", bert) == "αβγ дж");
    // İ: NFD gives I + U+0307, the dot (Mn) is stripped, then "i".
    CHECK(bert_normalize("İ", bert) == "i");
    // Without strip_accents, Rust's to_lowercase makes İ two characters
    // and leaves composed letters composed.
    const BertNormalizer keep_accents{true, true, false, true};
    CHECK(bert_normalize("İÉñ", keep_accents) ==
          "i\xCC\x87"
          "éñ");
    // cased models (lowercase false, strip_accents false): only cleaning.
    const BertNormalizer cased{true, true, false, false};
    CHECK(bert_normalize("Éa\tB", cased) == "Éa B");
    // Invalid bytes stay.
    CHECK(bert_normalize("A\xFF"
                         "B",
                         bert) ==
          "a\xFF"
          "b");
  }

  TEST_CASE("WordPiece tokenizer.json: BERT's pipeline gives the ids worked out by hand") {
    const Tokenizer bert = Tokenizer::from_hf(kFixtures + "bert-wordpiece.json");
    CHECK(bert.description() == "tokenizer.json WordPiece");
    // "hello, world!" → words hello , world ! ; [CLS] … [SEP] from the template.
    CHECK(bert.encode("Hello, World!", true) == Ids{kCls, kHello, kComma, kWorld, kBang, kSep});
    CHECK(bert.encode("Hello, World!", false) == Ids{kHello, kComma, kWorld, kBang});
    // Accents stripped, lowercased, \t a space: "unwanted cafe nino".
    // unwanted: the longest prefix in the vocabulary is "un", then ##want,
    // then ##ed.
    CHECK(bert.encode("Unwanted café\tNIÑO", false) == Ids{kUn, kWant, kEd, kCafe, kNino});
    // ÄPFELS → apfels → ap ##fel ##s (no "apfel", "##fels").
    CHECK(bert.encode("ÄPFELS", false) == Ids{kAp, kFel, kS});
    // CJK ideographs are words of their own.
    CHECK(bert.encode("hello中文world", false) == Ids{kHello, kZhong, kWen, kWorld});
    // Control characters vanish inside a word; \r\n separate words.
    CHECK(bert.encode("\x01hel\0lo\r\nwor\xC2\xADld\xEF\xBF\xBD"s, false) == Ids{kHello, kWorld});
    // Each punctuation character is a word: Unicode Po (¿) and ASCII symbols ($).
    CHECK(bert.encode("¿hello?$", false) == Ids{kInvertedQuestion, kHello, kQuestion, kDollar});
    CHECK(bert.encode("don't", false) == Ids{kDon, kApostrophe, kT});
    // No segmentation: "x" matches, then neither ##yz nor ##y: the whole word is [UNK].
    CHECK(bert.encode("hello xyz world", false) == Ids{kHello, kUnk, kWorld});
    // İ → i (its dot stripped after NFD).
    CHECK(bert.encode("İ", false) == Ids{kI});
    // max_input_chars_per_word 100: 100 characters cut, 101 are [UNK].
    Ids hundred = {kA};
    hundred.insert(hundred.end(), 99, kContA);
    CHECK(bert.encode(std::string(100, 'a'), false) == hundred);
    CHECK(bert.encode(std::string(101, 'A'), false) == Ids{kUnk});
    CHECK(bert.encode(std::string(101, 'a') + " hello", true) == Ids{kCls, kUnk, kHello, kSep});
    // Special tokens written in the text.
    CHECK(bert.encode("[CLS] hello [MASK]", false) == Ids{kCls, kHello, kMask});
    CHECK(bert.encode("", true) == Ids{kCls, kSep});

    CHECK(bert.pad() == kPad);
    CHECK(bert.is_special(kUnk));
    CHECK(bert.is_special(kMask));
    CHECK(bert.token_text(kWant) == "##want");
  }

  TEST_CASE("WordPiece decoder: ## joins, spaces between words, tokenizers' cleanup per token") {
    const Tokenizer bert = Tokenizer::from_hf(kFixtures + "bert-wordpiece.json");
    const Ids hello = bert.encode("Hello, World!", true);
    // Special tokens go through the decoder too: "[CLS]", " hello", ",", …
    CHECK(bert.decode(hello) == "[CLS] hello, world! [SEP]");
    CHECK(bert.decode(hello, true) == "hello, world!");
    CHECK(bert.decode(Ids{kUn, kWant, kEd, kCafe}) == "unwanted cafe");
    CHECK(bert.decode(Ids{kHello, kUnk, kWorld}) == "hello [UNK] world");
    CHECK(bert.decode(Ids{kInvertedQuestion, kHello, kQuestion, kDot}) == "¿ hello?.");
    // Cleanup works on each token alone: " '" is not " ' ", so "don ' t"
    // keeps its spaces (a cleanup of the joined text would give "don't").
    CHECK(bert.decode(Ids{kDon, kApostrophe, kT}) == "don ' t");
    // The first token is left as it is: a continuation keeps its "##".
    CHECK(bert.decode(Ids{kWant, kEd}) == "##wanted");
    CHECK(bert.decode(Ids{kCls, kWant}, true) == "##want");
    CHECK(bert.decode(Ids{kCls, kWant}) == "[CLS]want");
    for (const Ids& ids : {hello, Ids{kWant, kEd, kDot}, Ids{kCls, kWant, kSep}}) {
      for (const bool skip : {false, true}) CHECK(streamed(bert, ids, skip) == bert.decode(ids, skip));
    }
    // Round trips of text already lowercase, unaccented and spaced as BERT spaces it.
    for (const char* text : {"hello, world!", "unwanted cafe nino", "hello 中 文 world", "apfels"}) {
      CHECK(bert.decode(bert.encode(text, true), true) == text);
    }

    // Without cleanup, " ," stays.
    json j = fixture("bert-wordpiece.json");
    j["decoder"]["cleanup"] = false;
    Scratch scratch;
    CHECK(scratch.load(j).decode(hello, true) == "hello , world !");
  }

  TEST_CASE("WordPiece tokenizer.json variants: BertProcessing, WhitespaceSplit, a cased normalizer") {
    Scratch scratch;
    json j = fixture("bert-wordpiece.json");
    j["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", kSep}}, {"cls", {"[CLS]", kCls}}};
    CHECK(scratch.load(j).encode("hello", true) == Ids{kCls, kHello, kSep});

    // WhitespaceSplit leaves punctuation in the word: "hello," has no segmentation.
    j = fixture("bert-wordpiece.json");
    j["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
    CHECK(scratch.load(j).encode("hello, world", false) == Ids{kUnk, kWorld});

    // strip_accents false and lowercase false: "Hello" is not in the vocabulary.
    j = fixture("bert-wordpiece.json");
    j["normalizer"]["lowercase"] = false;
    CHECK(scratch.load(j).encode("Hello world", false) == Ids{kUnk, kWorld});
    // strip_accents null follows lowercase; true alone strips without lowercasing.
    j["normalizer"]["lowercase"] = true;
    j["normalizer"]["strip_accents"] = false;
    CHECK(scratch.load(j).encode("café", false) == Ids{kUnk});

    // A continuing_subword_prefix other than "##".
    j = fixture("bert-wordpiece.json");
    json vocab = json::object();
    for (const auto& [text, id] : j["model"]["vocab"].items()) {
      vocab[text.starts_with("##") ? "@@" + text.substr(2) : text] = id;
    }
    j["model"]["vocab"] = vocab;
    j["model"]["continuing_subword_prefix"] = "@@";
    j["decoder"]["prefix"] = "@@";
    const Tokenizer at = scratch.load(j);
    CHECK(at.encode("unwanted", false) == Ids{kUn, kWant, kEd});
    CHECK(at.decode(Ids{kUn, kWant, kEd}) == "unwanted");

    // max_input_chars_per_word from the file.
    j = fixture("bert-wordpiece.json");
    j["model"]["max_input_chars_per_word"] = 4;
    const Tokenizer short_words = scratch.load(j);
    CHECK(short_words.encode("cafe nino apfels", false) == Ids{kCafe, kNino, kUnk});

    // tokenizer_config.json's pad_token wins over padding.pad_id; one that
    // names no token is left for transformers to add.
    test::write_file(scratch.tmp.file("tokenizer_config.json"), json{{"pad_token", "[MASK]"}}.dump());
    CHECK(scratch.load(fixture("bert-wordpiece.json")).pad() == kMask);
    test::write_file(scratch.tmp.file("tokenizer_config.json"), json{{"pad_token", "<new>"}}.dump());
    CHECK(scratch.load(fixture("bert-wordpiece.json")).pad() == kPad);
  }

  TEST_CASE("Precompiled charsmap: Darts lookup, and tokenizers' grapheme-wise normalization") {
    // tokenizers' spm_precompiled test charsmap: keys "a" → "x", "ab" → "y"
    // and "a" U+0300 → "y", in a double array of 256 units.
    std::vector<uint32_t> trie(256, 0);
    trie['a'] = 'a' | 1u << 8 | 1u << 10;
    trie[96] = 0;
    trie[2] = 'b' | 1u << 8 | 1u << 10;
    trie[3] = 2;
    trie[172] = 0xCC | 1u << 10;
    trie[45] = 0x80 | 1u << 8 | 1u << 10;
    trie[44] = 2;
    std::string blob;
    const auto put = [&](uint32_t v) {
      for (int k = 0; k < 4; ++k) blob += static_cast<char>(v >> (8 * k) & 0xFF);
    };
    put(static_cast<uint32_t>(trie.size() * 4));
    for (const uint32_t u : trie) put(u);
    blob += "x\0y\0"s;
    const PrecompiledCharsmap map(blob);
    // transform takes the shortest key, as tokenizers does (results[0]).
    CHECK(map.transform("a") == "x");
    CHECK(map.transform("ab") == "x");
    CHECK(map.transform("\xCC\x80") == std::nullopt);
    CHECK(map.transform("b") == std::nullopt);
    // "ab" is two clusters: "a" → x, "b" stays. "a" U+0300 is one cluster
    // of 3 bytes, replaced whole by the value of its shortest key, "a".
    CHECK(map.normalize("ab") == "xb");
    CHECK(map.normalize("a\xCC\x80z") == "xz");
    CHECK(map.normalize("b\xFF"
                        "a") ==
          "b\xFF"
          "x");

    CHECK_THROWS_AS(PrecompiledCharsmap("\x10\0\0\0"s), std::invalid_argument);
    CHECK_THROWS_AS(PrecompiledCharsmap("ab"), std::invalid_argument);
    CHECK(base64_decode("eAB5AA==") == "x\0y\0"s);
    CHECK(base64_decode("TWFu") == "Man");
    CHECK(base64_decode("TWE=") == "Ma");
    CHECK(base64_decode("TW=u") == std::nullopt);
    CHECK(base64_decode("TWF") == std::nullopt);
  }

  TEST_CASE("Unigram tokenizer.json: Viterbi by score, unk, Precompiled, Metaspace") {
    const Tokenizer t5 = Tokenizer::from_hf(kFixtures + "t5-unigram.json");
    CHECK(t5.description() == "tokenizer.json Unigram (sentencepiece-style)");
    // "▁abc": ▁a + bc scores -4 - 5.5 = -9.5, better than ▁ + ab + c (-13),
    // ▁ab + c (-14) and ▁a + b + c (-14).
    CHECK(t5.encode("abc", false) == Ids{uSpaceA, uBC});
    CHECK(t5.encode("abc", true) == Ids{uSpaceA, uBC, uEos});
    CHECK(t5.encode("the abc", false) == Ids{uThe, uSpaceA, uBC});
    // "▁ab": ▁ + ab (-8) beats the piece ▁ab (-9).
    CHECK(t5.encode("ab", false) == Ids{uSpace, uAB});
    // "▁b": ▁b (-7) ties ▁ + b (-2 - 5); the first found, from the earlier start, stays.
    CHECK(t5.encode("b", false) == Ids{uSpaceB});
    // x and y have no piece: each scores min (-9) - 10, and the run of them is one <unk>.
    CHECK(t5.encode("x", false) == Ids{uSpace, uUnk});
    CHECK(t5.encode("xy", false) == Ids{uSpace, uUnk});
    CHECK(t5.encode("bxyc", false) == Ids{uSpaceB, uUnk, uC});
    // Precompiled: ﬁ → "fi" (▁fi, -6.5, beats ▁ + fi), ① → "1", NBSP → ' '.
    CHECK(t5.encode("\xEF\xAC\x81", false) == Ids{uSpaceFi});
    CHECK(t5.encode("\xE2\x91\xA0", false) == Ids{uSpace, uOne});
    CHECK(t5.encode("a\xC2\xA0"
                    "b",
                    false) == Ids{uSpaceA, uSpaceB});
    // e + U+0301 → é; composed é needs no rule.
    CHECK(t5.encode("e\xCC\x81", false) == Ids{uSpace, uEAcute});
    CHECK(t5.encode("\xC3\xA9", false) == Ids{uSpace, uEAcute});
    // e + two acutes is one cluster of 5 bytes: replaced whole by the rule
    // for its prefix e + U+0301, the second accent lost. With three (7
    // bytes) it goes character by character and nothing matches.
    CHECK(t5.encode("e\xCC\x81\xCC\x81", false) == Ids{uSpace, uEAcute});
    CHECK(t5.encode("e\xCC\x81\xCC\x81\xCC\x81", false) == Ids{uSpace, uUnk});
    // Strip (right) and Replace(" {2,}" → " "), U+3000 a space first.
    CHECK(t5.encode("a  b  ", false) == Ids{uSpaceA, uSpaceB});
    CHECK(t5.encode("a\xE3\x80\x80\xE3\x80\x80"
                    "b",
                    false) == Ids{uSpaceA, uSpaceB});
    CHECK(t5.encode("", true) == Ids{uEos});
    CHECK(t5.encode("</s>abc", false) == Ids{uEos, uSpaceA, uBC});

    CHECK(t5.decode(Ids{uThe, uSpaceA, uBC, uEos}) == "the abc</s>");
    CHECK(t5.decode(Ids{uThe, uSpaceA, uBC, uEos}, true) == "the abc");
    CHECK(t5.decode(t5.encode("the abc ab", true), true) == "the abc ab");
    CHECK(t5.is_special(uEos));
    CHECK(!t5.pad());
  }

  TEST_CASE("Unigram tokenizer.json variants: byte_fallback, prepend_scheme, no unk") {
    Scratch scratch;
    json j = fixture("t5-unigram.json");
    j["model"]["byte_fallback"] = true;
    j["decoder"] = {
        {"type", "Sequence"},
        {"decoders", json::array({{{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}},
                                  {{"type", "ByteFallback"}}})}};
    const Tokenizer bytes = scratch.load(j);
    // ☃ (E2 98 83) has no piece: its bytes do. x☃ fused has no <0x78>: <unk>.
    const Ids snowman = bytes.encode("☃", false);
    CHECK(snowman == Ids{uSpace, uByteE2, uByte98, uByte83});
    CHECK(bytes.encode("x☃", false) == Ids{uSpace, uUnk});
    CHECK(bytes.decode(snowman) == "☃");
    CHECK(streamed(bytes, snowman, false) == "☃");

    // prepend_scheme "first": only text at the start of the input gets ▁.
    // "abc" then scores a + bc (-10) over ab + c (-11).
    j = fixture("t5-unigram.json");
    j["pre_tokenizer"]["prepend_scheme"] = "first";
    CHECK(scratch.load(j).encode("</s>abc", false) == Ids{uEos, uA, uBC});
    CHECK(scratch.load(j).encode("abc", false) == Ids{uSpaceA, uBC});
    j["pre_tokenizer"]["prepend_scheme"] = "never";
    CHECK(scratch.load(j).encode("abc", false) == Ids{uA, uBC});

    // Without unk_id, unknown characters are dropped (tokenizers would fail).
    j = fixture("t5-unigram.json");
    j["model"]["unk_id"] = nullptr;
    CHECK(scratch.load(j).encode("bxyc", false) == Ids{uSpaceB, uC});

    // The older T5 spelling: WhitespaceSplit then Metaspace.
    j = fixture("t5-unigram.json");
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}},
                                       {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}}})}};
    CHECK(scratch.load(j).encode("the \n abc", false) == Ids{uThe, uSpaceA, uBC});
  }

  TEST_CASE("WordPiece and Unigram tokenizer.json errors name the file and the field") {
    Scratch scratch;
    json j = fixture("bert-wordpiece.json");
    j["model"]["unk_token"] = "<unk>";
    CHECK(scratch.error(j).ends_with("model.unk_token \"<unk>\" is not in model.vocab"));
    j = fixture("bert-wordpiece.json");
    j["model"]["max_input_chars_per_word"] = "many";
    CHECK(scratch.error(j).ends_with("model.max_input_chars_per_word must be an integer"));
    j = fixture("bert-wordpiece.json");
    j["decoder"]["cleanup"] = 1;
    CHECK(scratch.error(j).ends_with("decoder.cleanup must be true or false"));
    j = fixture("bert-wordpiece.json");
    j["padding"]["pad_id"] = 1000;
    CHECK(scratch.error(j).ends_with("padding.pad_id 1000 is not the id of a token"));

    j = fixture("t5-unigram.json");
    j["model"]["vocab"][4] = {"▁the"};
    CHECK(scratch.error(j).ends_with("model.vocab[4] must be [piece, score]"));
    j = fixture("t5-unigram.json");
    j["model"]["unk_id"] = 20;
    CHECK(scratch.error(j).ends_with("model.unk_id 20 is not an index of model.vocab"));
    j = fixture("t5-unigram.json");
    j["model"]["vocab"] = json::array();
    CHECK(scratch.error(j).ends_with("model.vocab is empty"));
    j = fixture("t5-unigram.json");
    j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "not base64!";
    CHECK(scratch.error(j).ends_with("normalizer.normalizers[0].precompiled_charsmap is not base64"));
    j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "EAAAAA==";
    CHECK(scratch.error(j).ends_with(
        "normalizer.normalizers[0].precompiled_charsmap is shorter than the trie its header announces"));
    j = fixture("t5-unigram.json");
    j["normalizer"]["normalizers"][1] = {{"type", "Nmt"}};
    CHECK(scratch.error(j).ends_with("normalizer.normalizers[1].type \"Nmt\" is not supported"));
    j = fixture("t5-unigram.json");
    j["model"]["type"] = "WordLevel";
    CHECK(scratch.error(j).ends_with(
        "model.type \"WordLevel\" is not supported (only \"BPE\", \"WordPiece\" and \"Unigram\")"));
  }

  TEST_CASE("WordPiece and Unigram tokenizers take any bytes: no throw, ids in range, streams add up") {
    const Tokenizer bert = Tokenizer::from_hf(kFixtures + "bert-wordpiece.json");
    const Tokenizer t5 = Tokenizer::from_hf(kFixtures + "t5-unigram.json");
    // Pieces of trouble, joined at random: invalid and cut sequences,
    // controls, combining marks, clusters, CJK, the fixtures' charsmap keys.
    const std::vector<std::string> pieces = {" ",      "\xFF",  "\xC3",   "\xE2\x82",   "\xED\xA0\x80",
                                             "\0"s,    "\x01",  "\u200D", "\u0301",     "\u3000",
                                             "\u00A0", "ﬁ",     "①",      "中",         "¿",
                                             "'",      "[CLS]", "</s>",   "a",          "e",
                                             "Hello",  "É",     "İ",      "\U0001F4BB", "\r\n",
                                             "##",     "▁"};
    std::mt19937 rng(5);
    std::vector<std::string> texts = {"", std::string(300, 'a'), "a\u0301\u0301\u0301\u0301\u0301\u0301 b"};
    for (int i = 0; i < 300; ++i) {
      std::string text;
      const int n = std::uniform_int_distribution<int>(1, 12)(rng);
      for (int k = 0; k < n; ++k) text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
      texts.push_back(std::move(text));
    }
    for (const Tokenizer* tok : {&bert, &t5}) {
      for (const std::string& text : texts) {
        for (const bool special : {false, true}) {
          const Ids ids = tok->encode(text, special, special);
          for (const int32_t id : ids) REQUIRE((id >= 0 && id < tok->vocab_size()));
          CHECK(streamed(*tok, ids, false) == tok->decode(ids));
        }
      }
    }
  }
}
