// Reading the JSON files of a Hugging Face checkpoint (tokenizer.json,
// tokenizer_config.json), with errors that name the file.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace lathe::text::detail {

// Throws Error(Io) "<path>: cannot be read" / "read failed".
std::string read_text_file(const std::filesystem::path& path);
// Throws Error(BadFile) "<path>: not valid JSON: …".
nlohmann::json parse_json_file(const std::filesystem::path& path);

}  // namespace lathe::text::detail
