#include "generator/driver/cache.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "runtime/error.hpp"

namespace lathe::driver {
namespace fs = std::filesystem;

namespace {

uint64_t size_of(const fs::path& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) return fs::file_size(path, error);
  uint64_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, error))
    if (entry.is_regular_file(error)) total += entry.file_size(error);
  return total;
}

}  // namespace

std::vector<CacheEntry> list_cache(const fs::path& cache) {
  std::vector<CacheEntry> out;
  std::error_code error;
  auto add = [&](const fs::path& path, const char* kind) {
    CacheEntry e{path, kind, size_of(path), fs::last_write_time(path, error)};
    if (!error) out.push_back(std::move(e));
  };
  for (const auto& entry : fs::directory_iterator(cache / "models", error))
    if (entry.is_directory() && entry.path().filename().string().find(".tmp") == std::string::npos)
      add(entry.path(), "build");
  for (const auto& entry : fs::directory_iterator(cache / "specs", error))
    if (entry.path().extension() == ".toml") add(entry.path(), "spec");
  for (const auto& entry : fs::directory_iterator(cache, error))
    if (entry.path().extension() == ".vkcache") add(entry.path(), "pipelines");
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.used < b.used; });
  return out;
}

uint64_t cache_limit() {
  const char* value = std::getenv("LATHE_CACHE_LIMIT");
  if (!value || !*value) return uint64_t{2} << 30;
  char* end = nullptr;
  const double number = std::strtod(value, &end);
  double scale = 1;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'K': scale = 1024.0, ++end; break;
    case 'M': scale = 1024.0 * 1024, ++end; break;
    case 'G': scale = 1024.0 * 1024 * 1024, ++end; break;
    default: break;
  }
  if (end == value || *end != '\0' || !(number >= 0) || number * scale > 1e18)
    throw Error(ErrorKind::InvalidArgument,
                std::string("LATHE_CACHE_LIMIT='") + value + "' is not a size (bytes, or with K, M or G: 2G, 500M)");
  return static_cast<uint64_t>(number * scale);
}

std::vector<CacheEntry> prune_cache(const fs::path& cache, std::optional<std::chrono::seconds> older_than,
                                    std::optional<uint64_t> max_bytes, const fs::path& keep) {
  std::vector<CacheEntry> entries = list_cache(cache);
  std::vector<CacheEntry> removed;
  const fs::file_time_type now = fs::file_time_type::clock::now();
  uint64_t total = 0;
  for (const CacheEntry& e : entries) total += e.bytes;
  for (const CacheEntry& e : entries) {  // least recently used first
    if (!keep.empty() && e.path == keep) continue;
    const bool old = older_than && now - e.used > *older_than;
    // Builds and specs are remade on demand; the pipeline caches only by the
    // driver at the next start, so a size limit leaves them.
    const bool over = max_bytes && total > *max_bytes && e.kind != "pipelines";
    if (!old && !over) continue;
    std::error_code error;
    fs::remove_all(e.path, error);
    if (error) continue;
    total -= e.bytes;
    removed.push_back(e);
  }
  return removed;
}

std::string format_bytes(uint64_t bytes) {
  char text[32];
  if (bytes < 1024) std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < (1u << 20)) std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
  else if (bytes < (1u << 30)) std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  else std::snprintf(text, sizeof text, "%.2f GiB", bytes / 1073741824.0);
  return text;
}

}  // namespace lathe::driver
