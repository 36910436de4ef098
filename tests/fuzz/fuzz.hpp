// What the fuzz targets share. Each target is a function of one input,
// lathe::fuzz::<target>(data, size), which returns for an answer the
// parser promises and calls finding() (or crashes, or throws) otherwise.
// Built as a fuzzer (LATHE_FUZZ_MAIN, tests/CMakeLists.txt),
// LATHE_FUZZ_TARGET makes it libFuzzer's entry point; the unit test
// fuzz_regressions replays tests/fuzz/regressions/<target>/ through the
// same functions.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#ifdef LATHE_FUZZ_MAIN
#define LATHE_FUZZ_TARGET(function)                                         \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    function(data, size);                                                   \
    return 0;                                                               \
  }
#else
#define LATHE_FUZZ_TARGET(function)
#endif

namespace lathe::fuzz {

void spec(const uint8_t* data, size_t size);
void gguf(const uint8_t* data, size_t size);
void safetensors(const uint8_t* data, size_t size);
void hf_config(const uint8_t* data, size_t size);
void tokenizer(const uint8_t* data, size_t size);
void chat_template(const uint8_t* data, size_t size);
void http(const uint8_t* data, size_t size);
void image(const uint8_t* data, size_t size);
void data_url(const uint8_t* data, size_t size);
void json_schema(const uint8_t* data, size_t size);
void grammar(const uint8_t* data, size_t size);
void tool_calls(const uint8_t* data, size_t size);

// A broken promise that is not a crash: says which, then aborts (libFuzzer
// keeps the input; the unit test dies with the message).
[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::abort();
}

// The loaders under test take paths (they map or read files), so an input
// is written to a file first: one directory per process, under $TMPDIR
// (else /tmp), removed when the process exits; the file is rewritten for
// every input.

inline const std::filesystem::path& input_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d =
        std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("lathe-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(input_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes the input to `name` in the process's directory; returns its path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  const std::filesystem::path path = input_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) finding("the input could not be written to a file (the harness, not the parser)");
  return path.string();
}

}  // namespace lathe::fuzz
