#include "runtime/text/tokenize/vocab_export.hpp"

#include <sentencepiece_processor.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/text/jinja/chat_template.hpp"
#include "runtime/text/tokenize/json_file.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/text/tokenize/tokenizer_data.hpp"

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

// A tokenizer.model: the pieces as the model file holds them.
GgufVocabulary sentencepiece_vocabulary(const std::string& dir, const fs::path& model_path, int64_t vocab) {
  GgufVocabulary out;
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
  return out;
}

// The id of a special token that tokenizer_config.json names by its text
// ("bos_token": "<|begin_of_text|>" or {"content": …}).
std::optional<int64_t> config_token_id(const nlohmann::json& config, const char* key,
                                       const std::map<std::string, int64_t>& ids) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  const nlohmann::json* text = &*it;
  if (it->is_object() && it->contains("content")) text = &(*it)["content"];
  if (!text->is_string()) return std::nullopt;
  const auto id = ids.find(text->get<std::string>());
  return id == ids.end() ? std::nullopt : std::optional<int64_t>(id->second);
}

// The pre-tokenizers lathe's GGUF reader and llama.cpp both know by name, in
// the order they are tried.
constexpr const char* kPreNames[] = {"llama-bpe", "qwen2", "smollm", "gpt-2"};

// Text whose splits tell the named pre-tokenizers apart: contractions in
// both cases, digit runs of every length, runs of spaces, newlines, tabs,
// letters and symbols outside ASCII.
constexpr const char* kProbe =
    "Hello world's 123  test\n\nI'LL DO 4567 it's 89, 1.5e10 \t tab  x   y\r\n"
    "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC" "100 \xF0\x9F\x98\x80!! '' \xE4\xB8\xAD\xE6\x96\x87 a1b22c333d4444 \n ";

// A tokenizer.json's model.vocab and added_tokens by id, as llama.cpp's
// converter lists them (get_vocab_base): `vocab` rows, "[PAD<id>]" UNUSED
// where no token has the id, added tokens CONTROL (special, or looking
// special) or USER_DEFINED; and every token's id by its text.
struct VocabularyById {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::map<std::string, int64_t> ids;
};
VocabularyById vocabulary_by_id(const nlohmann::json& j, const fs::path& json_path, int64_t vocab) {
  const auto rows = static_cast<size_t>(vocab);
  VocabularyById out{std::vector<std::string>(rows), std::vector<int32_t>(rows, kUnused), {}};
  auto& [tokens, types, ids] = out;
  for (size_t id = 0; id < rows; ++id) tokens[id] = "[PAD" + std::to_string(id) + "]";
  for (const auto& [text, id] : j["model"]["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      throw Error(ErrorKind::BadFile, json_path.string() + ": model.vocab[\"" + text + "\"] is not a token id");
    ids[text] = id.get<int64_t>();
    if (id.get<size_t>() < rows) {
      tokens[id.get<size_t>()] = text;
      types[id.get<size_t>()] = kNormal;
    }
  }
  if (const auto it = j.find("added_tokens"); it != j.end() && it->is_array()) {
    for (const nlohmann::json& t : *it) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        throw Error(ErrorKind::BadFile, json_path.string() + ": an added_tokens entry lacks its id or content");
      const int64_t id = t["id"].get<int64_t>();
      const std::string content = t["content"];
      ids[content] = id;
      if (id < 0 || static_cast<size_t>(id) >= rows) continue;
      tokens[static_cast<size_t>(id)] = content;
      types[static_cast<size_t>(id)] = t.value("special", false) || looks_special(content) ? kControl : kUserDefined;
    }
  }
  return out;
}

// A byte-level BPE tokenizer.json as llama.cpp's converter writes it
// (_set_vocab_gpt2): tokenizer.ggml.model "gpt2", the vocabulary by id with
// added tokens CONTROL (special, or looking special) or USER_DEFINED,
// "[PAD<id>]" UNUSED rows where no token has the id, the merges as
// "left right"; tokenizer.ggml.pre the first of kPreNames whose GGUF
// tokenizer encodes kProbe as the tokenizer.json does (llama.cpp names it
// by a hash of such an encoding).
GgufVocabulary bpe_vocabulary(const std::string& dir, const fs::path& json_path, int64_t vocab) {
  GgufVocabulary out;
  const nlohmann::json j = object_file(json_path);
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object() || model->value("type", "") != "BPE" || !model->contains("vocab") ||
      !(*model)["vocab"].is_object() || model->value("byte_fallback", false)) {
    out.summary = "no vocabulary written: " + json_path.string() +
                  " is not a byte-level BPE tokenizer (lathe writes those and SentencePiece models)";
    return out;
  }
  const auto rows = static_cast<size_t>(vocab);
  auto [tokens, types, ids] = vocabulary_by_id(j, json_path, vocab);
  std::vector<std::string> merges;
  if (const auto it = model->find("merges"); it != model->end() && it->is_array()) {
    for (const nlohmann::json& merge : *it) {
      if (merge.is_string()) {
        merges.push_back(merge.get<std::string>());
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
        // transformers ≥ 4.45 writes pairs, whose parts may hold spaces: the
        // converter writes those as U+0120, as byte-level text spells a space.
        const auto part = [](const nlohmann::json& p) { return replace_all(p.get<std::string>(), " ", "\xC4\xA0"); };
        merges.push_back(part(merge[0]) + " " + part(merge[1]));
      } else {
        throw Error(ErrorKind::BadFile, json_path.string() + ": model.merges holds an entry that is no merge");
      }
    }
  }

  auto& m = out.metadata;
  m["tokenizer.ggml.model"] = std::string("gpt2");
  m["tokenizer.ggml.tokens"] = weights::GgufValue::strings(tokens);
  weights::GgufArray type_array{weights::GgufType::I32, {}};
  for (int32_t t : types) type_array.items.emplace_back(t);
  m["tokenizer.ggml.token_type"] = std::move(type_array);
  m["tokenizer.ggml.merges"] = weights::GgufValue::strings(merges);

  // Special ids: tokenizer_config.json's texts, else config.json's ids.
  const nlohmann::json tokenizer_config = object_file(fs::path(dir) / "tokenizer_config.json");
  const nlohmann::json config = object_file(fs::path(dir) / "config.json");
  const struct {
    const char* text_key;
    const char* config_key;
    const char* gguf_key;
  } specials[] = {{"bos_token", "bos_token_id", "bos_token_id"},
                  {"eos_token", "eos_token_id", "eos_token_id"},
                  {"unk_token", "unk_token_id", "unknown_token_id"},
                  {"pad_token", "pad_token_id", "padding_token_id"}};
  for (const auto& s : specials) {
    std::optional<int64_t> id = config_token_id(tokenizer_config, s.text_key, ids);
    if (const auto it = config.find(s.config_key); !id && it != config.end() && it->is_number_integer())
      id = it->get<int64_t>();
    if (id && *id >= 0 && static_cast<size_t>(*id) < rows)
      m[std::string("tokenizer.ggml.") + s.gguf_key] = static_cast<uint32_t>(*id);
  }
  for (const char* name : {"add_bos_token", "add_eos_token"})
    if (const auto it = tokenizer_config.find(name); it != tokenizer_config.end() && it->is_boolean())
      m[std::string("tokenizer.ggml.") + name] = it->get<bool>();

  // The pre-tokenizer's name: the first whose encoding of the probe is the tokenizer.json's.
  const std::vector<int32_t> expected = Tokenizer::from_hf(json_path.string()).encode(kProbe, false, false);
  // A file of this process's own: two quantizations at once must not read each other's.
  const fs::path probe_path = fs::temp_directory_path() / ("lathe-vocab-" + std::to_string(::getpid()) + "-" +
                                                           std::to_string(std::hash<std::string>{}(json_path.string())) + ".gguf");
  for (const char* pre : kPreNames) {
    auto candidate = m;
    candidate["tokenizer.ggml.pre"] = std::string(pre);
    weights::write_gguf(probe_path.string(), candidate, {});
    bool same = false;
    try {
      same = Tokenizer::from_gguf(weights::GgufFile(probe_path.string())).encode(kProbe, false, false) == expected;
    } catch (const Error&) {
      same = false;  // e.g. a vocabulary without every byte-level character
    }
    if (same) {
      m["tokenizer.ggml.pre"] = std::string(pre);
      break;
    }
  }
  std::error_code ec;
  fs::remove(probe_path, ec);
  if (!m.contains("tokenizer.ggml.pre")) {
    out.metadata.clear();
    out.summary = "no vocabulary written: " + json_path.string() +
                  " pre-tokenizes as none of the GGUF pre-tokenizers lathe knows (llama-bpe, qwen2, smollm, gpt-2)";
    return out;
  }
  out.summary = "byte-level BPE vocabulary of " + std::to_string(rows) + " tokens, pre-tokenizer " +
                std::get<std::string>(m["tokenizer.ggml.pre"].value);
  return out;
}

// A WordPiece tokenizer.json (BERT) as llama.cpp's converter writes it
// (conversion/bert.py, BertModel.set_vocab): tokenizer.ggml.model "bert",
// the vocabulary by id rewritten to the phantom space: CONTROL tokens as
// they are, "##ing" as "ing", every other token "hello" as "▁hello"
// ("[PAD<id>]" rows too). gguf-py's SpecialVocab: [CLS] (cls_token) is BOS
// when there is no bos_token, [SEP] (sep_token) EOS and the separator
// (llama.cpp's key spells it "seperator"); unk and pad; the
// BertNormalizer's lowercase and strip_accents where it states them.
GgufVocabulary wordpiece_vocabulary(const std::string& dir, const nlohmann::json& j, const fs::path& json_path,
                                    int64_t vocab) {
  GgufVocabulary out;
  if (!j["model"].contains("vocab") || !j["model"]["vocab"].is_object()) {
    out.summary = "no vocabulary written: " + json_path.string() + ": model.vocab is not an object";
    return out;
  }
  auto [tokens, types, by_text] = vocabulary_by_id(j, json_path, vocab);
  const auto& ids = by_text;  // a reference the lambda below may capture (a structured binding may not be, before C++20)
  for (size_t id = 0; id < tokens.size(); ++id) {
    std::string& t = tokens[id];
    if (types[id] != kControl) t = t.starts_with("##") ? t.substr(2) : "\xE2\x96\x81" + t;
  }
  auto& m = out.metadata;
  m["tokenizer.ggml.model"] = std::string("bert");
  m["tokenizer.ggml.pre"] = std::string("default");
  m["tokenizer.ggml.tokens"] = weights::GgufValue::strings(tokens);
  weights::GgufArray type_array{weights::GgufType::I32, {}};
  for (int32_t t : types) type_array.items.emplace_back(t);
  m["tokenizer.ggml.token_type"] = std::move(type_array);

  // Special ids: tokenizer_config.json's texts, else BERT's own.
  const nlohmann::json config = object_file(fs::path(dir) / "tokenizer_config.json");
  const auto special = [&](std::initializer_list<const char*> keys, const char* bert) -> std::optional<int64_t> {
    for (const char* key : keys)
      if (const std::optional<int64_t> id = config_token_id(config, key, ids)) return id;
    const auto it = ids.find(bert);
    return it == ids.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  const struct {
    const char* gguf_key;
    std::optional<int64_t> id;
  } specials[] = {{"bos_token_id", special({"bos_token", "cls_token"}, "[CLS]")},
                  {"eos_token_id", special({"eos_token", "sep_token"}, "[SEP]")},
                  {"seperator_token_id", special({"sep_token"}, "[SEP]")},
                  {"unknown_token_id", special({"unk_token"}, "[UNK]")},
                  {"padding_token_id", special({"pad_token"}, "[PAD]")}};
  for (const auto& s : specials)
    if (s.id && *s.id >= 0 && *s.id < vocab) m[std::string("tokenizer.ggml.") + s.gguf_key] = static_cast<uint32_t>(*s.id);

  // The normalizer's flags, as SpecialVocab reads them (a Sequence's too).
  std::function<void(const nlohmann::json&)> flags = [&](const nlohmann::json& n) {
    if (!n.is_object()) return;
    const std::string type = n.value("type", "");
    if (type == "Lowercase") m["tokenizer.ggml.normalizer.lowercase"] = true;
    if (type == "StripAccents") m["tokenizer.ggml.normalizer.strip_accents"] = true;
    if (type == "BertNormalizer")
      for (const char* key : {"lowercase", "strip_accents"})
        if (const auto it = n.find(key); it != n.end() && it->is_boolean())
          m[std::string("tokenizer.ggml.normalizer.") + key] = it->get<bool>();
    if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array())
      for (const nlohmann::json& each : n["normalizers"]) flags(each);
  };
  if (const auto it = j.find("normalizer"); it != j.end()) flags(*it);
  out.summary = "WordPiece vocabulary of " + std::to_string(tokens.size()) + " tokens (llama.cpp's bert, phantom space)";
  return out;
}

}  // namespace

GgufVocabulary gguf_vocabulary(const std::string& dir, int64_t vocab) {
  const fs::path model_path = fs::path(dir) / "tokenizer.model", json_path = fs::path(dir) / "tokenizer.json";
  std::error_code ec;
  GgufVocabulary out;
  if (fs::is_regular_file(model_path, ec)) {
    out = sentencepiece_vocabulary(dir, model_path, vocab);
  } else if (fs::is_regular_file(json_path, ec)) {
    const nlohmann::json j = object_file(json_path);
    const bool wordpiece = j.contains("model") && j["model"].is_object() && j["model"].value("type", "") == "WordPiece";
    out = wordpiece ? wordpiece_vocabulary(dir, j, json_path, vocab) : bpe_vocabulary(dir, json_path, vocab);
  } else {
    out.summary = "no vocabulary written: " + dir + " has no tokenizer.model or tokenizer.json";
    return out;
  }
  if (out.metadata.empty()) return out;
  if (const std::optional<ChatTemplateSource> t = find_chat_template(dir)) {
    out.metadata["tokenizer.chat_template"] = t->text;
    out.summary += ", chat template";
  }
  return out;
}

}  // namespace lathe::text
