// What lathe keeps in its cache (runtime/cache_dir.hpp): model builds of
// `lathe build` and `lathe run` (models/<name>-<key>/), specs imported by
// `lathe run` (specs/*.toml) and the Vulkan pipeline caches
// (pipelines-*.vkcache). `lathe cache` lists them, `lathe cache clean`
// prunes them, and every new build prunes the least recently used builds
// beyond the size limit, so that the cache stays bounded.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lathe::driver {

struct CacheEntry {
  std::filesystem::path path;
  std::string kind;  // "build", "spec", "pipelines"
  uint64_t bytes = 0;
  std::filesystem::file_time_type used;  // last use (a build is touched whenever it is run)
};

// Every entry under `cache`, least recently used first. Half-made builds
// (*.tmp<pid>) are not entries.
std::vector<CacheEntry> list_cache(const std::filesystem::path& cache);

// The size limit of the cache's builds: $LATHE_CACHE_LIMIT (bytes, or with a
// K, M or G suffix), else 2 GiB. Throws lathe::Error naming the variable
// when it is not a size.
uint64_t cache_limit();

// Removes entries: those unused for longer than `older_than` (when given),
// then the least recently used builds and specs until what is left is at most
// `max_bytes` (when given). Never removes `keep`. Returns what it removed.
std::vector<CacheEntry> prune_cache(const std::filesystem::path& cache,
                                    std::optional<std::chrono::seconds> older_than, std::optional<uint64_t> max_bytes,
                                    const std::filesystem::path& keep = {});

// "12.3 MiB", "4.0 KiB"
std::string format_bytes(uint64_t bytes);

}  // namespace lathe::driver
