#include "runtime/text/jinja/chat_template.hpp"

#include <filesystem>

#include "runtime/error.hpp"
#include "runtime/text/jinja/jinja_ast.hpp"
#include "runtime/text/tokenize/json_file.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::text {

ChatTemplate ChatTemplate::parse(std::string_view source, std::string name) {
  return ChatTemplate(std::make_shared<const jinja::Template>(jinja::parse_template(source, name)));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) throw Error(ErrorKind::InvalidArgument, name() + ": the variables must be a JSON object");
  const jinja::Value v = jinja::Value::from_json(variables);
  return jinja::render_template(*template_, v.as_dict());
}

std::string ChatTemplate::render_chat(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                      const std::string& bos_token, const std::string& eos_token,
                                      const nlohmann::ordered_json& extra) const {
  if (!extra.is_object()) throw Error(ErrorKind::InvalidArgument, name() + ": the extra variables must be a JSON object");
  nlohmann::ordered_json variables = {
      {"messages", messages},
      {"tools", nullptr},
      {"documents", nullptr},
      {"add_generation_prompt", add_generation_prompt},
      {"bos_token", bos_token},
      {"eos_token", eos_token},
  };
  for (const auto& [key, value] : extra.items()) variables[key] = value;
  return render(variables);
}

const std::string& ChatTemplate::name() const { return template_->name; }

namespace {

namespace fs = std::filesystem;

// A special token as tokenizer_config.json names it: "<s>" or {"content": "<s>", …}.
std::string config_token(const nlohmann::json& config, const char* key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  throw Error(ErrorKind::BadFile, file + ": " + key + " must be a string or {\"content\": …}");
}

// chat_template: a string, or [{"name": …, "template": …}, …] (checkpoints
// with several templates, e.g. "default" and "tool_use").
std::optional<std::string> config_template(const nlohmann::json& config, const std::string& file) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["template"].is_string())
        throw Error(ErrorKind::BadFile, file + ": chat_template entries must be {\"name\": …, \"template\": …}");
      if (entry["name"] == "default") return entry["template"].get<std::string>();
    }
    return std::nullopt;
  }
  throw Error(ErrorKind::BadFile, file + ": chat_template must be a string or a list of {\"name\", \"template\"}");
}

}  // namespace

std::optional<ChatTemplateSource> find_chat_template(const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  ChatTemplateSource source;
  const fs::path config_path = dir / "tokenizer_config.json";
  std::optional<std::string> text;
  if (fs::exists(config_path, ec)) {
    const nlohmann::json config = detail::parse_json_file(config_path);
    if (!config.is_object()) throw Error(ErrorKind::BadFile, config_path.string() + ": must be a JSON object");
    source.bos_token = config_token(config, "bos_token", config_path.string());
    source.eos_token = config_token(config, "eos_token", config_path.string());
    text = config_template(config, config_path.string());
    source.origin = config_path.string() + " chat_template";
  }
  // A processor's template (a vision model's: chat_template.json holds
  // {"chat_template": …}) over the tokenizer's, and a .jinja file over both,
  // as transformers prefers them.
  const fs::path processor_path = dir / "chat_template.json";
  if (fs::exists(processor_path, ec)) {
    const nlohmann::json config = detail::parse_json_file(processor_path);
    if (!config.is_object() || !config.contains("chat_template"))
      throw Error(ErrorKind::BadFile, processor_path.string() + ": must be a JSON object with a chat_template");
    text = config_template(config, processor_path.string());
    source.origin = processor_path.string() + " chat_template";
  }
  const fs::path jinja_path = dir / "chat_template.jinja";
  if (fs::exists(jinja_path, ec)) {
    text = detail::read_text_file(jinja_path);
    source.origin = jinja_path.string();
  }
  if (!text) return std::nullopt;
  source.text = std::move(*text);
  return source;
}

std::optional<ChatTemplateSource> find_chat_template(const weights::GgufFile& file) {
  std::optional<std::string> text = file.string("tokenizer.chat_template");
  if (!text) return std::nullopt;
  ChatTemplateSource source;
  source.text = std::move(*text);
  source.origin = file.path() + " tokenizer.chat_template";
  const std::vector<std::string> tokens = file.string_array("tokenizer.ggml.tokens").value_or(std::vector<std::string>{});
  const auto token = [&](const char* key) -> std::string {
    const std::optional<int64_t> id = file.integer(key);
    if (!id) return "";
    if (*id < 0 || static_cast<size_t>(*id) >= tokens.size())
      throw Error(ErrorKind::BadFile, file.path() + ": " + key + " " + std::to_string(*id) + " is not a token of tokenizer.ggml.tokens");
    return tokens[static_cast<size_t>(*id)];
  };
  source.bos_token = token("tokenizer.ggml.bos_token_id");
  source.eos_token = token("tokenizer.ggml.eos_token_id");
  return source;
}

}  // namespace lathe::text
