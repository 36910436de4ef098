// Checkpoints in: import (a Hugging Face config or a GGUF file's metadata
// to a commented spec) and quantize (a GGUF file of llama.cpp's mixtures).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "core/contract.hpp"
#include "generator/commands/commands.hpp"
#include "generator/import/import.hpp"
#include "generator/import/quantize.hpp"

namespace lathe::tool {

int cmd_import(const std::string& path, const std::string& out, const std::string& name, const std::string& mmproj) {
  lathe::importer::ImportOptions options;
  options.name = name;
  options.mmproj = mmproj;
  const lathe::importer::ImportResult result = lathe::importer::import_model_config(path, options);
  if (result.checkpoint)
    std::cerr << path << ": " << result.checkpoint->spec_params << " parameters, as in " << result.checkpoint->path
              << "\n";
  if (out.empty()) {
    std::cout << result.text;
    return 0;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file << result.text;
  file.close();
  if (!file) {
    std::cerr << "lathe: " << out << ": cannot write\n";
    return 1;
  }
  std::cerr << out << " (written)\n";
  return 0;
}

int cmd_quantize(const std::string& in, const std::string& out, const std::string& type, const std::string& weights) {
  const lathe::importer::Mixture mixture = *lathe::importer::mixture_from_key(type);  // checked by the option
  // On a terminal, a line rewritten as each tensor is converted.
  lathe::importer::QuantizeProgress progress;
  if (isatty(STDERR_FILENO))
    progress = [](size_t done, size_t total, const std::string& name) {
      std::fprintf(stderr, "\rquantizing tensor %zu/%zu: %s\033[K", done + 1, total, name.c_str());
      std::fflush(stderr);
    };
  const lathe::importer::QuantizeResult result = lathe::importer::quantize_model(in, out, mixture, weights, progress);
  if (progress) std::cerr << "\r\033[K";
  std::cerr << out << " (written): ";
  bool first = true;
  for (const auto& [dtype, count] : result.tensors) {
    std::cerr << (first ? "" : ", ") << count << " " << lathe::spelling(dtype).enumerator;
    first = false;
  }
  std::cerr << " tensors, " << result.bytes << " bytes of data\n";
  if (!result.vocabulary.empty()) std::cerr << out << ": " << result.vocabulary << "\n";
  return 0;
}

}  // namespace lathe::tool
