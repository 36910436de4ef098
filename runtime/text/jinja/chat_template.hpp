// Chat templates: a conversation (OpenAI-style messages) → the prompt text a
// model was trained on, rendered exactly as Hugging Face transformers'
// apply_chat_template renders it. transformers compiles the checkpoint's
// Jinja2 template in an ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and the loopcontrols extension, replaces the tojson filter
// by json.dumps(ensure_ascii=False) and adds raise_exception(message) and
// strftime_now(format); this is an interpreter of the subset of Jinja2 that
// chat templates use, with those settings (jinja_parser.cpp,
// jinja_render.cpp, jinja_builtins.cpp say what is in it).
//
//   auto t = ChatTemplate::parse(find_chat_template(dir)->text);
//   std::string prompt = t.render_chat(messages, true, "<|begin_of_text|>", "<|eot_id|>");
//
// Errors are lathe::Error:
//   parse   BadFile          "chat template:12:5: expected '}}', found 'x'"
//   render  InvalidArgument  "chat template:3: System role not supported" (the template's raise_exception)
//           BadFile          "chat template:7: unknown filter 'frobnicate'" (any other runtime error)
// Bad input never crashes or hangs the interpreter: nesting, macro
// recursion, loop iterations and output size are bounded.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::weights {
class GgufFile;
}

namespace lathe::text {

namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // `name` begins every error message: the file and field it came from.
  static ChatTemplate parse(std::string_view source, std::string name = "chat template");

  // Renders with these variables (a JSON object; keys keep their order, as
  // tojson writes them).
  std::string render(const nlohmann::ordered_json& variables) const;

  // The variables apply_chat_template passes: messages, tools and documents
  // (None unless `extra` gives them), add_generation_prompt, bos_token,
  // eos_token, then every key of `extra` (enable_thinking, date_string, …),
  // which may override the others.
  std::string render_chat(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                          const std::string& bos_token, const std::string& eos_token,
                          const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& name() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Template> t) : template_(std::move(t)) {}
  std::shared_ptr<const jinja::Template> template_;
};

// A checkpoint's template and the special-token strings it is rendered with.
struct ChatTemplateSource {
  std::string text;
  std::string origin;                // "<dir>/tokenizer_config.json chat_template", for messages
  std::string bos_token, eos_token;  // as the checkpoint spells them; "" when it names none
};

// A Hugging Face checkpoint: `path` is its directory or a file in it
// (tokenizer.json, tokenizer_config.json). The template is chat_template.jinja
// when there is one (where transformers ≥ 4.43 saves it), else
// chat_template.json's chat_template (a processor's: a vision model's), else
// tokenizer_config.json's chat_template: a string, or a list of
// {"name", "template"} of which "default" is taken. bos_token / eos_token
// come from tokenizer_config.json (a string or {"content": …}).
// nullopt when the checkpoint has no template; Error(BadFile) for a field
// of the wrong shape.
std::optional<ChatTemplateSource> find_chat_template(const std::string& path);

// A GGUF file: tokenizer.chat_template, with the tokens that
// tokenizer.ggml.bos_token_id / eos_token_id name.
std::optional<ChatTemplateSource> find_chat_template(const weights::GgufFile& file);

}  // namespace lathe::text
