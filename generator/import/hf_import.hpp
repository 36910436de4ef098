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

#include <string>
#include <vector>

#include "generator/import/import.hpp"

namespace lathe::importer {

// The model types import_hf_config reads, in the order it lists them.
std::vector<std::string> supported_hf_model_types();

// The spec of `config` (a parsed config.json) as a TOML document. Before it
// returns, the document is rendered and read back by the spec parser;
// a failure there is an internal error (Error(InvalidArgument), "internal
// error: …" with the parser's messages), never a silently wrong spec.
// Throws ImportError for what the spec cannot represent.
TomlDoc import_hf_config(const nlohmann::json& config, const ImportOptions& options);

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


}  // namespace lathe::importer
