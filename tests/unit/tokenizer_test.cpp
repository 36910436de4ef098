// Tokenizers (runtime/text/tokenize/): the GPT-2 / Llama 3 / Qwen2 split patterns,
// exact ids of a small hand-made byte-level BPE, round trips of thousands of
// random strings (valid UTF-8 or not) through encode, decode and the
// streaming decoder, SentencePiece-style tokenizer.json, a SentencePiece
// model trained here and compared id for id with libsentencepiece (directly
// and as a GGUF "llama" vocabulary), GGUF "gpt2" vocabularies against the
// tokenizer.json they came from, and every loader error naming its field.
#include "runtime/text/tokenize/tokenizer.hpp"

#include <doctest/doctest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/byte_level.hpp"
#include "runtime/text/tokenize/pipeline.hpp"
#include "runtime/text/tokenize/utf8.hpp"
#include "runtime/text/tokenize/vocab_export.hpp"
#include "runtime/weights/gguf.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::text;
using nlohmann::json;
using Ids = std::vector<int32_t>;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("lathe-tokenizer-test") {}
};

// --- a small byte-level BPE, by hand ---------------------------------------
// ids 0..255: the byte-level character of byte i; 256..270: the merges below,
// in rank order; 271, 272: special tokens; 273: "Ġxyz", a token no merge
// forms (only ignore_merges reaches it).
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"Ġ", "t"}, {"h", "e"},   {"Ġt", "he"},  {"l", "l"},     {"e", "ll"}, {"H", "ell"}, {"Hell", "o"}, {"Ġ", "w"},
    {"o", "r"}, {"Ġw", "or"}, {"Ġwor", "l"}, {"Ġworl", "d"}, {"1", "2"},  {"12", "3"},  {"Ġ", "1"},
};
constexpr int32_t kHello = 262, kWorld = 267, k12 = 268, k123 = 269, kGt = 256, kHe = 257, kGthe = 258;
constexpr int32_t kEndOfText = 271, kBeginOfText = 272, kGxyz = 273;

std::vector<std::string> test_vocab() {
  std::vector<std::string> v;
  for (unsigned b = 0; b < 256; ++b) v.push_back(byte_level_char(static_cast<uint8_t>(b)));
  for (const auto& [l, r] : kMerges) v.push_back(l + r);
  v.push_back("<|endoftext|>");
  v.push_back("<|begin_of_text|>");
  v.push_back("Ġxyz");
  return v;
}

enum class Flavour { Gpt2, Llama3, Qwen2 };

// tokenizer.json of the test vocabulary, pre-tokenized as `flavour` does it.
json byte_level_json(Flavour flavour, bool merges_as_arrays = false) {
  const std::vector<std::string> vocab = test_vocab();
  json v = json::object();
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab[i].starts_with("<|")) continue;  // added tokens only
    v[vocab[i]] = i;
  }
  json merges = json::array();
  for (const auto& [l, r] : kMerges) merges.push_back(merges_as_arrays ? json::array({l, r}) : json(l + " " + r));
  json j;
  j["version"] = "1.0";
  j["added_tokens"] = json::array({
      {{"id", kEndOfText},
       {"content", "<|endoftext|>"},
       {"single_word", false},
       {"lstrip", false},
       {"rstrip", false},
       {"normalized", false},
       {"special", true}},
      {{"id", kBeginOfText},
       {"content", "<|begin_of_text|>"},
       {"single_word", false},
       {"lstrip", false},
       {"rstrip", false},
       {"normalized", false},
       {"special", true}},
  });
  j["normalizer"] = nullptr;
  const json byte_level_no_regex = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  switch (flavour) {
    case Flavour::Gpt2:
      j["pre_tokenizer"] = {
          {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
      j["post_processor"] = {
          {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
      break;
    case Flavour::Llama3:
      j["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", json::array({{{"type", "Split"},
                                                            {"pattern", {{"Regex", std::string(kLlama3Pattern)}}},
                                                            {"behavior", "Isolated"},
                                                            {"invert", false}},
                                                           byte_level_no_regex})}};
      j["post_processor"] = {
          {"type", "Sequence"},
          {"processors",
           json::array(
               {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
                {{"type", "TemplateProcessing"},
                 {"single", json::array({{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                                         {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                 {"pair", json::array()},
                 {"special_tokens",
                  {{"<|begin_of_text|>",
                    {{"id", "<|begin_of_text|>"}, {"ids", {kBeginOfText}}, {"tokens", {"<|begin_of_text|>"}}}}}}}})}};
      break;
    case Flavour::Qwen2:
      j["normalizer"] = {{"type", "NFC"}};
      j["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", json::array({{{"type", "Split"},
                                                            {"pattern", {{"Regex", std::string(kQwen2Pattern)}}},
                                                            {"behavior", "Isolated"},
                                                            {"invert", false}},
                                                           byte_level_no_regex})}};
      j["post_processor"] = {
          {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
      break;
  }
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", flavour == Flavour::Llama3},
                {"vocab", v},
                {"merges", merges}};
  return j;
}

Tokenizer load_json(const TempDir& tmp, const json& j, const std::string& name = "tokenizer.json") {
  const std::string path = tmp.file(name);
  test::write_file(path, j.dump());
  return Tokenizer::from_hf(path);
}

// --- random text ----------------------------------------------------------
std::string random_text(std::mt19937& rng, size_t max_units) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {'a', 'z'},         {'A', 'Z'},         {'0', '9'},       {'!', '/'},       {':', '@'},
      {0xC0, 0xFF},       {0x391, 0x3C9},     {0x410, 0x44F},   {0x5D0, 0x5EA},   {0x627, 0x64A},
      {0x905, 0x939},     {0x300, 0x36F},     {0x4E00, 0x4E80}, {0xAC00, 0xAC40}, {0x3041, 0x3096},
      {0x1F600, 0x1F64F}, {0x1F300, 0x1F320}, {0x2000, 0x206F}, {0xFFFD, 0xFFFD}, {0x10000, 0x10020},
  };
  static const std::vector<std::string> pieces = {
      " ",       "  ",     "   ",    "\t",   "\n",    "\n\n",   "\r\n",
      "'s",      "'LL",    "'t",     " 123", "2024",  "\u200D", "\U0001F469\u200D\U0001F4BB",
      "e\u0301", "\u00A0", "\u3000", " the", "Hello", "world"};
  std::string s;
  const size_t units = std::uniform_int_distribution<size_t>(0, max_units)(rng);
  for (size_t i = 0; i < units; ++i) {
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
      s += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
      continue;
    }
    const auto& [lo, hi] = ranges[std::uniform_int_distribution<size_t>(0, ranges.size() - 1)(rng)];
    utf8_append(s, static_cast<char32_t>(std::uniform_int_distribution<uint32_t>(lo, hi)(rng)));
  }
  return s;
}

// Text with invalid UTF-8 in it: stray continuation bytes, truncated
// sequences, overlongs, surrogates, 0xFF, all mixed with valid text.
std::string random_bytes(std::mt19937& rng, size_t max_units) {
  static const std::vector<std::string> bad = {"\x80",     "\xBF",         "\xC0\x80",     "\xC3",
                                               "\xE2\x82", "\xF0\x9F\x98", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                               "\xFF",     "\xFE",         "\xC3\x28"};
  std::string s;
  const size_t units = std::uniform_int_distribution<size_t>(0, max_units)(rng);
  for (size_t i = 0; i < units; ++i) {
    switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
      case 0:
        s += bad[std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng)];
        break;
      case 1:
        s += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
        break;
      default:
        s += random_text(rng, 3);
    }
  }
  return s;
}

// Streams `ids` through a StreamDecoder: every piece it emits must be
// well-formed UTF-8 when `valid`, and all of them together the same as decode().
std::string stream(const Tokenizer& tok, const Ids& ids, bool valid) {
  StreamDecoder decoder(tok);
  std::string out;
  for (const int32_t id : ids) {
    const std::string piece = decoder.push(id);
    if (valid) CHECK(is_valid_utf8(piece));
    out += piece;
  }
  out += decoder.flush();
  return out;
}

std::vector<std::string> split(std::string_view pattern, std::string_view text) {
  return split_text(text, Regex(pattern), SplitBehavior::Isolated);
}

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no lathe::Error was thrown");
  return Error(ErrorKind::InvalidArgument, "");
}

// --- GGUF -------------------------------------------------------------------
using Metadata = std::map<std::string, weights::GgufValue>;

Tokenizer load_gguf(const TempDir& tmp, const Metadata& metadata, const std::string& name = "vocab.gguf") {
  const std::string path = tmp.file(name);
  weights::write_gguf(path, metadata, {});
  const weights::GgufFile file(path);
  return Tokenizer::from_gguf(file);
}

Metadata gpt2_gguf(const std::string& pre) {
  const std::vector<std::string> vocab = test_vocab();
  std::vector<std::string> merges;
  for (const auto& [l, r] : kMerges) merges.push_back(l + " " + r);
  weights::GgufArray types{weights::GgufType::I32, {}};
  for (const std::string& t : vocab) types.items.emplace_back(static_cast<int32_t>(t.starts_with("<|") ? 3 : 1));
  return {
      {"tokenizer.ggml.model", std::string("gpt2")},
      {"tokenizer.ggml.pre", pre},
      {"tokenizer.ggml.tokens", weights::GgufValue::strings(vocab)},
      {"tokenizer.ggml.token_type", types},
      {"tokenizer.ggml.merges", weights::GgufValue::strings(merges)},
      {"tokenizer.ggml.bos_token_id", static_cast<uint32_t>(kBeginOfText)},
      {"tokenizer.ggml.eos_token_id", static_cast<uint32_t>(kEndOfText)},
  };
}

// tests/data/tokenizers/bert-wordpiece.json's vocabulary as llama.cpp's
// converter writes it (conversion/bert.py, BertModel.set_vocab): model
// "bert", the special tokens CONTROL and as they are, every other token
// NORMAL with WordPiece's "##ed" as "ed" and a word start "hello" as
// "▁hello" (the phantom space); [CLS] as BOS, [SEP] as the separator
// (gguf-py's SpecialVocab), the BertNormalizer's lowercase.
Metadata bert_gguf() {
  const json j = json::parse(test::read_file(std::string(LATHE_SOURCE_DIR) + "/tests/data/tokenizers/bert-wordpiece.json"));
  std::vector<std::string> tokens(j["model"]["vocab"].size());
  std::vector<int32_t> types(tokens.size(), 1);
  for (const auto& [text, id] : j["model"]["vocab"].items())
    tokens[id.get<size_t>()] = text.starts_with("##") ? text.substr(2) : "\xE2\x96\x81" + text;
  for (const json& added : j["added_tokens"]) {
    tokens[added["id"].get<size_t>()] = added["content"].get<std::string>();
    types[added["id"].get<size_t>()] = 3;
  }
  weights::GgufArray type_array{weights::GgufType::I32, {}};
  for (const int32_t t : types) type_array.items.emplace_back(t);
  return {
      {"tokenizer.ggml.model", std::string("bert")},
      {"tokenizer.ggml.pre", std::string("default")},
      {"tokenizer.ggml.tokens", weights::GgufValue::strings(tokens)},
      {"tokenizer.ggml.token_type", type_array},
      {"tokenizer.ggml.bos_token_id", uint32_t{2}},
      {"tokenizer.ggml.eos_token_id", uint32_t{3}},
      {"tokenizer.ggml.seperator_token_id", uint32_t{3}},
      {"tokenizer.ggml.unknown_token_id", uint32_t{1}},
      {"tokenizer.ggml.padding_token_id", uint32_t{0}},
      {"tokenizer.ggml.normalizer.lowercase", true},
  };
}

}  // namespace

TEST_SUITE("tokenizer") {
  TEST_CASE("the GPT-2, Llama 3 and Qwen2 patterns split as their tokenizers do") {
    CHECK(split(kGpt2Pattern, "Hello world's 123  test") ==
          std::vector<std::string>{"Hello", " world", "'s", " 123", " ", " test"});
    // GPT-2's contractions are case-sensitive, Llama 3's are not.
    CHECK(split(kGpt2Pattern, "I'LL DO") == std::vector<std::string>{"I", "'", "LL", " DO"});
    CHECK(split(kLlama3Pattern, "I'LL DO") == std::vector<std::string>{"I", "'LL", " DO"});
    // Llama 3: digits in groups of up to three, never with the space before.
    CHECK(split(kLlama3Pattern, "Hello world's 12345  test") ==
          std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45", " ", " test"});
    CHECK(split(kLlama3Pattern, "1234567") == std::vector<std::string>{"123", "456", "7"});
    CHECK(split(kGpt2Pattern, "1234567") == std::vector<std::string>{"1234567"});
    // Llama 3: newlines stand alone; punctuation takes the newlines after it.
    CHECK(split(kLlama3Pattern, "a\n\nb") == std::vector<std::string>{"a", "\n\n", "b"});
    CHECK(split(kLlama3Pattern, "x.\n\ny") == std::vector<std::string>{"x", ".\n\n", "y"});
    CHECK(split(kLlama3Pattern, "  x") == std::vector<std::string>{" ", " x"});
    // Llama 3 lets a punctuation mark lead a word.
    CHECK(split(kLlama3Pattern, "(abc)") == std::vector<std::string>{"(abc", ")"});
    // Qwen2: every digit alone.
    CHECK(split(kQwen2Pattern, "x 2024") == std::vector<std::string>{"x", " ", "2", "0", "2", "4"});
    // \p{L} and \p{N} are Unicode's.
    CHECK(split(kGpt2Pattern, "Привет мир ٣٤") == std::vector<std::string>{"Привет", " мир", " ٣٤"});
    CHECK(split(kLlama3Pattern, "数字123") == std::vector<std::string>{"数字", "123"});
    // Invalid bytes match nothing and stay in the gaps.
    CHECK(split(kGpt2Pattern,
                "ab\xFF"
                "cd") == std::vector<std::string>{"ab", "\xFF", "cd"});
  }

  TEST_CASE("split behaviors as Hugging Face's Split defines them") {
    const Regex dash("-");
    CHECK(split_text("a-b--c", dash, SplitBehavior::Removed) == std::vector<std::string>{"a", "b", "c"});
    CHECK(split_text("a-b--c", dash, SplitBehavior::Isolated) ==
          std::vector<std::string>{"a", "-", "b", "-", "-", "c"});
    CHECK(split_text("a-b--c", dash, SplitBehavior::MergedWithPrevious) ==
          std::vector<std::string>{"a-", "b-", "-", "c"});
    CHECK(split_text("a-b--c", dash, SplitBehavior::MergedWithNext) == std::vector<std::string>{"a", "-b", "-", "-c"});
    CHECK(split_text("a-b--c", dash, SplitBehavior::Contiguous) == std::vector<std::string>{"a", "-", "b", "--", "c"});
    CHECK(split_text("a-b--c", dash, SplitBehavior::Removed, true) == std::vector<std::string>{"-", "-", "-"});
  }

  TEST_CASE("a hand-made byte-level BPE gives the ids worked out by hand") {
    TempDir tmp;
    const Tokenizer gpt2 = load_json(tmp, byte_level_json(Flavour::Gpt2));
    CHECK(gpt2.vocab_size() == 274);
    CHECK(gpt2.encode("Hello world", false) == Ids{kHello, kWorld});
    // "'s" has no merge; " 123": "1 2" (rank 12) before "Ġ 1" (rank 14), then "12 3";
    // " test": only "Ġ t" applies.
    CHECK(gpt2.encode("Hello world's 123  test", false) ==
          Ids{kHello, kWorld, '\'', 's', ' ', k123, ' ', kGt, 'e', 's', 't'});
    // " the": "Ġ t" and "h e" first, then "Ġt he".
    CHECK(gpt2.encode(" the", false) == Ids{kGthe});
    CHECK(gpt2.encode("there", false) == Ids{'t', kHe, 'r', 'e'});
    CHECK(gpt2.encode("12", false) == Ids{k12});
    CHECK(gpt2.encode("", true).empty());
    // Bytes spelled in the alphabet: '\n' is "Ċ", id 10 here.
    CHECK(gpt2.encode("\n", false) == Ids{10});
    CHECK(gpt2.encode("\xC3\xA9", false) == Ids{0xC3, 0xA9});
    CHECK(gpt2.token_text(kWorld) == "Ġworld");
    CHECK(gpt2.token_bytes(kWorld) == " world");
    CHECK(gpt2.decode(Ids{kHello, kWorld}) == "Hello world");
    // An id past the vocabulary (a model's padded rows, which it can sample)
    // decodes to nothing, as Hugging Face's tokenizers decode it, streamed or
    // not; a negative one is an error.
    CHECK(gpt2.decode(Ids{kHello, 274, 100000, kWorld}) == "Hello world");
    CHECK(gpt2.token_text(274).empty());
    CHECK(gpt2.token_bytes(100000).empty());
    CHECK(!gpt2.is_special(274));
    StreamDecoder stream(gpt2);
    CHECK(stream.push(274) + stream.push(kHello) + stream.push(300) + stream.flush() == "Hello");
    CHECK_THROWS_WITH_AS(gpt2.decode(Ids{-1}), "token id -1 is negative", Error);
    // Merges given as [a, b] arrays read the same.
    const Tokenizer arrays = load_json(tmp, byte_level_json(Flavour::Gpt2, true), "arrays.json");
    CHECK(arrays.encode("Hello world's 123  test", false) == gpt2.encode("Hello world's 123  test", false));

    // Llama 3 style: ignore_merges lets a word that is a token be that token.
    const Tokenizer llama3 = load_json(tmp, byte_level_json(Flavour::Llama3), "llama3.json");
    CHECK(llama3.encode(" xyz", false) == Ids{kGxyz});
    CHECK(gpt2.encode(" xyz", false) == Ids{' ', 'x', 'y', 'z'});
    CHECK(llama3.encode("12345", false) == Ids{k123, '4', '5'});
    CHECK(gpt2.encode("12345", false) == Ids{k123, '4', '5'});
    CHECK(llama3.encode("1234", false) == Ids{k123, '4'});
    CHECK(gpt2.encode(" 1234", false) == Ids{' ', k123, '4'});
    // Qwen2: one digit at a time, so "12" never merges.
    const Tokenizer qwen2 = load_json(tmp, byte_level_json(Flavour::Qwen2), "qwen2.json");
    CHECK(qwen2.encode("123", false) == Ids{'1', '2', '3'});
  }

  TEST_CASE("added tokens match whole before pre-tokenization, BOS/EOS come from the post-processor and the config") {
    TempDir tmp;
    const Tokenizer gpt2 = load_json(tmp, byte_level_json(Flavour::Gpt2));
    CHECK(gpt2.encode("Hi<|endoftext|>there", false) == Ids{'H', 'i', kEndOfText, 't', kHe, 'r', 'e'});
    CHECK(gpt2.encode("<|endoftext|><|begin_of_text|>", false) == Ids{kEndOfText, kBeginOfText});
    CHECK(gpt2.is_special(kEndOfText));
    CHECK_FALSE(gpt2.is_special(kHello));
    // Not parsed: the text is encoded as text.
    const Ids literal = gpt2.encode("Hi<|endoftext|>there", false, false);
    CHECK(std::find(literal.begin(), literal.end(), kEndOfText) == literal.end());
    CHECK(gpt2.decode(literal) == "Hi<|endoftext|>there");
    CHECK(gpt2.decode(Ids{kHello, kEndOfText, kWorld}) == "Hello<|endoftext|> world");
    CHECK(gpt2.decode(Ids{kHello, kEndOfText, kWorld}, true) == "Hello world");
    // GPT-2's post-processor adds nothing, and without a config there is no BOS.
    CHECK(gpt2.encode("Hello", true) == Ids{kHello});
    CHECK_FALSE(gpt2.bos());

    // Llama 3's TemplateProcessing adds <|begin_of_text|>, which is then BOS.
    const Tokenizer llama3 = load_json(tmp, byte_level_json(Flavour::Llama3), "llama3.json");
    CHECK(llama3.encode("Hello", true) == Ids{kBeginOfText, kHello});
    CHECK(llama3.encode("Hello", false) == Ids{kHello});
    CHECK(llama3.bos() == kBeginOfText);
    CHECK_FALSE(llama3.eos());

    // A directory: tokenizer.json with tokenizer_config.json beside it.
    TempDir dir;
    test::write_file(dir.file("tokenizer.json"), byte_level_json(Flavour::Llama3).dump());
    test::write_file(dir.file("tokenizer_config.json"),
                     json{{"add_bos_token", false},
                          {"add_eos_token", true},
                          {"bos_token", {{"__type", "AddedToken"}, {"content", "<|begin_of_text|>"}}},
                          {"eos_token", "<|endoftext|>"}}
                         .dump());
    const Tokenizer configured = Tokenizer::from_hf(dir.dir.string());
    CHECK(configured.encode("Hello", true) == Ids{kHello, kEndOfText});
    CHECK(configured.bos() == kBeginOfText);
    CHECK(configured.eos() == kEndOfText);

    // lstrip / rstrip swallow the whitespace beside a token.
    json j = byte_level_json(Flavour::Gpt2);
    j["added_tokens"].push_back({{"id", kGxyz},
                                 {"content", "<tool>"},
                                 {"single_word", false},
                                 {"lstrip", true},
                                 {"rstrip", true},
                                 {"normalized", false},
                                 {"special", false}});
    const Tokenizer stripped = load_json(tmp, j, "stripped.json");
    CHECK(stripped.encode("Hello  <tool>  world", false, false) == Ids{kHello, kGxyz, 'w', 264, 'l', 'd'});
  }

  TEST_CASE("NFC: Qwen2's normalizer composes before splitting") {
    TempDir tmp;
    const Tokenizer qwen2 = load_json(tmp, byte_level_json(Flavour::Qwen2));
    CHECK(qwen2.encode("e\u0301", false) == qwen2.encode("\u00E9", false));
    CHECK(qwen2.encode("\u00E9", false) == Ids{0xC3, 0xA9});
    CHECK(qwen2.encode("x\xFF"
                       "e\u0301",
                       false) == Ids{'x', 0xFF, 0xC3, 0xA9});
  }

  TEST_CASE("byte-level round trip: thousands of random strings, valid UTF-8 or not, also streamed") {
    TempDir tmp;
    const Tokenizer tokenizers[] = {load_json(tmp, byte_level_json(Flavour::Gpt2), "gpt2.json"),
                                    load_json(tmp, byte_level_json(Flavour::Llama3), "llama3.json")};
    std::mt19937 rng(1234);
    int checked = 0;
    for (int i = 0; i < 3000; ++i) {
      const std::string s = random_text(rng, 40);
      for (const Tokenizer& tok : tokenizers) {
        const Ids ids = tok.encode(s, false);
        REQUIRE_MESSAGE(tok.decode(ids) == s, "text: " << s);
        REQUIRE(stream(tok, ids, true) == s);
        ++checked;
      }
    }
    for (int i = 0; i < 2000; ++i) {
      const std::string s = random_bytes(rng, 12);
      for (const Tokenizer& tok : tokenizers) {
        const Ids ids = tok.encode(s, true);
        REQUIRE(tok.decode(ids, true) == s);
        REQUIRE(stream(tok, tok.encode(s, false), false) == s);
        ++checked;
      }
    }
    CHECK(checked == 10000);
  }

  TEST_CASE("long inputs: whitespace runs, one giant word, many specials") {
    TempDir tmp;
    const Tokenizer tokenizers[] = {load_json(tmp, byte_level_json(Flavour::Gpt2), "gpt2.json"),
                                    load_json(tmp, byte_level_json(Flavour::Llama3), "llama3.json")};
    std::string text;
    for (int i = 0; i < 20; ++i) text += "<|endoftext|>";
    const std::string inputs[] = {std::string(100000, ' ') + "x", std::string(100000, '\n'),
                                  std::string(50000, 'l') + "o", text + std::string(30000, '9')};
    for (const Tokenizer& tok : tokenizers) {
      for (const std::string& s : inputs) CHECK(tok.decode(tok.encode(s, false)) == s);
    }
    // 50000 'l' pair up ("l l") into 25000 "ll" tokens, then "o".
    CHECK(tokenizers[0].encode(std::string(50000, 'l') + "o", false).size() == 25001);
  }

  TEST_CASE("the stream decoder holds back a character cut between tokens") {
    TempDir tmp;
    const Tokenizer tok = load_json(tmp, byte_level_json(Flavour::Gpt2));
    StreamDecoder d(tok);
    // "é" is two byte tokens; "😀" four.
    CHECK(d.push(0xC3).empty());
    CHECK(d.push(0xA9) == "\u00E9");
    CHECK(d.push(0xF0).empty());
    CHECK(d.push(0x9F).empty());
    CHECK(d.push(0x98).empty());
    CHECK(d.push(0x80) == "\U0001F600");
    // A byte that can never complete is shown at once.
    CHECK(d.push(0xFF) == "\xFF");
    CHECK(d.push(0xE2).empty());
    CHECK(d.push(kHello) ==
          "\xE2"
          "Hello");
    CHECK(d.push(0xE2).empty());
    CHECK(d.flush() == "\xE2");
    CHECK(d.flush().empty());
    CHECK(d.push(100000).empty());  // past the vocabulary: no text
    CHECK_THROWS_AS(d.push(-1), Error);
    CHECK_THROWS_AS(tok.decode(Ids{-1}), Error);
  }

  TEST_CASE("SentencePiece-style tokenizer.json: byte fallback, Metaspace, the ▁ decoder") {
    // <unk> <s> </s>, the 256 byte tokens, then ▁ a b ▁a ab ▁ab c.
    json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      vocab[name] = 3 + b;
    }
    const std::vector<std::string> rest = {"▁", "a", "b", "▁a", "ab", "▁ab", "c"};
    for (size_t i = 0; i < rest.size(); ++i) vocab[rest[i]] = 259 + i;
    const int32_t kSpace = 259, kC = 265, kSpaceAb = 264, kA = 260;
    json j;
    j["added_tokens"] = json::array();
    for (int id = 0; id < 3; ++id) {
      const std::string content = id == 0 ? "<unk>" : id == 1 ? "<s>" : "</s>";
      j["added_tokens"].push_back({{"id", id},
                                   {"content", content},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}});
    }
    j["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", "▁"}},
                                     {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}})}};
    j["pre_tokenizer"] = nullptr;
    j["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                   {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                           {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                              {{"type", "ByteFallback"}},
                                              {{"type", "Fuse"}},
                                              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
    j["model"] = {{"type", "BPE"},         {"unk_token", "<unk>"}, {"fuse_unk", true},
                  {"byte_fallback", true}, {"vocab", vocab},       {"merges", json::array({"▁ a", "a b", "▁a b"})}};
    TempDir tmp;
    const Tokenizer llama2 = load_json(tmp, j);
    CHECK(llama2.encode("ab ab", false) == Ids{kSpaceAb, kSpaceAb});
    CHECK(llama2.encode("abc", true) == Ids{1, kSpaceAb, kC});
    CHECK(llama2.encode("a", false) == Ids{259 + 3});
    // "ä" is not in the vocabulary: its two bytes.
    CHECK(llama2.encode("ä", false) == Ids{kSpace, 3 + 0xC3, 3 + 0xA4});
    CHECK(llama2.bos() == 1);
    CHECK(llama2.decode(Ids{1, kSpaceAb, kC}, true) == "abc");
    CHECK(llama2.decode(Ids{kSpace, 3 + 0xC3, 3 + 0xA4}) == "ä");
    CHECK(llama2.decode(Ids{kSpaceAb, kSpaceAb}) == "ab ab");
    CHECK(llama2.decode(Ids{kA}) == "a");

    // The newer spelling: a Metaspace pre-tokenizer and decoder.
    json meta = j;
    meta["normalizer"] = nullptr;
    meta["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
    meta["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
    const Tokenizer metaspace = load_json(tmp, meta, "metaspace.json");
    CHECK(metaspace.encode("ab ab", false) == Ids{kSpaceAb, kSpaceAb});
    // prepend_scheme "first": only the text at the start of the input gets "▁".
    CHECK(metaspace.encode("<s>ab", false) == Ids{1, 263});

    std::mt19937 rng(99);
    const std::vector<std::string> alphabet = {"a", "b", "c", " ", "  ", "ä", "😀", "\t", "ab", "\xFF"};
    for (int i = 0; i < 2000; ++i) {
      std::string s;
      const int n = std::uniform_int_distribution<int>(0, 12)(rng);
      for (int k = 0; k < n; ++k) s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      for (const Tokenizer* tok : {&llama2, &metaspace}) {
        const Ids ids = tok->encode(s, true);
        if (tok == &metaspace && s.starts_with(" ")) continue;  // Metaspace adds no "▁" before a space
        REQUIRE_MESSAGE(tok->decode(ids, true) == s, "text: [" << s << "]");
        REQUIRE(stream(*tok, tok->encode(s, false), false) == s);
      }
    }
  }

  // The fixtures in tests/data/tokenizers/ carry the pieces of Gemma 3's and
  // Llama 2's tokenizer.json that decoding depends on (their normalizer,
  // decoder and added tokens) over a vocabulary of a few tokens. What Hugging
  // Face's tokenizers make of them follows from its decode: each id becomes
  // its token's text (added tokens included; special ones dropped when
  // skipped), the decoder runs over that list, and the pieces are joined.
  TEST_CASE("decoding as Hugging Face's decoders do: added tokens through Replace, Strip on the whole text") {
    const std::string dir = std::string(LATHE_SOURCE_DIR) + "/tests/data/tokenizers/";
    // Gemma 3: decoder Sequence[Replace("▁" → " "), ByteFallback, Fuse];
    // "▁▁▁▁" (id 24) is a non-special added token. The tokens
    // ["<bos>", "def", "▁f", "():", "\n", "▁▁▁▁", "return", "▁1"] become
    // ["<bos>", "def", " f", "():", "\n", "    ", "return", " 1"], joined.
    const Tokenizer gemma = Tokenizer::from_hf(dir + "gemma3-whitespace.json");
    const Ids code = {2, 4, 5, 6, 7, 24, 8, 9};
    CHECK(gemma.decode(code) == "<bos>def f():\n    return 1");
    CHECK(gemma.decode(code, true) == "def f():\n    return 1");
    CHECK(gemma.decode(Ids{22, 23}) == "     ");  // "▁▁" and "▁▁▁": no leading space is stripped
    CHECK(stream(gemma, code, true) == gemma.decode(code));

    // Llama 2: decoder Sequence[Replace("▁" → " "), ByteFallback, Fuse,
    // Strip(" ", 1, 0)]. Strip comes after Fuse, so it removes one space at
    // the start of the whole text: ["<s>", "▁Hello", "</s>"] → "<s> Hello</s>"
    // keeps its space (the text starts with '<'); with specials skipped,
    // ["▁Hello"] → " Hello" → "Hello".
    const Tokenizer llama2 = Tokenizer::from_hf(dir + "llama2-special.json");
    const Ids hello = {1, 3, 2};
    CHECK(llama2.decode(hello) == "<s> Hello</s>");
    CHECK(llama2.decode(hello, true) == "Hello");
    CHECK(llama2.decode(Ids{3, 4}) == "Hello world");
    CHECK(llama2.decode(Ids{1, 3, 4}, true) == "Hello world");
    CHECK(stream(llama2, hello, true) == "<s> Hello</s>");
  }

  TEST_CASE("malformed or unsupported tokenizer.json: an error naming the file and the field") {
    TempDir tmp;
    const auto message = [&](const json& j) {
      const std::string path = tmp.file("bad.json");
      test::write_file(path, j.dump());
      const Error e = error_of([&] { Tokenizer::from_hf(path); });
      const std::string what = e.what();
      CHECK_MESSAGE(what.starts_with(path + ": "), what);
      return what;
    };
    json j = byte_level_json(Flavour::Gpt2);
    j["pre_tokenizer"] = {{"type", "Whitespace"}};
    CHECK(message(j).ends_with("pre_tokenizer.type \"Whitespace\" is not supported"));

    j = byte_level_json(Flavour::Llama3);
    j["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Punctuation"}};
    CHECK(message(j).ends_with("pre_tokenizer.pretokenizers[1].type \"Punctuation\" is not supported"));

    j = byte_level_json(Flavour::Gpt2);
    j["model"]["type"] = "WordLevel";
    CHECK(message(j).find("model.type \"WordLevel\" is not supported") != std::string::npos);

    j = byte_level_json(Flavour::Gpt2);
    j["normalizer"] = {{"type", "Nmt"}};
    CHECK(message(j).ends_with("normalizer.type \"Nmt\" is not supported"));

    j = byte_level_json(Flavour::Gpt2);
    j["decoder"] = {{"type", "CTC"}};
    CHECK(message(j).ends_with("decoder.type \"CTC\" is not supported"));

    j = byte_level_json(Flavour::Gpt2);
    j["post_processor"] = {{"type", "Madeup"}};
    CHECK(message(j).ends_with("post_processor.type \"Madeup\" is not supported"));

    j = byte_level_json(Flavour::Gpt2);
    j["model"]["merges"][3] = "l zz";
    CHECK(message(j).find("model.merges[3] \"zz\" is not in model.vocab") != std::string::npos);

    j = byte_level_json(Flavour::Gpt2);
    j["model"]["merges"][0] = "a b c";
    CHECK(message(j).find("model.merges[0]") != std::string::npos);

    j = byte_level_json(Flavour::Gpt2);
    j["model"]["vocab"].erase("Ā");
    CHECK(message(j).find("model.vocab lacks the byte-level token \"Ā\" (byte 0x00)") != std::string::npos);

    j = byte_level_json(Flavour::Llama3);
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
    CHECK(message(j).find("pre_tokenizer.pretokenizers[0].pattern.Regex") != std::string::npos);

    j = byte_level_json(Flavour::Gpt2);
    j["model"]["vocab"]["Hello"] = "x";
    CHECK(message(j).find("model.vocab[\"Hello\"] must be an integer") != std::string::npos);

    j = byte_level_json(Flavour::Gpt2);
    j["added_tokens"][0]["id"] = 100000000;
    CHECK(message(j).find("far beyond") != std::string::npos);

    j = byte_level_json(Flavour::Llama3);
    j["post_processor"]["processors"][1]["single"][0]["SpecialToken"]["id"] = "<nope>";
    CHECK(message(j).find("has no entry \"<nope>\"") != std::string::npos);

    j = byte_level_json(Flavour::Gpt2);
    j["model"]["continuing_subword_prefix"] = "##";
    CHECK(message(j).find("model.continuing_subword_prefix \"##\" is not supported") != std::string::npos);

    const std::string path = tmp.file("broken.json");
    test::write_file(path, "{\"model\": ");
    CHECK(error_of([&] { Tokenizer::from_hf(path); }).kind() == ErrorKind::BadFile);
    CHECK(error_of([&] { Tokenizer::from_hf(tmp.file("absent.json")); }).kind() == ErrorKind::NotFound);

    TempDir dir;
    test::write_file(dir.file("tokenizer.json"), byte_level_json(Flavour::Gpt2).dump());
    test::write_file(dir.file("tokenizer_config.json"), json{{"bos_token", "<nope>"}}.dump());
    CHECK(std::string(error_of([&] { Tokenizer::from_hf(dir.dir.string()); }).what())
              .find("tokenizer_config.json: bos_token \"<nope>\" is not a token") != std::string::npos);
  }

  TEST_CASE("truncated and corrupted tokenizer.json files fail cleanly") {
    TempDir tmp;
    const std::string good = byte_level_json(Flavour::Llama3).dump();
    const std::string path = tmp.file("t.json");
    std::mt19937 rng(7);
    for (int i = 0; i < 200; ++i) {
      std::string s = good;
      if (i % 2 == 0) {
        s.resize(std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng));
      } else {
        for (int k = 0; k < 3; ++k) {
          s[std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng)] =
              "{}[]\":,0a \\"[std::uniform_int_distribution<int>(0, 11)(rng)];
        }
      }
      test::write_file(path, s);
      try {
        const Tokenizer tok = Tokenizer::from_hf(path);
        const Ids ids = tok.encode("Hello world 123", true);
        for (const int32_t id : ids) CHECK(id < tok.vocab_size());
      } catch (const Error&) {
      }
    }
  }

  TEST_CASE("GGUF gpt2 vocabularies encode as the tokenizer.json they came from") {
    TempDir tmp;
    std::mt19937 rng(5);
    const std::pair<Flavour, std::string> cases[] = {
        {Flavour::Gpt2, "gpt-2"}, {Flavour::Llama3, "llama-bpe"}, {Flavour::Qwen2, "qwen2"}};
    for (const auto& [flavour, pre] : cases) {
      CAPTURE(pre);
      const Tokenizer hf = load_json(tmp, byte_level_json(flavour), pre + ".json");
      const Tokenizer gguf = load_gguf(tmp, gpt2_gguf(pre), pre + ".gguf");
      CHECK(gguf.vocab_size() == hf.vocab_size());
      CHECK(gguf.bos() == kBeginOfText);
      CHECK(gguf.eos() == kEndOfText);
      CHECK(gguf.is_special(kEndOfText));
      for (int i = 0; i < 500; ++i) {
        std::string s = random_text(rng, 30);
        if (i % 10 == 0) s += "<|endoftext|>" + random_text(rng, 5);
        REQUIRE_MESSAGE(gguf.encode(s, false) == hf.encode(s, false), "text: " << s);
        REQUIRE(gguf.decode(gguf.encode(s, false)) == hf.decode(hf.encode(s, false)));
      }
      CHECK(gguf.encode("Hello world's 123  test", false) == hf.encode("Hello world's 123  test", false));
    }
    // llama-bpe adds BOS by default (llama.cpp's rule); metadata overrides it.
    CHECK(load_gguf(tmp, gpt2_gguf("llama-bpe"), "a.gguf").encode("Hello", true) == Ids{kBeginOfText, kHello});
    CHECK(load_gguf(tmp, gpt2_gguf("gpt-2"), "b.gguf").encode("Hello", true) == Ids{kHello});
    Metadata m = gpt2_gguf("gpt-2");
    m["tokenizer.ggml.add_bos_token"] = true;
    m["tokenizer.ggml.add_eos_token"] = true;
    CHECK(load_gguf(tmp, m, "c.gguf").encode("Hello", true) == Ids{kBeginOfText, kHello, kEndOfText});
  }

  TEST_CASE("GGUF bert vocabularies (phantom-space WordPiece) encode as the tokenizer.json they came from") {
    TempDir tmp;
    const Tokenizer gguf = load_gguf(tmp, bert_gguf(), "bert.gguf");
    const Tokenizer hf = Tokenizer::from_hf(std::string(LATHE_SOURCE_DIR) + "/tests/data/tokenizers/bert-wordpiece.json");
    CHECK(gguf.vocab_size() == hf.vocab_size());
    // Worked out by hand on the GGUF spelling (ids of bert-wordpiece.json):
    // [CLS] ▁hello ▁, ▁world ▁! [SEP].
    CHECK(gguf.encode("Hello, World!", true) == Ids{2, 5, 7, 6, 8, 3});
    // ▁unwanted: "▁un" (10), then the bare continuations "want" (11), "ed" (12).
    CHECK(gguf.encode("Unwanted café\tNIÑO", false) == Ids{10, 11, 12, 13, 14});
    // A word start and a continuation of the same letters are two tokens:
    // "▁a" (21) then "a" (22); "▁s" (25) alone, "s" (15) after "▁nino".
    CHECK(gguf.encode("aa s ninos", false) == Ids{21, 22, 25, 14, 15});
    // "▁x" matches, "yz" does not: the whole word is [UNK] (1).
    CHECK(gguf.encode("hello xyz world", false) == Ids{5, 1, 6});
    // Special tokens written in the text are matched whole.
    CHECK(gguf.encode("[CLS] hello [MASK]", false) == Ids{2, 5, 4});
    CHECK(gguf.encode("", true) == Ids{2, 3});
    CHECK(gguf.pad() == 0);
    for (const char* text : {"Hello, World!", "Unwanted café\tNIÑO", "ÄPFELS", "hello中文world", "¿hello?$", "don't",
                             "hello xyz world", "İ", "aa aaa s ninos", "[CLS] hello [MASK]", "  spaced\n\nout  ",
                             "\x01hel\0lo\r\nwor\xC2\xADld"}) {
      const std::string t(text);
      CHECK_MESSAGE(gguf.encode(t, true) == hf.encode(t, true), "text: " << t);
      CHECK_MESSAGE(gguf.encode(t, false) == hf.encode(t, false), "text: " << t);
    }
    // Decoded as llama.cpp spells the pieces: "▁" a space, the first dropped.
    CHECK(gguf.decode(Ids{5, 6, 10, 11, 12}) == "hello world unwanted");
    CHECK(gguf.decode(gguf.encode("hello world", true), true) == "hello world");

    // lathe quantize's export of the tokenizer.json (vocab_export.hpp)
    // writes the converter's metadata, key for key.
    test::write_file(tmp.file("tokenizer.json"),
                     test::read_file(std::string(LATHE_SOURCE_DIR) + "/tests/data/tokenizers/bert-wordpiece.json"));
    const GgufVocabulary exported = gguf_vocabulary(tmp.dir.string(), 36);
    CHECK(exported.summary.find("WordPiece vocabulary of 36 tokens") != std::string::npos);
    CHECK(exported.metadata == bert_gguf());

    // Without lowercase in the file, llama.cpp keeps the case (and the accents).
    Metadata cased = bert_gguf();
    cased.erase("tokenizer.ggml.normalizer.lowercase");
    CHECK(load_gguf(tmp, cased, "cased.gguf").encode("Hello hello", false) == Ids{1, 5});
    // No ids in the file: llama.cpp's bert-base defaults (101, 102, 100), which this vocabulary lacks.
    Metadata bare = bert_gguf();
    bare.erase("tokenizer.ggml.bos_token_id");
    CHECK(std::string(error_of([&] { load_gguf(tmp, bare, "bare.gguf"); }).what())
              .find("tokenizer.ggml.bos_token_id is missing, and llama.cpp's default 101 is not a token id") !=
          std::string::npos);
  }

  TEST_CASE("GGUF vocabulary errors name the key") {
    TempDir tmp;
    const auto message = [&](const Metadata& m) { return std::string(error_of([&] { load_gguf(tmp, m); }).what()); };
    Metadata m = gpt2_gguf("deepseek-llm");
    CHECK(message(m).find("tokenizer.ggml.pre \"deepseek-llm\" is not supported") != std::string::npos);
    m = gpt2_gguf("gpt-2");
    m["tokenizer.ggml.model"] = std::string("t5");
    CHECK(message(m).find("tokenizer.ggml.model \"t5\" is not supported") != std::string::npos);
    m = gpt2_gguf("gpt-2");
    m.erase("tokenizer.ggml.merges");
    CHECK(message(m).find("tokenizer.ggml.merges is missing") != std::string::npos);
    m = gpt2_gguf("gpt-2");
    m["tokenizer.ggml.merges"] = weights::GgufValue::strings({"Ġ t", "q zz"});
    CHECK(message(m).find("tokenizer.ggml.merges[1] \"zz\" is not in tokenizer.ggml.tokens") != std::string::npos);
    m = gpt2_gguf("gpt-2");
    m["tokenizer.ggml.bos_token_id"] = static_cast<uint32_t>(9999);
    CHECK(message(m).find("tokenizer.ggml.bos_token_id 9999 is not a token id") != std::string::npos);
    m = gpt2_gguf("gpt-2");
    m["tokenizer.ggml.token_type"] = weights::GgufArray{weights::GgufType::I32, {int32_t{1}}};
    CHECK(message(m).find("tokenizer.ggml.token_type has 1 entries for 274 tokens") != std::string::npos);
    m = gpt2_gguf("gpt-2");
    m.erase("tokenizer.ggml.model");
    CHECK(message(m).find("tokenizer.ggml.model is missing") != std::string::npos);
    m = gpt2_gguf("gpt-2");
    m["tokenizer.ggml.model"] = std::string("llama");
    CHECK(message(m).find("tokenizer.ggml.scores is missing") != std::string::npos);
  }

  TEST_CASE(
      "SentencePiece: a model trained here gives libsentencepiece's ids, loaded directly and as a GGUF llama "
      "vocabulary") {
    // A corpus of made-up words from syllables, with digits, punctuation and
    // a few accented letters; the test lines add characters it never saw
    // (byte fallback) and runs of spaces.
    std::mt19937 rng(42);
    const std::vector<std::string> syllables = {"ka", "lo", "mi", "tra", "ne", "so", "qu", "ing", "ed", "the",
                                                "an", "re", "él", "ño",  "st", "er", "on", "a",   "is", "pro"};
    const auto word = [&] {
      std::string w;
      const int n = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int k = 0; k < n; ++k) w += syllables[std::uniform_int_distribution<size_t>(0, syllables.size() - 1)(rng)];
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) w[0] = static_cast<char>(std::toupper(w[0]));
      return w;
    };
    const auto sentence = [&] {
      std::string s;
      const int n = std::uniform_int_distribution<int>(3, 14)(rng);
      for (int k = 0; k < n; ++k) {
        if (k) s += ' ';
        s += word();
        if (std::uniform_int_distribution<int>(0, 7)(rng) == 0) s += ",";
        if (std::uniform_int_distribution<int>(0, 11)(rng) == 0) {
          s += ' ';  // not " " + …: GCC 12's -Wrestrict misfires on it (GCC bug 105329)
          s += std::to_string(rng() % 2000);
        }
      }
      return s + ".";
    };
    std::vector<std::string> corpus;
    for (int i = 0; i < 3000; ++i) corpus.push_back(sentence());

    struct Lines : sentencepiece::SentenceIterator {
      const std::vector<std::string>& lines;
      size_t at = 0;
      explicit Lines(const std::vector<std::string>& l) : lines(l) {}
      bool done() const override { return at >= lines.size(); }
      void Next() override { ++at; }
      const std::string& value() const override { return lines[at]; }
      sentencepiece::util::Status status() const override { return {}; }
    } lines(corpus);
    std::string proto;
    const auto status = sentencepiece::SentencePieceTrainer::Train({{"model_type", "bpe"},
                                                                    {"vocab_size", "600"},
                                                                    {"byte_fallback", "true"},
                                                                    {"character_coverage", "1.0"},
                                                                    {"normalization_rule_name", "identity"},
                                                                    {"remove_extra_whitespaces", "false"},
                                                                    {"user_defined_symbols", "<tool>,##"},
                                                                    {"minloglevel", "2"}},
                                                                   &lines, &proto);
    REQUIRE_MESSAGE(status.ok(), status.ToString());

    TempDir tmp;
    const std::string model_path = tmp.file("m.model");
    test::write_file(model_path, proto);
    sentencepiece::SentencePieceProcessor sp;
    REQUIRE(sp.LoadFromSerializedProto(proto).ok());
    const Tokenizer lathe_sp = Tokenizer::from_sentencepiece(model_path);
    CHECK(lathe_sp.vocab_size() == sp.GetPieceSize());
    CHECK(lathe_sp.bos() == sp.bos_id());
    CHECK(lathe_sp.eos() == sp.eos_id());

    // The same vocabulary as llama.cpp's converter writes it into a GGUF.
    std::vector<std::string> tokens;
    weights::GgufArray scores{weights::GgufType::F32, {}}, types{weights::GgufType::I32, {}};
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
      const std::string& piece = sp.IdToPiece(id);
      tokens.push_back(piece);
      scores.items.emplace_back(sp.GetScore(id));
      const int32_t type = sp.IsUnknown(id)                     ? 2
                           : sp.IsControl(id)                   ? 3
                           : piece == "<tool>" || piece == "##" ? 4
                           : sp.IsUnused(id)                    ? 5
                           : sp.IsByte(id)                      ? 6
                                                                : 1;
      types.items.emplace_back(type);
    }
    const Tokenizer gguf = load_gguf(tmp, {{"tokenizer.ggml.model", std::string("llama")},
                                           {"tokenizer.ggml.tokens", weights::GgufValue::strings(tokens)},
                                           {"tokenizer.ggml.scores", scores},
                                           {"tokenizer.ggml.token_type", types},
                                           {"tokenizer.ggml.bos_token_id", static_cast<uint32_t>(sp.bos_id())},
                                           {"tokenizer.ggml.eos_token_id", static_cast<uint32_t>(sp.eos_id())},
                                           {"tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(sp.unk_id())}});

    // lathe quantize's export of the model file (vocab_export.hpp) writes
    // this vocabulary, user-defined pieces included.
    test::write_file(tmp.file("tokenizer.model"), proto);
    const GgufVocabulary exported = gguf_vocabulary(tmp.dir.string(), sp.GetPieceSize());
    CHECK(exported.metadata.at("tokenizer.ggml.model") == weights::GgufValue(std::string("llama")));
    CHECK(exported.metadata.at("tokenizer.ggml.tokens") == weights::GgufValue::strings(tokens));
    CHECK(exported.metadata.at("tokenizer.ggml.scores") == weights::GgufValue(scores));
    CHECK(exported.metadata.at("tokenizer.ggml.token_type") == weights::GgufValue(types));
    CHECK(exported.metadata.at("tokenizer.ggml.bos_token_id") == weights::GgufValue(static_cast<uint32_t>(sp.bos_id())));
    CHECK(exported.metadata.at("tokenizer.ggml.eos_token_id") == weights::GgufValue(static_cast<uint32_t>(sp.eos_id())));
    CHECK(exported.metadata.at("tokenizer.ggml.unknown_token_id") ==
          weights::GgufValue(static_cast<uint32_t>(sp.unk_id())));

    std::vector<std::string> tests(corpus.begin(), corpus.begin() + 500);
    const std::vector<std::string> extra = {"",
                                            " ",
                                            "  leading and trailing  ",
                                            "tab\there",
                                            "数字 and 😀 emoji",
                                            "<tool> call ## here<tool>",
                                            "ÅÄÖ unseen",
                                            "a  b   c",
                                            "1234567890",
                                            "ünïcödé wörds",
                                            "\u00A0nbsp"};
    tests.insert(tests.end(), extra.begin(), extra.end());
    for (int i = 0; i < 300; ++i) {
      // Sentences with characters the model never saw, and odd spacing.
      std::string s = sentence();
      size_t at = std::uniform_int_distribution<size_t>(0, s.size())(rng);
      while (at < s.size() && (static_cast<uint8_t>(s[at]) & 0xC0) == 0x80) --at;  // not inside a character
      s.insert(at, random_text(rng, 3));
      tests.push_back(s);
    }
    int byte_fallbacks = 0;
    for (const std::string& line : tests) {
      CAPTURE(line);
      const std::vector<int> expected = sp.EncodeAsIds(line);
      const Ids want(expected.begin(), expected.end());
      for (const int id : expected) byte_fallbacks += sp.IsByte(id);
      REQUIRE(lathe_sp.encode(line, false) == want);
      REQUIRE(gguf.encode(line, false) == want);
      REQUIRE(gguf.decode(want) == sp.DecodeIds(expected));
      REQUIRE(lathe_sp.decode(want) == sp.DecodeIds(expected));
      REQUIRE(stream(gguf, want, true) == sp.DecodeIds(expected));
    }
    CHECK(byte_fallbacks > 0);
    // BOS first when asked for, in both.
    Ids with_bos = {sp.bos_id()};
    for (const int id : sp.EncodeAsIds("the kalo")) with_bos.push_back(id);
    CHECK(lathe_sp.encode("the kalo", true) == with_bos);
    CHECK(gguf.encode("the kalo", true) == with_bos);
    // Control pieces in text are matched when parsing specials.
    CHECK(gguf.encode("<s>", false) == Ids{sp.bos_id()});

    // Invalid UTF-8 never crashes either loader.
    for (int i = 0; i < 300; ++i) {
      const std::string s = random_bytes(rng, 8);
      CHECK_NOTHROW(lathe_sp.encode(s, true));
      const Ids ids = gguf.encode(s, false);
      // The GGUF path keeps every byte (byte fallback); the dummy prefix's
      // space is dropped again by decode.
      CHECK(gguf.decode(ids) == s);
    }

    CHECK(error_of([&] { Tokenizer::from_sentencepiece(tmp.file("absent.model")); }).kind() == ErrorKind::NotFound);
    test::write_file(tmp.file("junk.model"), "not a model");
    CHECK(error_of([&] { Tokenizer::from_sentencepiece(tmp.file("junk.model")); }).kind() == ErrorKind::BadFile);
  }

  TEST_CASE("a checkpoint's SentencePiece tokenizer as GGUF metadata: padding rows, added tokens, special ids") {
    TempDir tmp;
    const std::string demo = std::string(LATHE_SOURCE_DIR) + "/models/demo/tokenizer.model";
    test::write_file(tmp.file("tokenizer.model"), test::read_file(demo));
    // 3072 pieces in a model of 3080 rows; two added tokens, one of which
    // looks special to llama.cpp though not marked so; EOS moved by config.json.
    test::write_file(tmp.file("tokenizer_config.json"), R"({"add_bos_token": false, "chat_template": "{{ x }}",
      "added_tokens_decoder": {"3073": {"content": "<|im_start|>", "special": false},
                               "3074": {"content": "▁hello", "special": false},
                               "9999": {"content": "<beyond>", "special": true}}})");
    test::write_file(tmp.file("config.json"), R"({"eos_token_id": 5})");
    const GgufVocabulary v = gguf_vocabulary(tmp.dir.string(), 3080);
    CHECK(v.summary == "sentencepiece vocabulary of 3080 tokens, chat template");
    const auto& tokens = std::get<weights::GgufArray>(v.metadata.at("tokenizer.ggml.tokens").value).items;
    const auto& types = std::get<weights::GgufArray>(v.metadata.at("tokenizer.ggml.token_type").value).items;
    const auto& scores = std::get<weights::GgufArray>(v.metadata.at("tokenizer.ggml.scores").value).items;
    REQUIRE(tokens.size() == 3080);
    REQUIRE(types.size() == 3080);
    REQUIRE(scores.size() == 3080);
    const auto text = [&](size_t i) { return std::get<std::string>(tokens[i].value); };
    const auto type = [&](size_t i) { return std::get<int32_t>(types[i].value); };
    const auto score = [&](size_t i) { return std::get<float>(scores[i].value); };
    CHECK(text(0) == "<unk>");
    CHECK(type(0) == 2);
    CHECK(text(1) == "<s>");
    CHECK(type(1) == 3);
    CHECK(text(3) == "<0x00>");
    CHECK(type(3) == 6);
    CHECK(text(3072) == "[PAD3072]");
    CHECK(type(3072) == 5);
    CHECK(score(3072) == -10000.0f);
    CHECK(text(3073) == "<|im_start|>");
    CHECK(type(3073) == 3);
    CHECK(score(3073) == -1000.0f);
    CHECK(text(3074) == " hello");  // a user-defined token's ▁ is a space, as the converter writes it
    CHECK(type(3074) == 4);
    CHECK(text(3079) == "[PAD3079]");
    CHECK(v.metadata.at("tokenizer.ggml.bos_token_id") == weights::GgufValue(uint32_t{1}));
    CHECK(v.metadata.at("tokenizer.ggml.eos_token_id") == weights::GgufValue(uint32_t{5}));
    CHECK(v.metadata.at("tokenizer.ggml.unknown_token_id") == weights::GgufValue(uint32_t{0}));
    CHECK(v.metadata.at("tokenizer.ggml.add_bos_token") == weights::GgufValue(false));
    CHECK(v.metadata.at("tokenizer.ggml.add_space_prefix") == weights::GgufValue(true));
    CHECK(v.metadata.at("tokenizer.ggml.remove_extra_whitespaces") == weights::GgufValue(true));
    CHECK(v.metadata.at("tokenizer.chat_template") == weights::GgufValue(std::string("{{ x }}")));
    CHECK_FALSE(v.metadata.contains("tokenizer.ggml.add_eos_token"));

    // The file's vocabulary tokenizes as the model does, without the BOS it was told not to add.
    const Tokenizer from_file = load_gguf(tmp, v.metadata);
    const Tokenizer model = Tokenizer::from_sentencepiece(demo);
    for (const std::string line :
         {"In the beginning God created the heaven and the earth.", "Jesus wept.", "  x  y   z ", "\ta\n"}) {
      CAPTURE(line);
      CHECK(from_file.encode(line, true) == model.encode(line, false));
    }

    // Fewer rows than pieces: the rest are dropped, and the summary says so.
    test::write_file(tmp.file("tokenizer_config.json"), "{}");
    const GgufVocabulary small = gguf_vocabulary(tmp.dir.string(), 3000);
    CHECK(std::get<weights::GgufArray>(small.metadata.at("tokenizer.ggml.tokens").value).items.size() == 3000);
    CHECK(small.summary == "sentencepiece vocabulary of 3000 tokens (72 pieces beyond the embedding dropped)");
    CHECK(small.metadata.at("tokenizer.ggml.eos_token_id") == weights::GgufValue(uint32_t{5}));

    // No tokenizer.model: nothing, and why.
    std::filesystem::remove(tmp.file("tokenizer.model"));
    const GgufVocabulary none = gguf_vocabulary(tmp.dir.string(), 3000);
    CHECK(none.metadata.empty());
    CHECK(none.summary.find("has no tokenizer.model or tokenizer.json") != std::string::npos);
    test::write_file(tmp.file("tokenizer.json"), "{}");
    CHECK(gguf_vocabulary(tmp.dir.string(), 3000).summary.find("is not a byte-level BPE tokenizer") != std::string::npos);
    test::write_file(tmp.file("tokenizer.model"), "not a model");
    CHECK(error_of([&] { gguf_vocabulary(tmp.dir.string(), 3000); }).kind() == ErrorKind::BadFile);
  }

  TEST_CASE("a checkpoint's byte-level BPE tokenizer.json as GGUF metadata: the pre-tokenizer found by what it encodes") {
    TempDir tmp;
    std::mt19937 rng(9);
    const std::pair<Flavour, std::string> cases[] = {
        {Flavour::Gpt2, "gpt-2"}, {Flavour::Llama3, "llama-bpe"}, {Flavour::Qwen2, "qwen2"}};
    for (const auto& [flavour, pre] : cases) {
      CAPTURE(pre);
      const std::filesystem::path dir = tmp.dir / pre;
      std::filesystem::create_directories(dir);
      test::write_file((dir / "tokenizer.json").string(), byte_level_json(flavour, flavour == Flavour::Qwen2).dump());
      test::write_file((dir / "tokenizer_config.json").string(),
                       R"({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|endoftext|>"}})");
      const int64_t rows = static_cast<int64_t>(test_vocab().size()) + 2;  // two rows no token names
      const GgufVocabulary v = gguf_vocabulary(dir.string(), rows);
      CHECK(v.summary == "byte-level BPE vocabulary of 276 tokens, pre-tokenizer " + pre);
      // What the hand-written GGUF of this vocabulary holds, and two [PAD] rows.
      Metadata expected = gpt2_gguf(pre);
      std::vector<std::string> tokens = test_vocab();
      tokens.insert(tokens.end(), {"[PAD274]", "[PAD275]"});
      auto types = std::get<weights::GgufArray>(expected.at("tokenizer.ggml.token_type").value);
      types.items.emplace_back(int32_t{5});
      types.items.emplace_back(int32_t{5});
      CHECK(v.metadata.at("tokenizer.ggml.model") == expected.at("tokenizer.ggml.model"));
      CHECK(v.metadata.at("tokenizer.ggml.pre") == expected.at("tokenizer.ggml.pre"));
      CHECK(v.metadata.at("tokenizer.ggml.tokens") == weights::GgufValue::strings(tokens));
      CHECK(v.metadata.at("tokenizer.ggml.token_type") == weights::GgufValue(types));
      CHECK(v.metadata.at("tokenizer.ggml.merges") == expected.at("tokenizer.ggml.merges"));  // pairs too (Qwen2 here)
      CHECK(v.metadata.at("tokenizer.ggml.bos_token_id") == expected.at("tokenizer.ggml.bos_token_id"));
      CHECK(v.metadata.at("tokenizer.ggml.eos_token_id") == expected.at("tokenizer.ggml.eos_token_id"));
      // The file's tokenizer encodes as the tokenizer.json.
      const Tokenizer hf = load_json(tmp, byte_level_json(flavour), pre + ".json");
      const Tokenizer gguf = load_gguf(tmp, v.metadata, pre + ".gguf");
      for (int i = 0; i < 300; ++i) {
        const std::string s = random_text(rng, 30);
        REQUIRE_MESSAGE(gguf.encode(s, false) == hf.encode(s, false), "text: " << s);
      }
    }
    // Not byte-level BPE (nor WordPiece): nothing, and why.
    json unigram = byte_level_json(Flavour::Gpt2);
    unigram["model"]["type"] = "Unigram";
    test::write_file(tmp.file("tokenizer.json"), unigram.dump());
    const GgufVocabulary none = gguf_vocabulary(tmp.dir.string(), 274);
    CHECK(none.metadata.empty());
    CHECK(none.summary.find("is not a byte-level BPE tokenizer") != std::string::npos);
  }
}
