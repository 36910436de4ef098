#include "runtime/cache_dir.hpp"

#include <cstdlib>
#include <filesystem>

namespace lathe {

std::string cache_dir() {
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? std::string(value) : std::string();
  };
  namespace fs = std::filesystem;
  if (std::string d = env("LATHE_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return (fs::path(d) / "lathe").string();
  if (std::string d = env("HOME"); !d.empty()) return (fs::path(d) / ".cache" / "lathe").string();
  return {};
}

}  // namespace lathe
