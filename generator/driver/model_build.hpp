// `lathe build` and `lathe run`: a spec's generated sources compiled with the
// runtime libraries lathe was built with into a model executable, kept in the
// cache under a key of everything that went into it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::driver {

// How a model executable is compiled and linked: lathe's CMake build writes
// it beside the lathe binary (lathe-toolchain.txt, absolute paths) and
// installs it as <prefix>/share/lathe/toolchain.txt (paths under the prefix).
// One entry a line: `compiler PATH`, `flag F`, `include DIR`, `lib FILE` (a
// static library, in link order) and `link ITEM` (what follows them).
struct Toolchain {
  std::filesystem::path file;  // where it was read from
  std::string compiler;
  std::vector<std::string> flags;      // compile flags, -I… included
  std::vector<std::string> libraries;  // the runtime libraries and the model executable's main()
  std::vector<std::string> link;       // system libraries and options after them
};

// Reads `file`; relative paths in it are under `prefix`. Throws lathe::Error
// naming the file and line of an entry it cannot use.
Toolchain read_toolchain(const std::filesystem::path& file, const std::filesystem::path& prefix);

// The toolchain of the running lathe: beside its binary (a build tree), else
// in ../share/lathe (an installed one). Throws lathe::Error naming both places.
Toolchain find_toolchain();

// A 64-bit FNV-1a variant: a cache key, not a checksum against malice.
class Hash {
 public:
  Hash& add(std::string_view bytes);
  // The file's contents, or its name and "missing" (a key that matches nothing built).
  Hash& add_file(const std::filesystem::path& file);
  std::string hex() const;  // 16 digits

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// What a build depends on besides its spec: the lathe binary (its generator,
// templates and shaders), the toolchain and every library it links.
std::string toolchain_key(const Toolchain& toolchain);

// Compiles <dir>/model.cpp and <dir>/kernels.cpp (at once, one process
// each) and links them with the toolchain's libraries into `exe`. Throws
// lathe::Error naming the command that failed (its diagnostics are already
// on stderr).
void compile_model(const Toolchain& toolchain, const std::filesystem::path& dir, const std::filesystem::path& exe,
                   bool verbose);

}  // namespace lathe::driver
