#include "runtime/text/tokenize/spm.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

namespace {
constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 ▁
}

SpmModel::SpmModel(const std::vector<SpmPiece>& pieces, SpmOptions options) : options_(options) {
  byte_ids_.fill(-1);
  scores_.reserve(pieces.size());
  types_.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const SpmPiece& p = pieces[i];
    const auto id = static_cast<int32_t>(i);
    scores_.push_back(p.score);
    types_.push_back(p.type);
    const bool mergeable =
        p.type == PieceType::Normal || p.type == PieceType::UserDefined || p.type == PieceType::Unused;
    if (!(mergeable ? pieces_ : reserved_).try_emplace(p.text, id).second) {
      throw std::invalid_argument("piece \"" + p.text + "\" (id " + std::to_string(id) + ") is defined twice");
    }
    if (p.type == PieceType::UserDefined && !p.text.empty()) {
      user_defined_[static_cast<uint8_t>(p.text[0])].push_back(p.text);
    }
    if (p.type == PieceType::Unknown && unk_ < 0) unk_ = id;
    if (p.type == PieceType::Byte) {
      byte_fallback_ = true;
      unsigned value = 0;
      char tail = 0;
      if (p.text.size() == 6 && std::sscanf(p.text.c_str(), "<0x%2X%c", &value, &tail) == 2 && tail == '>') {
        byte_ids_[value & 0xFF] = id;
      }
    }
  }
  for (auto& list : user_defined_) {
    std::stable_sort(list.begin(), list.end(),
                     [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  }
}

std::string SpmModel::normalize(std::string_view text) const {
  std::string_view t = text;
  if (options_.remove_extra_whitespaces) {
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  }
  std::string out;
  if (t.empty()) return out;
  out.reserve(t.size() + 8);
  if (options_.add_dummy_prefix) out += kSpace;
  bool previous_space = false;
  for (const char c : t) {
    if (c == ' ') {
      if (!(options_.remove_extra_whitespaces && previous_space)) out += kSpace;
      previous_space = true;
    } else {
      out += c;
      previous_space = false;
    }
  }
  return out;
}

int32_t SpmModel::piece_to_id(std::string_view piece) const {
  if (const auto it = reserved_.find(piece); it != reserved_.end()) return it->second;
  if (const auto it = pieces_.find(piece); it != pieces_.end()) return it->second;
  return unk_;
}

void SpmModel::resegment(std::string_view piece,
                         const std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>>& rev,
                         std::vector<std::pair<std::string_view, int32_t>>& out) const {
  const int32_t id = piece_to_id(piece);
  if (id >= 0 && types_[id] == PieceType::Unused) {
    if (const auto it = rev.find(piece); it != rev.end()) {
      resegment(it->second.first, rev, out);
      resegment(it->second.second, rev, out);
      return;
    }
  }
  out.emplace_back(piece, id);
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  const std::string normalized = normalize(text);
  if (normalized.empty()) return;
  const std::string_view s = normalized;

  // Characters, with user-defined pieces matched whole (longest first).
  std::vector<MergeSymbol> symbols;
  symbols.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    bool frozen = false;
    for (const std::string& u : user_defined_[static_cast<uint8_t>(s[i])]) {
      if (s.substr(i, u.size()) == u) {
        n = u.size();
        frozen = true;
        break;
      }
    }
    if (n == 0) n = utf8_unit_length(s, i);
    MergeSymbol sym;
    sym.begin = static_cast<uint32_t>(i);
    sym.end = static_cast<uint32_t>(i + n);
    sym.frozen = frozen;
    sym.prev = static_cast<int32_t>(symbols.size()) - 1;
    sym.next = i + n < s.size() ? static_cast<int32_t>(symbols.size()) + 1 : -1;
    symbols.push_back(sym);
    i += n;
  }

  // Merged pieces of type UNUSED, and the pair each was last formed from.
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> rev;
  merge_symbols(symbols, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<MergeChoice> {
    const std::string_view piece = s.substr(l.begin, r.end - l.begin);
    const auto it = pieces_.find(piece);
    if (it == pieces_.end()) return std::nullopt;
    if (types_[it->second] == PieceType::Unused) {
      rev[piece] = {s.substr(l.begin, l.end - l.begin), s.substr(r.begin, r.end - r.begin)};
    }
    return MergeChoice{-static_cast<double>(scores_[it->second]), it->second};
  });

  std::vector<std::pair<std::string_view, int32_t>> pieces;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    resegment(s.substr(symbols[i].begin, symbols[i].end - symbols[i].begin), rev, pieces);
  }

  bool previous_unk = false;
  for (const auto& [piece, id] : pieces) {
    const bool unknown = id < 0 || id == unk_;
    if (unknown && byte_fallback_) {
      for (const char c : piece) {
        const int32_t b = byte_ids_[static_cast<uint8_t>(c)];
        if (b >= 0) {
          out.push_back(b);
        } else if (unk_ >= 0) {
          out.push_back(unk_);
        }
      }
      previous_unk = false;
      continue;
    }
    if (unknown) {
      // A run of unknown pieces is one unk, as SentencePieceProcessor makes it.
      if (unk_ >= 0 && !previous_unk) out.push_back(unk_);
      previous_unk = true;
      continue;
    }
    out.push_back(id);
    previous_unk = false;
  }
}

}  // namespace lathe::text
