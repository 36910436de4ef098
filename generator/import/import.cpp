#include "generator/import/import.hpp"

#include <filesystem>

#include "generator/import/gguf_import.hpp"
#include "generator/import/hf_import.hpp"

namespace lathe::importer {

namespace fs = std::filesystem;

namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace

ImportError::ImportError(std::vector<std::string> problems)
    : Error(ErrorKind::BadFile, join_lines(problems)), problems_(std::move(problems)) {}

std::string sanitize_model_name(const std::string& raw) {
  std::string out;
  for (const char ch : raw) {
    const char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (keep) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
  while (!out.empty() && (out.front() == '-' || out.front() == '.')) out.erase(out.begin());
  return out.empty() ? "model" : out;
}

ImportResult import_model_config(const std::string& path, ImportOptions options) {
  // A .gguf file, or a directory holding one and no config.json: GGUF metadata.
  std::string gguf;
  if (fs::path(path).extension() == ".gguf") {
    gguf = path;
  } else if (fs::is_directory(path) && !fs::exists(fs::path(path) / "config.json")) {
    for (const auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".gguf") {
        if (!gguf.empty())
          throw Error(ErrorKind::InvalidArgument, path + ": no config.json, and more than one .gguf file: name one");
        gguf = e.path().string();
      }
  }
  if (!gguf.empty()) return import_gguf(gguf, std::move(options));
  if (!options.mmproj.empty())
    throw Error(ErrorKind::InvalidArgument, path + ": --mmproj " + options.mmproj +
                                                " goes with a GGUF text model (the mmproj's pair), not a Hugging Face "
                                                "directory, whose config.json states its tower itself");
  return import_hf(path, std::move(options));
}

}  // namespace lathe::importer
