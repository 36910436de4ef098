// Tokenizer::from_hf: Hugging Face tokenizer.json (+ tokenizer_config.json).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/byte_level.hpp"
#include "runtime/text/tokenize/json_file.hpp"
#include "runtime/text/tokenize/pipeline.hpp"
#include "runtime/text/tokenize/precompiled.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/text/tokenize/tokenizer_data.hpp"

namespace lathe::text {

namespace {

using detail::Token;
using detail::TokenKind;
using nlohmann::json;

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

// How decoding spells the model's tokens.
enum class Spelling { Raw, ByteLevel, Metaspace, WordPiece };

struct Decoding {
  Spelling spelling = Spelling::Raw;
  std::string replacement;  // Metaspace: the character that stands for a space
  bool strip_leading_space = false;
  std::string continuing_prefix;  // WordPiece: "##"
  bool cleanup = true;            // WordPiece: " ." → "." and the like
};

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// What the WordPiece decoder makes of a token that is not the first: a
// continuation piece loses its prefix, any other gets a space in front; then
// tokenizers' cleanup, in its order, on that token alone.
std::string wordpiece_spelling(const std::string& text, const Decoding& d) {
  std::string s = text.starts_with(d.continuing_prefix) ? text.substr(d.continuing_prefix.size()) : " " + text;
  if (!d.cleanup) return s;
  static constexpr std::pair<std::string_view, std::string_view> kCleanup[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kCleanup) s = replace_all(std::move(s), from, to);
  return s;
}

// Reads one tokenizer.json; every error names the file and the field.
class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void bad(std::string_view field, std::string_view what) const {
    throw Error(ErrorKind::BadFile, file_ + ": " + std::string(field) + " " + std::string(what));
  }
  [[noreturn]] void unsupported_type(std::string_view field, std::string_view type) const {
    throw Error(ErrorKind::Unsupported,
                file_ + ": " + std::string(field) + ".type " + quote(type) + " is not supported");
  }

  // A member that is absent or null is nullptr.
  static const json* member(const json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }
  const json& object(const json& j, std::string_view field) const {
    if (!j.is_object()) bad(field, "must be an object");
    return j;
  }
  const json& array(const json& j, std::string_view field) const {
    if (!j.is_array()) bad(field, "must be an array");
    return j;
  }
  std::string string(const json& j, std::string_view field) const {
    if (!j.is_string()) bad(field, "must be a string");
    return j.get<std::string>();
  }
  bool flag(const json& obj, const char* key, std::string_view field, bool fallback) const {
    const json* j = member(obj, key);
    if (!j) return fallback;
    if (!j->is_boolean()) bad(std::string(field) + "." + key, "must be true or false");
    return j->get<bool>();
  }
  int64_t integer(const json& j, std::string_view field) const {
    if (!j.is_number_integer()) bad(field, "must be an integer");
    return j.get<int64_t>();
  }
  std::string type_of(const json& j, std::string_view field) const {
    object(j, field);
    const json* t = member(j, "type");
    if (!t) bad(field, "has no type");
    return string(*t, std::string(field) + ".type");
  }
  // {"String": "…"} or {"Regex": "…"}.
  std::shared_ptr<const Regex> pattern(const json& j, std::string_view field) const {
    object(j, field);
    const json* s = member(j, "String");
    const json* r = member(j, "Regex");
    if (!s && !r) bad(field, "must hold \"String\" or \"Regex\"");
    const std::string name = std::string(field) + (s ? ".String" : ".Regex");
    const std::string text = string(s ? *s : *r, name);
    try {
      return std::make_shared<const Regex>(text, s != nullptr);
    } catch (const std::invalid_argument& e) {
      bad(name, e.what());
    }
  }

  void load(const json& root);
  detail::TokenizerData take() { return std::move(data_); }
  void apply_config(const std::filesystem::path& config_path);

 private:
  void read_model(const json& model);
  void read_bpe(const json& model);
  void read_wordpiece(const json& model);
  void read_unigram(const json& model);
  void read_vocab_object(const json& model);
  void read_added(const json& added);
  void read_normalizer(const json& j, std::string_view field);
  void read_pre_tokenizer(const json& j, std::string_view field);
  void read_post_processor(const json& j, std::string_view field);
  void read_decoder(const json& j, std::string_view field);
  // `required`: a token the file names must exist (else it may be one
  // transformers adds at load time, such as a new pad token).
  std::optional<int32_t> config_token(const json& config, const char* key, const std::string& config_file,
                                      bool required = true) const;

  std::string file_;
  detail::TokenizerData data_;
  std::string model_type_;
  StringMap vocab_;
  std::optional<int32_t> unk_;
  bool byte_fallback_ = false;
  std::vector<BpeMerge> merges_;
  BpeOptions options_;
  WordPieceOptions word_piece_;
  std::vector<UnigramPiece> pieces_;
  std::vector<detail::AddedToken> added_;
  std::vector<Normalizer> normalizers_;
  std::vector<PreTokenizer> pre_tokenizers_;
  Decoding decoding_;
  bool byte_level_ = false;
};

void Loader::read_model(const json& model) {
  object(model, "model");
  if (const json* t = member(model, "type")) {
    model_type_ = string(*t, "model.type");
  } else if (member(model, "merges")) {
    model_type_ = "BPE";
  } else {
    bad("model", "has neither a type nor merges");
  }
  if (model_type_ == "BPE") {
    read_bpe(model);
  } else if (model_type_ == "WordPiece") {
    read_wordpiece(model);
  } else if (model_type_ == "Unigram") {
    read_unigram(model);
  } else {
    throw Error(ErrorKind::Unsupported, file_ + ": model.type " + quote(model_type_) +
                                            " is not supported (only \"BPE\", \"WordPiece\" and \"Unigram\")");
  }
}

// model.vocab as {"token": id, …} (BPE, WordPiece).
void Loader::read_vocab_object(const json& model) {
  const json* vocab = member(model, "vocab");
  if (!vocab) bad("model.vocab", "is missing");
  object(*vocab, "model.vocab");
  vocab_.reserve(vocab->size());
  for (const auto& [text, value] : vocab->items()) {
    const std::string field = "model.vocab[" + quote(text) + "]";
    const int64_t id = integer(value, field);
    if (id < 0 || id > INT32_MAX) bad(field, "id " + std::to_string(id) + " is out of range");
    vocab_.emplace(text, static_cast<int32_t>(id));
  }
}

void Loader::read_bpe(const json& model) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* j = member(model, key); j && !(j->is_string() && j->get<std::string>().empty())) {
      throw Error(ErrorKind::Unsupported, file_ + ": model." + key + " " + j->dump() + " is not supported");
    }
  }
  // model.dropout is ignored: BPE-dropout only regularizes training.
  options_.fuse_unk = flag(model, "fuse_unk", "model", false);
  options_.byte_fallback = byte_fallback_ = flag(model, "byte_fallback", "model", false);
  options_.ignore_merges = flag(model, "ignore_merges", "model", false);
  read_vocab_object(model);
  const json* merges = member(model, "merges");
  if (!merges) bad("model.merges", "is missing");
  array(*merges, "model.merges");
  merges_.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    std::string left, right;
    if (m.is_string()) {
      // "a b": exactly one space (tokens with spaces need the [a, b] form).
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        bad(field, quote(s) + " is not two tokens separated by one space");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2) {
      left = string(m[0], field + "[0]");
      right = string(m[1], field + "[1]");
    } else {
      bad(field, "must be \"a b\" or [\"a\", \"b\"]");
    }
    const auto find = [&](const std::string& token) {
      const auto it = vocab_.find(token);
      if (it == vocab_.end()) bad(field, quote(token) + " is not in model.vocab");
      return it->second;
    };
    merges_.push_back({find(left), find(right), find(left + right)});
  }

  if (const json* unk = member(model, "unk_token")) {
    const std::string text = string(*unk, "model.unk_token");
    const auto it = vocab_.find(text);
    if (it == vocab_.end()) bad("model.unk_token", quote(text) + " is not in model.vocab");
    options_.unk = unk_ = it->second;
  }
}

void Loader::read_wordpiece(const json& model) {
  read_vocab_object(model);
  if (const json* p = member(model, "continuing_subword_prefix")) {
    word_piece_.continuing_prefix = string(*p, "model.continuing_subword_prefix");
  }
  if (const json* m = member(model, "max_input_chars_per_word")) {
    const int64_t n = integer(*m, "model.max_input_chars_per_word");
    if (n < 0) bad("model.max_input_chars_per_word", "is negative");
    word_piece_.max_chars = static_cast<size_t>(n);
  }
  // tokenizers fails only when a word needs the unk token; a vocabulary
  // without one is refused here instead, so that encoding never fails.
  const json* unk = member(model, "unk_token");
  const std::string text = unk ? string(*unk, "model.unk_token") : "[UNK]";
  const auto it = vocab_.find(text);
  if (it == vocab_.end()) bad("model.unk_token", quote(text) + " is not in model.vocab");
  word_piece_.unk = *(unk_ = it->second);
}

// model.vocab as [["piece", score], …]: ids are the indices.
void Loader::read_unigram(const json& model) {
  const json* vocab = member(model, "vocab");
  if (!vocab) bad("model.vocab", "is missing");
  array(*vocab, "model.vocab");
  if (vocab->empty()) bad("model.vocab", "is empty");
  if (vocab->size() > INT32_MAX) bad("model.vocab", "has too many pieces");
  pieces_.reserve(vocab->size());
  vocab_.reserve(vocab->size());
  for (size_t i = 0; i < vocab->size(); ++i) {
    const std::string field = "model.vocab[" + std::to_string(i) + "]";
    const json& entry = (*vocab)[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[1].is_number()) bad(field, "must be [piece, score]");
    UnigramPiece piece{string(entry[0], field + "[0]"), entry[1].get<double>()};
    vocab_.insert_or_assign(piece.text, static_cast<int32_t>(i));
    pieces_.push_back(std::move(piece));
  }
  if (const json* unk = member(model, "unk_id")) {
    const int64_t id = integer(*unk, "model.unk_id");
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) {
      bad("model.unk_id", std::to_string(id) + " is not an index of model.vocab");
    }
    unk_ = static_cast<int32_t>(id);
  }
  byte_fallback_ = flag(model, "byte_fallback", "model", false);
}

void Loader::read_added(const json& added) {
  array(added, "added_tokens");
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const json& a = object(added[i], field);
    const json* id = member(a, "id");
    const json* content = member(a, "content");
    if (!id) bad(field + ".id", "is missing");
    if (!content) bad(field + ".content", "is missing");
    detail::AddedToken t;
    const int64_t value = integer(*id, field + ".id");
    if (value < 0 || value > INT32_MAX) bad(field + ".id", std::to_string(value) + " is out of range");
    t.id = static_cast<int32_t>(value);
    t.content = string(*content, field + ".content");
    if (t.content.empty()) bad(field + ".content", "is empty");
    t.special = flag(a, "special", field, false);
    t.lstrip = flag(a, "lstrip", field, false);
    t.rstrip = flag(a, "rstrip", field, false);
    t.single_word = flag(a, "single_word", field, false);
    added_.push_back(std::move(t));
  }
}

void Loader::read_normalizer(const json& j, std::string_view field) {
  const std::string type = type_of(j, field);
  const std::string f(field);
  if (type == "Sequence") {
    const json* list = member(j, "normalizers");
    if (!list) bad(f + ".normalizers", "is missing");
    array(*list, f + ".normalizers");
    for (size_t i = 0; i < list->size(); ++i)
      read_normalizer((*list)[i], f + ".normalizers[" + std::to_string(i) + "]");
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    const UnicodeForm form = type == "NFC"    ? UnicodeForm::NFC
                             : type == "NFD"  ? UnicodeForm::NFD
                             : type == "NFKC" ? UnicodeForm::NFKC
                                              : UnicodeForm::NFKD;
    normalizers_.push_back(UnicodeNormalizer{form});
  } else if (type == "Prepend") {
    const json* p = member(j, "prepend");
    if (!p) bad(f + ".prepend", "is missing");
    normalizers_.push_back(PrependNormalizer{string(*p, f + ".prepend")});
  } else if (type == "Replace") {
    const json* p = member(j, "pattern");
    const json* c = member(j, "content");
    if (!p) bad(f + ".pattern", "is missing");
    if (!c) bad(f + ".content", "is missing");
    normalizers_.push_back(ReplaceNormalizer{pattern(*p, f + ".pattern"), string(*c, f + ".content")});
  } else if (type == "Lowercase") {
    normalizers_.push_back(LowercaseNormalizer{});
  } else if (type == "BertNormalizer") {
    BertNormalizer bert;
    bert.clean_text = flag(j, "clean_text", f, true);
    bert.handle_chinese_chars = flag(j, "handle_chinese_chars", f, true);
    bert.lowercase = flag(j, "lowercase", f, true);
    bert.strip_accents = flag(j, "strip_accents", f, bert.lowercase);  // null: as lowercase
    normalizers_.push_back(bert);
  } else if (type == "Precompiled") {
    const json* c = member(j, "precompiled_charsmap");
    if (!c) bad(f + ".precompiled_charsmap", "is missing");
    const std::optional<std::string> blob = base64_decode(string(*c, f + ".precompiled_charsmap"));
    if (!blob) bad(f + ".precompiled_charsmap", "is not base64");
    try {
      normalizers_.push_back(PrecompiledNormalizer{std::make_shared<const PrecompiledCharsmap>(*blob)});
    } catch (const std::invalid_argument& e) {
      bad(f + ".precompiled_charsmap", e.what());
    }
  } else if (type == "Strip") {
    normalizers_.push_back(StripNormalizer{flag(j, "strip_left", f, false), flag(j, "strip_right", f, false)});
  } else {
    unsupported_type(field, type);
  }
}

void Loader::read_pre_tokenizer(const json& j, std::string_view field) {
  const std::string type = type_of(j, field);
  const std::string f(field);
  if (type == "Sequence") {
    const json* list = member(j, "pretokenizers");
    if (!list) bad(f + ".pretokenizers", "is missing");
    array(*list, f + ".pretokenizers");
    for (size_t i = 0; i < list->size(); ++i) {
      read_pre_tokenizer((*list)[i], f + ".pretokenizers[" + std::to_string(i) + "]");
    }
  } else if (type == "ByteLevel") {
    pre_tokenizers_.push_back(ByteLevelStep{flag(j, "add_prefix_space", f, true), flag(j, "use_regex", f, true)});
    byte_level_ = true;
  } else if (type == "Split") {
    const json* p = member(j, "pattern");
    if (!p) bad(f + ".pattern", "is missing");
    SplitStep step;
    step.pattern = pattern(*p, f + ".pattern");
    const json* b = member(j, "behavior");
    if (!b) bad(f + ".behavior", "is missing");
    const std::string behavior = string(*b, f + ".behavior");
    if (behavior == "Removed") {
      step.behavior = SplitBehavior::Removed;
    } else if (behavior == "Isolated") {
      step.behavior = SplitBehavior::Isolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = SplitBehavior::MergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = SplitBehavior::MergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = SplitBehavior::Contiguous;
    } else {
      bad(f + ".behavior", quote(behavior) + " is not a split behavior");
    }
    step.invert = flag(j, "invert", f, false);
    pre_tokenizers_.push_back(std::move(step));
  } else if (type == "Digits") {
    // Hugging Face cuts at Unicode numerics: each alone, or runs of them.
    static const auto single = std::make_shared<const Regex>(R"(\p{N})");
    static const auto runs = std::make_shared<const Regex>(R"(\p{N}+)");
    pre_tokenizers_.push_back(
        SplitStep{flag(j, "individual_digits", f, false) ? single : runs, SplitBehavior::Isolated, false});
  } else if (type == "Metaspace") {
    MetaspaceStep step;
    if (const json* r = member(j, "replacement")) step.replacement = string(*r, f + ".replacement");
    if (step.replacement.empty()) bad(f + ".replacement", "is empty");
    if (const json* s = member(j, "prepend_scheme")) {
      const std::string scheme = string(*s, f + ".prepend_scheme");
      if (scheme == "always") {
        step.prepend = PrependScheme::Always;
      } else if (scheme == "first") {
        step.prepend = PrependScheme::First;
      } else if (scheme == "never") {
        step.prepend = PrependScheme::Never;
      } else {
        bad(f + ".prepend_scheme", quote(scheme) + " is not \"always\", \"first\" or \"never\"");
      }
    } else {
      step.prepend = flag(j, "add_prefix_space", f, true) ? PrependScheme::Always : PrependScheme::Never;
    }
    step.split = flag(j, "split", f, true);
    pre_tokenizers_.push_back(std::move(step));
  } else if (type == "WhitespaceSplit" || type == "BertPreTokenizer") {
    pre_tokenizers_.push_back(WhitespaceSplitStep{type == "BertPreTokenizer"});
  } else {
    unsupported_type(field, type);
  }
}

void Loader::read_post_processor(const json& j, std::string_view field) {
  const std::string type = type_of(j, field);
  const std::string f(field);
  if (type == "Sequence") {
    const json* list = member(j, "processors");
    if (!list) bad(f + ".processors", "is missing");
    array(*list, f + ".processors");
    for (size_t i = 0; i < list->size(); ++i)
      read_post_processor((*list)[i], f + ".processors[" + std::to_string(i) + "]");
  } else if (type == "ByteLevel") {
    // Offsets only.
  } else if (type == "TemplateProcessing") {
    const json* single = member(j, "single");
    if (!single) bad(f + ".single", "is missing");
    array(*single, f + ".single");
    const json* specials = member(j, "special_tokens");
    std::vector<int32_t> before, after;
    bool seen_sequence = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const std::string item_field = f + ".single[" + std::to_string(i) + "]";
      const json& item = object((*single)[i], item_field);
      if (const json* s = member(item, "Sequence")) {
        const json* id = member(*s, "id");
        if (!id || string(*id, item_field + ".Sequence.id") != "A") bad(item_field, "must be sequence \"A\"");
        if (seen_sequence) bad(item_field, "repeats the sequence");
        seen_sequence = true;
      } else if (const json* token = member(item, "SpecialToken")) {
        const json* id = member(*token, "id");
        if (!id) bad(item_field + ".SpecialToken.id", "is missing");
        const std::string name = string(*id, item_field + ".SpecialToken.id");
        const json* entry = specials ? member(*specials, name.c_str()) : nullptr;
        if (!entry) bad(f + ".special_tokens", "has no entry " + quote(name));
        const std::string entry_field = f + ".special_tokens[" + quote(name) + "]";
        const json* ids = member(*entry, "ids");
        if (!ids) bad(entry_field + ".ids", "is missing");
        array(*ids, entry_field + ".ids");
        for (size_t k = 0; k < ids->size(); ++k) {
          const int64_t v = integer((*ids)[k], entry_field + ".ids[" + std::to_string(k) + "]");
          if (v < 0 || v > INT32_MAX) bad(entry_field + ".ids[" + std::to_string(k) + "]", "is out of range");
          (seen_sequence ? after : before).push_back(static_cast<int32_t>(v));
        }
      } else {
        bad(item_field, "must be a Sequence or a SpecialToken");
      }
    }
    if (!seen_sequence) bad(f + ".single", "has no sequence \"A\"");
    // A later processor wraps the output of the earlier ones.
    data_.prefix.insert(data_.prefix.begin(), before.begin(), before.end());
    data_.suffix.insert(data_.suffix.end(), after.begin(), after.end());
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    const auto token = [&](const char* key) {
      const json* t = member(j, key);
      const std::string tf = f + "." + key;
      if (!t || !t->is_array() || t->size() != 2) bad(tf, "must be [token, id]");
      const int64_t v = integer((*t)[1], tf + "[1]");
      if (v < 0 || v > INT32_MAX) bad(tf + "[1]", "is out of range");
      return static_cast<int32_t>(v);
    };
    data_.prefix.insert(data_.prefix.begin(), token("cls"));
    data_.suffix.push_back(token("sep"));
  } else {
    unsupported_type(field, type);
  }
}

void Loader::read_decoder(const json& j, std::string_view field) {
  const std::string type = type_of(j, field);
  const std::string f(field);
  if (type == "Sequence") {
    const json* list = member(j, "decoders");
    if (!list) bad(f + ".decoders", "is missing");
    array(*list, f + ".decoders");
    for (size_t i = 0; i < list->size(); ++i) read_decoder((*list)[i], f + ".decoders[" + std::to_string(i) + "]");
  } else if (type == "ByteLevel") {
    decoding_.spelling = Spelling::ByteLevel;
  } else if (type == "Metaspace") {
    decoding_.spelling = Spelling::Metaspace;
    decoding_.replacement = "\xE2\x96\x81";
    if (const json* r = member(j, "replacement")) decoding_.replacement = string(*r, f + ".replacement");
    bool prepend = flag(j, "add_prefix_space", f, true);
    if (const json* s = member(j, "prepend_scheme")) prepend = string(*s, f + ".prepend_scheme") != "never";
    decoding_.strip_leading_space = prepend;
  } else if (type == "Replace") {
    // Llama 2's Replace("▁", " "): the only replacement decoding needs.
    const json* p = member(j, "pattern");
    const json* c = member(j, "content");
    if (!p || !c) bad(f, "needs a pattern and a content");
    const json* s = member(object(*p, f + ".pattern"), "String");
    if (!s || string(*c, f + ".content") != " ") {
      throw Error(ErrorKind::Unsupported, file_ + ": " + f + " is not supported (only Replace of a String by \" \")");
    }
    decoding_.spelling = Spelling::Metaspace;
    decoding_.replacement = string(*s, f + ".pattern.String");
  } else if (type == "WordPiece") {
    decoding_.spelling = Spelling::WordPiece;
    decoding_.continuing_prefix = "##";
    if (const json* p = member(j, "prefix")) decoding_.continuing_prefix = string(*p, f + ".prefix");
    decoding_.cleanup = flag(j, "cleanup", f, true);
    decoding_.strip_leading_space = true;
  } else if (type == "ByteFallback" || type == "Fuse") {
    // <0xXX> tokens always decode to their byte; joining is what decode does.
  } else if (type == "Strip") {
    const json* c = member(j, "content");
    const int64_t start = member(j, "start") ? integer(*member(j, "start"), f + ".start") : 0;
    const int64_t stop = member(j, "stop") ? integer(*member(j, "stop"), f + ".stop") : 0;
    if (!c || string(*c, f + ".content") != " " || start > 1 || start < 0 || stop != 0) {
      throw Error(ErrorKind::Unsupported, file_ + ": " + f + " is not supported (only Strip of one leading \" \")");
    }
    decoding_.strip_leading_space = start == 1;
  } else {
    unsupported_type(field, type);
  }
}

void Loader::load(const json& root) {
  object(root, "the top level");
  const json* model = member(root, "model");
  if (!model) bad("model", "is missing");
  if (const json* added = member(root, "added_tokens")) read_added(*added);
  read_model(*model);
  if (const json* n = member(root, "normalizer")) read_normalizer(*n, "normalizer");
  if (const json* p = member(root, "pre_tokenizer")) read_pre_tokenizer(*p, "pre_tokenizer");
  if (const json* p = member(root, "post_processor")) read_post_processor(*p, "post_processor");
  if (const json* d = member(root, "decoder")) read_decoder(*d, "decoder");
  if (const json* p = member(root, "padding")) {
    if (const json* id = member(object(*p, "padding"), "pad_id")) {
      const int64_t v = integer(*id, "padding.pad_id");
      if (v < 0 || v > INT32_MAX) bad("padding.pad_id", std::to_string(v) + " is out of range");
      data_.pad = static_cast<int32_t>(v);
    }
  }

  // The id space: the model's vocabulary and the added tokens. Ids far past
  // the number of tokens are refused rather than allocated.
  int64_t max_id = -1;
  for (const auto& [text, id] : vocab_) max_id = std::max<int64_t>(max_id, id);
  for (const auto& a : added_) max_id = std::max<int64_t>(max_id, a.id);
  const size_t count = vocab_.size() + added_.size();
  if (max_id >= static_cast<int64_t>(2 * count + 1024)) {
    bad("model.vocab", "has id " + std::to_string(max_id) + ", far beyond its " + std::to_string(count) + " tokens");
  }
  data_.tokens.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [text, id] : vocab_) {
    Token& t = data_.tokens[id];
    if (t.kind != TokenKind::Unused) bad("model.vocab", "gives id " + std::to_string(id) + " to two tokens");
    t.text = text;
    t.kind = TokenKind::Normal;
    if (byte_fallback_ && text.size() == 6 && text.starts_with("<0x") && text.back() == '>') {
      t.kind = TokenKind::Byte;
    }
  }
  // A Unigram piece spelled twice: the map holds its last id, the id space
  // both.
  for (size_t id = 0; id < pieces_.size(); ++id) {
    Token& t = data_.tokens[id];
    if (t.kind != TokenKind::Unused) continue;
    t.text = pieces_[id].text;
    t.kind = TokenKind::Normal;
  }
  if (unk_) data_.tokens[*unk_].kind = TokenKind::Unknown;
  switch (decoding_.spelling) {
    case Spelling::ByteLevel:
      for (Token& t : data_.tokens) t.bytes = byte_level_decode(t.text);
      break;
    case Spelling::Metaspace:
      detail::spell_spm_bytes(data_.tokens, decoding_.replacement);
      break;
    case Spelling::Raw:
    case Spelling::WordPiece:
      detail::spell_spm_bytes(data_.tokens, "");
      break;
  }
  // Hugging Face passes added tokens through the decoder like any other:
  // Gemma 3's non-special "▁▁▁▁" decodes as four spaces (Replace "▁" → " ").
  // Special tokens keep their text (no decoder changes "<bos>"); so do a
  // byte-level vocabulary's added tokens, whose text ("<|im_start|>", "\n\n")
  // the ByteLevel decoder leaves as it is.
  for (const auto& a : added_) {
    Token& t = data_.tokens[a.id];
    t.text = a.content;
    t.kind = a.special ? TokenKind::Special : TokenKind::Added;
    t.bytes = a.content;
    if (!a.special && decoding_.spelling == Spelling::Metaspace) {
      std::vector<Token> spelled = {t};
      spelled[0].kind = TokenKind::Normal;
      detail::spell_spm_bytes(spelled, decoding_.replacement);
      t.bytes = spelled[0].bytes;
    }
  }
  // The WordPiece decoder spells every token, special ones too ("[CLS] a
  // [SEP]"), except the first, which it leaves as it is: the space in front
  // is dropped there, and a continuation piece keeps its prefix.
  if (decoding_.spelling == Spelling::WordPiece) {
    for (Token& t : data_.tokens) {
      if (t.kind != TokenKind::Byte && t.kind != TokenKind::Unused) t.bytes = wordpiece_spelling(t.text, decoding_);
    }
    data_.continuing_prefix = decoding_.continuing_prefix;
  }
  for (const int32_t id : data_.prefix) {
    if (static_cast<size_t>(id) >= data_.tokens.size())
      bad("post_processor", "adds id " + std::to_string(id) + ", which no token has");
  }
  for (const int32_t id : data_.suffix) {
    if (static_cast<size_t>(id) >= data_.tokens.size())
      bad("post_processor", "adds id " + std::to_string(id) + ", which no token has");
  }
  if (data_.pad && static_cast<size_t>(*data_.pad) >= data_.tokens.size()) {
    bad("padding.pad_id", std::to_string(*data_.pad) + " is not the id of a token");
  }
  data_.strip_leading_space = decoding_.strip_leading_space;

  if (byte_level_ && !options_.byte_fallback) {
    for (unsigned b = 0; b < 256; ++b) {
      if (!vocab_.contains(byte_level_char(static_cast<uint8_t>(b)))) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", b);
        bad("model.vocab", "lacks the byte-level token " + quote(byte_level_char(static_cast<uint8_t>(b))) + " (byte " +
                               hex + ") that the ByteLevel pre_tokenizer needs");
      }
    }
  }
  data_.description = "tokenizer.json " + model_type_ + (byte_level_ ? " (byte-level)" : "") +
                      (decoding_.spelling == Spelling::Metaspace ? " (sentencepiece-style)" : "");
  data_.added = detail::AddedMatcher(added_);
  HfModel words = model_type_ == "WordPiece" ? HfModel(WordPieceModel(std::move(vocab_), word_piece_))
                  : model_type_ == "Unigram" ? HfModel(UnigramModel(std::move(pieces_), unk_, byte_fallback_))
                                             : HfModel(BpeModel(std::move(vocab_), merges_, options_));
  data_.encoder =
      std::make_unique<HfTextEncoder>(std::move(normalizers_), std::move(pre_tokenizers_), std::move(words));
}

std::optional<int32_t> Loader::config_token(const json& config, const char* key, const std::string& config_file,
                                            bool required) const {
  const json* j = member(config, key);
  if (!j) return std::nullopt;
  std::string text;
  if (j->is_string()) {
    text = j->get<std::string>();
  } else if (const json* c = member(*j, "content"); c && c->is_string()) {
    text = c->get<std::string>();
  } else {
    throw Error(ErrorKind::BadFile, config_file + ": " + key + " must be a string or {\"content\": …}");
  }
  for (size_t id = 0; id < data_.tokens.size(); ++id) {
    if (data_.tokens[id].kind != TokenKind::Unused && data_.tokens[id].text == text) return static_cast<int32_t>(id);
  }
  if (!required) return std::nullopt;
  throw Error(ErrorKind::BadFile, config_file + ": " + key + " " + quote(text) + " is not a token of " + file_);
}

void Loader::apply_config(const std::filesystem::path& config_path) {
  std::optional<int32_t> bos, eos;
  std::optional<bool> add_bos, add_eos;
  if (std::filesystem::exists(config_path)) {
    const std::string cf = config_path.string();
    const json config = detail::parse_json_file(config_path);
    if (!config.is_object()) throw Error(ErrorKind::BadFile, cf + ": must be a JSON object");
    bos = config_token(config, "bos_token", cf);
    if (const std::optional<int32_t> pad = config_token(config, "pad_token", cf, false)) data_.pad = pad;
    eos = config_token(config, "eos_token", cf);
    for (auto [key, out] : {std::pair{"add_bos_token", &add_bos}, std::pair{"add_eos_token", &add_eos}}) {
      if (const json* j = member(config, key)) {
        if (!j->is_boolean()) throw Error(ErrorKind::BadFile, cf + ": " + key + " must be true or false");
        *out = j->get<bool>();
      }
    }
    if (add_bos.value_or(false) && !bos)
      throw Error(ErrorKind::BadFile, cf + ": add_bos_token is true but bos_token is not set");
    if (add_eos.value_or(false) && !eos)
      throw Error(ErrorKind::BadFile, cf + ": add_eos_token is true but eos_token is not set");
  }
  // Without a config, BOS/EOS are what the post-processor adds.
  if (!bos && !data_.prefix.empty()) bos = data_.prefix.front();
  if (!eos && !data_.suffix.empty()) eos = data_.suffix.back();
  data_.bos = bos;
  data_.eos = eos;
  // An explicit add_bos_token / add_eos_token rewrites the post-processor's
  // choice, as transformers' LlamaTokenizerFast does.
  const auto set = [](std::vector<int32_t>& ids, int32_t id, bool wanted, bool front) {
    std::erase(ids, id);
    if (wanted) ids.insert(front ? ids.begin() : ids.end(), id);
  };
  if (add_bos && bos) set(data_.prefix, *bos, *add_bos, true);
  if (add_eos && eos) set(data_.suffix, *eos, *add_eos, false);
}

}  // namespace

Tokenizer Tokenizer::from_hf(const std::string& path) {
  std::filesystem::path file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) file /= "tokenizer.json";
  if (!std::filesystem::exists(file, ec)) throw Error(ErrorKind::NotFound, file.string() + ": no such file");
  const json root = detail::parse_json_file(file);
  Loader loader(file.string());
  loader.load(root);
  loader.apply_config(file.parent_path() / "tokenizer_config.json");
  return Tokenizer(std::make_shared<const detail::TokenizerData>(loader.take()));
}

}  // namespace lathe::text
