#include "runtime/generate/speculate.hpp"

#include <algorithm>

namespace lathe::text {

std::vector<int32_t> lookup_proposals(std::span<const int32_t> history, int32_t ngram, size_t most) {
  const size_t size = history.size();
  if (most == 0) return {};
  for (size_t n = std::min(static_cast<size_t>(std::max(ngram, 0)), size > 0 ? size - 1 : 0); n >= 1; --n) {
    const std::span<const int32_t> tail = history.subspan(size - n);
    // The latest earlier place it ends at, before the tail itself: an
    // occurrence ending at `end` is followed by history[end, …).
    for (size_t end = size - 1; end >= n; --end) {
      if (!std::equal(tail.begin(), tail.end(), history.begin() + static_cast<std::ptrdiff_t>(end - n))) continue;
      const size_t take = std::min(most, size - end);
      return {history.begin() + static_cast<std::ptrdiff_t>(end),
              history.begin() + static_cast<std::ptrdiff_t>(end + take)};
    }
  }
  return {};
}

}  // namespace lathe::text
