// Tokenizer::from_sentencepiece: a SentencePiece .model file, encoded by
// libsentencepiece itself. Debian's package ships no sentencepiece_model.pb.h,
// so the one setting decoding needs from the model proto (add_dummy_prefix)
// is read from the serialized proto with a few lines of wire-format parsing.
#include <sentencepiece_processor.h>

#include <filesystem>

#include "runtime/error.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/text/tokenize/tokenizer_data.hpp"

namespace lathe::text {

namespace {

using detail::Token;
using detail::TokenKind;

// Protocol buffer wire format, just enough to walk a message's fields.
struct ProtoField {
  uint32_t number = 0;
  uint32_t wire = 0;       // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t varint = 0;     // wire 0
  std::string_view bytes;  // wire 2
};

class ProtoReader {
 public:
  explicit ProtoReader(std::string_view s) : s_(s) {}
  // False at the end, or at the first malformed byte.
  bool next(ProtoField& f) {
    uint64_t key = 0;
    if (pos_ >= s_.size() || !varint(key)) return false;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    switch (f.wire) {
      case 0:
        return varint(f.varint);
      case 1:
        return skip(8);
      case 5:
        return skip(4);
      case 2: {
        uint64_t n = 0;
        if (!varint(n) || n > s_.size() - pos_) return false;
        f.bytes = s_.substr(pos_, n);
        pos_ += n;
        return true;
      }
      default:
        return false;
    }
  }

 private:
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && pos_ < s_.size(); shift += 7) {
      const auto b = static_cast<uint8_t>(s_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool skip(size_t n) {
    if (n > s_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

// ModelProto.pieces (1, repeated) → SentencePiece.type (3), NORMAL (1) when unset.
std::vector<int32_t> detail::sentencepiece_piece_types(std::string_view model_proto) {
  std::vector<int32_t> types;
  ProtoReader model(model_proto);
  for (ProtoField f; model.next(f);) {
    if (f.number != 1 || f.wire != 2) continue;
    int32_t type = 1;
    ProtoReader piece(f.bytes);
    for (ProtoField g; piece.next(g);)
      if (g.number == 3 && g.wire == 0) type = static_cast<int32_t>(g.varint);
    types.push_back(type);
  }
  return types;
}

// ModelProto.normalizer_spec (3) → NormalizerSpec.add_dummy_prefix (3),
// remove_extra_whitespaces (4).
detail::SentencePieceNormalizer detail::sentencepiece_normalizer(std::string_view model_proto) {
  SentencePieceNormalizer n;
  ProtoReader model(model_proto);
  for (ProtoField f; model.next(f);) {
    if (f.number != 3 || f.wire != 2) continue;
    ProtoReader spec(f.bytes);
    for (ProtoField g; spec.next(g);) {
      if (g.number == 3 && g.wire == 0) n.add_dummy_prefix = g.varint != 0;
      if (g.number == 4 && g.wire == 0) n.remove_extra_whitespaces = g.varint != 0;
    }
  }
  return n;
}

namespace {

class SentencePieceEncoder final : public detail::TextEncoder {
 public:
  explicit SentencePieceEncoder(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp) : sp_(std::move(sp)) {}
  void encode(std::string_view text, bool, std::vector<int32_t>& out) const override {
    // libsentencepiece replaces invalid UTF-8 by U+FFFD, so such input
    // encodes (to the replacement character's pieces) but does not round-trip.
    const std::vector<int> ids = sp_->EncodeAsIds(text);
    out.insert(out.end(), ids.begin(), ids.end());
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace

Tokenizer Tokenizer::from_sentencepiece(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(ErrorKind::NotFound, path + ": no such file");
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const auto status = sp->Load(path); !status.ok()) {
    throw Error(ErrorKind::BadFile, path + ": not a SentencePiece model: " + status.ToString());
  }
  detail::TokenizerData data;
  const int n = sp->GetPieceSize();
  data.tokens.resize(static_cast<size_t>(n));
  std::vector<detail::AddedToken> added;
  for (int id = 0; id < n; ++id) {
    Token& t = data.tokens[id];
    t.text = sp->IdToPiece(id);
    t.kind = sp->IsControl(id)   ? TokenKind::Special
             : sp->IsUnknown(id) ? TokenKind::Unknown
             : sp->IsByte(id)    ? TokenKind::Byte
             : sp->IsUnused(id)  ? TokenKind::Unused
                                 : TokenKind::Normal;
    if (t.kind == TokenKind::Special && !t.text.empty()) added.push_back({t.text, id, true, false, false, false});
  }
  detail::spell_spm_bytes(data.tokens, "\xE2\x96\x81");
  data.strip_leading_space = detail::sentencepiece_normalizer(sp->serialized_model_proto()).add_dummy_prefix;
  if (sp->bos_id() >= 0 && sp->bos_id() < n) {
    data.bos = sp->bos_id();
    data.prefix = {*data.bos};
  }
  if (sp->eos_id() >= 0 && sp->eos_id() < n) data.eos = sp->eos_id();
  data.added = detail::AddedMatcher(std::move(added));
  data.encoder = std::make_unique<SentencePieceEncoder>(std::move(sp));
  data.description = "sentencepiece " + std::filesystem::path(path).filename().string();
  return Tokenizer(std::make_shared<const detail::TokenizerData>(std::move(data)));
}

}  // namespace lathe::text
