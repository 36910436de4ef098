// Importing a Hugging Face config.json as a spec: the architecture keys of
// each supported model_type, with transformers' defaults for the keys a
// config leaves out, become a commented TOML spec like those in models/.
//
// What a config says that the spec cannot (longrope, an unknown activation,
// quantization, …) is an error naming the config key and value; keys the
// importer does not know are a warning, never silently dropped. With a
// checkpoint beside the config, the spec's parameter count must equal the
// checkpoint's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "generator/import/toml_doc.hpp"
#include "generator/spec/spec.hpp"
#include "runtime/error.hpp"

namespace lathe::importer {

struct ImportOptions {
  std::string name;    // [model] name; empty: from `_name_or_path`, else "model"
  std::string source;  // [model] source; empty: "<_name_or_path> config.json", else `file`
  std::string file = "config.json";  // names the config in every error and warning
  // Receives each warning line (unknown keys, values dropped as inactive).
  // Unset: the line goes to stderr.
  std::function<void(const std::string&)> warn;
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

// The model types import_hf_config reads, in the order it lists them.
std::vector<std::string> supported_hf_model_types();

// The spec of `config` (a parsed config.json) as a TOML document. Before it
// returns, the document is rendered and read back by the spec parser;
// a failure there is an internal error (Error(InvalidArgument), "internal
// error: …" with the parser's messages), never a silently wrong spec.
// Throws ImportError for what the spec cannot represent.
TomlDoc import_hf_config(const nlohmann::json& config, const ImportOptions& options);

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

// `path`: a directory holding config.json, or a config file itself. The
// name defaults to the directory's name (a Hugging Face cache snapshot
// resolves to its repository's name), or to a file's stem when it is not
// config.json, else `_name_or_path`; every name is lower-cased and
// sanitized. When the directory also holds a checkpoint (safetensors, a
// sharded index, or GGUF), the spec's parameter count must equal the sum of
// the checkpoint's tensor elements, leaving out tensors that match
// weights.ignore; a mismatch is an ImportError naming both numbers and the
// first tensor names only one side has. Throws Error(NotFound) when there is
// no config, Error(BadFile) when it is not a JSON object.
ImportResult import_hf(const std::string& path, ImportOptions options = {});

// The one entry point for `lathe import`: dispatches on the kind of input.
// `.gguf` files are not handled here (throws Error(Unsupported) saying so);
// everything else goes to import_hf.
ImportResult import_model_config(const std::string& path, ImportOptions options = {});

// "HuggingFaceTB/SmolLM2-135M" → "smollm2-135m": lower case, [a-z0-9._-],
// other runs of characters become one "-"; "model" when nothing is left.
std::string sanitize_model_name(const std::string& raw);

}  // namespace lathe::importer
