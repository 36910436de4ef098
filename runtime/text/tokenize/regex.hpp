// Regular expressions for pre-tokenizers: PCRE2 (8-bit) in UTF mode with
// Unicode properties (PCRE2_UTF | PCRE2_UCP), so \p{L}, \p{N}, \s and
// (?i:'s|'t…) mean what they mean in Hugging Face's Oniguruma patterns.
// PCRE2_MATCH_INVALID_UTF lets invalid UTF-8 through: such bytes match
// nothing, so they fall into the gaps between matches and stay in the text.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe::text {

class Regex {
 public:
  // Throws std::invalid_argument with PCRE2's message and the offset of the
  // fault; callers add the file and field.
  explicit Regex(std::string_view pattern, bool literal = false);

  // Every non-empty match as [begin, end) byte offsets, left to right.
  std::vector<std::pair<size_t, size_t>> matches(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace lathe::text
