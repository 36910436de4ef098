// Tokenizer::from_gguf: the vocabulary llama.cpp's converters write into a
// GGUF file's metadata (tokenizer.ggml.*).
#include <algorithm>
#include <cstdio>
#include <variant>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/byte_level.hpp"
#include "runtime/text/tokenize/pipeline.hpp"
#include "runtime/text/tokenize/spm.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/text/tokenize/tokenizer_data.hpp"
#include "runtime/text/tokenize/wordpiece.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::text {

namespace {

using detail::Token;
using detail::TokenKind;
using weights::GgufArray;
using weights::GgufFile;
using weights::GgufValue;

class Reader {
 public:
  explicit Reader(const GgufFile& file) : file_(file) {}

  [[noreturn]] void bad(std::string_view key, std::string_view what) const {
    throw Error(ErrorKind::BadFile, file_.path() + ": " + std::string(key) + " " + std::string(what));
  }

  const GgufArray* array(std::string_view key) const {
    const auto it = file_.metadata().find(key);
    if (it == file_.metadata().end()) return nullptr;
    const auto* a = std::get_if<GgufArray>(&it->second.value);
    if (!a) bad(key, "must be an array");
    return a;
  }
  std::optional<std::vector<int64_t>> integers(std::string_view key) const {
    const GgufArray* a = array(key);
    if (!a) return std::nullopt;
    std::vector<int64_t> out;
    out.reserve(a->items.size());
    for (const GgufValue& v : a->items) {
      const std::optional<int64_t> i = std::visit(
          [](const auto& x) -> std::optional<int64_t> {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
              if constexpr (std::is_same_v<T, uint64_t>) {
                if (x > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
              }
              return static_cast<int64_t>(x);
            } else {
              return std::nullopt;
            }
          },
          v.value);
      if (!i) bad(key, "must be an array of integers");
      out.push_back(*i);
    }
    return out;
  }
  std::optional<std::vector<float>> floats(std::string_view key) const {
    const GgufArray* a = array(key);
    if (!a) return std::nullopt;
    std::vector<float> out;
    out.reserve(a->items.size());
    for (const GgufValue& v : a->items) {
      if (const auto* f = std::get_if<float>(&v.value)) {
        out.push_back(*f);
      } else if (const auto* d = std::get_if<double>(&v.value)) {
        out.push_back(static_cast<float>(*d));
      } else {
        bad(key, "must be an array of numbers");
      }
    }
    return out;
  }
  std::vector<std::string> strings(std::string_view key) const {
    if (!array(key)) bad(key, "is missing");
    auto s = file_.string_array(key);
    if (!s) bad(key, "must be an array of strings");
    return *s;
  }
  std::optional<bool> boolean(std::string_view key) const {
    const auto it = file_.metadata().find(key);
    if (it == file_.metadata().end()) return std::nullopt;
    const auto* b = std::get_if<bool>(&it->second.value);
    if (!b) bad(key, "must be a bool");
    return *b;
  }
  // A token id that must name one of the `n` tokens.
  std::optional<int32_t> id(std::string_view key, size_t n) const {
    if (!file_.metadata().contains(key)) return std::nullopt;
    const std::optional<int64_t> v = file_.integer(key);
    if (!v) bad(key, "must be an integer");
    if (*v < 0 || static_cast<uint64_t>(*v) >= n) {
      bad(key, std::to_string(*v) + " is not a token id (the vocabulary has " + std::to_string(n) + ")");
    }
    return static_cast<int32_t>(*v);
  }

 private:
  const GgufFile& file_;
};

// llama.cpp's token types, numbered as GGUF numbers them.
enum GgufTokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

TokenKind kind_of(int64_t type) {
  switch (type) {
    case kUnknown:
      return TokenKind::Unknown;
    case kControl:
      return TokenKind::Special;
    case kUserDefined:
      return TokenKind::Added;
    case kUnused:
      return TokenKind::Unused;
    case kByte:
      return TokenKind::Byte;
    default:
      return TokenKind::Normal;
  }
}

struct PreTokenization {
  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizer> steps;
  bool ignore_merges = false;
  bool add_bos = false;
};

// tokenizer.ggml.pre names the pre-tokenizer of the original tokenizer.json
// (the names and defaults are llama.cpp's).
std::optional<PreTokenization> pre_tokenization(const std::string& pre) {
  PreTokenization p;
  if (pre == "gpt-2" || pre == "default") {
    p.steps = {ByteLevelStep{false, true}};
  } else if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe") {
    static const auto regex = std::make_shared<const Regex>(kLlama3Pattern);
    p.steps = {SplitStep{regex, SplitBehavior::Isolated, false}, ByteLevelStep{false, false}};
    p.ignore_merges = true;
    p.add_bos = true;
  } else if (pre == "qwen2") {
    static const auto regex = std::make_shared<const Regex>(kQwen2Pattern);
    // Qwen2's tokenizer.json normalizes to NFC first; llama.cpp skips that.
    p.normalizers = {UnicodeNormalizer{UnicodeForm::NFC}};
    p.steps = {SplitStep{regex, SplitBehavior::Isolated, false}, ByteLevelStep{false, false}};
  } else if (pre == "smollm") {
    static const auto digit = std::make_shared<const Regex>(R"(\p{N})");
    p.steps = {SplitStep{digit, SplitBehavior::Isolated, false}, ByteLevelStep{false, true}};
  } else {
    return std::nullopt;
  }
  return p;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  const Reader r(file);
  const std::optional<std::string> model = file.string("tokenizer.ggml.model");
  if (!model) r.bad("tokenizer.ggml.model", "is missing (the file holds no vocabulary)");
  if (*model != "gpt2" && *model != "llama" && *model != "bert") {
    throw Error(ErrorKind::Unsupported, file.path() + ": tokenizer.ggml.model \"" + *model +
                                            "\" is not supported (only \"gpt2\", \"llama\" and \"bert\")");
  }
  const std::vector<std::string> texts = r.strings("tokenizer.ggml.tokens");
  const size_t n = texts.size();
  if (n == 0) r.bad("tokenizer.ggml.tokens", "is empty");
  if (n > static_cast<size_t>(INT32_MAX)) r.bad("tokenizer.ggml.tokens", "has too many tokens");
  std::vector<int64_t> types = r.integers("tokenizer.ggml.token_type").value_or(std::vector<int64_t>(n, kNormal));
  if (types.size() != n) {
    r.bad("tokenizer.ggml.token_type",
          "has " + std::to_string(types.size()) + " entries for " + std::to_string(n) + " tokens");
  }
  const std::optional<int32_t> bos = r.id("tokenizer.ggml.bos_token_id", n);
  const std::optional<int32_t> eos = r.id("tokenizer.ggml.eos_token_id", n);
  const std::optional<int32_t> unk = r.id("tokenizer.ggml.unknown_token_id", n);
  if (unk) types[*unk] = kUnknown;

  detail::TokenizerData data;
  data.bos = bos;
  data.eos = eos;
  data.pad = r.id("tokenizer.ggml.padding_token_id", n);
  data.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    data.tokens[i].text = texts[i];
    data.tokens[i].kind = kind_of(types[i]);
  }
  bool add_bos = false;

  if (*model == "gpt2") {
    const std::string pre = file.string("tokenizer.ggml.pre").value_or("default");
    std::optional<PreTokenization> p = pre_tokenization(pre);
    if (!p) {
      throw Error(ErrorKind::Unsupported,
                  file.path() + ": tokenizer.ggml.pre \"" + pre +
                      "\" is not supported (known: gpt-2, default, llama-bpe, llama3, llama-v3, qwen2, smollm)");
    }
    add_bos = p->add_bos;

    // Control and user-defined tokens are matched whole before the model;
    // the model's vocabulary is the rest.
    StringMap vocab;
    vocab.reserve(n);
    std::vector<detail::AddedToken> added;
    for (size_t i = 0; i < n; ++i) {
      const auto id = static_cast<int32_t>(i);
      if (types[i] == kControl || types[i] == kUserDefined) {
        if (!texts[i].empty()) added.push_back({texts[i], id, types[i] == kControl, false, false, false});
        continue;
      }
      vocab.insert_or_assign(texts[i], id);
    }
    for (unsigned b = 0; b < 256; ++b) {
      if (!vocab.contains(byte_level_char(static_cast<uint8_t>(b)))) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", b);
        r.bad("tokenizer.ggml.tokens",
              "lacks the byte-level token \"" + byte_level_char(static_cast<uint8_t>(b)) + "\" (byte " + hex + ")");
      }
    }
    const std::vector<std::string> merge_texts = r.strings("tokenizer.ggml.merges");
    std::vector<BpeMerge> merges;
    merges.reserve(merge_texts.size());
    for (size_t i = 0; i < merge_texts.size(); ++i) {
      const std::string& m = merge_texts[i];
      const std::string key = "tokenizer.ggml.merges[" + std::to_string(i) + "]";
      // The separator is the first space after the first character (byte-level
      // tokens never hold a space, but "▁"-less vocabularies may start with one).
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos) r.bad(key, "\"" + m + "\" is not two tokens separated by a space");
      const auto find = [&](const std::string& token) {
        const auto it = vocab.find(token);
        if (it == vocab.end()) r.bad(key, "\"" + token + "\" is not in tokenizer.ggml.tokens");
        return it->second;
      };
      const std::string left = m.substr(0, space), right = m.substr(space + 1);
      merges.push_back({find(left), find(right), find(left + right)});
    }
    for (Token& t : data.tokens) {
      t.bytes = t.kind == TokenKind::Normal || t.kind == TokenKind::Unused ? byte_level_decode(t.text) : t.text;
    }
    BpeOptions options;
    options.ignore_merges = p->ignore_merges;
    options.unk = unk;
    data.added = detail::AddedMatcher(std::move(added));
    data.encoder =
        std::make_unique<HfTextEncoder>(std::move(p->normalizers), std::move(p->steps),
                                        HfModel(std::in_place_type<BpeModel>, std::move(vocab), merges, options));
    data.description = "gguf gpt2 " + pre;
  } else if (*model == "bert") {
    // llama.cpp's WPM vocabulary (src/llama-vocab.cpp): its converter
    // rewrites WordPiece's "##ing" as "ing" and a word start "hello" as
    // "▁hello" (phantom space), control tokens as they are; the tokenizer
    // puts "▁" before each word and cuts it greedily into the longest
    // pieces. That is Hugging Face's WordPiece with a word prefix "▁" and
    // no continuing prefix, after BERT's normalizer (lowercase and
    // strip_accents as the file says) and pre-tokenizer. Words over 100
    // characters are one unknown token, as in Hugging Face (llama.cpp
    // cuts them). The ids llama.cpp assumes where the file names none are
    // bert-base's.
    const auto special = [&](std::string_view key, int32_t fallback) {
      if (const std::optional<int32_t> id = r.id(key, n)) return *id;
      if (static_cast<size_t>(fallback) >= n)
        r.bad(key, "is missing, and llama.cpp's default " + std::to_string(fallback) + " is not a token id");
      return fallback;
    };
    const int32_t cls = special("tokenizer.ggml.bos_token_id", 101);
    const int32_t sep = special("tokenizer.ggml.seperator_token_id", 102);  // llama.cpp's spelling
    const int32_t unknown = special("tokenizer.ggml.unknown_token_id", 100);
    data.pad = special("tokenizer.ggml.padding_token_id", 0);
    data.tokens[static_cast<size_t>(unknown)].kind = TokenKind::Unknown;
    StringMap vocab;
    vocab.reserve(n);
    std::vector<detail::AddedToken> added;
    for (size_t i = 0; i < n; ++i) {
      const auto id = static_cast<int32_t>(i);
      vocab.insert_or_assign(texts[i], id);
      if ((types[i] == kControl || types[i] == kUserDefined) && !texts[i].empty())
        added.push_back({texts[i], id, types[i] == kControl, false, false, false});
    }
    BertNormalizer normalizer;
    normalizer.lowercase = r.boolean("tokenizer.ggml.normalizer.lowercase").value_or(false);
    normalizer.strip_accents = r.boolean("tokenizer.ggml.normalizer.strip_accents").value_or(normalizer.lowercase);
    WordPieceOptions options;
    options.word_prefix = "\xE2\x96\x81";
    options.continuing_prefix = "";
    options.unk = unknown;
    detail::spell_spm_bytes(data.tokens, "\xE2\x96\x81");
    data.strip_leading_space = true;
    data.added = detail::AddedMatcher(std::move(added));
    data.encoder = std::make_unique<HfTextEncoder>(std::vector<Normalizer>{normalizer},
                                                   std::vector<PreTokenizer>{WhitespaceSplitStep{true}},
                                                   HfModel(WordPieceModel(std::move(vocab), options)));
    data.description = "gguf bert (wordpiece)";
    // llama.cpp's WPM adds [CLS] and [SEP] whatever add_bos_token and
    // add_eos_token say.
    data.prefix = {cls};
    data.suffix = {sep};
    return Tokenizer(std::make_shared<const detail::TokenizerData>(std::move(data)));
  } else {
    const std::optional<std::vector<float>> scores = r.floats("tokenizer.ggml.scores");
    if (!scores) r.bad("tokenizer.ggml.scores", "is missing");
    if (scores->size() != n) {
      r.bad("tokenizer.ggml.scores",
            "has " + std::to_string(scores->size()) + " entries for " + std::to_string(n) + " tokens");
    }
    std::vector<SpmPiece> pieces(n);
    std::vector<detail::AddedToken> added;
    for (size_t i = 0; i < n; ++i) {
      pieces[i].text = texts[i];
      pieces[i].score = (*scores)[i];
      const int64_t t = types[i];
      pieces[i].type = t >= kNormal && t <= kByte ? static_cast<PieceType>(t) : PieceType::Normal;
      if (t == kControl && !texts[i].empty())
        added.push_back({texts[i], static_cast<int32_t>(i), true, false, false, false});
    }
    SpmOptions options;
    options.add_dummy_prefix = r.boolean("tokenizer.ggml.add_space_prefix").value_or(true);
    options.remove_extra_whitespaces = r.boolean("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    try {
      data.encoder = std::make_unique<SpmEncoder>(SpmModel(pieces, options));
    } catch (const std::invalid_argument& e) {
      r.bad("tokenizer.ggml.tokens", e.what());
    }
    detail::spell_spm_bytes(data.tokens, "\xE2\x96\x81");
    data.added = detail::AddedMatcher(std::move(added));
    data.strip_leading_space = options.add_dummy_prefix;
    data.description = "gguf llama (sentencepiece bpe)";
    add_bos = true;
  }

  // An explicit add_bos_token / add_eos_token needs its token; the default
  // (BOS for llama and Llama 3 vocabularies) only applies where there is one.
  const std::optional<bool> explicit_bos = r.boolean("tokenizer.ggml.add_bos_token");
  const std::optional<bool> explicit_eos = r.boolean("tokenizer.ggml.add_eos_token");
  if (explicit_bos.value_or(false) && !bos)
    r.bad("tokenizer.ggml.add_bos_token", "is true but there is no tokenizer.ggml.bos_token_id");
  if (explicit_eos.value_or(false) && !eos)
    r.bad("tokenizer.ggml.add_eos_token", "is true but there is no tokenizer.ggml.eos_token_id");
  if (explicit_bos.value_or(add_bos) && bos) data.prefix = {*bos};
  if (explicit_eos.value_or(false) && eos) data.suffix = {*eos};
  return Tokenizer(std::make_shared<const detail::TokenizerData>(std::move(data)));
}

}  // namespace lathe::text
