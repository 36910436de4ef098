#include "runtime/text/vocab_export.hpp"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/json_file.hpp"
#include "runtime/text/tokenizer_data.hpp"

namespace lathe::text {

namespace fs = std::filesystem;

namespace {

// Token types, as SentencePiece and llama.cpp (llama_token_type) number them.
enum TokenType : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

// A JSON object file of the checkpoint, or an empty object when absent.
nlohmann::json object_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return nlohmann::json::object();
  nlohmann::json j = detail::parse_json_file(path);
  if (!j.is_object()) throw Error(ErrorKind::BadFile, path.string() + ": must be a JSON object");
  return j;
}

// llama.cpp's does_token_look_special: added tokens some checkpoints fail
// to mark special (Gemma's <mask> and <unusedN>, <|…|> of many).
bool looks_special(const std::string& t) {
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace

GgufVocabulary gguf_vocabulary(const std::string& dir, int64_t vocab) {
  GgufVocabulary out;
  const fs::path model_path = fs::path(dir) / "tokenizer.model";
  std::error_code ec;
  if (!fs::is_regular_file(model_path, ec)) {
    out.summary = fs::exists(fs::path(dir) / "tokenizer.json", ec)
                      ? "no vocabulary written: " + dir + " has a tokenizer.json only, and lathe writes "
                                                          "SentencePiece (tokenizer.model) vocabularies alone"
                      : "no vocabulary written: " + dir + " has no tokenizer.model";
    return out;
  }
  sentencepiece::SentencePieceProcessor sp;
  if (const auto status = sp.Load(model_path.string()); !status.ok())
    throw Error(ErrorKind::BadFile, model_path.string() + ": not a SentencePiece model: " + status.ToString());

  const auto rows = static_cast<size_t>(vocab);
  std::vector<std::string> tokens(rows);
  std::vector<float> scores(rows, -10000.0f);
  std::vector<int32_t> types(rows, kUnused);
  for (size_t id = 0; id < rows; ++id) tokens[id] = "[PAD" + std::to_string(id) + "]";
  // The types as the model file holds them: user-defined pieces too, which
  // the processor's API (and so llama.cpp's converter) cannot tell from
  // normal ones.
  const std::vector<int32_t> piece_types = detail::sentencepiece_piece_types(sp.serialized_model_proto());
  const int pieces = sp.GetPieceSize();
  for (int id = 0; id < pieces && static_cast<size_t>(id) < rows; ++id) {
    tokens[id] = sp.IdToPiece(id);
    scores[id] = sp.GetScore(id);
    types[id] = static_cast<size_t>(id) < piece_types.size() ? piece_types[id] : kNormal;
  }

  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  const nlohmann::json tokenizer_config = object_file(config_path);
  if (const auto it = tokenizer_config.find("added_tokens_decoder"); it != tokenizer_config.end()) {
    if (!it->is_object())
      throw Error(ErrorKind::BadFile, config_path.string() + ": added_tokens_decoder must be an object");
    for (const auto& [key, token] : it->items()) {
      size_t id = 0;
      try {
        id = std::stoull(key);
      } catch (const std::exception&) {
        throw Error(ErrorKind::BadFile, config_path.string() + ": added_tokens_decoder key \"" + key +
                                            "\" is not a token id");
      }
      if (!token.is_object() || !token.contains("content") || !token["content"].is_string())
        throw Error(ErrorKind::BadFile,
                    config_path.string() + ": added_tokens_decoder[" + key + "] has no string content");
      if (id >= rows) continue;  // as the converter: out of the embedding's range
      const std::string content = token["content"];
      const bool special = (token.contains("special") && token["special"] == true) || looks_special(content);
      types[id] = special ? kControl : kUserDefined;
      tokens[id] = special ? content : replace_all(content, "\xE2\x96\x81", " ");
      scores[id] = -1000.0f;
    }
  }

  auto& m = out.metadata;
  m["tokenizer.ggml.model"] = std::string("llama");
  m["tokenizer.ggml.pre"] = std::string("default");
  m["tokenizer.ggml.tokens"] = weights::GgufValue::strings(tokens);
  weights::GgufArray score_array{weights::GgufType::F32, {}}, type_array{weights::GgufType::I32, {}};
  for (size_t i = 0; i < rows; ++i) {
    score_array.items.emplace_back(scores[i]);
    type_array.items.emplace_back(types[i]);
  }
  m["tokenizer.ggml.scores"] = std::move(score_array);
  m["tokenizer.ggml.token_type"] = std::move(type_array);
  // The normalizer's flags: llama.cpp's SentencePiece tokenizer adds the
  // space prefix as the model does; lathe's also collapses whitespace where
  // the model does (llama.cpp's converter writes that key for T5-style
  // vocabularies only, and its llama tokenizer keeps every space).
  const detail::SentencePieceNormalizer normalizer = detail::sentencepiece_normalizer(sp.serialized_model_proto());
  m["tokenizer.ggml.add_space_prefix"] = normalizer.add_dummy_prefix;
  m["tokenizer.ggml.remove_extra_whitespaces"] = normalizer.remove_extra_whitespaces;

  // Special ids: config.json's, else the SentencePiece model's own.
  const nlohmann::json config = object_file(fs::path(dir) / "config.json");
  const struct {
    const char* config_key;
    const char* gguf_key;
    int model_id;
  } specials[] = {{"bos_token_id", "bos_token_id", sp.bos_id()},
                  {"eos_token_id", "eos_token_id", sp.eos_id()},
                  {"unk_token_id", "unknown_token_id", sp.unk_id()},
                  {"pad_token_id", "padding_token_id", sp.pad_id()}};
  for (const auto& s : specials) {
    int64_t id = s.model_id;
    if (const auto it = config.find(s.config_key); it != config.end() && it->is_number_integer()) id = it->get<int64_t>();
    if (id >= 0 && static_cast<size_t>(id) < rows)
      m[std::string("tokenizer.ggml.") + s.gguf_key] = static_cast<uint32_t>(id);
  }
  for (const char* name : {"add_bos_token", "add_eos_token"})
    if (const auto it = tokenizer_config.find(name); it != tokenizer_config.end() && it->is_boolean())
      m[std::string("tokenizer.ggml.") + name] = it->get<bool>();

  out.summary = "sentencepiece vocabulary of " + std::to_string(rows) + " tokens";
  if (static_cast<size_t>(pieces) > rows)
    out.summary += " (" + std::to_string(static_cast<size_t>(pieces) - rows) + " pieces beyond the embedding dropped)";
  if (const std::optional<ChatTemplateSource> t = find_chat_template(dir)) {
    m["tokenizer.chat_template"] = t->text;
    out.summary += ", chat template";
  }
  return out;
}

}  // namespace lathe::text
