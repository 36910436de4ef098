#include "runtime/text/tokenize/unigram.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

namespace {

// tokenizers' K_UNK_PENALTY: an unknown character scores this much below
// the lowest piece.
constexpr double kUnkPenalty = 10.0;
constexpr int32_t kNoUnk = -1;  // an unknown character when the model has no unk

}  // namespace

UnigramModel::UnigramModel(std::vector<UnigramPiece> pieces, std::optional<int32_t> unk, bool byte_fallback)
    : unk_(unk), byte_fallback_(byte_fallback) {
  double min_score = std::numeric_limits<double>::infinity();
  scores_.reserve(pieces.size());
  ids_.reserve(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    min_score = std::min(min_score, pieces[id].score);
    scores_.push_back(pieces[id].score);
    longest_ = std::max(longest_, pieces[id].text.size());
    ids_.insert_or_assign(std::move(pieces[id].text), static_cast<int32_t>(id));
  }
  unk_score_ = min_score - kUnkPenalty;
  byte_ids_.fill(-1);
  for (unsigned b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (const auto it = ids_.find(std::string_view(name)); it != ids_.end()) byte_ids_[b] = it->second;
  }
}

void UnigramModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  // best[e]: the best segmentation of word[0, e): its score, and its last
  // piece word[start, e) with that piece's id. Ties keep the first found:
  // the earliest start, then the shortest piece.
  struct Node {
    double score = 0;
    size_t start = std::string_view::npos;  // npos: not reached yet
    int32_t id = kNoUnk;
  };
  std::vector<Node> best(word.size() + 1);
  const int32_t unk = unk_.value_or(kNoUnk);
  const auto offer = [&](size_t start, size_t end, double score, int32_t id) {
    Node& n = best[end];
    const double candidate = best[start].score + score;
    if (n.start == std::string_view::npos || candidate > n.score) n = {candidate, start, id};
  };
  for (size_t start = 0; start < word.size();) {
    const size_t unit = utf8_unit_length(word, start);
    bool single = false;
    // A piece is valid UTF-8, so one that matches ends where a character does.
    for (size_t end = start + unit; end <= word.size() && end - start <= longest_;
         end += end < word.size() ? utf8_unit_length(word, end) : 1) {
      const auto it = ids_.find(word.substr(start, end - start));
      if (it == ids_.end()) continue;
      offer(start, end, scores_[it->second], it->second);
      single = single || end - start == unit;
    }
    if (!single) offer(start, start + unit, unk_score_, unk);
    start += unit;
  }

  // Back from the end; runs of unknown characters fuse.
  std::vector<std::pair<size_t, size_t>> spans;  // [start, end) of each token, last first
  std::vector<bool> unknown;
  for (size_t end = word.size(); end > 0;) {
    const Node& n = best[end];
    const bool is_unk = n.id == unk;
    if (is_unk && !unknown.empty() && unknown.back()) {
      spans.back().first = n.start;
    } else {
      spans.emplace_back(n.start, end);
      unknown.push_back(is_unk);
    }
    end = n.start;
  }
  for (size_t k = spans.size(); k-- > 0;) {
    const std::string_view text = word.substr(spans[k].first, spans[k].second - spans[k].first);
    if (const auto it = ids_.find(text); it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    if (byte_fallback_ &&
        std::all_of(text.begin(), text.end(), [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (const char c : text) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      continue;
    }
    if (unk_) out.push_back(*unk_);
  }
}

}  // namespace lathe::text
