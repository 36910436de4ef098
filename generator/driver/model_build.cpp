#include "generator/driver/model_build.hpp"

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "generator/driver/process.hpp"
#include "runtime/error.hpp"

namespace lathe::driver {
namespace fs = std::filesystem;

Toolchain read_toolchain(const fs::path& file, const fs::path& prefix) {
  std::ifstream in(file);
  if (!in) throw Error(ErrorKind::NotFound, file.string() + ": cannot read the toolchain description");
  Toolchain t;
  t.file = file;
  auto under_prefix = [&](const std::string& path) { return (prefix / path).lexically_normal().string(); };
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? std::string() : line.substr(space + 1);
    if (key.empty() || key[0] == '#') continue;
    if (value.empty()) continue;  // an empty list a generator expression expanded to
    if (key == "compiler") t.compiler = value;
    else if (key == "flag") t.flags.push_back(value);
    else if (key == "include") t.flags.push_back("-I" + under_prefix(value));
    else if (key == "lib") t.libraries.push_back(under_prefix(value));
    else if (key == "link") t.link.push_back(value);
    else
      throw Error(ErrorKind::BadFile, file.string() + ":" + std::to_string(number) + ": unknown entry '" + key + "'");
  }
  if (t.compiler.empty()) throw Error(ErrorKind::BadFile, file.string() + ": no compiler entry");
  return t;
}

Toolchain find_toolchain() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) throw Error(ErrorKind::NotFound, "cannot locate the lathe binary (/proc/self/exe): " + error.message());
  const fs::path beside = exe.parent_path() / "lathe-toolchain.txt";
  if (fs::exists(beside)) return read_toolchain(beside, exe.parent_path());
  const fs::path prefix = exe.parent_path().parent_path();
  const fs::path installed = prefix / "share" / "lathe" / "toolchain.txt";
  if (fs::exists(installed)) return read_toolchain(installed, prefix);
  throw Error(ErrorKind::NotFound, "no toolchain description for building models: neither " + beside.string() +
                                       " (a build tree) nor " + installed.string() + " (an installed lathe) exists");
}

// Eight bytes a step, then the rest one by one: the key of a cached build
// hashes the lathe binary and its libraries (about 100 MB) on every run.
Hash& Hash::add(std::string_view bytes) {
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, 8);
    h_ = (h_ ^ word) * 0x100000001b3ull;
    h_ ^= h_ >> 29;  // the multiply carries low bits up only
  }
  for (; i < bytes.size(); ++i) h_ = (h_ ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  return *this;
}

Hash& Hash::add_file(const fs::path& file) {
  add(file.string());
  std::ifstream in(file, std::ios::binary);
  if (!in) return add("missing");
  std::vector<char> buffer(1 << 20);
  while (in.read(buffer.data(), buffer.size()) || in.gcount() > 0)
    add(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  return *this;
}

std::string Hash::hex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string out(16, '0');
  uint64_t v = h_;
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kDigits[v & 15];
  return out;
}

std::string toolchain_key(const Toolchain& toolchain) {
  Hash hash;
  hash.add_file("/proc/self/exe").add_file(toolchain.file);
  for (const std::string& library : toolchain.libraries) hash.add_file(library);
  return hash.hex();
}

void compile_model(const Toolchain& toolchain, const fs::path& dir, const fs::path& exe, bool verbose) {
  std::vector<Command> compiles;
  std::vector<std::string> objects;
  for (const char* source : {"model.cpp", "kernels.cpp"}) {
    Command c = {toolchain.compiler};
    c.insert(c.end(), toolchain.flags.begin(), toolchain.flags.end());
    objects.push_back((dir / source).replace_extension(".o").string());
    // No debug information: a cached executable is for running (it was
    // 96 % debug information, 44 MB).
    c.insert(c.end(), {"-g0", "-I" + dir.string(), "-c", (dir / source).string(), "-o", objects.back()});
    compiles.push_back(std::move(c));
  }
  Command link = {toolchain.compiler};
  link.insert(link.end(), objects.begin(), objects.end());
  link.insert(link.end(), {"-Wl,--strip-debug", "-o", exe.string()});  // the libraries' debug information too
  link.insert(link.end(), toolchain.libraries.begin(), toolchain.libraries.end());
  link.insert(link.end(), toolchain.link.begin(), toolchain.link.end());

  auto check = [&](const std::vector<Command>& commands) {
    if (verbose)
      for (const Command& c : commands) std::cerr << quote(c) << "\n";
    const std::vector<int> status = run_all(commands);
    for (size_t i = 0; i < commands.size(); ++i)
      if (status[i] != 0)
        throw Error(ErrorKind::Io, "the model build failed (exit status " + std::to_string(status[i]) +
                                       "; toolchain " + toolchain.file.string() + "): " + quote(commands[i]));
  };
  check(compiles);
  check({link});
}

}  // namespace lathe::driver
