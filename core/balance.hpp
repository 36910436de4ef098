// A model's layers over devices by memory: contiguous runs, one a device in
// order, each device at least one layer, the first also holding a fixed
// `first` (the embedding) and the last a fixed `last` (the head). The
// split `lathe report --split memory` plans and a model executable's
// `--split memory` runs (generator/spec/placement.cpp, cli/model/common.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

namespace lathe::balance {

// The layers each device takes when each fills up to `ratio` of its
// capacity in turn, leaving a layer for each device after it (the most a
// prefix can take is never worse for the devices after it, so this fits
// at `ratio` whenever any contiguous placement does); nullopt where it
// does not fit.
inline std::optional<std::vector<int64_t>> fill(std::span<const int64_t> need, std::span<const int64_t> capacity,
                                                 int64_t first, int64_t last, double ratio) {
  const size_t n = capacity.size(), layers = need.size();
  std::vector<int64_t> counts;
  size_t l = 0;
  for (size_t d = 0; d < n; ++d) {
    double used = static_cast<double>((d == 0 ? first : 0) + (d + 1 == n ? last : 0));
    const double limit = ratio * static_cast<double>(capacity[d]);
    const size_t keep = n - 1 - d;  // layers the devices after this one need
    const size_t start = l;
    while (l < layers - keep && (d + 1 == n || used + static_cast<double>(need[l]) <= limit)) used += static_cast<double>(need[l++]);
    if (l == start || used > limit) return std::nullopt;
    counts.push_back(static_cast<int64_t>(l - start));
  }
  return counts;
}

// The contiguous placement whose largest need ÷ capacity is least (found
// by bisection on that ratio), so that it fits (every ratio ≤ 1) whenever
// some placement does; nullopt where there are more devices than layers
// or a device has no capacity.
inline std::optional<std::vector<int64_t>> by_memory(std::span<const int64_t> need, std::span<const int64_t> capacity,
                                                     int64_t first = 0, int64_t last = 0) {
  const size_t n = capacity.size();
  if (n == 0 || need.size() < n || std::any_of(capacity.begin(), capacity.end(), [](int64_t c) { return c <= 0; }))
    return std::nullopt;
  const double total = static_cast<double>(std::accumulate(need.begin(), need.end(), first + last));
  double lo = 0, hi = total / static_cast<double>(*std::min_element(capacity.begin(), capacity.end())) + 1.0;
  std::optional<std::vector<int64_t>> best = fill(need, capacity, first, last, hi);  // every device could hold it all
  for (int i = 0; i < 64 && best; ++i) {
    const double mid = (lo + hi) / 2;
    if (auto at = fill(need, capacity, first, last, mid)) {
      best = std::move(at);
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return best;
}

}  // namespace lathe::balance
