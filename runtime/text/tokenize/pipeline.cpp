#include "runtime/text/tokenize/pipeline.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/text/tokenize/byte_level.hpp"
#include "runtime/text/tokenize/char_class.hpp"
#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

namespace {

// Applies `f` to each maximal valid UTF-8 run of `text`, keeping invalid
// bytes as they are between the runs.
template <typename F>
std::string map_valid_runs(std::string_view text, F&& f) {
  std::string out;
  out.reserve(text.size());
  size_t run = 0, i = 0;
  while (i < text.size()) {
    const size_t n = utf8_sequence_length(text, i);
    if (n != 0) {
      i += n;
      continue;
    }
    if (i > run) out += f(text.substr(run, i - run));
    out += text[i++];
    run = i;
  }
  if (i > run) out += f(text.substr(run, i - run));
  return out;
}

std::string utf8proc_run(std::string_view valid, utf8proc_option_t options) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                                          static_cast<utf8proc_ssize_t>(valid.size()), &result, options);
  if (n < 0) return std::string(valid);  // cannot happen on valid UTF-8; keep the text rather than lose it
  std::string out(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
  return out;
}

}  // namespace

std::string normalize_unicode(std::string_view text, UnicodeForm form) {
  // UTF8PROC_STABLE: Unicode's stable normalization; COMPAT for the K forms.
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::NFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case UnicodeForm::NFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case UnicodeForm::NFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case UnicodeForm::NFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  return map_valid_runs(
      text, [&](std::string_view run) { return utf8proc_run(run, static_cast<utf8proc_option_t>(options)); });
}

std::string lowercase(std::string_view text) {
  return map_valid_runs(text, [](std::string_view run) {
    std::string out;
    out.reserve(run.size());
    for (size_t i = 0; i < run.size();) {
      const size_t n = utf8_sequence_length(run, i);
      const char32_t c = utf8_decode(run, i, n);
      i += n;
      // The one character whose lowercase is two (SpecialCasing.txt).
      if (c == 0x130) {
        out += "i\xCC\x87";
        continue;
      }
      utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    return out;
  });
}

std::string bert_normalize(std::string_view text, const BertNormalizer& options) {
  std::string out = map_valid_runs(text, [&](std::string_view run) {
    std::string cleaned;
    cleaned.reserve(run.size());
    for (size_t i = 0; i < run.size();) {
      const size_t n = utf8_sequence_length(run, i);
      char32_t c = utf8_decode(run, i, n);
      i += n;
      if (options.clean_text) {
        if (c == 0 || c == 0xFFFD || is_bert_control(c)) continue;
        if (is_white_space(c)) c = ' ';
      }
      const bool spaced = options.handle_chinese_chars && is_cjk_ideograph(c);
      if (spaced) cleaned += ' ';
      utf8_append(cleaned, c);
      if (spaced) cleaned += ' ';
    }
    return cleaned;
  });
  if (options.strip_accents) {
    out = map_valid_runs(normalize_unicode(out, UnicodeForm::NFD), [](std::string_view run) {
      std::string kept;
      kept.reserve(run.size());
      for (size_t i = 0; i < run.size();) {
        const size_t n = utf8_sequence_length(run, i);
        if (!is_nonspacing_mark(utf8_decode(run, i, n))) kept.append(run.substr(i, n));
        i += n;
      }
      return kept;
    });
  }
  return options.lowercase ? lowercase(out) : out;
}

const Regex& gpt2_regex() {
  static const Regex regex(kGpt2Pattern);
  return regex;
}

std::vector<std::string> split_text(std::string_view text, const Regex& pattern, SplitBehavior behavior, bool invert) {
  // The text as alternating gaps and matches, each with its kind.
  struct Span {
    size_t begin, end;
    bool delimiter;
  };
  std::vector<Span> spans;
  size_t at = 0;
  for (const auto& [b, e] : pattern.matches(text)) {
    if (b > at) spans.push_back({at, b, invert});
    spans.push_back({b, e, !invert});
    at = e;
  }
  if (at < text.size()) spans.push_back({at, text.size(), invert});

  std::vector<Span> pieces;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Span& s : spans) {
        if (!s.delimiter) pieces.push_back(s);
      }
      break;
    case SplitBehavior::Isolated:
      pieces = spans;
      break;
    case SplitBehavior::Contiguous:
      for (const Span& s : spans) {
        if (s.delimiter && !pieces.empty() && pieces.back().delimiter) {
          pieces.back().end = s.end;
        } else {
          pieces.push_back(s);
        }
      }
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool previous_delimiter = false;
      for (const Span& s : spans) {
        if (s.delimiter && !previous_delimiter && !pieces.empty()) {
          pieces.back().end = s.end;
        } else {
          pieces.push_back({s.begin, s.end, false});
        }
        previous_delimiter = s.delimiter;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      // Mirror image of MergedWithPrevious, walking from the end.
      bool next_delimiter = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->delimiter && !next_delimiter && !pieces.empty()) {
          pieces.back().begin = it->begin;
        } else {
          pieces.push_back({it->begin, it->end, false});
        }
        next_delimiter = it->delimiter;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const Span& s : pieces) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

namespace {

// [begin, end) of `text` without the whitespace at the ends asked for.
std::pair<size_t, size_t> white_space_trim(std::string_view text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      const size_t n = utf8_sequence_length(text, begin);
      if (n == 0 || !is_white_space(utf8_decode(text, begin, n))) break;
      begin += n;
    }
  }
  if (right) {
    // White_Space characters are one to three bytes long.
    while (end > begin) {
      size_t n = 1;
      while (n < 3 && end - n > begin && (static_cast<uint8_t>(text[end - n]) & 0xC0) == 0x80) ++n;
      if (utf8_sequence_length(text, end - n) != n || !is_white_space(utf8_decode(text, end - n, n))) break;
      end -= n;
    }
  }
  return {begin, end};
}

// Words between whitespace; with `punctuation`, each punctuation character
// a word of its own too (BertPreTokenizer).
void split_words(std::string_view text, bool punctuation, std::vector<std::string>& out) {
  size_t word = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    const char32_t c = n == 0 ? 0 : utf8_decode(text, i, n);
    const bool space = n != 0 && is_white_space(c);
    const bool isolated = n != 0 && punctuation && is_bert_punctuation(c);
    if (space || isolated) {
      if (i > word) out.emplace_back(text.substr(word, i - word));
      if (isolated) out.emplace_back(text.substr(i, n));
      word = i + n;
    }
    i += n == 0 ? 1 : n;
  }
  if (text.size() > word) out.emplace_back(text.substr(word));
}

std::string apply(const Normalizer& n, std::string text) {
  if (const auto* u = std::get_if<UnicodeNormalizer>(&n)) return normalize_unicode(text, u->form);
  if (const auto* p = std::get_if<PrependNormalizer>(&n)) return text.empty() ? text : p->prefix + text;
  if (const auto* r = std::get_if<ReplaceNormalizer>(&n)) {
    std::string out;
    size_t at = 0;
    for (const auto& [b, e] : r->pattern->matches(text)) {
      out.append(text, at, b - at);
      out += r->content;
      at = e;
    }
    out.append(text, at);
    return out;
  }
  if (const auto* b = std::get_if<BertNormalizer>(&n)) return bert_normalize(text, *b);
  if (const auto* p = std::get_if<PrecompiledNormalizer>(&n)) return p->charsmap->normalize(text);
  if (const auto* s = std::get_if<StripNormalizer>(&n)) {
    const auto [begin, end] = white_space_trim(text, s->left, s->right);
    return text.substr(begin, end - begin);
  }
  return lowercase(text);
}

std::string replace_spaces(std::string_view text, std::string_view replacement) {
  std::string out;
  out.reserve(text.size() + 8);
  for (const char c : text) {
    if (c == ' ') {
      out += replacement;
    } else {
      out += c;
    }
  }
  return out;
}

void apply(const PreTokenizer& step, std::vector<std::string>& words, bool at_start) {
  std::vector<std::string> next;
  next.reserve(words.size());
  if (const auto* s = std::get_if<SplitStep>(&step)) {
    for (const std::string& w : words) {
      for (std::string& piece : split_text(w, *s->pattern, s->behavior, s->invert)) next.push_back(std::move(piece));
    }
  } else if (const auto* b = std::get_if<ByteLevelStep>(&step)) {
    for (std::string& w : words) {
      if (b->add_prefix_space && (w.empty() || w[0] != ' ')) w.insert(0, 1, ' ');
      if (b->use_regex) {
        for (const std::string& piece : split_text(w, gpt2_regex(), SplitBehavior::Isolated)) {
          next.push_back(byte_level_encode(piece));
        }
      } else {
        next.push_back(byte_level_encode(w));
      }
    }
  } else if (const auto* ws = std::get_if<WhitespaceSplitStep>(&step)) {
    for (const std::string& word : words) split_words(word, ws->punctuation, next);
  } else {
    const auto& m = std::get<MetaspaceStep>(step);
    for (size_t i = 0; i < words.size(); ++i) {
      std::string w = replace_spaces(words[i], m.replacement);
      const bool prepend =
          m.prepend == PrependScheme::Always || (m.prepend == PrependScheme::First && at_start && i == 0);
      if (prepend && !w.starts_with(m.replacement)) w.insert(0, m.replacement);
      if (!m.split) {
        next.push_back(std::move(w));
        continue;
      }
      // Cut before each replacement (MergedWithNext on the replacement).
      size_t begin = 0;
      for (size_t at = w.find(m.replacement, 1); at != std::string::npos; at = w.find(m.replacement, at + 1)) {
        if (at > begin) next.push_back(w.substr(begin, at - begin));
        begin = at;
      }
      if (begin < w.size()) next.push_back(w.substr(begin));
    }
  }
  words = std::move(next);
}

}  // namespace

std::vector<std::string> HfTextEncoder::pre_tokenize(std::string_view text, bool at_start) const {
  std::string normalized(text);
  for (const Normalizer& n : normalizers_) normalized = apply(n, std::move(normalized));
  std::vector<std::string> words;
  if (!normalized.empty()) words.push_back(std::move(normalized));
  for (const PreTokenizer& p : pre_tokenizers_) apply(p, words, at_start);
  return words;
}

void HfTextEncoder::encode(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  const std::vector<std::string> words = pre_tokenize(text, at_start);
  std::visit(
      [&](const auto& model) {
        for (const std::string& word : words) model.encode_word(word, out);
      },
      model_);
}

}  // namespace lathe::text
