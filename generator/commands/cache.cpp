// `lathe cache`: what lathe keeps in its cache (builds, imported specs,
// pipeline caches) listed, and `lathe cache clean` pruning it.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "generator/commands/commands.hpp"
#include "generator/driver/cache.hpp"
#include "runtime/cache_dir.hpp"
#include "runtime/error.hpp"

namespace lathe::tool {
namespace {

// The cache directory; an Error saying how to name one when there is none.
std::string cache_or_throw() {
  const std::string cache = lathe::cache_dir();
  if (cache.empty())
    throw lathe::Error(lathe::ErrorKind::NotFound, "no cache directory: set LATHE_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
  return cache;
}

// How long ago `used` was: minutes, hours or days.
std::string age_text(std::filesystem::file_time_type used) {
  const double s = std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - used).count();
  char text[32];
  if (s < 3600) std::snprintf(text, sizeof text, "%.0f min", s / 60);
  else if (s < 86400 * 2) std::snprintf(text, sizeof text, "%.1f h", s / 3600);
  else std::snprintf(text, sizeof text, "%.0f days", s / 86400);
  return text;
}

}  // namespace

int cmd_cache_list() {
  const std::string cache = cache_or_throw();
  const auto entries = lathe::driver::list_cache(cache);
  uint64_t total = 0;
  std::printf("%-10s %12s %10s  %s\n", "kind", "size", "last used", "path");
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    std::printf("%-10s %12s %10s  %s\n", it->kind.c_str(), lathe::driver::format_bytes(it->bytes).c_str(),
                age_text(it->used).c_str(), it->path.c_str());
    total += it->bytes;
  }
  std::printf("%zu entries, %s in %s (builds are pruned beyond %s: LATHE_CACHE_LIMIT)\n", entries.size(),
              lathe::driver::format_bytes(total).c_str(), cache.c_str(),
              lathe::driver::format_bytes(lathe::driver::cache_limit()).c_str());
  return 0;
}

int cmd_cache_clean(std::optional<double> older_than_days) {
  const std::string cache = cache_or_throw();
  std::optional<std::chrono::seconds> older;
  if (older_than_days) older = std::chrono::seconds(static_cast<int64_t>(*older_than_days * 86400));
  else older = std::chrono::seconds(-1);  // every entry
  const auto removed = lathe::driver::prune_cache(cache, older, std::nullopt);
  uint64_t total = 0;
  for (const auto& e : removed) total += e.bytes;
  std::printf("removed %zu entries, %s\n", removed.size(), lathe::driver::format_bytes(total).c_str());
  return 0;
}

}  // namespace lathe::tool
