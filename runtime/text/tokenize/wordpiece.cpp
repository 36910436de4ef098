#include "runtime/text/tokenize/wordpiece.hpp"

#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text {

void WordPieceModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  // Character boundaries (an invalid byte is a character of its own, which
  // no piece holds).
  std::vector<size_t> bounds = {0};
  for (size_t i = 0; i < word.size(); i += utf8_unit_length(word, i)) bounds.push_back(i + utf8_unit_length(word, i));
  if (bounds.size() - 1 > options_.max_chars) {
    out.push_back(options_.unk);
    return;
  }
  const size_t first = out.size();
  std::string piece;
  // Hugging Face tries the ends from the longest down, one character at a time.
  for (size_t b = 0; b + 1 < bounds.size();) {
    size_t e = bounds.size() - 1;
    for (; e > b; --e) {
      piece = b > 0 ? options_.continuing_prefix : options_.word_prefix;
      piece.append(word.substr(bounds[b], bounds[e] - bounds[b]));
      if (const auto it = vocab_.find(piece); it != vocab_.end()) {
        out.push_back(it->second);
        break;
      }
    }
    if (e == b) {  // no piece starts here: the whole word is unknown
      out.resize(first);
      out.push_back(options_.unk);
      return;
    }
    b = e;
  }
}

}  // namespace lathe::text
