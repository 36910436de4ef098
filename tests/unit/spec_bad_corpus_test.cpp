// The bad-spec corpus: tests/specs/bad/*.toml each break one rule (a few
// break several on purpose) and list, in their leading comment block, the
// exact diagnostics they must produce:
//
//   # expect: {file}:9:12: heads (4) is not a multiple of kv_heads (3)
//
// one `# expect:` line per error, in the order Diagnostics::format() prints
// them, `{file}` standing for the path the parser was given.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "generator/spec/parse.hpp"

using namespace lathe::spec;
namespace fs = std::filesystem;

namespace {

const fs::path kBadDir = fs::path(LATHE_SOURCE_DIR) / "tests" / "specs" / "bad";
constexpr std::string_view kExpect = "# expect: ";

std::vector<fs::path> bad_specs() {
  std::vector<fs::path> files;
  if (!fs::is_directory(kBadDir)) return files;
  for (const fs::directory_entry& entry : fs::directory_iterator(kBadDir))
    if (entry.is_regular_file() && entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

struct Expectations {
  std::vector<std::string> lines;  // `{file}` not yet replaced
  int misplaced = 0;               // `# expect:` lines after the leading comment block
};

Expectations read_expectations(const fs::path& path) {
  Expectations e;
  std::ifstream in(path, std::ios::binary);
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (header && line.rfind('#', 0) != 0) header = false;
    if (line.rfind(kExpect, 0) != 0) continue;
    if (header) e.lines.push_back(line.substr(kExpect.size()));
    else ++e.misplaced;
  }
  return e;
}

std::string with_file(std::string line, const std::string& file) {
  const std::string key = "{file}";
  for (size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + file.size()))
    line.replace(at, key.size(), file);
  return line;
}

}  // namespace

TEST_CASE("the bad-spec corpus exists and every file says what it expects") {
  REQUIRE_MESSAGE(fs::is_directory(kBadDir), kBadDir.string());
  const std::vector<fs::path> files = bad_specs();
  REQUIRE(!files.empty());
  for (const fs::path& file : files) {
    INFO(file.string());
    const Expectations e = read_expectations(file);
    CHECK(!e.lines.empty());
    CHECK(e.misplaced == 0);  // an expectation below the header would be silently ignored
  }
}

TEST_CASE("every bad spec yields exactly the diagnostics it expects") {
  const std::vector<fs::path> files = bad_specs();
  REQUIRE(!files.empty());
  for (const fs::path& file : files) {
    const std::string path = file.string();
    INFO(path);
    std::string expected;
    for (const std::string& line : read_expectations(file).lines) expected += with_file(line, path) + "\n";

    Diagnostics diag(path);
    const auto spec = parse_spec_file(path, diag);
    CHECK(!spec);
    CHECK(diag.format() == expected);
  }
}
