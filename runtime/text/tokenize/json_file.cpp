#include "runtime/text/tokenize/json_file.hpp"

#include <fstream>
#include <iterator>

#include "runtime/error.hpp"

namespace lathe::text::detail {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, path.string() + ": cannot be read");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw Error(ErrorKind::Io, path.string() + ": read failed");
  return text;
}

nlohmann::json parse_json_file(const std::filesystem::path& path) {
  try {
    return nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadFile, path.string() + ": not valid JSON: " + e.what());
  }
}

}  // namespace lathe::text::detail
