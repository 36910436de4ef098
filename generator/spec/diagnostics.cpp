#include "generator/spec/diagnostics.hpp"

#include <algorithm>
#include <sstream>

namespace lathe::spec {

std::string format_diagnostic(const std::string& file, const Diagnostic& d) {
  std::ostringstream out;
  out << file;
  if (d.loc.line > 0) out << ":" << d.loc.line << ":" << d.loc.column;
  out << ": " << d.message;
  return out.str();
}

std::string Diagnostics::format() const {
  std::vector<Diagnostic> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.column < b.loc.column;
  });
  std::string out;
  for (const Diagnostic& d : sorted) out += format_diagnostic(file_, d) + "\n";
  return out;
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    // A known key that the word starts with ("epsilon" for "eps") is as
    // likely a typo as one a letter away.
    const bool prefix = c.size() >= 3 && word.rfind(c, 0) == 0;
    const size_t d = prefix ? 1 : edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace lathe::spec
