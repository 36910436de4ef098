// What every importer returns and takes, and the one entry point of `lathe
// import`, which picks the importer by the kind of input (Hugging Face
// config.json: hf_import.hpp; GGUF: gguf_import.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/spec.hpp"
#include "generator/import/toml_doc.hpp"
#include "runtime/error.hpp"

namespace lathe::importer {

struct ImportOptions {
  std::string name;    // [model] name; empty: from `_name_or_path`, else "model"
  std::string source;  // [model] source; empty: "<_name_or_path> config.json", else `file`
  std::string file = "config.json";  // names the config in every error and warning
  // Receives each warning line (unknown keys, values dropped as inactive).
  // Unset: the line goes to stderr.
  std::function<void(const std::string&)> warn;
  // decoder_start_token_id of a generation_config.json beside config.json
  // (import_hf reads it): generate() starts an encoder-decoder's decoder
  // from it, before the config's own.
  std::optional<int64_t> generation_decoder_start;
  // The directory that holds config.json (import_hf sets it): a multimodal
  // model's image tokens that its config does not give are looked up in its
  // tokenizer.json (Pixtral's [IMG_BREAK] and [IMG_END], Gemma 3's "\n\n").
  // Empty: none, and those tokens are left out with a warning.
  std::string directory;
  // A GGUF text model's mmproj (llama.cpp's vision tower and projector,
  // gguf_mmproj.hpp): import_gguf adds [vision] from it. Empty: none.
  std::string mmproj;
  // Check the spec against the checkpoint beside the config (import_hf's
  // parameter count, import_gguf's manifest). `lathe audit` turns it off:
  // it checks the tensors itself, each problem under its own check.
  bool check_weights = true;
};

// Everything a config says that a spec cannot, or that the checkpoint
// contradicts: one problem per line, each starting with the config's file
// name, all of them at once. what() is the lines joined by newlines.
class ImportError : public Error {
 public:
  explicit ImportError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// The parameter check against a checkpoint beside the config.
struct CheckpointCheck {
  std::string path;                  // the file or index opened
  int64_t spec_params = 0;           // make_report(spec).total_params
  int64_t checkpoint_elements = 0;   // every tensor's elements, less weights.ignore matches
  int64_t ignored_tensors = 0;       // tensors left out by weights.ignore
};

struct ImportResult {
  TomlDoc doc;
  std::string text;  // doc.render()
  spec::Spec spec;   // text, parsed
  std::optional<CheckpointCheck> checkpoint;  // set when the directory held weights
};

// The one entry point for `lathe import`: a .gguf file (or a directory
// holding one and no config.json) goes to import_gguf, everything else to
// import_hf.
ImportResult import_model_config(const std::string& path, ImportOptions options = {});


// "HuggingFaceTB/SmolLM2-135M" → "smollm2-135m": lower case, [a-z0-9._-],
// other runs of characters become one "-"; "model" when nothing is left.
std::string sanitize_model_name(const std::string& raw);

}  // namespace lathe::importer
