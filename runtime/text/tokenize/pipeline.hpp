// Hugging Face's encoding pipeline for one piece of text free of added
// tokens: normalizers, then pre-tokenizers that cut it into words, then the
// model (BPE, WordPiece or Unigram) on each word. Only the components that
// LLM and encoder vocabularies use are here; hf.cpp refuses the others by
// name.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/text/tokenize/bpe.hpp"
#include "runtime/text/tokenize/precompiled.hpp"
#include "runtime/text/tokenize/regex.hpp"
#include "runtime/text/tokenize/tokenizer_data.hpp"
#include "runtime/text/tokenize/unigram.hpp"
#include "runtime/text/tokenize/wordpiece.hpp"

namespace lathe::text {

// The split patterns of the vocabularies lathe knows, as their
// tokenizer.json files (and llama.cpp's tokenizer.ggml.pre) spell them.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// --- normalizers ---------------------------------------------------------
enum class UnicodeForm { NFC, NFD, NFKC, NFKD };
struct UnicodeNormalizer {
  UnicodeForm form;
};
struct PrependNormalizer {
  std::string prefix;  // put in front of non-empty text
};
struct ReplaceNormalizer {
  std::shared_ptr<const Regex> pattern;
  std::string content;
};
struct LowercaseNormalizer {};
// BERT's, in this order: clean_text drops NUL, U+FFFD and control characters
// and makes every other whitespace a space; handle_chinese_chars puts spaces
// around CJK ideographs; strip_accents decomposes (NFD) and drops nonspacing
// marks; lowercase. (tokenizer.json's strip_accents null means "as
// lowercase"; the loader resolves it.)
struct BertNormalizer {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;
  bool lowercase = true;
};
struct PrecompiledNormalizer {
  std::shared_ptr<const PrecompiledCharsmap> charsmap;
};
// Whitespace (White_Space) off either end.
struct StripNormalizer {
  bool left = false, right = true;
};
using Normalizer = std::variant<UnicodeNormalizer, PrependNormalizer, ReplaceNormalizer, LowercaseNormalizer,
                                BertNormalizer, PrecompiledNormalizer, StripNormalizer>;

// Normalizes the valid UTF-8 runs of `text` (utf8proc); invalid bytes stay.
std::string normalize_unicode(std::string_view text, UnicodeForm form);
// Rust's char::to_lowercase, character by character: U+0130 (İ) becomes
// "i\u0307"; every other character its simple lowercase mapping.
std::string lowercase(std::string_view text);
std::string bert_normalize(std::string_view text, const BertNormalizer& options);

// --- pre-tokenizers ------------------------------------------------------
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
struct SplitStep {
  std::shared_ptr<const Regex> pattern;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;  // the pattern matches the words, not the delimiters
};
// GPT-2's: an optional space in front, the GPT-2 pattern split, then every
// byte spelled in the byte-level alphabet.
struct ByteLevelStep {
  bool add_prefix_space = false;
  bool use_regex = true;
};
enum class PrependScheme { Always, First, Never };
// SentencePiece-style: spaces become `replacement` ("▁"), one goes in front.
struct MetaspaceStep {
  std::string replacement = "\xE2\x96\x81";
  PrependScheme prepend = PrependScheme::Always;
  bool split = true;  // cut before every replacement
};
// WhitespaceSplit: words between runs of whitespace (White_Space). BERT's
// pre-tokenizer does that, then makes each punctuation character a word.
struct WhitespaceSplitStep {
  bool punctuation = false;
};
using PreTokenizer = std::variant<SplitStep, ByteLevelStep, MetaspaceStep, WhitespaceSplitStep>;

// `text` cut by the matches of `pattern` as Hugging Face's Split does.
std::vector<std::string> split_text(std::string_view text, const Regex& pattern, SplitBehavior behavior,
                                    bool invert = false);
const Regex& gpt2_regex();

using HfModel = std::variant<BpeModel, WordPieceModel, UnigramModel>;

class HfTextEncoder final : public detail::TextEncoder {
 public:
  HfTextEncoder(std::vector<Normalizer> normalizers, std::vector<PreTokenizer> pre_tokenizers, HfModel model)
      : normalizers_(std::move(normalizers)), pre_tokenizers_(std::move(pre_tokenizers)), model_(std::move(model)) {}

  void encode(std::string_view text, bool at_start, std::vector<int32_t>& out) const override;
  // The words the model sees (for tests and debugging).
  std::vector<std::string> pre_tokenize(std::string_view text, bool at_start) const;

 private:
  std::vector<Normalizer> normalizers_;
  std::vector<PreTokenizer> pre_tokenizers_;
  HfModel model_;
};

}  // namespace lathe::text
