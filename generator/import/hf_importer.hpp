// The Hugging Face importer's parts (hf_import.cpp and the files it
// splits its families into): config.json as read (Config), the family
// table, and the Importer that writes a spec from them. Private to
// generator/import.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/manifest.hpp"
#include "generator/import/hf_core_keys.hpp"
#include "generator/import/hf_import.hpp"
#include "generator/import/toml_doc.hpp"
#include "generator/spec/parse.hpp"

namespace lathe::importer::hf {

using nlohmann::json;
namespace fs = std::filesystem;

enum class Family {
  Llama, Mistral, Mixtral, Qwen2, Qwen2Moe, Qwen3, Qwen3Moe, Gemma, Gemma2, Gemma3Text, Phi3, Olmo2, Gpt2,
  GptNeox, Phi, Gptj, Falcon, Bloom, Mpt, Bert, Roberta, XlmRoberta, T5, ModernBert, Bart, MBart, Mamba, Mamba2, Bamba,
  DeepseekV2, DeepseekV3,
  MllamaText,  // Llama 3.2 Vision's text_config (mllama_text_model): imported only within an mllama config
};

struct FamilyInfo {
  Family family;
  const char* model_type;
  const char* config_class;  // names the defaults in comments
  const char* model_class;   // names hard-coded behaviour in comments
};

inline constexpr FamilyInfo kFamilies[] = {
    {Family::Llama, "llama", "LlamaConfig", "Llama"},
    {Family::Mistral, "mistral", "MistralConfig", "Mistral"},
    {Family::Mixtral, "mixtral", "MixtralConfig", "Mixtral"},
    {Family::Qwen2, "qwen2", "Qwen2Config", "Qwen2"},
    {Family::Qwen2Moe, "qwen2_moe", "Qwen2MoeConfig", "Qwen2Moe"},
    {Family::Qwen3, "qwen3", "Qwen3Config", "Qwen3"},
    {Family::Qwen3Moe, "qwen3_moe", "Qwen3MoeConfig", "Qwen3Moe"},
    {Family::Gemma, "gemma", "GemmaConfig", "Gemma"},
    {Family::Gemma2, "gemma2", "Gemma2Config", "Gemma2"},
    {Family::Gemma3Text, "gemma3_text", "Gemma3TextConfig", "Gemma3"},
    {Family::Phi3, "phi3", "Phi3Config", "Phi3"},
    {Family::Olmo2, "olmo2", "Olmo2Config", "Olmo2"},
    {Family::Gpt2, "gpt2", "GPT2Config", "GPT2"},
    {Family::GptNeox, "gpt_neox", "GPTNeoXConfig", "GPTNeoX"},
    {Family::Phi, "phi", "PhiConfig", "Phi"},
    {Family::Gptj, "gptj", "GPTJConfig", "GPTJ"},
    {Family::Falcon, "falcon", "FalconConfig", "Falcon"},
    {Family::Bloom, "bloom", "BloomConfig", "Bloom"},
    {Family::Mpt, "mpt", "MptConfig", "Mpt"},
    {Family::Bert, "bert", "BertConfig", "Bert"},
    {Family::Roberta, "roberta", "RobertaConfig", "Roberta"},
    {Family::XlmRoberta, "xlm-roberta", "XLMRobertaConfig", "XLMRoberta"},
    {Family::T5, "t5", "T5Config", "T5"},
    {Family::ModernBert, "modernbert", "ModernBertConfig", "ModernBert"},
    {Family::Bart, "bart", "BartConfig", "Bart"},
    {Family::MBart, "mbart", "MBartConfig", "MBart"},
    {Family::Mamba, "mamba", "MambaConfig", "Mamba"},
    {Family::Mamba2, "mamba2", "Mamba2Config", "Mamba2"},
    {Family::Bamba, "bamba", "BambaConfig", "Bamba"},
    {Family::DeepseekV2, "deepseek_v2", "DeepseekV2Config", "DeepseekV2"},
    {Family::DeepseekV3, "deepseek_v3", "DeepseekV3Config", "DeepseekV3"},
};

inline const FamilyInfo* find_family(std::string_view model_type) {
  for (const FamilyInfo& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

// The multimodal model types: a text_config, read by its family's reader
// (model_type `text_model_type` unless it says another), and a
// vision_config, read with the top-level keys into [vision] (hf_vision.cpp).
struct MultimodalInfo {
  const char* model_type;
  const char* config_class;       // names the top-level defaults in comments
  const char* model_class;        // names hard-coded behaviour in comments
  const char* text_model_type;    // text_config.model_type's default
  const char* vision_model_type;  // vision_config.model_type's default
};

inline constexpr MultimodalInfo kMultimodal[] = {
    {"llava", "LlavaConfig", "LlavaForConditionalGeneration", "llama", "clip_vision_model"},
    {"mistral3", "Mistral3Config", "Mistral3ForConditionalGeneration", "mistral", "pixtral"},
    {"gemma3", "Gemma3Config", "Gemma3ForConditionalGeneration", "gemma3_text", "siglip_vision_model"},
    {"mllama", "MllamaConfig", "MllamaForConditionalGeneration", "mllama_text_model", "mllama_vision_model"},
};

inline bool is_gemma(Family f) { return f == Family::Gemma || f == Family::Gemma2 || f == Family::Gemma3Text; }

// Keys every config may hold that say nothing about the architecture:
// training, generation, tokenizer and bookkeeping settings of PretrainedConfig.
inline const std::set<std::string, std::less<>> kIgnoredKeys = {
    "_name_or_path", "architectures", "model_type", "transformers_version", "auto_map",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "use_cache", "initializer_range", "initializer_factor", "attention_dropout", "hidden_dropout",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attn_pdrop", "resid_pdrop", "embd_pdrop",
    "output_attentions", "output_hidden_states", "return_dict", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "pruned_heads", "chunk_size_feed_forward", "is_decoder", "tie_encoder_decoder", "cross_attention_hidden_size",
    "finetuning_task", "id2label", "label2id", "num_labels", "tokenizer_class", "prefix", "task_specific_params",
    "problem_type", "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
    "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "_attn_implementation", "_attn_implementation_autoset", "attn_implementation", "cache_implementation",
    "pretraining_tp",  // Llama: how training split the matmuls; the same function
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise",  // MoE training
    "gradient_checkpointing", "use_return_dict", "_commit_hash",
    "is_composition",  // older transformers: a config made of sub-configs
};

// obj[key] when it is a string.
inline std::optional<std::string> string_in(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return std::nullopt;
  return obj[key].get<std::string>();
}

// The spec's ranges (generator/spec/parse.cpp).
inline constexpr int64_t kMaxDim = int64_t{1} << 24;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 4096;

// A value as a message shows it: JSON, strings quoted.
inline std::string shown(const json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>()))  // JSON's dump would say null
    return std::isnan(v.get<double>()) ? "NaN" : v.get<double>() > 0 ? "Infinity" : "-Infinity";
  return v.dump();
}

// Python's json module writes float("inf") and float("nan") as the bare
// tokens Infinity, -Infinity and NaN (Mamba-2's time_step_limit), which JSON
// does not have. Outside strings each becomes a marker string for the
// parser, and each marker the double it stands for after.
inline constexpr std::string_view kNonFinite = "\\u0000lathe-non-finite:";

inline json parse_python_json(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const std::string_view token : {"-Infinity", "Infinity", "NaN"}) {
      if (text.compare(i, token.size(), token) != 0) continue;
      out += "\"" + std::string(kNonFinite) + std::string(token) + "\"";
      i += token.size() - 1;
      replaced = any = true;
      break;
    }
    if (!replaced) out += c;
  }
  json j = json::parse(out);
  if (!any) return j;
  // Every value, depth first without recursion (a config may nest deep).
  const std::string marker = std::string(1, '\0') + std::string(kNonFinite.substr(6));
  std::vector<json*> pending = {&j};
  while (!pending.empty()) {
    json& v = *pending.back();
    pending.pop_back();
    if (v.is_structured()) {
      for (json& item : v) pending.push_back(&item);
    } else if (v.is_string() && v.get_ref<const std::string&>().rfind(marker, 0) == 0) {
      const std::string token = v.get_ref<const std::string&>().substr(marker.size());
      v = token == "NaN" ? std::numeric_limits<double>::quiet_NaN()
          : token == "Infinity" ? std::numeric_limits<double>::infinity()
                                : -std::numeric_limits<double>::infinity();
    }
  }
  return j;
}

// A sub-config of a multimodal config (text_config, vision_config): where
// its keys are, and the defaults of the keys that a config.json of its own
// always writes. transformers saved a sub-config as its differences from
// the class's defaults (llava-1.5's text_config has no hidden_size:
// LlamaConfig's 4096).
struct Nesting {
  std::string where;   // "text_config": "not in text_config" in the default notes
  std::string prefix;  // "vision_config.": the keys as notes and errors name them ("" for text_config)
  std::map<std::string, int64_t, std::less<>> implied;  // required keys' class defaults
};

// The config being read: typed reads that remember which keys were read,
// and all errors, each prefixed with the file.
class Config {
 public:
  Config(const json& j, std::string file, const char* config_class, Nesting nesting = {})
      : j_(j), file_(std::move(file)), class_(config_class), nesting_(std::move(nesting)) {}

  template <class T>
  struct Field {
    T value{};
    std::string note;    // the comment: the key, or where the value came from
    bool given = false;  // written in the config (null counts as written)
  };

  bool present(std::string_view key) const { return j_.contains(key); }
  bool is_null(std::string_view key) const { return present(key) && j_.at(std::string(key)).is_null(); }
  bool has(std::string_view key) const { return present(key) && !is_null(key); }
  const json& at(std::string_view key) const { return j_.at(std::string(key)); }
  void use(std::string_view key) { used_.insert(std::string(key)); }

  // The key as notes and errors name it: "vision_config.hidden_size" in a vision_config.
  std::string name(std::string_view key) const { return nesting_.prefix + std::string(key); }

  std::string default_note(std::string_view key) const {
    return name(key) + " (" + class_ + " default; not in " + (nesting_.where.empty() ? "config.json" : nesting_.where) +
           ")";
  }

  // A key's value as a T: nullopt when the config does not give it (null
  // counts as not given), or when `fits` says the value is no T, which is an
  // error saying what was `expected`.
  template <class T, class Fits>
  std::optional<T> typed(std::string_view key, Fits fits, const char* expected) {
    use(key);
    if (!has(key)) return std::nullopt;
    const json& v = at(key);
    if (!fits(v)) {
      value_error(key, v, expected);
      return std::nullopt;
    }
    return v.get<T>();
  }

  // Integer keys: a float, a string, … is an error; so is a value outside
  // [min, max] (the spec's own ranges, so that a config never turns into a
  // spec the parser rejects).
  std::optional<int64_t> integer(std::string_view key, int64_t min = 1, int64_t max = kMaxDim) {
    const auto n = typed<int64_t>(
        key,
        [](const json& v) {
          return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
        },
        "expected an integer");
    if (n && (*n < min || *n > max)) {
      value_error(key, at(key), "must be between " + std::to_string(min) + " and " + std::to_string(max));
      return std::nullopt;
    }
    return n;
  }

  std::optional<double> number(std::string_view key) {
    return typed<double>(
        key, [](const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }, "expected a number");
  }

  std::optional<bool> boolean(std::string_view key) {
    return typed<bool>(key, [](const json& v) { return v.is_boolean(); }, "expected true or false");
  }

  std::optional<std::string> string(std::string_view key) {
    return typed<std::string>(key, [](const json& v) { return v.is_string(); }, "expected a string");
  }

  // A dimension every config writes: missing is an error.
  Field<int64_t> required(std::string_view key, int64_t max = kMaxDim) {
    Field<int64_t> f{0, name(key), true};
    if (!present(key) || is_null(key)) {
      use(key);
      if (const auto it = nesting_.implied.find(key); it != nesting_.implied.end() && !present(key))
        return {it->second, default_note(key), false};
      error("missing required key '" + name(key) + "'");
      return f;
    }
    if (auto v = integer(key, 1, max)) f.value = *v;
    return f;
  }

  // `read`, the value of `key` as read, else the config class's default.
  template <class T>
  Field<T> or_default(std::string_view key, const std::optional<T>& read, T fallback) const {
    if (read) return {*read, name(key), true};
    return {fallback, default_note(key), present(key)};
  }
  Field<int64_t> integer_or(std::string_view key, int64_t fallback, int64_t min = 1, int64_t max = kMaxDim) {
    return or_default(key, integer(key, min, max), fallback);
  }
  Field<double> number_or(std::string_view key, double fallback) { return or_default(key, number(key), fallback); }
  Field<bool> boolean_or(std::string_view key, bool fallback) { return or_default(key, boolean(key), fallback); }
  // A key whose null means "none" (sliding_window, softcaps): absent gives
  // the class default, null gives nullopt.
  Field<std::optional<double>> nullable_number(std::string_view key, std::optional<double> fallback) {
    if (is_null(key)) {
      use(key);
      return {std::nullopt, name(key) + " = null", true};
    }
    if (auto v = number(key)) return {*v, name(key), true};
    return {fallback, default_note(key), false};
  }

  void error(const std::string& message) { errors_.push_back(file_ + ": " + message); }
  void value_error(std::string_view key, const json& v, const std::string& message) {
    error(name(key) + " = " + shown(v) + ": " + message);
  }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::string& file() const { return file_; }

  // The keys nobody read and that kIgnoredKeys (and `also_ignored`) does not list.
  std::vector<std::string> unknown_keys(const std::set<std::string, std::less<>>& also_ignored = {}) const {
    std::vector<std::string> out;
    for (const auto& [key, value] : j_.items())
      if (!used_.count(key) && !kIgnoredKeys.count(key) && !also_ignored.count(key)) out.push_back(name(key));
    return out;
  }

 private:
  const json& j_;
  std::string file_;
  const char* class_;
  Nesting nesting_;
  std::set<std::string> used_;
  std::vector<std::string> errors_;
};

// TOML numbers: an integral value as an integer (query_pre_attn_scalar = 256).
inline TomlValue number_value(double v) {
  if (v == std::trunc(v) && std::fabs(v) < 9e15) return TomlValue(static_cast<int64_t>(v));
  return TomlValue(v);
}

inline std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

inline std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// HF hidden_act values the spec has (docs/spec.md, [mlp] activation).
inline std::optional<std::string> activation_of(const std::string& act) {
  if (act == "silu" || act == "swish") return "silu";
  if (act == "gelu") return "gelu_erf";
  if (act == "gelu_new" || act == "gelu_fast" || act == "gelu_pytorch_tanh") return "gelu_tanh";
  if (act == "relu") return "relu";
  if (act == "quick_gelu") return "gelu_quick";
  return std::nullopt;
}

inline const char* kActivationHelp =
    "the spec has silu (silu, swish), gelu_erf (gelu), gelu_tanh (gelu_new, gelu_fast, gelu_pytorch_tanh), relu "
    "and gelu_quick (quick_gelu)";

// An activation key (hidden_act, projector_hidden_act) as the spec's word,
// its note naming the key (and the config's word where the spec's differs);
// an unknown one is an error, and nullopt.
inline std::optional<Config::Field<std::string>> read_activation_key(Config& c, std::string_view key,
                                                                      const char* fallback) {
  auto act = c.string(key);
  const std::string word = act.value_or(fallback);
  const std::string note = act ? c.name(key) : c.default_note(key);
  auto spec_word = activation_of(word);
  if (!spec_word) {
    c.error(c.name(key) + " = \"" + word + "\": unknown activation; " + kActivationHelp);
    return std::nullopt;
  }
  return Config::Field<std::string>{*spec_word, word == *spec_word ? note : note + " = \"" + word + "\"",
                                    act.has_value()};
}

// A warning line: to options.warn, else to stderr.
inline void warn_line(const ImportOptions& options, const std::string& line) {
  if (options.warn) options.warn(line);
  else std::cerr << line << "\n";
}

// The layers' kinds, from a layer_types list or a rule: true = windowed.
using LayerKinds = std::vector<bool>;

// The shortest pattern p with kinds[i] == p[i % |p|] for every layer.
inline std::vector<bool> shortest_pattern(const LayerKinds& kinds) {
  for (size_t period = 1; period <= kinds.size(); ++period) {
    bool fits = true;
    for (size_t i = period; i < kinds.size() && fits; ++i) fits = kinds[i] == kinds[i % period];
    if (fits) return {kinds.begin(), kinds.begin() + static_cast<std::ptrdiff_t>(period)};
  }
  return kinds;
}

// quantization_config: an error (a quantized checkpoint's config says so at its top).
void refuse_quantization(Config& c);

// [model]: the name (options.name, else the last part of `name_or_path`)
// and the source.
void write_model(TomlTable& model, const std::string& name_or_path, const ImportOptions& options);

class Importer {
 public:
  // `nesting`: the config is a multimodal config's text_config.
  Importer(const json& config, const FamilyInfo& info, const ImportOptions& options, Nesting nesting = {})
      : c_(config, options.file, info.config_class, std::move(nesting)), info_(info), f_(info.family),
        options_(options) {
    // The tables in spec order; the empty ones are not written.
    for (const char* t : {"model", "dims", "norm", "attention", "position", "position.scaling", "mlp", "moe", "ssm", "mla",
                          "embedding", "output", "weights", "weights.names", "weights.encoder_names", "pooling"})
      doc_.table(t);
  }

  TomlDoc run();

 private:
  TomlTable& t(const char* name) { return *doc_.find(name); }
  void warn(const std::string& line);
  std::string hard_coded(const std::string& what) const { return std::string(info_.model_class) + what; }

  void read_model();

  // Settings that change the model into something no spec describes.
  void read_refusals();

  // ---- dtype -------------------------------------------------------------
  void read_dtype();

  // ---- the core dimensions, by the family's row (CoreKeys) --------------------
  // A row's fields as read_core read them. vocab and context only when the
  // row reads them first (CoreKeys::reads_first).
  struct Core {
    Config::Field<int64_t> hidden, layers, heads;
    std::optional<Config::Field<int64_t>> vocab, context;
  };

  // A family's core dimensions, by its row: read_core_heads, then
  // read_core_widths. A reader with keys of its own to read between the two
  // (Phi's and Falcon's key/value heads, the Llama family's head_dim) calls them itself.
  Core read_core(const CoreKeys& row);

  // hidden and layers into [dims]; heads too, and the head split, where the row splits.
  Core read_core_heads(const CoreKeys& row);

  // dims.intermediate, vocab and max_context, then the LayerNorm's epsilon.
  void read_core_widths(const CoreKeys& row, const Core& core);

  // One dimension of a row, within [1, max].
  Config::Field<int64_t> read_dim(const CoreDim& dim, int64_t max);

  Config::Field<int64_t> read_context(const CoreKeys& row);

  // dims.intermediate, by the row's Width rule.
  void read_intermediate(const CoreKeys& row, const Config::Field<int64_t>& hidden);

  // 4 * hidden as the MLP width (`width` names it in the error), which must
  // stay within the spec's range.
  int64_t four_times(const Config::Field<int64_t>& hidden, const std::string& width);

  // ---- GPT-2 ---------------------------------------------------------------
  void read_gpt2();

  // ---- GPT-NeoX, Phi, GPT-J, Falcon, BLOOM, MPT ---------------------------------
  // The module path of each role, as the family's checkpoints name them.
  void set_names(std::initializer_list<std::pair<const char*, std::string>> names);

  // hidden / heads: every one of these families splits the width into heads.
  // `why` ends the error when they do not divide (null: "<Class> splits the width into heads").
  int64_t split_heads(const Config::Field<int64_t>& hidden, const Config::Field<int64_t>& heads,
                      const char* why = nullptr);

  // The first of `keys` the config writes, read as a required dimension.
  Config::Field<int64_t> required_any(std::initializer_list<const char*> keys, int64_t max = kMaxDim);

  void set_layernorm(const char* eps_key);

  void set_max_context(const Config::Field<int64_t>& context);

  // rotary_dim = int(head_dim * factor): the partial rotary of GPT-NeoX
  // (rotary_pct) and Phi (partial_rotary_factor).
  void set_rotary_fraction(double factor, const std::string& note);

  // The partial rotary factor: transformers 5's rope_parameters.partial_rotary_factor,
  // else the first of `keys` given, else the class default.
  void read_rotary_fraction(std::initializer_list<const char*> keys, double fallback);

  // RoPE base and scaling: transformers 5's rope_parameters, or the older
  // base key (rope_theta, GPT-NeoX's rotary_emb_base) and rope_scaling.
  void read_rope_base(std::initializer_list<const char*> theta_keys, double fallback);

  void set_tied(bool fallback);

  // MambaForCausalLM (state-spaces/mamba-*-hf): every layer a MambaBlock,
  // x + mixer(RMSNorm(x)); no attention, no positions.
  void read_mamba();

  // A Mamba or Mamba-2 model's blocks around the mixer: SiLU inside it,
  // RMS pre-norms (`norm_class`), the tie (`tied_default` when the config
  // says nothing), the hf-mamba names.
  void read_ssm_blocks(const char* norm_class, bool tied_default);

  // Mamba2ForCausalLM (mamba2-*-hf, Mamba-Codestral): every layer a
  // Mamba2Block, x + mixer(RMSNorm(x)); Mamba2Config's defaults are
  // Codestral's (8 groups, 128 heads, untied).
  void read_mamba2();

  // The keys of a Mamba-2 mixer's config (Mamba2Config's, or a hybrid's
  // mamba_* names), in the order: state size, conv taps, expand, head dim,
  // heads, groups, conv bias, in/out_proj bias.
  void read_mamba2_mixer(std::array<const char*, 8> keys, int64_t hidden, int64_t default_groups, const char* mixer);

  // BambaForCausalLM (ibm-ai-platform/Bamba-9B): Llama's decoder blocks,
  // the mixer a Mamba-2 mixer except in attn_layer_indices; attention with
  // RoPE on half of each head (BambaConfig hard-codes partial_rotary_factor
  // 0.5), the hf-bamba names.
  void read_bamba();

  // GPTNeoXForCausalLM (Pythia): one fused query_key_value laid out per head,
  // partial rotate-half RoPE, parallel attention and MLP with two norms.
  void read_gpt_neox();

  // PhiForCausalLM (Phi-1, Phi-1.5, Phi-2): q/k/v with biases, partial
  // rotate-half RoPE, one LayerNorm feeding attention and MLP, a biased LM head.
  void read_phi();

  // GPTJForCausalLM: q/k/v without biases, interleaved RoPE on the first
  // rotary_dim dims, one LayerNorm feeding attention and MLP, a biased LM head.
  void read_gptj();

  // FalconForCausalLM: a fused query_key_value whose rows depend on the
  // attention form (multi-query: q | k | v; the new decoder architecture:
  // grouped per KV head; otherwise per head), rotate-half RoPE.
  void read_falcon();

  // BloomForCausalLM: ALiBi, a LayerNorm on the word embeddings, a fused
  // query_key_value laid out per head, a tanh-GELU MLP 4 * hidden wide.
  void read_bloom();

  // BertModel, RobertaModel, XLMRobertaModel: encoders of post-norm
  // LayerNorm blocks with biases everywhere, learned absolute positions and
  // token types summed with the tokens, then a LayerNorm of the embeddings; a
  // GELU MLP. RoBERTa numbers positions from padding_idx + 1 (its position
  // table has pad_token_id + 1 more rows than it has positions).
  void read_bert();

  // T5: pre-norm blocks of T5LayerNorm (an RMS norm), no position
  // embedding but the relative position bias of each stack's first block,
  // shared by the stack's layers; scores not scaled (Mesh TensorFlow's
  // initialization folds it into q); no biases; a ReLU MLP (v1.0) or a gated
  // one ("gated-gelu": v1.1, Flan-T5). A T5EncoderModel is the encoder alone;
  // T5ForConditionalGeneration adds the decoder (num_decoder_layers blocks:
  // causal self-attention with its own bias table, cross-attention, MLP) and
  // the LM head: tied to `shared` with the hidden states scaled by
  // d_model^-0.5 (v1.0), or lm_head of its own (v1.1, Flan-T5).
  void read_t5();

  // model.decoder_start: the token generate() starts the decoder from:
  // generation_config.json's decoder_start_token_id, else config.json's,
  // else the class default, else `fallback_key`'s (T5: pad_token_id, as
  // its checkpoints set it); within the vocabulary of `vocab` tokens.
  void read_decoder_start(int64_t vocab, std::optional<int64_t> class_default, const char* fallback_key);

  // BartForConditionalGeneration (BartModel's checkpoints hold the same
  // tensors): post-norm blocks of LayerNorms with biases, learned positions
  // read from row p + 2 (BartLearnedPositionalEmbedding's offset), a
  // LayerNorm of each stack's embeddings, biases on every projection, a
  // GELU MLP, the LM head tied to `shared` plus final_logits_bias, a
  // [1, vocab] buffer. mBART is the same but for pre-norm blocks and a final
  // LayerNorm ending each stack.
  void read_bart();

  // ModernBertModel: pre-norm LayerNorm blocks (no norm before the first
  // layer's attention: the embedding norm's output goes in as is), a fused
  // Wqkv (q | k | v), RoPE with a global base and a local one on the
  // sliding-window layers, which see local_attention / 2 keys on either side
  // (every global_attn_every_n_layers-th layer, from 0, is global), a fused
  // GeGLU Wi (the activated half first), a final norm.
  void read_modernbert();

  // MptForCausalLM: ALiBi, LayerNorms without biases, a fused Wqkv (q | k | v),
  // no biases anywhere, an erf-GELU MLP expansion_ratio * d_model wide.
  void read_mpt();

  // ---- the Llama family ------------------------------------------------------
  void read_llama_like();

  // Norm epsilons: the spec's range is (0, 1].
  Config::Field<double> epsilon(const char* key, double fallback);

  void read_norm();

  void read_attention();

  void set_qkv_bias(TomlTable& a, bool on, const std::string& note);

  // Which layers use a sliding window, and how wide it is.
  void read_window();

  // layer_types, as windowed or not; nullopt when the config has none.
  std::optional<LayerKinds> layer_types();

  // ---- positions -------------------------------------------------------------
  void read_position();

  void read_gemma3_rope_parameters(const json& rp);

  std::optional<double> number_in(const json& obj, const std::string& where, const char* key);

  // partial_rotary_factor: Phi3Attention rotates int(head_dim * factor) dims;
  // the other families rotate the whole head.
  void read_rotary(const json* scaling, const std::string& scaling_key);

  void read_scaling(const json& s, const std::string& key);

  // ---- DeepSeek-V2/V3 ----------------------------------------------------------
  // DeepseekV2/V3ForCausalLM as the release's modeling_deepseek.py computes
  // it (the checkpoints were trained with it): multi-head latent attention,
  // RoPE in interleaved pairs on the rotary parts, YaRN with DeepSeek's
  // mscale; the first first_k_dense_replace layers (and those off
  // moe_layer_freq) dense, the others DeepSeek's MoE.
  void read_deepseek();

  // ---- MLP, experts, embeddings --------------------------------------------
  void read_activation(const char* key, const char* fallback);

  void read_mlp();

  void read_moe();

  void check_top_k(const Config::Field<int64_t>& experts, const Config::Field<int64_t>& top_k);

  void read_embedding();

  Config c_;
  const FamilyInfo& info_;
  Family f_;
  const ImportOptions& options_;
  TomlDoc doc_;
  int64_t layers_ = 0;
  int64_t head_dim_ = 0;
  int64_t max_context_ = 0;
  bool windowed_ = false;  // some layer has a sliding window
};

// A multimodal config (kMultimodal) as a spec: the decoder's tables from its
// text_config, then [vision]. Throws ImportError with every problem of
// both parts.
TomlDoc import_multimodal(const json& config, const MultimodalInfo& info, const ImportOptions& options);

}  // namespace lathe::importer::hf
