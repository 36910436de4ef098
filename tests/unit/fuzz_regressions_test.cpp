// Every finding of the fuzz targets (scripts/fuzz), kept as the input that
// found it under tests/fuzz/regressions/<target>/, replayed through the
// target's own function: it must now be an answer the parser promises.
// A regression aborts (fuzz::finding, a sanitizer) or throws here.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "tests/fuzz/fuzz.hpp"
#include "tests/harness/temp_files.hpp"

namespace fs = std::filesystem;

namespace {

using Target = void (*)(const uint8_t*, size_t);

int replay(const std::string& name, Target target) {
  const fs::path dir = fs::path(LATHE_SOURCE_DIR) / "tests/fuzz/regressions" / name;
  int count = 0;
  if (!fs::is_directory(dir)) return count;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string input = lathe::test::read_file(e.path().string());
    CAPTURE(e.path().string());
    CHECK_NOTHROW(target(reinterpret_cast<const uint8_t*>(input.data()), input.size()));
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("fuzz findings stay fixed") {
  int count = 0;
  count += replay("spec", lathe::fuzz::spec);
  count += replay("gguf", lathe::fuzz::gguf);
  count += replay("safetensors", lathe::fuzz::safetensors);
  count += replay("hf_config", lathe::fuzz::hf_config);
  count += replay("tokenizer", lathe::fuzz::tokenizer);
  count += replay("chat_template", lathe::fuzz::chat_template);
  count += replay("http", lathe::fuzz::http);
  count += replay("image", lathe::fuzz::image);
  count += replay("data_url", lathe::fuzz::data_url);
  count += replay("json_schema", lathe::fuzz::json_schema);
  count += replay("grammar", lathe::fuzz::grammar);
  count += replay("tool_calls", lathe::fuzz::tool_calls);
  MESSAGE(count << " inputs replayed");
}
