// The tokenizer alone, as llama.cpp's llama-tokenize, both ways: tokenize
// (text to ids) and detokenize (ids to text).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/model/commands.hpp"
#include "cli/model/common.hpp"
#include "runtime/error.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

namespace lathe::cli {

int cmd_tokenize(const TokenizeOptions& o) {
  const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "tokenize");
  const std::string text = o.file.empty() ? o.prompt : read_text_file(o.file, "--file");
  const std::vector<int32_t> ids = tokenizer.encode(text, !o.no_special, !o.no_parse_special);
  if (o.ids_only) {
    std::cout << "[";
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
    std::cout << "]\n";
  } else {
    for (const int32_t id : ids) std::printf("%6d -> '%s'\n", id, std::string(tokenizer.token_bytes(id)).c_str());
  }
  if (o.show_count) std::cout << "Total number of tokens: " << ids.size() << "\n";
  return 0;
}

int cmd_detokenize(const std::string& weights, const std::string& tokenizer_path, const std::string& tokens,
                   bool skip_special) {
  const lathe::text::Tokenizer tokenizer = load_tokenizer(tokenizer_path, weights, "detokenize");
  const std::vector<int32_t> ids = parse_tokens(tokens);
  for (const int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size())
      throw Error(ErrorKind::InvalidArgument, "--tokens: " + std::to_string(id) + " is outside the vocabulary of " +
                                                  tokenizer.description() + " (" + std::to_string(tokenizer.vocab_size()) +
                                                  " tokens)");
  std::cout << tokenizer.decode(ids, skip_special) << "\n";
  return 0;
}

}  // namespace lathe::cli
