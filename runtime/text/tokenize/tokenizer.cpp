#include "runtime/text/tokenize/tokenizer.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/tokenizer_data.hpp"
#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

namespace detail {

AddedMatcher::AddedMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
// Approximates Hugging Face's word characters: ASCII alphanumerics, '_' and
// every non-ASCII byte (letters of other scripts).
bool is_word_byte(char c) {
  const auto b = static_cast<unsigned char>(c);
  return b >= 0x80 || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_';
}

}  // namespace

std::vector<Fragment> AddedMatcher::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  size_t text_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const uint32_t k : by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const AddedToken& t = tokens_[k];
      if (t.special && !parse_special) continue;
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      if (t.single_word) {
        const size_t end = i + t.content.size();
        if ((i > 0 && is_word_byte(text[i - 1])) || (end < text.size() && is_word_byte(text[end]))) continue;
      }
      hit = &t;
      break;
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t text_end = i;
    if (hit->lstrip) {
      while (text_end > text_start && is_space(text[text_end - 1])) --text_end;
    }
    if (text_end > text_start) out.push_back({text.substr(text_start, text_end - text_start), -1, text_start == 0});
    out.push_back({text.substr(i, hit->content.size()), hit->id, i == 0});
    i += hit->content.size();
    if (hit->rstrip) {
      while (i < text.size() && is_space(text[i])) ++i;
    }
    text_start = i;
  }
  if (text_start < text.size()) out.push_back({text.substr(text_start), -1, text_start == 0});
  return out;
}

void spell_spm_bytes(std::vector<Token>& tokens, std::string_view replacement) {
  for (Token& t : tokens) {
    switch (t.kind) {
      case TokenKind::Byte: {
        unsigned value = 0;
        char tail = 0;
        if (t.text.size() == 6 && std::sscanf(t.text.c_str(), "<0x%2X%c", &value, &tail) == 2 && tail == '>') {
          t.bytes.assign(1, static_cast<char>(value));
        } else {
          t.bytes = t.text;
        }
        break;
      }
      case TokenKind::Special:
      case TokenKind::Unknown:
        t.bytes = t.text;
        break;
      default: {
        t.bytes.clear();
        std::string_view s = t.text;
        for (size_t at; !replacement.empty() && (at = s.find(replacement)) != std::string_view::npos;) {
          t.bytes.append(s.substr(0, at));
          t.bytes += ' ';
          s.remove_prefix(at + replacement.size());
        }
        t.bytes.append(s);
      }
    }
  }
}

namespace {

// A model may have more token rows than its tokenizer has tokens (a
// vocabulary padded for the matmuls: Qwen2's 151,936 rows for 151,665
// tokens); such an id, which a model can sample, is a token of no text, as
// Hugging Face's tokenizers decode it. Negative ids are errors.
bool absent(const TokenizerData& d, int32_t id) { return id >= 0 && static_cast<size_t>(id) >= d.tokens.size(); }

const Token& token_at(const TokenizerData& d, int32_t id) {
  static const Token kAbsent{};
  if (id < 0) throw Error(ErrorKind::InvalidArgument, "token id " + std::to_string(id) + " is negative");
  if (absent(d, id)) return kAbsent;
  return d.tokens[id];
}

// Appends what `id` decodes to. at_start: no token was written yet. The
// leading space a SentencePiece-style vocabulary drops is that of the whole
// text, as Hugging Face's decoders see it (Metaspace strips it from the
// first token decoded, Strip from the fused string): after a special token
// written out ("<s>▁Hello" → "<s> Hello") it stays; a skipped one does not
// count.
void append_token(const TokenizerData& d, int32_t id, bool skip_special, bool& at_start, std::string& out) {
  if (absent(d, id)) return;  // no text, and the start of the text is still ahead
  const Token& t = token_at(d, id);
  if (t.kind == TokenKind::Special && skip_special) return;
  std::string_view bytes = t.bytes;
  const bool spelled = t.kind != TokenKind::Byte && t.kind != TokenKind::Unused;
  if (at_start && spelled && !d.continuing_prefix.empty() && t.text.starts_with(d.continuing_prefix)) {
    bytes = t.text;
  } else if (at_start && d.strip_leading_space && spelled && !bytes.empty() && bytes[0] == ' ') {
    bytes.remove_prefix(1);
  }
  at_start = false;
  out += bytes;
}

}  // namespace
}  // namespace detail

using detail::TokenizerData;

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerData> data) : data_(std::move(data)) {}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const TokenizerData& d = *data_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special) ids = d.prefix;
  for (const detail::Fragment& f : d.added.split(text, parse_special)) {
    if (f.id >= 0) {
      ids.push_back(f.id);
    } else {
      d.encoder->encode(f.text, f.at_start, ids);
    }
  }
  if (add_special) ids.insert(ids.end(), d.suffix.begin(), d.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool at_start = true;
  for (const int32_t id : ids) detail::append_token(*data_, id, skip_special, at_start, out);
  return out;
}

std::optional<int32_t> Tokenizer::bos() const { return data_->bos; }
std::optional<int32_t> Tokenizer::eos() const { return data_->eos; }
std::optional<int32_t> Tokenizer::pad() const { return data_->pad; }
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(data_->tokens.size()); }
const std::string& Tokenizer::token_text(int32_t id) const { return detail::token_at(*data_, id).text; }
std::string_view Tokenizer::token_bytes(int32_t id) const { return detail::token_at(*data_, id).bytes; }
bool Tokenizer::is_special(int32_t id) const { return detail::token_at(*data_, id).kind == detail::TokenKind::Special; }
const std::string& Tokenizer::description() const { return data_->description; }

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special, bool start_of_text)
    : data_(tokenizer.data_), skip_special_(skip_special), at_start_(start_of_text) {}

std::string StreamDecoder::push(int32_t id) {
  detail::append_token(*data_, id, skip_special_, at_start_, pending_);
  const size_t ready = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace lathe::text
