// config.json → spec. The defaults a config leaves out are transformers'
// own, per configuration class (LlamaConfig, Gemma2Config, …), and every
// value written says in its comment where it came from: the config key, or
// "<Class> default; not in config.json", or the modeling code that hard-codes it.
#include "generator/import/hf_import.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <sstream>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"
#include "runtime/weights/checkpoint.hpp"

namespace lathe::importer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

enum class Family {
  Llama, Mistral, Mixtral, Qwen2, Qwen2Moe, Qwen3, Qwen3Moe, Gemma, Gemma2, Gemma3Text, Phi3, Olmo2, Gpt2,
  GptNeox, Phi, Gptj, Falcon, Bloom, Mpt, Bert, Roberta, XlmRoberta, T5, ModernBert, Bart, MBart, Mamba, Mamba2, Bamba,
  DeepseekV2, DeepseekV3,
};

struct FamilyInfo {
  Family family;
  const char* model_type;
  const char* config_class;  // names the defaults in comments
  const char* model_class;   // names hard-coded behaviour in comments
};

constexpr FamilyInfo kFamilies[] = {
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

bool is_gemma(Family f) { return f == Family::Gemma || f == Family::Gemma2 || f == Family::Gemma3Text; }

// Keys every config may hold that say nothing about the architecture:
// training, generation, tokenizer and bookkeeping settings of PretrainedConfig.
const std::set<std::string, std::less<>> kIgnoredKeys = {
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
};

// obj[key] when it is a string.
std::optional<std::string> string_in(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return std::nullopt;
  return obj[key].get<std::string>();
}

// The spec's ranges (generator/spec/parse.cpp).
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 4096;

// A value as a message shows it: JSON, strings quoted.
std::string shown(const json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>()))  // JSON's dump would say null
    return std::isnan(v.get<double>()) ? "NaN" : v.get<double>() > 0 ? "Infinity" : "-Infinity";
  return v.dump();
}

// Python's json module writes float("inf") and float("nan") as the bare
// tokens Infinity, -Infinity and NaN (Mamba-2's time_step_limit), which JSON
// does not have. Outside strings each becomes a marker string for the
// parser, and each marker the double it stands for after.
constexpr std::string_view kNonFinite = "\\u0000lathe-non-finite:";

json parse_python_json(const std::string& text) {
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

// The config being read: typed reads that remember which keys were read,
// and all errors, each prefixed with the file.
class Config {
 public:
  Config(const json& j, std::string file, const char* config_class)
      : j_(j), file_(std::move(file)), class_(config_class) {}

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

  std::string default_note(std::string_view key) const {
    return std::string(key) + " (" + class_ + " default; not in config.json)";
  }

  // Integer keys: a float, a string, … is an error; so is a value outside
  // [min, max] (the spec's own ranges, so that a config never turns into a
  // spec the parser rejects).
  std::optional<int64_t> integer(std::string_view key, int64_t min = 1, int64_t max = kMaxDim) {
    use(key);
    if (!has(key)) return std::nullopt;
    const json& v = at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})) {
      value_error(key, v, "expected an integer");
      return std::nullopt;
    }
    const int64_t n = v.get<int64_t>();
    if (n < min || n > max) {
      value_error(key, v, "must be between " + std::to_string(min) + " and " + std::to_string(max));
      return std::nullopt;
    }
    return n;
  }

  std::optional<double> number(std::string_view key) {
    use(key);
    if (!has(key)) return std::nullopt;
    const json& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      value_error(key, v, "expected a number");
      return std::nullopt;
    }
    return v.get<double>();
  }

  std::optional<bool> boolean(std::string_view key) {
    use(key);
    if (!has(key)) return std::nullopt;
    const json& v = at(key);
    if (!v.is_boolean()) {
      value_error(key, v, "expected true or false");
      return std::nullopt;
    }
    return v.get<bool>();
  }

  std::optional<std::string> string(std::string_view key) {
    use(key);
    if (!has(key)) return std::nullopt;
    const json& v = at(key);
    if (!v.is_string()) {
      value_error(key, v, "expected a string");
      return std::nullopt;
    }
    return v.get<std::string>();
  }

  // A dimension every config writes: missing is an error.
  Field<int64_t> required(std::string_view key, int64_t max = kMaxDim) {
    Field<int64_t> f{0, std::string(key), true};
    if (!present(key) || is_null(key)) {
      use(key);
      error("missing required key '" + std::string(key) + "'");
      return f;
    }
    if (auto v = integer(key, 1, max)) f.value = *v;
    return f;
  }

  Field<int64_t> integer_or(std::string_view key, int64_t fallback, int64_t min = 1, int64_t max = kMaxDim) {
    if (auto v = integer(key, min, max)) return {*v, std::string(key), true};
    return {fallback, default_note(key), present(key)};
  }
  Field<double> number_or(std::string_view key, double fallback) {
    if (auto v = number(key)) return {*v, std::string(key), true};
    return {fallback, default_note(key), present(key)};
  }
  Field<bool> boolean_or(std::string_view key, bool fallback) {
    if (auto v = boolean(key)) return {*v, std::string(key), true};
    return {fallback, default_note(key), present(key)};
  }
  // A key whose null means "none" (sliding_window, softcaps): absent gives
  // the class default, null gives nullopt.
  Field<std::optional<double>> nullable_number(std::string_view key, std::optional<double> fallback) {
    if (is_null(key)) {
      use(key);
      return {std::nullopt, std::string(key) + " = null", true};
    }
    if (auto v = number(key)) return {*v, std::string(key), true};
    return {fallback, default_note(key), false};
  }

  void error(const std::string& message) { errors_.push_back(file_ + ": " + message); }
  void value_error(std::string_view key, const json& v, const std::string& message) {
    error(std::string(key) + " = " + shown(v) + ": " + message);
  }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::string& file() const { return file_; }

  // The keys nobody read and that kIgnoredKeys does not list.
  std::vector<std::string> unknown_keys() const {
    std::vector<std::string> out;
    for (const auto& [key, value] : j_.items())
      if (!used_.count(key) && !kIgnoredKeys.count(key)) out.push_back(key);
    return out;
  }

 private:
  const json& j_;
  std::string file_;
  const char* class_;
  std::set<std::string> used_;
  std::vector<std::string> errors_;
};

// TOML numbers: an integral value as an integer (query_pre_attn_scalar = 256).
TomlValue number_value(double v) {
  if (v == std::trunc(v) && std::fabs(v) < 9e15) return TomlValue(static_cast<int64_t>(v));
  return TomlValue(v);
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// HF hidden_act values the spec has (docs/spec.md, [mlp] activation).
std::optional<std::string> activation_of(const std::string& act) {
  if (act == "silu" || act == "swish") return "silu";
  if (act == "gelu") return "gelu_erf";
  if (act == "gelu_new" || act == "gelu_fast" || act == "gelu_pytorch_tanh") return "gelu_tanh";
  if (act == "relu") return "relu";
  return std::nullopt;
}

const char* kActivationHelp =
    "the spec has silu (silu, swish), gelu_erf (gelu), gelu_tanh (gelu_new, gelu_fast, gelu_pytorch_tanh) and relu";

// The layers' kinds, from a layer_types list or a rule: true = windowed.
using LayerKinds = std::vector<bool>;

// The shortest pattern p with kinds[i] == p[i % |p|] for every layer.
std::vector<bool> shortest_pattern(const LayerKinds& kinds) {
  for (size_t period = 1; period <= kinds.size(); ++period) {
    bool fits = true;
    for (size_t i = period; i < kinds.size() && fits; ++i) fits = kinds[i] == kinds[i % period];
    if (fits) return {kinds.begin(), kinds.begin() + static_cast<std::ptrdiff_t>(period)};
  }
  return kinds;
}

class Importer {
 public:
  Importer(const json& config, const FamilyInfo& info, const ImportOptions& options)
      : c_(config, options.file, info.config_class), info_(info), f_(info.family), options_(options) {
    // The tables in spec order; the empty ones are not written.
    for (const char* t : {"model", "dims", "norm", "attention", "position", "position.scaling", "mlp", "moe", "ssm", "mla",
                          "embedding", "output", "weights", "weights.names", "weights.encoder_names", "pooling"})
      doc_.table(t);
  }

  TomlDoc run() {
    c_.use("model_type");
    read_model();
    read_refusals();
    read_dtype();
    switch (f_) {
      case Family::Gpt2: read_gpt2(); break;
      case Family::GptNeox: read_gpt_neox(); break;
      case Family::Phi: read_phi(); break;
      case Family::Gptj: read_gptj(); break;
      case Family::Falcon: read_falcon(); break;
      case Family::Bloom: read_bloom(); break;
      case Family::Mpt: read_mpt(); break;
      case Family::Bert: case Family::Roberta: case Family::XlmRoberta: read_bert(); break;
      case Family::T5: read_t5(); break;
      case Family::ModernBert: read_modernbert(); break;
      case Family::Bart: case Family::MBart: read_bart(); break;
      case Family::Mamba: read_mamba(); break;
      case Family::Mamba2: read_mamba2(); break;
      case Family::Bamba: read_bamba(); break;
      case Family::DeepseekV2: case Family::DeepseekV3: read_deepseek(); break;
      default: read_llama_like();
    }
    if (!c_.errors().empty()) throw ImportError(c_.errors());
    const std::vector<std::string> unknown = c_.unknown_keys();
    if (!unknown.empty())
      warn(c_.file() + ": warning: keys not read (the spec may be missing what they change): " + join(unknown));
    return std::move(doc_);
  }

 private:
  TomlTable& t(const char* name) { return *doc_.find(name); }
  void warn(const std::string& line) {
    if (options_.warn) options_.warn(line);
    else std::cerr << line << "\n";
  }
  std::string hard_coded(const std::string& what) const { return std::string(info_.model_class) + what; }

  void read_model() {
    const std::string name_or_path = c_.string("_name_or_path").value_or("");
    std::string name = options_.name;
    if (name.empty()) name = sanitize_model_name(fs::path(name_or_path).filename().string());
    t("model").set("name", name);
    std::string source = options_.source;
    if (source.empty()) source = name_or_path.empty() ? options_.file : name_or_path + " config.json";
    t("model").set("source", source);
  }

  // Settings that change the model into something no spec describes.
  void read_refusals() {
    if (c_.present("quantization_config")) {
      c_.use("quantization_config");
      const json& q = c_.at("quantization_config");
      const std::string method =
          q.is_object() && q.contains("quant_method") ? shown(q["quant_method"]) : std::string("(no quant_method)");
      c_.error("quantization_config (quant_method " + method +
               "): quantized checkpoints are not imported; the spec's weights.dtype is f32, f16, bf16 or one of "
               "ggml's block formats (GGUF files)");
    }
    // (T5's and BART's configs say so; their readers import both stacks.)
    const bool encoder_decoder_family = f_ == Family::T5 || f_ == Family::Bart || f_ == Family::MBart;
    if (!encoder_decoder_family && c_.boolean("is_encoder_decoder").value_or(false))
      c_.error("is_encoder_decoder = true: encoder-decoder models (a decoder with cross-attention) are not supported yet");
    if (c_.boolean("add_cross_attention").value_or(false))
      c_.error("add_cross_attention = true: the spec has no cross-attention");
    if (c_.boolean("use_bidirectional_attention").value_or(false))
      c_.error("use_bidirectional_attention = true: the spec's attention is causal");
  }

  // ---- dtype -------------------------------------------------------------
  void read_dtype() {
    // transformers 5 writes "dtype", earlier versions "torch_dtype".
    const char* key = c_.has("dtype") ? "dtype" : "torch_dtype";
    c_.use("dtype");
    c_.use("torch_dtype");
    auto dtype = c_.string(key);
    std::string word = "f32";
    std::string note = "torch_dtype not in config.json: float32, as torch loads it";
    if (dtype) {
      note = key;
      if (*dtype == "float32") word = "f32";
      else if (*dtype == "float16") word = "f16";
      else if (*dtype == "bfloat16") word = "bf16";
      else c_.value_error(key, c_.at(key), "the spec's weights.dtype is f32 (float32), f16 (float16) or bf16 (bfloat16)");
    }
    t("weights").set("dtype", word, note);
  }

  // ---- GPT-2 ---------------------------------------------------------------
  void read_gpt2() {
    auto hidden = c_.required("n_embd");
    auto layers = c_.required("n_layer", kMaxLayers);
    auto heads = c_.required("n_head", kMaxHeads);
    auto vocab = c_.required("vocab_size");
    auto positions = c_.required("n_positions");
    c_.use("n_ctx");  // the old name of n_positions; GPT2Config does not read it
    TomlTable& d = t("dims");
    d.set("hidden", hidden.value, "n_embd");
    d.set("layers", layers.value, "n_layer");
    d.set("heads", heads.value, "n_head");
    if (heads.value > 0 && hidden.value % heads.value != 0)
      c_.error("n_embd (" + std::to_string(hidden.value) + ") is not a multiple of n_head (" +
               std::to_string(heads.value) + "): GPT2Attention splits n_embd into n_head heads");
    if (auto inner = c_.integer("n_inner")) {
      d.set("intermediate", *inner, "n_inner");
    } else {
      if (4 * hidden.value > kMaxDim)
        c_.error("n_embd = " + std::to_string(hidden.value) + ": the MLP width 4 * n_embd exceeds " +
                 std::to_string(kMaxDim));
      d.set("intermediate", 4 * hidden.value,
            c_.is_null("n_inner") ? "4 * n_embd (n_inner is null)" : "4 * n_embd (n_inner not in config.json)");
    }
    d.set("vocab", vocab.value, "vocab_size");
    d.set("max_context", positions.value, "n_positions");

    auto eps = epsilon("layer_norm_epsilon", 1e-5);
    t("norm").set("kind", "layernorm").set("eps", eps.value, eps.note).set("placement", "pre");

    TomlTable& a = t("attention");
    a.set("bias", true, "c_attn and c_proj carry biases");
    if (!c_.boolean_or("scale_attn_weights", true).value)
      a.set("scale", 1.0, "scale_attn_weights = false: scores are not divided by sqrt(head_dim)");
    if (c_.boolean("scale_attn_by_inverse_layer_idx").value_or(false))
      c_.error("scale_attn_by_inverse_layer_idx = true: the spec has one score scale for every layer, not "
               "1 / (layer + 1)");
    c_.use("reorder_and_upcast_attn");  // fp32 softmax during training: the same function
    for (const char* key : {"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
                            "summary_first_dropout"})
      c_.use(key);  // GPT2DoubleHeadsModel's classifier head, not the LM

    t("position").set("kind", "learned", "wpe: [n_positions, n_embd]");

    read_activation("activation_function", "gelu_new");
    t("mlp").set("gated", false).set("bias", true);

    auto tied = c_.boolean_or("tie_word_embeddings", true);
    t("embedding").set("tied", tied.value, tied.note);

    t("weights")
        .set("preset", "hf-gpt2")
        .set("layout", "in_out", "Conv1D stores [in, out]")
        .set("fused_qkv", true, "c_attn: [n_embd, 3 * n_embd] = q, k, v")
        .note("The checkpoint also holds each layer's causal-mask buffers.")
        .set("ignore", std::vector<std::string>{"h.{layer}.attn.bias", "h.{layer}.attn.masked_bias"});
  }

  // ---- GPT-NeoX, Phi, GPT-J, Falcon, BLOOM, MPT ---------------------------------
  // The module path of each role, as the family's checkpoints name them.
  void set_names(std::initializer_list<std::pair<const char*, std::string>> names) {
    TomlTable& n = t("weights.names");
    for (const auto& [role, path] : names) n.set(role, path);
  }

  // hidden / heads: every one of these families splits the width into heads.
  int64_t split_heads(const Config::Field<int64_t>& hidden, const Config::Field<int64_t>& heads) {
    if (heads.value > 0 && hidden.value % heads.value != 0)
      c_.error(hidden.note + " (" + std::to_string(hidden.value) + ") is not a multiple of " + heads.note + " (" +
               std::to_string(heads.value) + "): " + info_.model_class + " splits the width into heads");
    const int64_t head_dim = heads.value > 0 ? hidden.value / heads.value : 0;
    head_dim_ = head_dim;
    return head_dim;
  }

  void set_core_dims(const Config::Field<int64_t>& hidden, const Config::Field<int64_t>& layers,
                     const Config::Field<int64_t>& heads) {
    TomlTable& d = t("dims");
    d.set("hidden", hidden.value, hidden.note);
    d.set("layers", layers.value, layers.note);
    d.set("heads", heads.value, heads.note);
    layers_ = layers.value;
    split_heads(hidden, heads);
  }

  // The first of `keys` the config writes, read as a required dimension.
  Config::Field<int64_t> required_any(std::initializer_list<const char*> keys, int64_t max = kMaxDim) {
    for (const char* k : keys)
      if (c_.has(k)) {
        for (const char* other : keys) c_.use(other);
        return c_.required(k, max);
      }
    return c_.required(*keys.begin(), max);
  }

  void set_layernorm(const char* eps_key) {
    auto eps = epsilon(eps_key, 1e-5);
    t("norm").set("kind", "layernorm").set("eps", eps.value, eps.note);
  }

  void set_max_context(const Config::Field<int64_t>& context) {
    t("dims").set("max_context", context.value, context.note);
    max_context_ = context.value;
  }

  // rotary_dim = int(head_dim * factor): the partial rotary of GPT-NeoX
  // (rotary_pct) and Phi (partial_rotary_factor).
  void set_rotary_fraction(double factor, const std::string& note) {
    if (factor <= 0 || factor > 1) {
      c_.error(note + " = " + shown(factor) + ": must be in (0, 1]");
      return;
    }
    const auto rotary = static_cast<int64_t>(static_cast<double>(head_dim_) * factor);
    if (rotary < 2 || rotary % 2 != 0) {
      c_.error(note + " = " + shown(factor) + ": rotates " + std::to_string(rotary) + " of head_dim " +
               std::to_string(head_dim_) + " dims, which is not a positive even number");
      return;
    }
    if (rotary != head_dim_)
      t("position").set("rotary_dim", rotary, note + " = " + shown(factor) + " of head_dim " + std::to_string(head_dim_));
  }

  // The partial rotary factor: transformers 5's rope_parameters.partial_rotary_factor,
  // else the first of `keys` given, else the class default.
  void read_rotary_fraction(std::initializer_list<const char*> keys, double fallback) {
    for (const char* k : keys) c_.use(k);
    if (c_.has("rope_parameters") && c_.at("rope_parameters").is_object()) {
      if (auto f = number_in(c_.at("rope_parameters"), "rope_parameters", "partial_rotary_factor")) {
        set_rotary_fraction(*f, "rope_parameters.partial_rotary_factor");
        return;
      }
    }
    for (const char* k : keys)
      if (auto f = c_.number(k)) {
        set_rotary_fraction(*f, k);
        return;
      }
    set_rotary_fraction(fallback, c_.default_note(*keys.begin()));
  }

  // RoPE base and scaling: transformers 5's rope_parameters, or the older
  // base key (rope_theta, GPT-NeoX's rotary_emb_base) and rope_scaling.
  void read_rope_base(std::initializer_list<const char*> theta_keys, double fallback) {
    TomlTable& p = t("position");
    c_.use("rope_parameters");
    c_.use("rope_scaling");
    for (const char* k : theta_keys) c_.use(k);
    const json* scaling = nullptr;
    std::string scaling_key = "rope_scaling";
    std::optional<double> theta;
    std::string theta_note;
    if (c_.has("rope_parameters")) {
      const json& rp = c_.at("rope_parameters");
      if (!rp.is_object()) {
        c_.value_error("rope_parameters", rp, "expected an object");
        return;
      }
      scaling = &rp;
      scaling_key = "rope_parameters";
      theta = number_in(rp, "rope_parameters", "rope_theta");
      theta_note = "rope_parameters.rope_theta";
    } else if (c_.has("rope_scaling")) {
      scaling = &c_.at("rope_scaling");
    }
    for (const char* k : theta_keys)
      if (!theta && c_.has(k)) {
        theta = c_.number(k);
        theta_note = k;
      }
    if (!theta) theta_note = c_.default_note(*theta_keys.begin());
    if (theta && *theta <= 0) c_.error(theta_note + " = " + shown(*theta) + ": must be positive");
    p.set("theta", theta.value_or(fallback), theta_note);
    if (scaling != nullptr) read_scaling(*scaling, scaling_key);
  }

  void set_tied(bool fallback) {
    auto tied = c_.boolean_or("tie_word_embeddings", fallback);
    t("embedding").set("tied", tied.value, tied.note);
  }

  // MambaForCausalLM (state-spaces/mamba-*-hf): every layer a MambaBlock,
  // x + mixer(RMSNorm(x)); no attention, no positions.
  void read_mamba() {
    const Config::Field<int64_t> hidden = read_ssm_dims(768, 32, 50280);
    c_.use("n_layer");  // mamba_ssm's name of num_hidden_layers, written beside it
    c_.use("d_model");
    c_.use("pad_vocab_size_multiple");  // vocab_size is the padded count already

    TomlTable& m = t("ssm");
    m.set("kind", "mamba", info_.model_class + std::string("Mixer"));
    auto state = c_.integer_or("state_size", 16, 1, 4096);
    auto conv = c_.integer_or("conv_kernel", 4, 1, 64);
    auto expand = c_.integer_or("expand", 2, 1, 64);
    m.set("d_state", state.value, state.note).set("d_conv", conv.value, conv.note).set("expand", expand.value, expand.note);
    // intermediate_size: MambaConfig computes expand · hidden_size and writes it.
    if (auto inner = c_.integer("intermediate_size")) {
      if (*inner != expand.value * hidden.value)
        c_.error("intermediate_size = " + std::to_string(*inner) + ": MambaConfig sets it to expand · hidden_size = " +
                 std::to_string(expand.value * hidden.value));
    }
    // time_step_rank: an integer, or "auto" = ceil(hidden_size / 16).
    c_.use("time_step_rank");
    if (c_.has("time_step_rank") && c_.at("time_step_rank").is_string()) {
      if (c_.at("time_step_rank").get<std::string>() != "auto")
        c_.value_error("time_step_rank", c_.at("time_step_rank"), "expected an integer or \"auto\"");
      m.set("dt_rank", (hidden.value + 15) / 16, "time_step_rank = \"auto\": ceil(hidden_size / 16)");
    } else if (auto rank = c_.integer("time_step_rank")) {
      m.set("dt_rank", *rank, "time_step_rank");
    } else {
      m.set("dt_rank", (hidden.value + 15) / 16, c_.default_note("time_step_rank") + ": \"auto\", ceil(hidden_size / 16)");
    }
    auto conv_bias = c_.boolean_or("use_conv_bias", true);
    auto bias = c_.boolean_or("use_bias", false);
    m.set("conv_bias", conv_bias.value, conv_bias.note).set("bias", bias.value, bias.note + ": in_proj and out_proj");
    // Training-time settings: the initialization of dt and A, the residual's
    // dtype (the runtime adds in f32 anyway), mamba_ssm's fused kernels.
    for (const char* key : {"time_step_scale", "time_step_min", "time_step_max", "time_step_init_scheme", "time_step_floor",
                            "rescale_prenorm_residual", "residual_in_fp32", "fused_add_norm", "use_mambapy", "ssm_cfg",
                            "use_associative_scan"})
      c_.use(key);
    read_ssm_blocks("MambaRMSNorm", true);
  }

  // A state-space model's [dims]: hidden_size, num_hidden_layers and
  // vocab_size (their config class's defaults), and a max_context of its own
  // (no position table, a fixed state: the config has none). Returns hidden_size.
  Config::Field<int64_t> read_ssm_dims(int64_t hidden_default, int64_t layers_default, int64_t vocab_default) {
    auto hidden = c_.integer_or("hidden_size", hidden_default);
    auto layers = c_.integer_or("num_hidden_layers", layers_default, 1, kMaxLayers);
    TomlTable& d = t("dims");
    d.set("hidden", hidden.value, hidden.note).set("layers", layers.value, layers.note);
    layers_ = layers.value;
    auto vocab = c_.integer_or("vocab_size", vocab_default, 1, kMaxDim);
    d.set("vocab", vocab.value, vocab.note);
    set_max_context({8192, std::string(info_.config_class) +
                               " has no context length (no position table, a fixed state): a default",
                     false});
    return hidden;
  }

  // A Mamba or Mamba-2 model's blocks around the mixer: SiLU inside it,
  // RMS pre-norms (`norm_class`), the tie (`tied_default` when the config
  // says nothing), the hf-mamba names.
  void read_ssm_blocks(const char* norm_class, bool tied_default) {
    if (auto act = c_.string("hidden_act"); act && *act != "silu")
      c_.value_error("hidden_act", c_.at("hidden_act"), std::string("the ") + info_.model_class +
                                                            " mixer's activation is SiLU (\"silu\")");
    if (auto rms = c_.boolean("rms_norm"); rms && !*rms)
      c_.error(std::string("rms_norm = false: transformers' ") + info_.model_class + "Block normalizes with " +
               norm_class + " whatever it says");
    auto eps = epsilon("layer_norm_epsilon", 1e-5);
    t("norm").set("kind", "rmsnorm", norm_class).set("eps", eps.value, eps.note);
    set_tied(tied_default);
    t("weights").set("preset", "hf-mamba");
  }

  // Mamba2ForCausalLM (mamba2-*-hf, Mamba-Codestral): every layer a
  // Mamba2Block, x + mixer(RMSNorm(x)); Mamba2Config's defaults are
  // Codestral's (8 groups, 128 heads, untied).
  void read_mamba2() {
    const Config::Field<int64_t> hidden = read_ssm_dims(4096, 64, 32768);

    read_mamba2_mixer({"state_size", "conv_kernel", "expand", "head_dim", "num_heads", "n_groups", "use_conv_bias",
                       "use_bias"},
                      hidden.value, 8, "Mamba2Mixer");
    // Training-time settings (dt's and A's initialization, the residual's
    // dtype: the runtime adds in f32 anyway), the chunk of mamba_ssm's
    // chunked scan (a kernel's tiling, not the model's), time_step_rank
    // (Mamba2Mixer has no dt_proj).
    for (const char* key : {"time_step_rank", "time_step_min", "time_step_max", "time_step_floor", "rescale_prenorm_residual",
                            "residual_in_fp32", "chunk_size", "initializer_range"})
      c_.use(key);
    read_ssm_blocks("Mamba2RMSNorm", false);
  }

  // The keys of a Mamba-2 mixer's config (Mamba2Config's, or a hybrid's
  // mamba_* names), in the order: state size, conv taps, expand, head dim,
  // heads, groups, conv bias, in/out_proj bias.
  void read_mamba2_mixer(std::array<const char*, 8> keys, int64_t hidden, int64_t default_groups, const char* mixer) {
    TomlTable& m = t("ssm");
    m.set("kind", "mamba2", mixer);
    auto state = c_.integer_or(keys[0], 128, 1, 4096);
    auto conv = c_.integer_or(keys[1], 4, 1, 64);
    auto expand = c_.integer_or(keys[2], 2, 1, 64);
    auto heads = c_.integer_or(keys[4], 128);
    Config::Field<int64_t> head_dim;
    // A hybrid's "auto" head dim (BambaConfig's default): d_inner / heads.
    const bool automatic = !c_.has(keys[3]) ? std::string_view(keys[3]) == "mamba_d_head"
                                            : c_.at(keys[3]).is_string();
    if (automatic) {
      c_.use(keys[3]);
      if (c_.has(keys[3]) && c_.at(keys[3]).get<std::string>() != "auto")
        c_.value_error(keys[3], c_.at(keys[3]), "expected an integer or \"auto\"");
      head_dim = {heads.value > 0 ? expand.value * hidden / heads.value : 0,
                  std::string(keys[3]) + " \"auto\": d_inner / heads", true};
    } else {
      head_dim = c_.integer_or(keys[3], 64);
    }
    auto groups = c_.integer_or(keys[5], default_groups);
    m.set("d_state", state.value, state.note).set("d_conv", conv.value, conv.note).set("expand", expand.value, expand.note);
    // The mixer's widths: intermediate_size = expand · hidden_size, split
    // into heads of head_dim, in groups of B and C.
    const int64_t inner = expand.value * hidden;
    if (heads.value * head_dim.value != inner)
      c_.error(std::string(keys[4]) + " (" + std::to_string(heads.value) + ") × " + keys[3] + " (" +
               std::to_string(head_dim.value) + ") is not expand × hidden_size = " + std::to_string(inner) + ": " +
               mixer + "'s heads split d_inner");
    else if (heads.value % groups.value != 0)
      c_.error(std::string(keys[4]) + " (" + std::to_string(heads.value) + ") is not a multiple of " + keys[5] + " (" +
               std::to_string(groups.value) + "): each group's B and C serve heads / groups heads");
    m.set("heads", heads.value, heads.note).set("head_dim", head_dim.value, head_dim.note);
    m.set("groups", groups.value, groups.note);
    // time_step_limit: the range dt is clamped to, (0, Infinity) by default.
    if (c_.has("time_step_limit") && !c_.is_null("time_step_limit")) {
      c_.use("time_step_limit");
      const json& lim = c_.at("time_step_limit");
      if (!lim.is_array() || lim.size() != 2 || !lim[0].is_number() || !lim[1].is_number() ||
          std::isnan(lim[0].get<double>()) || std::isnan(lim[1].get<double>()) || lim[0].get<double>() < 0 ||
          !std::isfinite(lim[0].get<double>()) || lim[1].get<double>() <= lim[0].get<double>())
        c_.value_error("time_step_limit", lim, "expected [min, max] with 0 <= min < max (max may be Infinity)");
      else {
        if (lim[0].get<double>() > 0) m.set("dt_min", lim[0].get<double>(), "time_step_limit[0]");
        if (std::isfinite(lim[1].get<double>())) m.set("dt_max", lim[1].get<double>(), "time_step_limit[1]");
      }
    }
    auto conv_bias = c_.boolean_or(keys[6], true);
    auto bias = c_.boolean_or(keys[7], false);
    m.set("conv_bias", conv_bias.value, conv_bias.note).set("bias", bias.value, bias.note + ": in_proj and out_proj");
    if (auto before = c_.boolean("norm_before_gate"); before && *before)
      c_.error(std::string("norm_before_gate = true: ") + mixer + " gates before its norm (norm(y · SiLU(z)))");
  }

  // BambaForCausalLM (ibm-ai-platform/Bamba-9B): Llama's decoder blocks,
  // the mixer a Mamba-2 mixer except in attn_layer_indices; attention with
  // RoPE on half of each head (BambaConfig hard-codes partial_rotary_factor
  // 0.5), the hf-bamba names.
  void read_bamba() {
    read_llama_like();
    // BambaConfig sets partial_rotary_factor to 0.5 whatever the config says;
    // mamba_ssm's attn_rotary_emb, where a config keeps it, must agree.
    c_.use("partial_rotary_factor");
    set_rotary_fraction(0.5, "partial_rotary_factor (BambaConfig hard-codes it)");
    if (auto rotary = c_.integer("attn_rotary_emb"); rotary && *rotary != head_dim_ / 2)
      c_.error("attn_rotary_emb = " + std::to_string(*rotary) + ": transformers' Bamba rotates half of each head (" +
               std::to_string(head_dim_ / 2) + " of head_dim " + std::to_string(head_dim_) + ")");
    const int64_t hidden = c_.integer_or("hidden_size", 4096).value;
    read_mamba2_mixer({"mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_d_head", "mamba_n_heads", "mamba_n_groups",
                       "mamba_conv_bias", "mamba_proj_bias"},
                      hidden, 1, "BambaMixer");
    std::vector<int64_t> attention;
    if (c_.has("attn_layer_indices")) {
      c_.use("attn_layer_indices");
      const json& list = c_.at("attn_layer_indices");
      bool ok = list.is_array();
      for (const json& v : ok ? list : json::array()) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= layers_) {
          ok = false;
          break;
        }
        if (std::find(attention.begin(), attention.end(), v.get<int64_t>()) == attention.end())
          attention.push_back(v.get<int64_t>());
      }
      if (!ok)
        c_.value_error("attn_layer_indices", list,
                       "expected layer numbers from 0 to num_hidden_layers - 1 (" + std::to_string(layers_ - 1) + ")");
      std::sort(attention.begin(), attention.end());
    }
    if (attention.empty())
      c_.error("attn_layer_indices: none given; a Bamba model without attention layers is a Mamba-2 model "
               "(model_type \"mamba2\")");
    else if (static_cast<int64_t>(attention.size()) >= layers_)
      c_.error("attn_layer_indices: every layer is an attention layer; a Bamba model without Mamba layers is a Llama");
    else
      t("ssm").set("attention_layers", attention, "attn_layer_indices: these layers' mixer is attention");
    // The chunk of the chunked scan (a kernel's tiling), the training-time
    // initialization of dt, the z-loss of training; num_logits_to_keep is
    // a generation setting.
    for (const char* key : {"mamba_chunk_size", "time_step_min", "time_step_max", "time_step_floor", "z_loss_coefficient",
                            "num_logits_to_keep", "initializer_range"})
      c_.use(key);
    t("weights").set("preset", "hf-bamba");
  }

  // GPTNeoXForCausalLM (Pythia): one fused query_key_value laid out per head,
  // partial rotate-half RoPE, parallel attention and MLP with two norms.
  void read_gpt_neox() {
    auto hidden = c_.required("hidden_size");
    auto layers = c_.required("num_hidden_layers", kMaxLayers);
    auto heads = c_.required("num_attention_heads", kMaxHeads);
    set_core_dims(hidden, layers, heads);
    auto inter = c_.required("intermediate_size");
    t("dims").set("intermediate", inter.value, inter.note);
    auto vocab = c_.required("vocab_size");
    t("dims").set("vocab", vocab.value, vocab.note);
    set_max_context(c_.integer_or("max_position_embeddings", 2048));

    set_layernorm("layer_norm_eps");
    auto parallel = c_.boolean_or("use_parallel_residual", true);
    if (parallel.value)
      t("norm")
          .set("placement", "parallel", parallel.note + ": x + attention(ln1(x)) + mlp(ln2(x))")
          .set("parallel_shared", false, "input_layernorm feeds attention, post_attention_layernorm the MLP");
    else
      t("norm").set("placement", "pre", parallel.note + " = false");

    auto bias = c_.boolean_or("attention_bias", true);
    if (bias.value) t("attention").set("bias", true, bias.note + ": query_key_value and dense");
    c_.use("classifier_dropout");  // GPTNeoXForTokenClassification's head

    t("position").set("kind", "rope").set("pairing", "neox", "GPTNeoX rotates halves");
    read_rotary_fraction({"rotary_pct", "partial_rotary_factor"}, 0.25);
    read_rope_base({"rotary_emb_base", "rope_theta"}, 10000.0);

    read_activation("hidden_act", "gelu");
    t("mlp").set("gated", false).set("bias", true, "dense_h_to_4h and dense_4h_to_h carry biases");
    set_tied(false);

    t("weights")
        .set("fused_qkv", true, "query_key_value: [3 * hidden, hidden]")
        .set("qkv_layout", "per_head", "GPTNeoXAttention views it as [heads, 3, head_dim]");
    const std::string L = "gpt_neox.layers.{layer}.";
    set_names({{"embed", "gpt_neox.embed_in"},
               {"attn_norm", L + "input_layernorm"},
               {"mlp_norm", L + "post_attention_layernorm"},
               {"qkv", L + "attention.query_key_value"},
               {"o", L + "attention.dense"},
               {"up", L + "mlp.dense_h_to_4h"},
               {"down", L + "mlp.dense_4h_to_h"},
               {"final_norm", "gpt_neox.final_layer_norm"},
               {"lm_head", "embed_out"}});
    t("weights")
        .note("Older checkpoints also hold each layer's causal mask and rotary buffers.")
        .set("ignore", std::vector<std::string>{L + "attention.bias", L + "attention.masked_bias",
                                                L + "attention.rotary_emb.inv_freq"});
  }

  // PhiForCausalLM (Phi-1, Phi-1.5, Phi-2): q/k/v with biases, partial
  // rotate-half RoPE, one LayerNorm feeding attention and MLP, a biased LM head.
  void read_phi() {
    auto hidden = c_.required("hidden_size");
    auto layers = c_.required("num_hidden_layers", kMaxLayers);
    auto heads = c_.required("num_attention_heads", kMaxHeads);
    set_core_dims(hidden, layers, heads);
    if (c_.is_null("num_key_value_heads") || !c_.present("num_key_value_heads")) {
      c_.use("num_key_value_heads");
    } else if (auto kv = c_.integer("num_key_value_heads", 1, kMaxHeads)) {
      if (*kv != heads.value) {
        if (heads.value % *kv != 0)
          c_.error("num_attention_heads (" + std::to_string(heads.value) + ") is not a multiple of num_key_value_heads (" +
                   std::to_string(*kv) + ")");
        t("dims").set("kv_heads", *kv, "num_key_value_heads");
      }
    }
    auto inter = c_.required("intermediate_size");
    t("dims").set("intermediate", inter.value, inter.note);
    auto vocab = c_.required("vocab_size");
    t("dims").set("vocab", vocab.value, vocab.note);
    set_max_context(c_.integer_or("max_position_embeddings", 2048));

    set_layernorm("layer_norm_eps");
    t("norm")
        .set("placement", "parallel", "PhiDecoderLayer: x + attention(ln(x)) + mlp(ln(x))")
        .set("parallel_shared", true, "one input_layernorm");
    if (c_.boolean("qk_layernorm").value_or(false))
      c_.error("qk_layernorm = true: Phi's q/k LayerNorms (with biases) are not the spec's RMSNorm qk_norm");
    t("attention").set("bias", true, "PhiAttention: q/k/v_proj and dense carry biases");

    t("position").set("kind", "rope").set("pairing", "neox", "Phi rotates halves");
    read_rotary_fraction({"partial_rotary_factor"}, 0.5);
    read_rope_base({"rope_theta"}, 10000.0);

    read_activation("hidden_act", "gelu_new");
    t("mlp").set("gated", false).set("bias", true, "fc1 and fc2 carry biases");
    set_tied(false);
    t("output").set("bias", true, "PhiForCausalLM: lm_head carries a bias");

    const std::string L = "model.layers.{layer}.";
    set_names({{"embed", "model.embed_tokens"},
               {"attn_norm", L + "input_layernorm"},
               {"q", L + "self_attn.q_proj"},
               {"k", L + "self_attn.k_proj"},
               {"v", L + "self_attn.v_proj"},
               {"o", L + "self_attn.dense"},
               {"up", L + "mlp.fc1"},
               {"down", L + "mlp.fc2"},
               {"final_norm", "model.final_layernorm"},
               {"lm_head", "lm_head"}});
  }

  // GPTJForCausalLM: q/k/v without biases, interleaved RoPE on the first
  // rotary_dim dims, one LayerNorm feeding attention and MLP, a biased LM head.
  void read_gptj() {
    auto hidden = c_.required("n_embd");
    auto layers = c_.required("n_layer", kMaxLayers);
    auto heads = c_.required("n_head", kMaxHeads);
    set_core_dims(hidden, layers, heads);
    if (auto inner = c_.integer("n_inner")) {
      t("dims").set("intermediate", *inner, "n_inner");
    } else {
      if (4 * hidden.value > kMaxDim)
        c_.error("n_embd = " + std::to_string(hidden.value) + ": the MLP width 4 * n_embd exceeds " +
                 std::to_string(kMaxDim));
      t("dims").set("intermediate", 4 * hidden.value,
                    c_.is_null("n_inner") ? "4 * n_embd (n_inner is null)" : "4 * n_embd (n_inner not in config.json)");
    }
    auto vocab = c_.required("vocab_size");
    t("dims").set("vocab", vocab.value, vocab.note);
    set_max_context(c_.integer_or("n_positions", 2048));

    set_layernorm("layer_norm_epsilon");
    t("norm")
        .set("placement", "parallel", "GPTJBlock: x + attention(ln_1(x)) + mlp(ln_1(x))")
        .set("parallel_shared", true, "one ln_1");

    TomlTable& p = t("position");
    p.set("kind", "rope").set("pairing", "interleaved", "GPTJ rotates every two dims (rotate_every_two)");
    std::optional<int64_t> rotary;
    std::string rotary_note = "rotary_dim";
    if (c_.is_null("rotary_dim")) {
      c_.use("rotary_dim");
      rotary_note = "rotary_dim = null: the whole head";
    } else if (auto r = c_.integer("rotary_dim", 1, kMaxHeads)) {
      rotary = *r;
    } else if (!c_.present("rotary_dim")) {
      rotary = 64;
      rotary_note = c_.default_note("rotary_dim");
    }
    if (rotary && (*rotary % 2 != 0 || *rotary > head_dim_))
      c_.error(rotary_note + " = " + std::to_string(*rotary) + ": must be even and at most head_dim " +
               std::to_string(head_dim_));
    else if (rotary && *rotary != head_dim_)
      p.set("rotary_dim", *rotary, rotary_note);
    p.set("theta", 10000.0, "GPTJ: create_sinusoidal_positions hard-codes base 10000");

    read_activation("activation_function", "gelu_new");
    t("mlp").set("gated", false).set("bias", true, "fc_in and fc_out carry biases");
    set_tied(false);
    t("output").set("bias", true, "GPTJForCausalLM: lm_head carries a bias");

    const std::string L = "transformer.h.{layer}.";
    set_names({{"embed", "transformer.wte"},
               {"attn_norm", L + "ln_1"},
               {"q", L + "attn.q_proj"},
               {"k", L + "attn.k_proj"},
               {"v", L + "attn.v_proj"},
               {"o", L + "attn.out_proj"},
               {"up", L + "mlp.fc_in"},
               {"down", L + "mlp.fc_out"},
               {"final_norm", "transformer.ln_f"},
               {"lm_head", "lm_head"}});
    t("weights")
        .note("The checkpoint also holds each layer's causal-mask buffers.")
        .set("ignore", std::vector<std::string>{L + "attn.bias", L + "attn.masked_bias"});
  }

  // FalconForCausalLM: a fused query_key_value whose rows depend on the
  // attention form (multi-query: q | k | v; the new decoder architecture:
  // grouped per KV head; otherwise per head), rotate-half RoPE.
  void read_falcon() {
    auto hidden = required_any({"hidden_size", "n_embed"});
    auto layers = c_.required("num_hidden_layers", kMaxLayers);
    auto heads = c_.required("num_attention_heads", kMaxHeads);
    set_core_dims(hidden, layers, heads);
    auto new_arch = c_.boolean_or("new_decoder_architecture", false);
    auto multi_query = c_.boolean_or("multi_query", true);
    auto parallel = c_.boolean_or("parallel_attn", true);
    auto kv = c_.integer_or("num_kv_heads", heads.value, 1, kMaxHeads);
    if (!c_.present("num_kv_heads") || c_.is_null("num_kv_heads")) kv.note = "num_kv_heads (null: num_attention_heads)";
    std::string layout = "per_head";
    std::string layout_note;
    if (new_arch.value) {
      if (heads.value % kv.value != 0)
        c_.error("num_attention_heads (" + std::to_string(heads.value) + ") is not a multiple of " + kv.note + " (" +
                 std::to_string(kv.value) + ")");
      if (kv.value != heads.value) t("dims").set("kv_heads", kv.value, kv.note);
      layout = "grouped";
      layout_note = "new_decoder_architecture: per KV head its query heads, then k, then v";
    } else if (multi_query.value) {
      t("dims").set("kv_heads", 1, multi_query.note + ": one K/V head");
      layout = "blocks";
      layout_note = "multi_query: q of every head, then k, then v";
    } else {
      if (kv.given && kv.value != heads.value)
        c_.error(kv.note + " = " + std::to_string(kv.value) + ": without new_decoder_architecture or multi_query, "
                 "FalconAttention splits query_key_value into num_attention_heads [q k v] triples");
      layout_note = "multi_query = false: [q k v] per head";
    }
    auto ffn = c_.integer_or("ffn_hidden_size", 4 * hidden.value);
    if (!c_.present("ffn_hidden_size") || c_.is_null("ffn_hidden_size")) ffn.note = "4 * hidden_size (ffn_hidden_size not given)";
    t("dims").set("intermediate", ffn.value, ffn.note);
    auto vocab = c_.required("vocab_size");
    t("dims").set("vocab", vocab.value, vocab.note);
    set_max_context(c_.integer_or("max_position_embeddings", 2048));

    set_layernorm("layer_norm_epsilon");
    TomlTable& n = t("norm");
    c_.use("num_ln_in_parallel_attn");
    int64_t lns = new_arch.value ? 2 : 1;
    std::string lns_note = new_arch.value ? "new_decoder_architecture: ln_attn and ln_mlp" : "";
    if (c_.has("num_ln_in_parallel_attn")) {
      if (auto v = c_.integer("num_ln_in_parallel_attn", 1, 2)) {
        lns = *v;
        lns_note = "num_ln_in_parallel_attn = " + std::to_string(lns);
      }
    }
    std::string attn_norm = "input_layernorm", mlp_norm;
    if (new_arch.value && lns == 2) {
      n.set("placement", "parallel", "new_decoder_architecture: x + attention(ln_attn(x)) + mlp(ln_mlp(x))")
          .set("parallel_shared", false, lns_note);
      attn_norm = "ln_attn";
      mlp_norm = "ln_mlp";
    } else if (new_arch.value || parallel.value) {
      n.set("placement", "parallel", (new_arch.value ? std::string("new_decoder_architecture") : parallel.note) +
                                         ": x + attention(ln(x)) + mlp(ln(x))")
          .set("parallel_shared", true, "one input_layernorm");
    } else {
      n.set("placement", "pre", "parallel_attn = false");
      mlp_norm = "post_attention_layernorm";
    }
    c_.use("apply_residual_connection_post_layernorm");  // the RW checkpoints' key; FalconModel reads none

    if (c_.boolean("alibi").value_or(false))
      c_.error("alibi = true: Falcon's ALiBi (scaled by 1/sqrt(head_dim), added before the softmax scale) is not "
               "the spec's ALiBi; the spec imports Falcon with rotary positions (alibi = false)");
    auto bias = c_.boolean_or("bias", false);
    if (bias.value) {
      t("attention").set("bias", true, bias.note + ": query_key_value and dense");
    }
    t("position").set("kind", "rope").set("pairing", "neox", "Falcon rotates halves");
    read_rope_base({"rope_theta"}, 10000.0);

    read_activation("activation", "gelu");
    t("mlp").set("gated", false);
    if (bias.value) t("mlp").set("bias", true, bias.note + ": dense_h_to_4h and dense_4h_to_h");
    set_tied(true);

    t("weights").set("fused_qkv", true, "query_key_value").set("qkv_layout", layout, layout_note);
    const std::string L = "transformer.h.{layer}.";
    set_names({{"embed", "transformer.word_embeddings"},
               {"attn_norm", L + attn_norm},
               {"qkv", L + "self_attention.query_key_value"},
               {"o", L + "self_attention.dense"},
               {"up", L + "mlp.dense_h_to_4h"},
               {"down", L + "mlp.dense_4h_to_h"},
               {"final_norm", "transformer.ln_f"},
               {"lm_head", "lm_head"}});
    if (!mlp_norm.empty()) set_names({{"mlp_norm", L + mlp_norm}});
  }

  // BloomForCausalLM: ALiBi, a LayerNorm on the word embeddings, a fused
  // query_key_value laid out per head, a tanh-GELU MLP 4 * hidden wide.
  void read_bloom() {
    auto hidden = required_any({"hidden_size", "n_embed"});
    auto layers = required_any({"n_layer", "num_hidden_layers"}, kMaxLayers);
    auto heads = required_any({"n_head", "num_attention_heads"}, kMaxHeads);
    set_core_dims(hidden, layers, heads);
    if (4 * hidden.value > kMaxDim)
      c_.error(hidden.note + " = " + std::to_string(hidden.value) + ": the MLP width 4 * hidden exceeds " +
               std::to_string(kMaxDim));
    t("dims").set("intermediate", 4 * hidden.value, "BloomMLP: 4 * " + hidden.note);
    c_.use("n_inner");  // BloomMLP does not read it
    auto vocab = c_.required("vocab_size");
    t("dims").set("vocab", vocab.value, vocab.note);
    // ALiBi has no table to bound the context; BloomConfig has no such key.
    auto context = c_.integer_or("seq_length", 2048);
    if (!context.given) context.note = "BloomConfig has no context length (ALiBi); the models were trained on 2048";
    set_max_context(context);

    set_layernorm("layer_norm_epsilon");
    t("norm").set("placement", "pre");
    if (c_.boolean("apply_residual_connection_post_layernorm").value_or(false))
      c_.error("apply_residual_connection_post_layernorm = true: the residual stream would carry the normed input, "
               "which no spec placement does");
    for (const char* key : {"slow_but_exact", "attention_softmax_in_fp32", "masked_softmax_fusion",
                            "bias_dropout_fusion", "skip_bias_add", "skip_bias_add_qkv", "offset_alibi", "unk_token_id"})
      c_.use(key);  // Megatron training settings: the same function
    t("attention").set("bias", true, "BloomAttention: query_key_value and dense carry biases");
    t("position").set("kind", "alibi", "BloomModel: ALiBi slopes, no position embedding");
    t("mlp")
        .set("activation", "gelu_tanh", "BloomGelu: the tanh approximation")
        .set("gated", false)
        .set("bias", true, "dense_h_to_4h and dense_4h_to_h carry biases");
    set_tied(true);
    t("embedding").set("norm", true, "word_embeddings_layernorm");

    t("weights")
        .set("fused_qkv", true, "query_key_value: [3 * hidden, hidden]")
        .set("qkv_layout", "per_head", "BloomAttention views it as [heads, 3, head_dim]");
    const std::string L = "transformer.h.{layer}.";
    set_names({{"embed", "transformer.word_embeddings"},
               {"embed_norm", "transformer.word_embeddings_layernorm"},
               {"attn_norm", L + "input_layernorm"},
               {"qkv", L + "self_attention.query_key_value"},
               {"o", L + "self_attention.dense"},
               {"mlp_norm", L + "post_attention_layernorm"},
               {"up", L + "mlp.dense_h_to_4h"},
               {"down", L + "mlp.dense_4h_to_h"},
               {"final_norm", "transformer.ln_f"},
               {"lm_head", "lm_head"}});
  }

  // BertModel, RobertaModel, XLMRobertaModel: encoders of post-norm
  // LayerNorm blocks with biases everywhere, learned absolute positions and
  // token types summed with the tokens, then a LayerNorm of the embeddings; a
  // GELU MLP. RoBERTa numbers positions from padding_idx + 1 (its position
  // table has pad_token_id + 1 more rows than it has positions).
  void read_bert() {
    auto hidden = c_.required("hidden_size");
    auto layers = c_.required("num_hidden_layers", kMaxLayers);
    auto heads = c_.required("num_attention_heads", kMaxHeads);
    set_core_dims(hidden, layers, heads);
    auto intermediate = c_.required("intermediate_size");
    auto vocab = c_.required("vocab_size");
    t("model").set("stack", "encoder", std::string(info_.model_class) + "Model: bidirectional self-attention");
    t("dims").set("intermediate", intermediate.value, intermediate.note).set("vocab", vocab.value, vocab.note);
    auto positions = c_.integer_or("max_position_embeddings", 512);
    const bool roberta = f_ != Family::Bert;
    int64_t offset = 0;
    if (roberta) {
      // create_position_ids_from_input_ids: padding_idx + 1 + the position.
      c_.use("pad_token_id");
      const json* pad = c_.has("pad_token_id") ? &c_.at("pad_token_id") : nullptr;
      offset = (pad && pad->is_number_integer() ? pad->get<int64_t>() : 1) + 1;
      if (offset < 1 || offset >= positions.value)
        c_.error("pad_token_id: positions start at pad_token_id + 1 = " + std::to_string(offset) +
                 ", outside the position table of max_position_embeddings = " + std::to_string(positions.value));
    }
    Config::Field<int64_t> context = positions;
    context.value = positions.value - offset;
    if (roberta) context.note = positions.note + " − (pad_token_id + 1)";
    set_max_context(context);
    const std::string mode = c_.string("position_embedding_type").value_or("absolute");
    if (mode != "absolute")
      c_.error("position_embedding_type = \"" + mode + "\": only absolute positions are supported (not the relative "
               "key/query scores)");
    set_layernorm("layer_norm_eps");
    t("norm")
        .set("placement", "post", hard_coded("SelfOutput / Output: LayerNorm(x + branch)"))
        .set("final", false, "the last block's LayerNorm ends the stack");
    t("attention").set("bias", true, "query, key, value and the output dense carry biases");
    t("position").set("kind", "learned", "position_embeddings");
    if (roberta)
      t("position")
          .set("offset", offset, "position p reads row p + pad_token_id + 1")
          .set("table_size", positions.value, positions.note);
    read_activation("hidden_act", "gelu");
    t("mlp").set("gated", false).set("bias", true, "intermediate.dense and output.dense carry biases");
    auto types = c_.integer_or("type_vocab_size", 2);
    t("embedding")
        .set("token_types", types.value, types.note + ": token_type_embeddings (row 0 for one segment)")
        .set("norm", true, "embeddings.LayerNorm");
    for (const char* key : {"classifier_dropout", "gradient_checkpointing", "output_past"}) c_.use(key);
    // A task model (…ForMaskedLM, …ForSequenceClassification) holds its head
    // beside the encoder, and the base model a pooler; neither is the encoder's.
    std::vector<std::string> ignore = {"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids",
                                       "embeddings.token_type_ids"};
    // The pre-training heads a …ForMaskedLM / …ForPreTraining checkpoint holds.
    const std::vector<std::string> task_heads =
        roberta ? std::vector<std::string>{"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder"}
                : std::vector<std::string>{"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                                           "cls.predictions.decoder", "cls.seq_relationship"};
    for (const std::string& h : task_heads) ignore.insert(ignore.end(), {h + ".weight", h + ".bias"});
    ignore.push_back(roberta ? "lm_head.bias" : "cls.predictions.bias");
    t("weights")
        .set("preset", "hf-bert")
        .note("The base model's pooler and the pre-training heads are not the encoder's.")
        .set("ignore", ignore);
  }

  // T5: pre-norm blocks of T5LayerNorm (an RMS norm), no position
  // embedding but the relative position bias of each stack's first block,
  // shared by the stack's layers; scores not scaled (Mesh TensorFlow's
  // initialization folds it into q); no biases; a ReLU MLP (v1.0) or a gated
  // one ("gated-gelu": v1.1, Flan-T5). A T5EncoderModel is the encoder alone;
  // T5ForConditionalGeneration adds the decoder (num_decoder_layers blocks:
  // causal self-attention with its own bias table, cross-attention, MLP) and
  // the LM head: tied to `shared` with the hidden states scaled by
  // d_model^-0.5 (v1.0), or lm_head of its own (v1.1, Flan-T5).
  void read_t5() {
    const json* archs = c_.present("architectures") ? &c_.at("architectures") : nullptr;
    const std::string arch = archs && archs->is_array() && archs->size() == 1 && (*archs)[0].is_string()
                                 ? (*archs)[0].get<std::string>()
                                 : std::string();
    const bool encoder_only = arch == "T5EncoderModel";
    // No architectures: T5Config's own model, the whole T5.
    if (archs && !archs->is_null() && !encoder_only && arch != "T5ForConditionalGeneration")
      c_.error("architectures " + archs->dump() +
               ": a T5ForConditionalGeneration (encoder and decoder) or a T5EncoderModel (the encoder alone) imports");
    auto hidden = c_.required("d_model");
    auto layers = c_.required("num_layers", kMaxLayers);
    auto heads = c_.required("num_heads", kMaxHeads);
    auto head_dim = c_.required("d_kv");
    TomlTable& d = t("dims");
    d.set("hidden", hidden.value, hidden.note);
    if (encoder_only) {
      d.set("layers", layers.value, layers.note);
      layers_ = layers.value;
    } else {
      auto decoder_layers = c_.integer_or("num_decoder_layers", layers.value, 1, kMaxLayers);
      d.set("layers", decoder_layers.value,
            decoder_layers.given ? "num_decoder_layers: the decoder's"
                                 : "the decoder's: num_layers (num_decoder_layers not in config.json; T5Config's default)");
      d.set("encoder_layers", layers.value, layers.note + ": the encoder's");
      layers_ = decoder_layers.value;
    }
    d.set("heads", heads.value, heads.note);
    d.set("head_dim", head_dim.value, "d_kv");
    auto ff = c_.required("d_ff");
    auto vocab = c_.required("vocab_size");
    d.set("intermediate", ff.value, ff.note).set("vocab", vocab.value, vocab.note);
    auto context = c_.integer_or("n_positions", 512);
    if (!context.given) context.note = "T5 was trained on 512 tokens (relative positions set no limit of their own)";
    set_max_context(context);
    if (encoder_only) {
      t("model").set("stack", "encoder", "T5EncoderModel: bidirectional self-attention");
    } else {
      t("model").set("stack", "encoder-decoder", "T5ForConditionalGeneration: the decoder attends to the encoder's output");
      read_decoder_start(vocab.value, std::nullopt, "pad_token_id");
    }
    auto eps = epsilon("layer_norm_epsilon", 1e-6);
    t("norm").set("kind", "rmsnorm", "T5LayerNorm: no mean, no bias").set("eps", eps.value, eps.note);
    t("attention").set("scale", 1.0, "T5Attention does not scale the scores");
    auto buckets = c_.integer_or("relative_attention_num_buckets", 32, 2, 1024);
    auto distance = c_.integer_or("relative_attention_max_distance", 128);
    // The encoder's table: half the buckets a side, half of those exact
    // distances; the decoder's (causal) table: half of them exact.
    const int64_t exact = encoder_only ? buckets.value / 4 : buckets.value / 2;
    if (buckets.value < 4 || buckets.value % 2 != 0)
      c_.error("relative_attention_num_buckets = " + std::to_string(buckets.value) +
               ": a bidirectional table needs an even number, at least 4");
    else if (distance.value <= exact)
      c_.error("relative_attention_max_distance = " + std::to_string(distance.value) + ": not above the " +
               std::to_string(exact) + " exact distances of relative_attention_num_buckets = " +
               std::to_string(buckets.value) + (encoder_only ? "" : " in the decoder's causal table"));
    t("position")
        .set("kind", "relative", encoder_only ? "relative_attention_bias of the first block"
                                              : "relative_attention_bias of each stack's first block")
        .set("buckets", buckets.value, buckets.note)
        .set("max_distance", distance.value, distance.note);
    const std::string proj = c_.string("feed_forward_proj").value_or("relu");
    const bool gated = proj.rfind("gated-", 0) == 0;
    const std::string act = gated ? proj.substr(6) : proj;
    // T5Config: "gated-gelu" runs gelu_new (the tanh approximation).
    const std::optional<std::string> word = activation_of(act == "gelu" && gated ? "gelu_new" : act);
    if (!word) c_.error("feed_forward_proj = \"" + proj + "\": unknown activation; " + kActivationHelp);
    t("mlp")
        .set("activation", word.value_or("relu"), "feed_forward_proj = \"" + proj + "\"")
        .set("gated", gated, gated ? "DenseGatedActDense: wi_0 activated, times wi_1" : "DenseActDense: wi, then wo");
    bool tied = false;
    if (!encoder_only) {
      auto tie = c_.boolean_or("tie_word_embeddings", true);
      tied = tie.value;
      t("embedding").set("tied", tie.value, tie.note);
      if (tied)
        t("output").set("scale", std::pow(static_cast<double>(hidden.value), -0.5),
                        "T5ForConditionalGeneration: a tied head reads the hidden states times d_model^-0.5");
    }
    for (const char* key : {"dense_act_fn", "is_gated_act", "is_encoder_decoder", "num_decoder_layers", "dropout_rate",
                            "classifier_dropout", "n_positions", "tie_word_embeddings", "output_past"})
      c_.use(key);  // derived from feed_forward_proj, or the decoder's and the LM head's
    std::vector<std::string> ignore = {"encoder.embed_tokens.weight"};
    if (!encoder_only) ignore.push_back("decoder.embed_tokens.weight");
    if (tied) ignore.push_back("lm_head.weight");
    t("weights")
        .set("preset", "hf-t5")
        .note(encoder_only ? "encoder.embed_tokens is shared, the same tensor."
                           : tied ? "Each stack's embed_tokens, and the tied lm_head, are shared, the same tensor."
                                  : "Each stack's embed_tokens is shared, the same tensor.")
        .set("ignore", ignore);
    if (gated && encoder_only) t("weights.names").set("up", "encoder.block.{layer}.layer.1.DenseReluDense.wi_1");
    if (gated && !encoder_only) {
      t("weights.names").set("up", "decoder.block.{layer}.layer.2.DenseReluDense.wi_1");
      t("weights.encoder_names").set("up", "encoder.block.{layer}.layer.1.DenseReluDense.wi_1");
    }
  }

  // model.decoder_start: the token generate() starts the decoder from:
  // generation_config.json's decoder_start_token_id, else config.json's,
  // else the class default, else `fallback_key`'s (T5: pad_token_id, as
  // its checkpoints set it); within the vocabulary of `vocab` tokens.
  void read_decoder_start(int64_t vocab, std::optional<int64_t> class_default, const char* fallback_key) {
    auto start = c_.integer("decoder_start_token_id", 0, kMaxDim);
    Config::Field<int64_t> f;
    if (options_.generation_decoder_start) {
      f = {*options_.generation_decoder_start, "generation_config.json: decoder_start_token_id", true};
    } else if (start) {
      f = {*start, "decoder_start_token_id", true};
    } else if (class_default) {
      f = {*class_default, c_.default_note("decoder_start_token_id"), false};
    } else if (fallback_key != nullptr) {
      f = c_.integer_or(fallback_key, 0, 0, kMaxDim);
      f.note = "decoder_start_token_id not in config.json: " + f.note;
    } else {
      c_.error("decoder_start_token_id is not set (here or in generation_config.json): " +
               std::string(info_.model_class) + "'s decoder needs the token it starts from");
      return;
    }
    if (vocab > 0 && f.value >= vocab)
      c_.error(f.note + " = " + std::to_string(f.value) + ": outside the vocabulary of " + std::to_string(vocab) +
               " tokens");
    t("model").set("decoder_start", f.value, f.note);
  }

  // BartForConditionalGeneration (BartModel's checkpoints hold the same
  // tensors): post-norm blocks of LayerNorms with biases, learned positions
  // read from row p + 2 (BartLearnedPositionalEmbedding's offset), a
  // LayerNorm of each stack's embeddings, biases on every projection, a
  // GELU MLP, the LM head tied to `shared` plus final_logits_bias, a
  // [1, vocab] buffer. mBART is the same but for pre-norm blocks and a final
  // LayerNorm ending each stack.
  void read_bart() {
    const bool mbart = f_ == Family::MBart;
    const std::string cls = info_.model_class;
    const json* archs = c_.present("architectures") ? &c_.at("architectures") : nullptr;
    const std::string arch = archs && archs->is_array() && archs->size() == 1 && (*archs)[0].is_string()
                                 ? (*archs)[0].get<std::string>()
                                 : std::string();
    if (archs && !archs->is_null() && arch != cls + "ForConditionalGeneration" && arch != cls + "Model")
      c_.error("architectures " + archs->dump() + ": a " + cls + "ForConditionalGeneration or " + cls +
               "Model imports (an encoder-decoder with its LM head); task heads do not");
    auto hidden = c_.integer_or("d_model", 1024);
    auto encoder_layers = c_.integer_or("encoder_layers", 12, 1, kMaxLayers);
    auto decoder_layers = c_.integer_or("decoder_layers", 12, 1, kMaxLayers);
    auto heads = c_.integer_or("encoder_attention_heads", 16, 1, kMaxHeads);
    auto decoder_heads = c_.integer_or("decoder_attention_heads", 16, 1, kMaxHeads);
    auto ffn = c_.integer_or("encoder_ffn_dim", 4096);
    auto decoder_ffn = c_.integer_or("decoder_ffn_dim", 4096);
    auto vocab = c_.integer_or("vocab_size", 50265);
    auto positions = c_.integer_or("max_position_embeddings", 1024, 1, kMaxDim - 2);
    // The spec's two stacks share their widths.
    if (decoder_heads.value != heads.value)
      c_.error("decoder_attention_heads = " + std::to_string(decoder_heads.value) + ": differs from " + heads.note +
               " = " + std::to_string(heads.value) + "; the spec's stacks share dims.heads");
    if (decoder_ffn.value != ffn.value)
      c_.error("decoder_ffn_dim = " + std::to_string(decoder_ffn.value) + ": differs from " + ffn.note + " = " +
               std::to_string(ffn.value) + "; the spec's stacks share dims.intermediate");
    TomlTable& d = t("dims");
    d.set("hidden", hidden.value, hidden.note)
        .set("layers", decoder_layers.value, decoder_layers.note)
        .set("encoder_layers", encoder_layers.value, encoder_layers.note)
        .set("heads", heads.value, heads.note);
    layers_ = decoder_layers.value;
    split_heads(hidden, heads);
    d.set("intermediate", ffn.value, ffn.note).set("vocab", vocab.value, vocab.note);
    set_max_context(positions);

    t("model").set("stack", "encoder-decoder", cls + "ForConditionalGeneration: the decoder attends to the encoder's output");
    // MBartConfig has no default: a language code or </s>, per checkpoint.
    read_decoder_start(vocab.value, mbart ? std::nullopt : std::optional<int64_t>(2), nullptr);

    // Keys of the fairseq-era configs that transformers' classes no longer
    // read: each must say what the class builds, or the checkpoint is
    // another model's.
    const auto legacy = [&](const char* key, bool builds, const std::string& what) {
      auto v = c_.boolean(key);
      if (v && *v != builds) c_.error(std::string(key) + " = " + (*v ? "true" : "false") + ": " + cls + "Model " + what);
    };
    const std::string other = mbart ? "; post-norm blocks are BART's (model_type \"bart\")"
                                    : "; pre-norm blocks with final norms are mBART's (model_type \"mbart\")";
    legacy("normalize_before", mbart,
           (mbart ? "normalizes before each branch" : "normalizes after each residual add") + other);
    legacy("add_final_layer_norm", mbart, (mbart ? "ends each stack with a LayerNorm" : "has no final LayerNorm") + other);
    legacy("normalize_embedding", true, "normalizes the embeddings (layernorm_embedding)");
    legacy("static_position_embeddings", false, "learns its position table (embed_positions)");
    if (auto extra = c_.integer("extra_pos_embeddings", 0, kMaxDim); extra && *extra != 2)
      c_.error("extra_pos_embeddings = " + std::to_string(*extra) + ": " + cls +
               "LearnedPositionalEmbedding offsets positions by 2");
    for (const char* key : {"add_bias_logits", "do_blenderbot_90_layernorm", "force_bos_token_to_be_generated",
                            "classif_dropout", "classifier_dropout", "activation_dropout", "encoder_layerdrop",
                            "decoder_layerdrop", "init_std", "_num_labels", "num_hidden_layers", "is_encoder_decoder",
                            "gradient_checkpointing", "output_past"})
      c_.use(key);  // training, the classification head's, or derived (num_hidden_layers = encoder_layers)

    t("norm")
        .set("kind", "layernorm", "nn.LayerNorm")
        .set("eps", 1e-5, cls + " hard-codes nn.LayerNorm's default; the config has no epsilon");
    if (mbart)
      t("norm")
          .set("placement", "pre", "MBartEncoderLayer / MBartDecoderLayer: x + branch(LayerNorm(x))")
          .set("final", true, "each stack ends with layer_norm");
    else
      t("norm")
          .set("placement", "post", "BartEncoderLayer / BartDecoderLayer: LayerNorm(x + branch(x))")
          .set("final", false, "the last block's LayerNorm ends each stack");
    t("attention").set("bias", true, "q_proj, k_proj, v_proj and out_proj carry biases");
    t("position")
        .set("kind", "learned", "embed_positions of each stack")
        .set("offset", 2, cls + "LearnedPositionalEmbedding: position p reads row p + 2")
        .set("table_size", positions.value + 2, positions.note + " + 2");
    read_activation("activation_function", "gelu");
    t("mlp").set("gated", false).set("bias", true, "fc1 and fc2 carry biases");
    auto tie = c_.boolean_or("tie_word_embeddings", true);
    t("embedding").set("tied", tie.value, tie.note).set("norm", true, "layernorm_embedding of each stack");
    auto scale = c_.boolean_or("scale_embedding", false);
    if (scale.value) t("embedding").set("scale", "sqrt_hidden", "scale_embedding: the token embeddings times sqrt(d_model)");
    t("output").set("bias", true, "final_logits_bias: [1, vocab_size], added to the logits");

    std::vector<std::string> ignore = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"};
    if (tie.value) ignore.push_back("lm_head.weight");
    t("weights")
        .set("preset", "hf-bart")
        .note(tie.value ? "Each stack's embed_tokens, and the tied lm_head, are model.shared, the same tensor."
                        : "Each stack's embed_tokens is model.shared, the same tensor.")
        .set("ignore", ignore);
  }

  // ModernBertModel: pre-norm LayerNorm blocks (no norm before the first
  // layer's attention: the embedding norm's output goes in as is), a fused
  // Wqkv (q | k | v), RoPE with a global base and a local one on the
  // sliding-window layers, which see local_attention / 2 keys on either side
  // (every global_attn_every_n_layers-th layer, from 0, is global), a fused
  // GeGLU Wi (the activated half first), a final norm.
  void read_modernbert() {
    auto hidden = required_any({"hidden_size"});
    auto layers = required_any({"num_hidden_layers"}, kMaxLayers);
    auto heads = required_any({"num_attention_heads"}, kMaxHeads);
    set_core_dims(hidden, layers, heads);
    auto intermediate = c_.integer_or("intermediate_size", 1152);
    auto vocab = c_.integer_or("vocab_size", 50368);
    t("model").set("stack", "encoder", "ModernBertModel: bidirectional self-attention");
    t("dims").set("intermediate", intermediate.value, intermediate.note).set("vocab", vocab.value, vocab.note);
    set_max_context(c_.integer_or("max_position_embeddings", 8192));
    auto eps = epsilon("norm_eps", 1e-5);
    auto norm_bias = c_.boolean_or("norm_bias", false);
    t("norm")
        .set("kind", "layernorm")
        .set("eps", eps.value, eps.note)
        .set("bias", norm_bias.value, norm_bias.note)
        .set("first_attn_norm", false, "layer 0's attn_norm is an Identity");
    auto attention_bias = c_.boolean_or("attention_bias", false);
    t("attention").set("bias", attention_bias.value, attention_bias.note);
    // Which layers are local: layer_types (transformers 5), else every n-th global.
    LayerKinds kinds;
    std::string kinds_note;
    if (c_.has("layer_types") && c_.at("layer_types").is_array()) {
      c_.use("layer_types");
      for (const json& k : c_.at("layer_types")) kinds.push_back(k == "sliding_attention");
      kinds_note = "layer_types";
      if (static_cast<int64_t>(kinds.size()) != layers.value)
        c_.error("layer_types names " + std::to_string(kinds.size()) + " layers; num_hidden_layers is " +
                 std::to_string(layers.value));
    } else {
      auto every = c_.integer_or("global_attn_every_n_layers", 3);
      for (int64_t l = 0; l < layers.value; ++l) kinds.push_back(l % every.value != 0);
      kinds_note = every.note + " = " + std::to_string(every.value) + ": layer l is global iff l % n == 0";
    }
    auto local = c_.integer_or("local_attention", 128, 2);
    bool any_local = std::find(kinds.begin(), kinds.end(), true) != kinds.end();
    if (any_local && local.value / 2 >= max_context_) {
      warn(c_.file() + ": warning: local_attention = " + std::to_string(local.value) + " reaches past the context of " +
           std::to_string(max_context_) + " positions: every layer sees every key");
      any_local = false;
    }
    if (any_local) {
      t("attention")
          .set("sliding_window", local.value / 2, local.note + " / 2: keys at most this far on either side")
          .set("window_pattern", shortest_pattern(kinds), kinds_note);
    }
    // RoPE bases: rope_parameters by layer type (transformers 5), else the global and local thetas.
    double global_theta = 160000.0, local_theta = 10000.0;
    std::string global_note = c_.default_note("global_rope_theta"), local_note = c_.default_note("local_rope_theta");
    if (c_.has("rope_parameters") && c_.at("rope_parameters").is_object()) {
      c_.use("rope_parameters");
      const json& rp = c_.at("rope_parameters");
      if (auto v = number_in(rp.value("full_attention", json::object()), "rope_parameters.full_attention", "rope_theta"))
        global_theta = *v, global_note = "rope_parameters.full_attention.rope_theta";
      if (auto v = number_in(rp.value("sliding_attention", json::object()), "rope_parameters.sliding_attention", "rope_theta"))
        local_theta = *v, local_note = "rope_parameters.sliding_attention.rope_theta";
    } else {
      auto g = c_.number_or("global_rope_theta", global_theta);
      auto l = c_.number_or("local_rope_theta", local_theta);
      global_theta = g.value, global_note = g.note, local_theta = l.value, local_note = l.note;
    }
    for (const auto& [theta, note] : {std::pair{global_theta, global_note}, std::pair{local_theta, local_note}})
      if (!(theta > 0) || !std::isfinite(theta))
        c_.error(note + " = " + shown(json(theta)) + ": a RoPE base must be a positive number");
    t("position").set("theta", number_value(global_theta), global_note);
    if (any_local) t("position").set("local_theta", number_value(local_theta), local_note);
    read_activation("hidden_activation", "gelu");
    auto mlp_bias = c_.boolean_or("mlp_bias", false);
    t("mlp")
        .set("gated", true, "ModernBertMLP: act(input) * gate of Wi's halves")
        .set("fused_gate_up", "gate_up", "Wi: [2 * intermediate_size, hidden], the activated half first")
        .set("bias", mlp_bias.value, mlp_bias.note);
    t("embedding").set("norm", true, "embeddings.norm");
    for (const char* key : {"initializer_cutoff_factor", "embedding_dropout", "mlp_dropout", "classifier_pooling",
                            "classifier_dropout", "classifier_bias", "classifier_activation", "deterministic_flash_attn",
                            "sparse_prediction", "sparse_pred_ignore_index", "reference_compile", "decoder_bias",
                            "cls_token_id", "tie_word_embeddings", "repad_logits_with_grad", "norm_eps",
                            "layer_norm_eps", "position_embedding_type"})
      c_.use(key);  // training, the classifier's and the MLM head's
    const std::string L = "model.layers.{layer}.";
    set_names({{"embed", "model.embeddings.tok_embeddings"},
               {"embed_norm", "model.embeddings.norm"},
               {"attn_norm", L + "attn_norm"},
               {"qkv", L + "attn.Wqkv"},
               {"o", L + "attn.Wo"},
               {"mlp_norm", L + "mlp_norm"},
               {"gate_up", L + "mlp.Wi"},
               {"down", L + "mlp.Wo"},
               {"final_norm", "model.final_norm"}});
    t("weights")
        .set("fused_qkv", true, "Wqkv: [3 * hidden, hidden] = q, k, v")
        .note("ModernBertForMaskedLM's prediction head is not the encoder's.")
        .set("ignore", std::vector<std::string>{"head.dense.weight", "head.dense.bias", "head.norm.weight",
                                                "head.norm.bias", "decoder.weight", "decoder.bias"});
  }

  // MptForCausalLM: ALiBi, LayerNorms without biases, a fused Wqkv (q | k | v),
  // no biases anywhere, an erf-GELU MLP expansion_ratio * d_model wide.
  void read_mpt() {
    auto hidden = c_.required("d_model");
    auto layers = c_.required("n_layers", kMaxLayers);
    auto heads = c_.required("n_heads", kMaxHeads);
    set_core_dims(hidden, layers, heads);
    c_.use("expansion_ratio");
    double ratio = 4;
    std::string ratio_note = c_.default_note("expansion_ratio");
    if (auto r = c_.number("expansion_ratio")) {
      ratio = *r;
      ratio_note = "expansion_ratio";
    }
    const double width = ratio * static_cast<double>(hidden.value);
    if (width != std::floor(width) || width < 1 || width > static_cast<double>(kMaxDim))
      c_.error("expansion_ratio = " + shown(ratio) + ": the MLP width expansion_ratio * d_model must be a whole "
               "number between 1 and " + std::to_string(kMaxDim));
    else
      t("dims").set("intermediate", static_cast<int64_t>(width), ratio_note + " * d_model");
    auto vocab = c_.required("vocab_size");
    t("dims").set("vocab", vocab.value, vocab.note);
    set_max_context(c_.integer_or("max_seq_len", 2048));

    set_layernorm("layer_norm_epsilon");
    t("norm").set("placement", "pre").set("bias", false, "MptBlock drops the norms' biases");
    c_.use("norm_type");  // low_precision_layernorm: a LayerNorm in the activations' dtype
    for (const char* key : {"embedding_fraction", "init_device", "verbose", "init_config", "emb_pdrop"})
      c_.use(key);  // training settings
    auto no_bias = c_.boolean_or("no_bias", true);
    if (!no_bias.value) c_.error("no_bias = false: HF's MptModel has no biases (it would drop the checkpoint's)");
    if (c_.has("logit_scale")) {
      c_.use("logit_scale");
      c_.value_error("logit_scale", c_.at("logit_scale"), "the spec does not scale the logits");
    }
    c_.use("logit_scale");

    // attn_config: MptAttentionConfig, each key with its default.
    c_.use("attn_config");
    json ac = c_.has("attn_config") ? c_.at("attn_config") : json::object();
    if (!ac.is_object()) {
      c_.value_error("attn_config", ac, "expected an object");
      ac = json::object();
    }
    const auto field = [&](const char* key) { return ac.contains(key) ? ac[key] : json(); };
    if (const json v = field("attn_type"); !v.is_null() && v != "multihead_attention")
      c_.error("attn_config.attn_type = " + shown(v) + ": MptAttention is multi-head attention");
    if (const json v = field("qk_ln"); !v.is_null() && v != false)
      c_.error("attn_config.qk_ln = " + shown(v) + ": the spec has no LayerNorm on q and k");
    if (const json v = field("clip_qkv"); !v.is_null())
      c_.error("attn_config.clip_qkv = " + shown(v) + ": the spec does not clamp q, k and v");
    if (const json v = field("prefix_lm"); !v.is_null() && v != false)
      c_.error("attn_config.prefix_lm = " + shown(v) + ": the spec's attention is causal");
    if (const json v = field("alibi"); !v.is_null() && v != true)
      c_.error("attn_config.alibi = " + shown(v) + ": HF's MptModel always adds ALiBi and has no position table");
    if (const json v = field("alibi_bias_max"); !v.is_null() && !(v.is_number() && v.get<double>() == 8))
      c_.error("attn_config.alibi_bias_max = " + shown(v) + ": the spec's ALiBi slopes are the standard 2^(-8i/n)");
    if (const json v = field("softmax_scale"); !v.is_null()) {
      if (!v.is_number() || v.get<double>() <= 0) c_.value_error("attn_config.softmax_scale", v, "expected a positive number");
      else t("attention").set("scale", v.get<double>(), "attn_config.softmax_scale");
    }
    c_.use("learned_pos_emb");
    t("position").set("kind", "alibi", "MptModel: ALiBi (alibi_bias_max 8); learned_pos_emb has no table in HF's MptModel");
    t("mlp").set("activation", "gelu_erf", "MptMLP: GELU(approximate=\"none\")").set("gated", false);
    set_tied(true);

    t("weights").set("fused_qkv", true, "Wqkv: q, k, v = chunk(3)");
    const std::string L = "transformer.blocks.{layer}.";
    set_names({{"embed", "transformer.wte"},
               {"attn_norm", L + "norm_1"},
               {"qkv", L + "attn.Wqkv"},
               {"o", L + "attn.out_proj"},
               {"mlp_norm", L + "norm_2"},
               {"up", L + "ffn.up_proj"},
               {"down", L + "ffn.down_proj"},
               {"final_norm", "transformer.norm_f"},
               {"lm_head", "lm_head"}});
  }

  // ---- the Llama family ------------------------------------------------------
  // hidden_size and num_hidden_layers into [dims]; those and num_attention_heads, read.
  std::tuple<Config::Field<int64_t>, Config::Field<int64_t>, Config::Field<int64_t>> read_widths() {
    TomlTable& d = t("dims");
    auto hidden = c_.required("hidden_size");
    auto layers = c_.required("num_hidden_layers", kMaxLayers);
    auto heads = c_.required("num_attention_heads", kMaxHeads);
    d.set("hidden", hidden.value, hidden.note);
    d.set("layers", layers.value, layers.note);
    layers_ = layers.value;
    return {hidden, layers, heads};
  }

  void read_llama_like() {
    TomlTable& d = t("dims");
    auto [hidden, layers, heads] = read_widths();
    const int64_t natural = heads.value > 0 ? hidden.value / heads.value : 0;

    // head_dim: the key when a config has it (every family reads it then),
    // else the class default: 256 for Gemma, 128 for Qwen3, hidden / heads.
    int64_t head_dim = natural;
    std::string head_note = "head_dim";
    if (auto hd = c_.integer("head_dim", 1, kMaxHeads)) {
      head_dim = *hd;
    } else if (!c_.present("head_dim") && (is_gemma(f_) || f_ == Family::Qwen3)) {
      head_dim = is_gemma(f_) ? 256 : 128;
      head_note = c_.default_note("head_dim");
    }
    const bool explicit_head_dim = heads.value > 0 && (head_dim != natural || hidden.value % heads.value != 0);
    std::string heads_note = "num_attention_heads";
    if (!explicit_head_dim && c_.has("head_dim"))
      heads_note += " (head_dim = " + std::to_string(head_dim) + " = hidden / heads)";
    d.set("heads", heads.value, heads_note);
    head_dim_ = head_dim;
    if (heads.value > 0 && hidden.value > 0 && (head_dim < 1 || head_dim > kMaxHeads))
      c_.error(head_note + ": the head width " + std::to_string(head_dim) + " (hidden_size " +
               std::to_string(hidden.value) + " / num_attention_heads " + std::to_string(heads.value) +
               " unless head_dim is given) must be between 1 and " + std::to_string(kMaxHeads));
    else if (head_dim % 2 != 0)
      c_.error(head_note + ": the head width " + std::to_string(head_dim) +
               " is odd, and RoPE rotates pairs of dimensions");

    // num_key_value_heads: absent gives the class default, null gives MHA.
    int64_t kv_default = heads.value;
    if (f_ == Family::Mistral || f_ == Family::Mixtral) kv_default = 8;
    else if (f_ == Family::Qwen2 || f_ == Family::Qwen3) kv_default = 32;
    else if (f_ == Family::Qwen2Moe || f_ == Family::Gemma) kv_default = 16;
    else if (f_ == Family::Qwen3Moe) kv_default = 4;
    else if (f_ == Family::Bamba) kv_default = 8;
    else if (f_ == Family::Gemma2 || f_ == Family::Gemma3Text) kv_default = 4;
    if (c_.is_null("num_key_value_heads")) {
      c_.use("num_key_value_heads");
      d.set("kv_heads", heads.value, "num_key_value_heads = null: MHA");
    } else {
      const bool given = c_.present("num_key_value_heads");
      auto kv = c_.integer_or("num_key_value_heads", kv_default, 1, kMaxHeads);
      d.set("kv_heads", kv.value, kv.note);
      if (heads.value > 0 && kv.value > 0 && heads.value % kv.value != 0) {
        std::string message = "num_attention_heads (" + std::to_string(heads.value) + ") is not a multiple of " +
                              kv.note + " (" + std::to_string(kv.value) + ")";
        // A config that leaves the key out gets the class's default, which
        // fits only the model the class was written for (Qwen2's 32).
        if (!given)
          message += ": the config has no num_key_value_heads, and transformers' config class for this model_type "
                     "defaults it to " + std::to_string(kv_default) + "; add \"num_key_value_heads\" (" +
                     std::to_string(heads.value) + " for multi-head attention) to config.json";
        c_.error(message);
      }
    }
    if (explicit_head_dim) d.set("head_dim", head_dim, head_note);

    auto inter = c_.required("intermediate_size");
    d.set("intermediate", inter.value,
          f_ == Family::Mixtral ? "intermediate_size (per expert)"
          : f_ == Family::Qwen2Moe || f_ == Family::Qwen3Moe
              ? "intermediate_size (dense MLP width; experts use moe_intermediate_size)"
                                   : "intermediate_size");
    auto vocab = c_.required("vocab_size");
    d.set("vocab", vocab.value, "vocab_size");
    auto context = c_.required("max_position_embeddings");
    d.set("max_context", context.value, "max_position_embeddings");
    max_context_ = context.value;

    read_norm();
    read_attention();
    read_window();
    read_position();
    read_mlp();
    read_moe();
    read_embedding();

    t("weights").set("preset", "hf-llama");
    if (f_ == Family::Phi3)
      t("weights").set("fused_qkv", true, "qkv_proj: [(heads + 2 * kv_heads) * head_dim, hidden] = q, k, v");
  }

  // Norm epsilons: the spec's range is (0, 1].
  Config::Field<double> epsilon(const char* key, double fallback) {
    auto eps = c_.number_or(key, fallback);
    if (eps.given && (eps.value <= 0 || eps.value > 1)) c_.value_error(key, c_.at(key), "must be in (0, 1]");
    return eps;
  }

  void read_norm() {
    double eps_default = 1e-6;
    if (f_ == Family::Mixtral || f_ == Family::Phi3 || f_ == Family::Olmo2) eps_default = 1e-5;
    auto eps = epsilon("rms_norm_eps", eps_default);
    TomlTable& n = t("norm");
    n.set("kind", "rmsnorm").set("eps", eps.value, eps.note);
    if (f_ == Family::Gemma2 || f_ == Family::Gemma3Text)
      n.set("placement", "sandwich", "input/post_attention/pre_feedforward/post_feedforward_layernorm");
    else if (f_ == Family::Olmo2)
      n.set("placement", "branch_output", "post_attention/post_feedforward_layernorm on each branch's output");
    else
      n.set("placement", "pre");
    if (is_gemma(f_)) n.set("unit_offset", true, hard_coded("RMSNorm scales by (1 + weight)"));
  }

  void read_attention() {
    TomlTable& a = t("attention");
    switch (f_) {
      case Family::Qwen2:
        a.note("Qwen2Attention hard-codes these (no config key): q/k/v_proj with bias, o_proj without.");
        set_qkv_bias(a, true, "");
        break;
      case Family::Qwen2Moe: {
        auto bias = c_.boolean_or("qkv_bias", true);
        set_qkv_bias(a, bias.value, bias.note + "; o_proj never has one");
        break;
      }
      case Family::Mistral:
      case Family::Mixtral:
      case Family::Phi3:
        // No attention bias in these families, and their attention reads no key
        // for one: some configs still write attention_bias = false.
        if (c_.boolean("attention_bias").value_or(false))
          warn(c_.file() + ": warning: attention_bias = true is ignored: HF " + info_.model_class +
               " attention has no biases");
        break;
      default: {
        auto bias = c_.boolean_or("attention_bias", false);
        if (bias.value) a.set("bias", true, "attention_bias: q, k, v and o_proj");
      }
    }
    if (f_ == Family::Llama) {
      if (c_.boolean_or("mlp_bias", false).value) t("mlp").set("bias", true, "mlp_bias");
    }

    if (f_ == Family::Gemma2 || f_ == Family::Gemma3Text) {
      auto scalar = c_.number_or("query_pre_attn_scalar", 256);
      if (scalar.value <= 0) c_.value_error("query_pre_attn_scalar", c_.at("query_pre_attn_scalar"), "must be positive");
      a.set("query_pre_attn_scalar", number_value(scalar.value), scalar.note + ": scores scaled by its -1/2 power");
      auto softcap = c_.nullable_number("attn_logit_softcapping", f_ == Family::Gemma2 ? std::optional<double>(50.0)
                                                                                          : std::nullopt);
      if (softcap.value && *softcap.value < 0)
        c_.value_error("attn_logit_softcapping", c_.at("attn_logit_softcapping"), "must not be negative");
      else if (softcap.value && *softcap.value > 0)
        a.set("softcap", *softcap.value, softcap.note);
    }

    if (f_ == Family::Qwen3 || f_ == Family::Qwen3Moe || f_ == Family::Gemma3Text)
      a.set("qk_norm", "per_head", hard_coded("Attention: q_norm and k_norm over head_dim, head by head"));
    else if (f_ == Family::Olmo2)
      a.set("qk_norm", "whole", "Olmo2Attention: q_norm over heads * head_dim, k_norm over kv_heads * head_dim");
  }

  void set_qkv_bias(TomlTable& a, bool on, const std::string& note) {
    a.set("q_bias", on, note).set("k_bias", on).set("v_bias", on).set("o_bias", false);
  }

  // Which layers use a sliding window, and how wide it is.
  void read_window() {
    TomlTable& a = t("attention");
    std::optional<int64_t> window;
    std::string window_note = "sliding_window";
    std::string pattern_note = "layer_types: true = sliding_attention";
    LayerKinds kinds;  // empty: every layer, when there is a window
    const auto read_size = [&](std::optional<int64_t> fallback) {
      if (c_.is_null("sliding_window")) {
        c_.use("sliding_window");
        window_note = "sliding_window = null";
        return std::optional<int64_t>();
      }
      if (auto w = c_.integer("sliding_window")) return w;
      if (!c_.present("sliding_window") && fallback) window_note = c_.default_note("sliding_window");
      return c_.present("sliding_window") ? std::optional<int64_t>() : fallback;
    };

    switch (f_) {
      case Family::Mistral:
        window = read_size(4096);
        break;
      case Family::Mixtral:
      case Family::Phi3:
        window = read_size(std::nullopt);
        break;
      case Family::Qwen2:
      case Family::Qwen3:
      case Family::Qwen3Moe:
      case Family::Qwen2Moe: {
        auto use = c_.boolean_or("use_sliding_window", false);
        auto size = read_size(4096);
        auto max_window_layers = c_.integer_or("max_window_layers", 28, 0, kMaxLayers);
        if (!use.value) {
          if (size)
            a.note("sliding_window = " + std::to_string(*size) + " is inactive: use_sliding_window = false.");
          break;
        }
        window = size;
        if (!window) break;
        if (auto types = layer_types()) {
          kinds = *types;
        } else if (f_ == Family::Qwen2Moe || f_ == Family::Qwen3Moe) {
          c_.error("use_sliding_window = true without layer_types: transformers versions disagree on which "
                   "MoE layers are windowed; write layer_types");
        } else {
          // Qwen2Attention: layers from max_window_layers on are windowed.
          for (int64_t i = 0; i < layers_; ++i) kinds.push_back(i >= max_window_layers.value);
          pattern_note = "Qwen2Attention: layers from " + max_window_layers.note + " = " +
                         std::to_string(max_window_layers.value) + " on are windowed";
        }
        break;
      }
      case Family::Gemma2:
      case Family::Gemma3Text: {
        window = read_size(4096);
        if (auto types = layer_types()) {
          kinds = *types;
        } else if (f_ == Family::Gemma2) {
          for (int64_t i = 0; i < layers_; ++i) kinds.push_back(i % 2 == 0);
          pattern_note = "Gemma2: layer i is windowed iff i is even (no layer_types)";
        } else {
          auto period = c_.integer_or("sliding_window_pattern", 6, 1, kMaxLayers);
          for (int64_t i = 0; i < layers_; ++i) kinds.push_back((i + 1) % period.value != 0);
          pattern_note = period.note + " = " + std::to_string(period.value) + ": layer i is global iff (i + 1) % " +
                         std::to_string(period.value) + " == 0";
        }
        c_.use("sliding_window_pattern");
        break;
      }
      default:
        break;  // Llama, Gemma, OLMo 2: full attention; a sliding_window key is unknown to them
    }
    if (!window) return;
    if (!kinds.empty() && std::none_of(kinds.begin(), kinds.end(), [](bool b) { return b; })) {
      a.note("sliding_window = " + std::to_string(*window) + " is inactive: no layer is a sliding_attention layer.");
      return;
    }
    if (*window > max_context_) {
      a.note("sliding_window = " + std::to_string(*window) + " is larger than max_position_embeddings: no layer "
             "ever sees fewer keys than its whole context, so no window is written.");
      warn(c_.file() + ": warning: sliding_window = " + std::to_string(*window) +
           " exceeds max_position_embeddings = " + std::to_string(max_context_) + "; imported as full attention");
      return;
    }
    if (f_ == Family::Mistral || f_ == Family::Mixtral || f_ == Family::Phi3) {
      a.note("Taken verbatim from the config. The spec counts the window in keys including the current");
      a.note("one, which HF's implementations need not (docs/spec.md, the window convention).");
    }
    a.set("sliding_window", *window, window_note);
    const bool all = kinds.empty() || std::all_of(kinds.begin(), kinds.end(), [](bool b) { return b; });
    if (!all) {
      const std::vector<bool> pattern = shortest_pattern(kinds);
      a.set("window_pattern", pattern, pattern_note);
    }
    windowed_ = true;
  }

  // layer_types, as windowed or not; nullopt when the config has none.
  std::optional<LayerKinds> layer_types() {
    c_.use("layer_types");
    if (!c_.has("layer_types")) return std::nullopt;
    const json& types = c_.at("layer_types");
    if (!types.is_array()) {
      c_.value_error("layer_types", types, "expected a list of \"sliding_attention\" / \"full_attention\"");
      return std::nullopt;
    }
    if (static_cast<int64_t>(types.size()) != layers_) {
      c_.error("layer_types has " + std::to_string(types.size()) + " entries for num_hidden_layers = " +
               std::to_string(layers_));
      return std::nullopt;
    }
    LayerKinds kinds;
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] == "sliding_attention") kinds.push_back(true);
      else if (types[i] == "full_attention") kinds.push_back(false);
      else {
        c_.error("layer_types[" + std::to_string(i) + "] = " + shown(types[i]) +
                 ": the spec knows \"sliding_attention\" and \"full_attention\"");
        return std::nullopt;
      }
    }
    return kinds;
  }

  // ---- positions -------------------------------------------------------------
  void read_position() {
    TomlTable& p = t("position");
    p.set("kind", "rope");
    p.set("pairing", "neox", "HF " + std::string(info_.model_class) + " checkpoints rotate halves");

    const double theta_default = f_ == Family::Gemma3Text ? 1e6 : 10000.0;
    // transformers 5 writes rope_parameters: {rope_type, rope_theta, …}; Gemma 3
    // one such object per layer type. Earlier versions rope_theta + rope_scaling.
    c_.use("rope_parameters");
    c_.use("rope_scaling");
    c_.use("rope_theta");
    const json* scaling = nullptr;
    std::string scaling_key = "rope_scaling";
    std::optional<double> theta;
    std::string theta_note = "rope_theta";
    if (c_.has("rope_parameters")) {
      const json& rp = c_.at("rope_parameters");
      if (!rp.is_object()) {
        c_.value_error("rope_parameters", rp, "expected an object");
        return;
      }
      if (f_ == Family::Gemma3Text && (rp.contains("full_attention") || rp.contains("sliding_attention"))) {
        read_gemma3_rope_parameters(rp);
        return;
      }
      scaling = &rp;
      scaling_key = "rope_parameters";
      theta = number_in(rp, "rope_parameters", "rope_theta");
      theta_note = "rope_parameters.rope_theta";
      if (c_.has("rope_theta")) theta = theta ? theta : c_.number("rope_theta");
    } else {
      theta = c_.number("rope_theta");
      if (c_.has("rope_scaling")) scaling = &c_.at("rope_scaling");
    }
    if (!theta) theta_note = c_.default_note("rope_theta");
    if (theta && *theta <= 0) c_.error(theta_note + " = " + std::to_string(*theta) + ": must be positive");
    p.set("theta", theta.value_or(theta_default), theta_note);

    read_rotary(scaling, scaling_key);

    if (f_ == Family::Gemma3Text) {
      auto local = c_.number_or("rope_local_base_freq", 10000.0);
      if (local.value <= 0) c_.value_error("rope_local_base_freq", c_.at("rope_local_base_freq"), "must be positive");
      else if (windowed_) p.set("local_theta", local.value, local.note + ": sliding layers");
    }
    if (scaling != nullptr) read_scaling(*scaling, scaling_key);
  }

  void read_gemma3_rope_parameters(const json& rp) {
    TomlTable& p = t("position");
    for (const auto& [key, value] : rp.items())
      if (key != "full_attention" && key != "sliding_attention")
        c_.error("rope_parameters." + key + ": expected only full_attention and sliding_attention");
    double theta = 1e6;
    std::string theta_note = c_.default_note("rope_theta");
    if (rp.contains("full_attention") && rp["full_attention"].is_object()) {
      const json& full = rp["full_attention"];
      if (auto v = number_in(full, "rope_parameters.full_attention", "rope_theta"); v && *v <= 0) {
        c_.error("rope_parameters.full_attention.rope_theta = " + shown(*v) + ": must be positive");
      } else if (v) {
        theta = *v;
        theta_note = "rope_parameters.full_attention.rope_theta";
      }
      p.set("theta", theta, theta_note);
      read_scaling(full, "rope_parameters.full_attention");
    } else {
      p.set("theta", theta, theta_note);
    }
    if (rp.contains("sliding_attention") && rp["sliding_attention"].is_object()) {
      const json& local = rp["sliding_attention"];
      const std::string type = string_in(local, "rope_type").value_or("default");
      if (type != "default")
        c_.error("rope_parameters.sliding_attention.rope_type = \"" + type +
                 "\": the spec scales the RoPE of every layer alike");
      if (auto v = number_in(local, "rope_parameters.sliding_attention", "rope_theta"); v && *v <= 0)
        c_.error("rope_parameters.sliding_attention.rope_theta = " + shown(*v) + ": must be positive");
      else if (v && windowed_)
        p.set("local_theta", *v, "rope_parameters.sliding_attention.rope_theta");
    } else if (windowed_) {
      p.set("local_theta", 10000.0, c_.default_note("rope_local_base_freq"));
    }
  }

  std::optional<double> number_in(const json& obj, const std::string& where, const char* key) {
    if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
    if (!obj[key].is_number()) {
      c_.error(where + "." + key + " = " + shown(obj[key]) + ": expected a number");
      return std::nullopt;
    }
    return obj[key].get<double>();
  }

  // partial_rotary_factor: Phi3Attention rotates int(head_dim * factor) dims;
  // the other families rotate the whole head.
  void read_rotary(const json* scaling, const std::string& scaling_key) {
    std::optional<double> factor;
    std::string key = "partial_rotary_factor";
    if (scaling != nullptr && scaling->is_object() && scaling->contains(key) && scaling_key == "rope_parameters") {
      factor = number_in(*scaling, scaling_key, key.c_str());
      key = scaling_key + "." + key;
    }
    if (c_.has("partial_rotary_factor")) factor = c_.number("partial_rotary_factor");
    c_.use("partial_rotary_factor");
    if (!factor || *factor == 1.0) return;
    if (f_ != Family::Phi3) {
      c_.error(key + " = " + shown(*factor) + ": HF " + info_.model_class +
               " rotates the whole head; only phi3 reads this key");
      return;
    }
    if (*factor <= 0 || *factor > 1) {
      c_.error(key + " = " + shown(*factor) + ": must be in (0, 1]");
      return;
    }
    const auto rotary = static_cast<int64_t>(static_cast<double>(head_dim_) * *factor);
    if (rotary < 2 || rotary % 2 != 0) {
      c_.error(key + " = " + shown(*factor) + ": rotates " + std::to_string(rotary) + " of head_dim " +
               std::to_string(head_dim_) + " dims, which is not a positive even number");
      return;
    }
    t("position").set("rotary_dim", rotary,
                      key + " = " + shown(*factor) + " of head_dim " + std::to_string(head_dim_));
  }

  void read_scaling(const json& s, const std::string& key) {
    if (s.is_null()) return;
    if (!s.is_object()) {
      c_.error(key + " = " + shown(s) + ": expected an object or null");
      return;
    }
    std::string type_key = key + ".rope_type";
    std::string type;
    if (s.contains("rope_type") && s["rope_type"].is_string()) type = s["rope_type"].get<std::string>();
    else if (s.contains("type") && s["type"].is_string()) {
      type = s["type"].get<std::string>();
      type_key = key + ".type";
    } else {
      if (key == "rope_parameters") return;  // only rope_theta: no scaling
      c_.error(key + ": no rope_type");
      return;
    }
    std::set<std::string> read = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
    const auto num = [&](const char* k) {
      read.insert(k);
      return number_in(s, key, k);
    };
    TomlTable& sc = t("position.scaling");
    const auto set_num = [&](const char* spec_key, const char* k, bool required) {
      const std::optional<double> v = num(k);
      if (v) {
        if (*v <= 0 || *v > 1e6) c_.error(key + "." + k + " = " + shown(*v) + ": must be in (0, 1e6]");
        sc.set(spec_key, *v, key + "." + k);
      } else if (required) {
        c_.error(key + "." + k + " is missing; rope_type \"" + type + "\" needs it");
      }
      return v;
    };
    const auto set_original = [&](bool required) {
      read.insert("original_max_position_embeddings");
      const json& original = s.contains("original_max_position_embeddings") ? s["original_max_position_embeddings"]
                                                                             : json();
      if (original.is_number_integer() && (original.get<int64_t>() < 1 || original.get<int64_t>() > kMaxDim)) {
        c_.error(key + ".original_max_position_embeddings = " + shown(original) + ": must be between 1 and " +
                 std::to_string(kMaxDim));
      } else if (original.is_number_integer()) {
        sc.set("original_max_context", s["original_max_position_embeddings"].get<int64_t>(),
               key + ".original_max_position_embeddings");
      } else if (s.contains("original_max_position_embeddings") && !s["original_max_position_embeddings"].is_null()) {
        c_.error(key + ".original_max_position_embeddings = " + shown(s["original_max_position_embeddings"]) +
                 ": expected an integer");
      } else if (required) {
        c_.error(key + ".original_max_position_embeddings is missing; rope_type \"" + type + "\" needs it");
      } else {
        sc.set("original_max_context", max_context_,
               "max_position_embeddings (" + key + ".original_max_position_embeddings not given)");
      }
    };

    if (type == "default") return;
    if (f_ == Family::Phi3) {
      // Phi3Config reads "su" and "yarn" as LongRoPE too, and accepts nothing else.
      c_.error(type_key + " = \"" + type + "\": Phi-3 scales RoPE only by LongRoPE (per-dimension short and "
               "long factors), which the spec does not have");
      return;
    }
    // Gemma 3 scales only the full-attention layers' RoPE, as the spec does
    // when position.local_theta gives the windowed layers a base of their own.
    if (type == "linear" || type == "dynamic") {
      sc.set("kind", type == "linear" ? "linear" : "dynamic_ntk", type_key + " = \"" + type + "\"");
      const std::optional<double> factor = set_num("factor", "factor", true);
      if (type == "dynamic") {
        // transformers' dynamic NTK scales past max_position_embeddings (it
        // ignores original_max_position_embeddings) and sets no limit; the
        // spec's context is the one the factor aims at.
        read.insert("original_max_position_embeddings");
        sc.set("original_max_context", max_context_, "max_position_embeddings (dynamic scales past it)");
        if (factor && *factor > 1 && *factor * static_cast<double>(max_context_) <= static_cast<double>(kMaxDim)) {
          t("dims").set("max_context", static_cast<int64_t>(*factor * static_cast<double>(max_context_)),
                        "max_position_embeddings × " + key + ".factor (dynamic NTK's reach)");
        } else if (factor) {
          c_.error(key + ".factor = " + shown(*factor) + ": dynamic NTK needs a factor above 1 whose product with "
                   "max_position_embeddings (" + std::to_string(max_context_) + ") is at most " + std::to_string(kMaxDim));
        }
      }
    } else if (type == "llama3") {
      sc.set("kind", "llama3", type_key);
      set_num("factor", "factor", true);
      set_num("low_freq_factor", "low_freq_factor", true);
      set_num("high_freq_factor", "high_freq_factor", true);
      set_original(true);
      const auto low = number_in(s, key, "low_freq_factor");
      const auto high = number_in(s, key, "high_freq_factor");
      if (low && high && *high <= *low)
        c_.error(key + ".high_freq_factor (" + shown(*high) + ") must be larger than low_freq_factor (" + shown(*low) +
                 ")");
    } else if (type == "yarn") {
      sc.set("kind", "yarn", type_key);
      set_num("factor", "factor", true);
      set_original(false);
      set_num("beta_fast", "beta_fast", false);
      set_num("beta_slow", "beta_slow", false);
      set_num("attention_factor", "attention_factor", false);
      // DeepSeek's: the attention factor m(factor, mscale) / m(factor,
      // mscale_all_dim) (transformers' too), and under latent attention the
      // release's score scale times m(factor, mscale_all_dim)² (spec.md).
      for (const char* k : {"mscale", "mscale_all_dim"}) {
        read.insert(k);
        if (s.contains(k) && !s[k].is_null() && !(s[k].is_number() && s[k].get<double>() == 0)) set_num(k, k, false);
      }
      read.insert("truncate");
      if (s.contains("truncate") && s["truncate"] == false)
        c_.error(key + ".truncate = false: the spec's yarn scaling rounds the correction range (truncate = true)");
    } else if (type == "longrope" || type == "su") {
      c_.error(type_key + " = \"" + type + "\": the spec has no LongRoPE (per-dimension short and long factors); "
               "position.scaling.kind is none, linear, dynamic_ntk, yarn or llama3");
      return;
    } else {
      c_.error(type_key + " = \"" + type + "\": unknown RoPE scaling; position.scaling.kind is none, linear, "
               "dynamic_ntk, yarn or llama3 (rope_type default, linear, dynamic, yarn, llama3)");
      return;
    }
    std::vector<std::string> unread;
    for (const auto& [k, v] : s.items())
      if (!read.count(k)) unread.push_back(k);
    if (!unread.empty()) warn(c_.file() + ": warning: " + key + " keys not read: " + join(unread));
  }

  // ---- DeepSeek-V2/V3 ----------------------------------------------------------
  // DeepseekV2/V3ForCausalLM as the release's modeling_deepseek.py computes
  // it (the checkpoints were trained with it): multi-head latent attention,
  // RoPE in interleaved pairs on the rotary parts, YaRN with DeepSeek's
  // mscale; the first first_k_dense_replace layers (and those off
  // moe_layer_freq) dense, the others DeepSeek's MoE.
  void read_deepseek() {
    const bool v3 = f_ == Family::DeepseekV3;
    TomlTable& d = t("dims");
    auto [hidden, layers, heads] = read_widths();
    d.set("heads", heads.value, "num_attention_heads (each a query head over the shared latent)");
    // Every head reads the one latent: the spec has no KV heads to give.
    c_.use("num_key_value_heads");
    auto inter = c_.required("intermediate_size");
    d.set("intermediate", inter.value, "intermediate_size (the dense layers' MLP width)");
    auto vocab = c_.required("vocab_size");
    d.set("vocab", vocab.value, "vocab_size");
    auto context = c_.required("max_position_embeddings");
    d.set("max_context", context.value, "max_position_embeddings");
    max_context_ = context.value;

    TomlTable& m = t("mla");
    if (c_.is_null("q_lora_rank")) {
      c_.use("q_lora_rank");
      m.note("q_lora_rank = null: q_proj straight from the hidden state.");
    } else if (auto q = c_.integer("q_lora_rank")) {
      m.set("q_lora_rank", *q, "q_lora_rank");
    }
    int64_t latent_width[4] = {};
    const char* keys[4] = {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"};
    for (size_t i = 0; i < 4; ++i) {
      latent_width[i] = c_.required(keys[i], i == 0 ? kMaxDim : 4096).value;
      m.set(keys[i], latent_width[i], keys[i]);
    }
    // The cache's rows: pairs turned by RoPE, in 16-byte texels.
    if (latent_width[2] % 2 != 0)
      c_.error("qk_rope_head_dim (" + std::to_string(latent_width[2]) + ") is odd, and RoPE turns pairs of dimensions");
    else if ((latent_width[0] + latent_width[2]) % 8 != 0)
      c_.error("kv_lora_rank + qk_rope_head_dim (" + std::to_string(latent_width[0] + latent_width[2]) +
               ") is not a multiple of 8: the latent cache's rows");

    auto eps = epsilon("rms_norm_eps", 1e-6);
    t("norm").set("kind", "rmsnorm").set("eps", eps.value, eps.note).set("placement", "pre");
    if (c_.boolean("attention_bias").value_or(false))
      c_.error("attention_bias = true: latent attention's projections have no biases in the spec");
    read_position();
    t("position").set("pairing", "interleaved",
                      "modeling_deepseek.py rotates q_pe and k_pe in pairs (2i, 2i + 1): it de-interleaves them, then "
                      "rotates halves");
    read_activation("hidden_act", "silu");
    t("mlp").set("gated", true);

    // Experts: none when n_routed_experts is null.
    const std::string L = "model.layers.{layer}.mlp.";
    if (c_.is_null("n_routed_experts") || !c_.present("n_routed_experts")) {
      c_.use("n_routed_experts");
      for (const char* k : {"num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace",
                            "moe_layer_freq", "n_group", "topk_group", "topk_method", "scoring_func", "norm_topk_prob",
                            "routed_scaling_factor"})
        c_.use(k);
    } else {
      TomlTable& e = t("moe");
      auto experts = c_.integer_or("n_routed_experts", v3 ? 256 : 64, 1, kMaxHeads);
      auto top_k = c_.integer_or("num_experts_per_tok", v3 ? 8 : 6);
      check_top_k(experts, top_k);
      e.set("experts", experts.value, experts.note);
      e.set("top_k", top_k.value, top_k.note);
      auto width = c_.integer_or("moe_intermediate_size", v3 ? 2048 : 1407);
      e.set("expert_intermediate", width.value, width.note);
      auto shared = c_.integer_or("n_shared_experts", v3 ? 1 : 2, 0, kMaxHeads);
      if (shared.value > 0) {
        e.set("shared_experts", shared.value, shared.note + ": one MLP of n_shared_experts × moe_intermediate_size");
        e.set("shared_intermediate", width.value, width.note);
      }
      // Layer l has experts iff l ≥ first_k_dense_replace and l % moe_layer_freq == 0.
      auto first_dense = c_.integer_or("first_k_dense_replace", 0, 0, kMaxLayers);
      auto freq = c_.integer_or("moe_layer_freq", 1, 1, kMaxLayers);
      std::vector<int64_t> dense;
      for (int64_t l = 0; l < layers.value; ++l)
        if (l < first_dense.value || l % freq.value != 0) dense.push_back(l);
      if (!dense.empty())
        e.set("dense_layers", dense, first_dense.note + " and " + freq.note + ": these layers have the dense MLP");
      auto scoring = c_.string("scoring_func").value_or("softmax");
      if (scoring != "softmax" && scoring != "sigmoid")
        c_.value_error("scoring_func", c_.at("scoring_func"), "the spec's moe.scoring is softmax or sigmoid");
      else if (scoring != "softmax")
        e.set("scoring", scoring, "scoring_func");
      // topk_method: greedy (every expert a candidate), group_limited_greedy
      // (V2: a group scored by its best expert), noaux_tc (V3: by the sum of
      // its best two, choosing by score + e_score_correction_bias).
      const std::string method = c_.string("topk_method").value_or(v3 ? "noaux_tc" : "greedy");
      auto groups = c_.integer_or("n_group", 1, 1, 32);
      auto topk_groups = c_.integer_or("topk_group", 1, 1, 32);
      if (method == "group_limited_greedy" || method == "noaux_tc") {
        // Equal groups of consecutive experts, enough kept to hold top_k (one group: no limit).
        if (groups.value > 1) {
          const int64_t per_group = experts.value / groups.value;
          e.set("groups", groups.value, groups.note);
          e.set("topk_groups", topk_groups.value, topk_groups.note);
          e.set("group_score", method == "noaux_tc" ? "top2_sum" : "max", "topk_method = \"" + method + "\"");
          if (experts.value % groups.value != 0)
            c_.error("n_routed_experts (" + std::to_string(experts.value) + ") is not a multiple of n_group (" +
                     std::to_string(groups.value) + ")");
          else if (topk_groups.value > groups.value)
            c_.error("topk_group (" + std::to_string(topk_groups.value) + ") is larger than n_group (" +
                     std::to_string(groups.value) + ")");
          else if (top_k.value <= experts.value && top_k.value > topk_groups.value * per_group)
            c_.error("num_experts_per_tok (" + std::to_string(top_k.value) + ") is larger than the experts of the " +
                     "kept groups (topk_group · n_routed_experts / n_group = " +
                     std::to_string(topk_groups.value * per_group) + ")");
          else if (method == "noaux_tc" && per_group < 2)
            c_.error("topk_method = \"noaux_tc\" scores a group by its best two experts, but each group has " +
                     std::to_string(per_group));
        }
        if (method == "noaux_tc") e.set("correction_bias", true, "noaux_tc: e_score_correction_bias chooses the experts");
      } else if (method != "greedy") {
        c_.value_error("topk_method", c_.at("topk_method"),
                       "the spec routes by greedy, group_limited_greedy (V2) or noaux_tc (V3)");
      }
      auto norm = c_.boolean_or("norm_topk_prob", false);
      e.set("norm_topk_prob", norm.value, norm.note);
      auto scale = c_.number_or("routed_scaling_factor", 1.0);
      // V2 scales the weights only when it does not renormalize them; V3 always.
      if (!v3 && norm.value && top_k.value > 1) {
        if (scale.value != 1.0)
          e.note("routed_scaling_factor (" + shown(scale.value) +
                 ") is not applied: DeepseekV2MoE renormalizes the top-k weights instead");
      } else if (scale.value <= 0 || scale.value > 1e6) {
        c_.value_error("routed_scaling_factor", c_.at("routed_scaling_factor"), "must be in (0, 1e6]");
      } else if (scale.value != 1.0) {
        e.set("routed_scaling_factor", scale.value, scale.note);
      }
      t("weights.names")
          .note(std::string(info_.model_class) + "MoE's router and experts (the hf-llama preset names Mixtral's).")
          .set("router", L + "gate")
          .set("expert_gate", L + "experts.{expert}.gate_proj")
          .set("expert_up", L + "experts.{expert}.up_proj")
          .set("expert_down", L + "experts.{expert}.down_proj")
          .set("shared_gate", L + "shared_experts.gate_proj")
          .set("shared_up", L + "shared_experts.up_proj")
          .set("shared_down", L + "shared_experts.down_proj");
    }
    // Training-only settings: the auxiliary losses and expert parallelism.
    for (const char* k : {"aux_loss_alpha", "seq_aux", "ep_size"}) c_.use(k);
    if (auto mtp = c_.integer("num_nextn_predict_layers", 0, kMaxLayers); mtp && *mtp > 0)
      t("weights").note("num_nextn_predict_layers = " + std::to_string(*mtp) +
                        ": the checkpoint's multi-token prediction layers after the last are not part of the model "
                        "(their tensors are not in the manifest)");
    read_embedding();
    t("weights").set("preset", "hf-llama");
  }

  // ---- MLP, experts, embeddings --------------------------------------------
  void read_activation(const char* key, const char* fallback) {
    auto act = c_.string(key);
    const std::string word = act.value_or(fallback);
    const std::string note = act ? std::string(key) : c_.default_note(key);
    auto spec_word = activation_of(word);
    if (!spec_word) {
      c_.error(std::string(key) + " = \"" + word + "\": unknown activation; " + kActivationHelp);
      return;
    }
    t("mlp").set("activation", *spec_word, word == *spec_word ? note : note + " = \"" + word + "\"");
  }

  void read_mlp() {
    if (is_gemma(f_)) {
      // GemmaMLP reads hidden_activation, default gelu_pytorch_tanh, and ignores
      // hidden_act (transformers #29402: Gemma's GeGLU is the tanh approximation).
      const bool has_act = c_.has("hidden_act");
      const std::optional<std::string> ignored = has_act ? c_.string("hidden_act") : std::nullopt;
      read_activation("hidden_activation", "gelu_pytorch_tanh");
      if (ignored && !c_.has("hidden_activation") && *ignored != "gelu_pytorch_tanh")
        warn(c_.file() + ": warning: hidden_act = \"" + *ignored + "\" is ignored: " + info_.model_class +
             "MLP reads hidden_activation (default gelu_pytorch_tanh)");
    } else {
      read_activation("hidden_act", "silu");
    }
    t("mlp").set("gated", true);
    // Phi3: the pre-extension context, read only by LongRoPE (refused above).
    if (f_ == Family::Phi3) c_.use("original_max_position_embeddings");
    if (f_ == Family::Phi3) t("mlp").set("fused_gate_up", "gate_up", "Phi3MLP: gate, up = gate_up_proj(x).chunk(2)");
  }

  void read_moe() {
    TomlTable& m = t("moe");
    if (f_ == Family::Mixtral) {
      // MixtralConfig maps num_experts to num_local_experts.
      const char* experts_key = c_.has("num_local_experts") || !c_.has("num_experts") ? "num_local_experts"
                                                                                        : "num_experts";
      auto experts = c_.integer_or(experts_key, 8, 1, kMaxHeads);
      c_.use("num_experts");
      auto top_k = c_.integer_or("num_experts_per_tok", 2);
      check_top_k(experts, top_k);
      m.set("experts", experts.value, experts.note);
      m.set("top_k", top_k.value, top_k.note);
      m.set("norm_topk_prob", true, "MixtralSparseMoeBlock always divides the top-k weights by their sum (no config key)");
    } else if (f_ == Family::Qwen2Moe || f_ == Family::Qwen3Moe) {
      const bool qwen3 = f_ == Family::Qwen3Moe;
      auto experts = c_.integer_or("num_experts", qwen3 ? 128 : 60, 1, kMaxHeads);
      auto top_k = c_.integer_or("num_experts_per_tok", qwen3 ? 8 : 4);
      auto norm = c_.boolean_or("norm_topk_prob", false);
      auto width = c_.integer_or("moe_intermediate_size", qwen3 ? 768 : 1408);
      auto shared = qwen3 ? Config::Field<int64_t>{} : c_.integer_or("shared_expert_intermediate_size", 5632);
      auto step = c_.integer_or("decoder_sparse_step", 1, 1, 1024);
      if (step.value != 1) m.set("sparse_step", step.value, step.note);
      c_.use("mlp_only_layers");
      if (c_.has("mlp_only_layers")) {
        const json& dense = c_.at("mlp_only_layers");
        std::vector<int64_t> layers;
        bool valid = dense.is_array();
        if (valid)
          for (const json& l : dense) {
            if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= layers_) valid = false;
            else layers.push_back(l.get<int64_t>());
          }
        if (!valid)
          c_.value_error("mlp_only_layers", dense, "expected a list of layer numbers below num_hidden_layers");
        else if (!layers.empty())
          m.set("dense_layers", layers, "mlp_only_layers: these layers have the dense MLP");
      }
      check_top_k(experts, top_k);
      m.set("experts", experts.value, experts.note);
      m.set("top_k", top_k.value, top_k.note);
      m.set("norm_topk_prob", norm.value, norm.note);
      m.set("expert_intermediate", width.value, width.note);
      if (!qwen3) {
        m.set("shared_experts", 1, "Qwen2MoeSparseMoeBlock: one shared expert");
        m.set("shared_intermediate", shared.value, shared.note);
        m.set("shared_expert_gate", true, "shared_expert_gate: sigmoid(Linear(hidden, 1)) on the shared expert");
      }
      const std::string L = "model.layers.{layer}.mlp.";
      t("weights.names")
          .note(std::string(qwen3 ? "Qwen3-MoE" : "Qwen2-MoE") +
                "'s router and experts (the hf-llama preset names Mixtral's).")
          .set("router", L + "gate")
          .set("expert_gate", L + "experts.{expert}.gate_proj")
          .set("expert_up", L + "experts.{expert}.up_proj")
          .set("expert_down", L + "experts.{expert}.down_proj");
    }
  }

  void check_top_k(const Config::Field<int64_t>& experts, const Config::Field<int64_t>& top_k) {
    if (top_k.value > experts.value)
      c_.error(top_k.note + " = " + std::to_string(top_k.value) + " is larger than " + experts.note + " = " +
               std::to_string(experts.value));
  }

  void read_embedding() {
    const bool tied_default = is_gemma(f_);
    auto tied = c_.boolean_or("tie_word_embeddings", tied_default);
    t("embedding").set("tied", tied.value, tied.note);
    if (is_gemma(f_))
      t("embedding").set("scale", "sqrt_hidden", hard_coded("Model multiplies embeddings by hidden_size ** 0.5"));
    if (f_ == Family::Gemma2 || f_ == Family::Gemma3Text) {
      auto softcap = c_.nullable_number("final_logit_softcapping",
                                        f_ == Family::Gemma2 ? std::optional<double>(30.0) : std::nullopt);
      if (softcap.value && *softcap.value < 0)
        c_.value_error("final_logit_softcapping", c_.at("final_logit_softcapping"), "must not be negative");
      else if (softcap.value && *softcap.value > 0)
        t("output").set("softcap", *softcap.value, softcap.note);
    }
  }

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

// A line about the model for the header: the attention shape, norms,
// positions, MLP and head, as the hand-written specs open.
std::string summary(const spec::Spec& s) {
  std::vector<std::string> parts;
  const auto& d = s.dims;
  if (s.ssm.enabled()) {
    const spec::Ssm& m = s.ssm;
    const std::string shape =
        m.mamba2() ? std::to_string(m.heads) + " heads of " + std::to_string(m.head_dim) + " in " +
                         std::to_string(m.groups) + (m.groups == 1 ? " group" : " groups")
                   : "dt_rank " + std::to_string(m.dt_rank);
    if (m.hybrid()) {
      const int64_t attention = static_cast<int64_t>(m.attention_layers.size());
      return std::to_string(d.layers) + " layers, " + std::to_string(d.layers - attention) + (m.mamba2() ? " Mamba-2" : " Mamba") +
             " mixers (d_inner " + std::to_string(m.d_inner) + ", d_state " + std::to_string(m.d_state) + ", " + shape +
             ") and " + std::to_string(attention) + " attention (" + std::to_string(d.heads) + "/" +
             std::to_string(d.kv_heads) + " heads), each with a " + (s.mlp.gated ? "gated " : "") + "MLP; " +
             spec::name(s.norm.kind) + " pre-norms, " + (s.embedding.tied ? "tied" : "untied") +
             " LM head; a KV cache in the attention layers, a fixed state in the others.";
    }
    return std::to_string(d.layers) + (m.mamba2() ? " Mamba-2" : " Mamba") + " layers (d_inner " +
           std::to_string(m.d_inner) + ", d_state " + std::to_string(m.d_state) + ", " + std::to_string(m.d_conv) +
           " conv taps, " + shape + "), " + spec::name(s.norm.kind) + " pre-norms, " +
           (s.embedding.tied ? "tied" : "untied") + " LM head; a fixed state per sequence, no KV cache.";
  }
  if (s.encoder()) parts.push_back("bidirectional encoder");
  if (s.encoder_decoder())
    parts.push_back("encoder-decoder, " + std::to_string(d.encoder_layers) + " + " + std::to_string(d.layers) +
                    " layers, cross-attention");
  if (s.mla.enabled) {
    const spec::Mla& m = s.mla;
    parts.push_back("multi-head latent attention, " + std::to_string(d.heads) + " heads over a latent of " +
                    std::to_string(m.kv_lora_rank) + " + a rotary key of " + std::to_string(m.qk_rope_head_dim) +
                    (m.q_lora_rank > 0 ? ", a query latent of " + std::to_string(m.q_lora_rank) : std::string()));
  } else if (d.kv_heads == d.heads) parts.push_back("MHA " + std::to_string(d.heads) + ":" + std::to_string(d.kv_heads));
  else if (d.kv_heads == 1) parts.push_back("MQA " + std::to_string(d.heads) + ":1");
  else parts.push_back("GQA " + std::to_string(d.heads) + ":" + std::to_string(d.kv_heads));
  if (!s.mla.enabled && d.head_dim * d.heads != d.hidden) parts.back() += " with head_dim " + std::to_string(d.head_dim);
  std::string norm = std::string(spec::name(s.norm.kind)) + " (" + spec::name(s.norm.placement) + ")";
  if (s.norm.unit_offset) norm += " with (1 + w) scales";
  parts.push_back(norm);
  if (s.attention.qk_norm != spec::QKNorm::None) parts.push_back(std::string(spec::name(s.attention.qk_norm)) + " qk-norm");
  if (s.position.kind == spec::PositionKind::Rope) {
    std::string rope = s.position.pairing == spec::RopePairing::Neox ? "rotate-half RoPE" : "interleaved-pair RoPE";
    if (s.position.scaling.kind != spec::RopeScaling::None)
      rope += " with " + std::string(spec::name(s.position.scaling.kind)) + " scaling";
    parts.push_back(rope);
  } else {
    parts.push_back(std::string(spec::name(s.position.kind)) + " positions");
  }
  if (s.attention.sliding_window > 0)
    parts.push_back(std::string("sliding window ") + std::to_string(s.attention.sliding_window) +
                    (s.attention.window_pattern.empty() ? " on every layer" : " on some layers"));
  std::string mlp = s.mlp.gated ? std::string("gated ") + spec::name(s.mlp.activation) + " MLP"
                                : std::string(spec::name(s.mlp.activation)) + " MLP";
  if (s.moe.enabled()) {
    mlp = std::to_string(s.moe.experts) + " " + mlp + " experts, top-" + std::to_string(s.moe.top_k);
    if (s.moe.shared_experts > 0) mlp += ", " + std::to_string(s.moe.shared_experts) + " shared";
  }
  parts.push_back(mlp);
  if (s.encoder()) {
    if (s.embedding.token_types > 0) parts.push_back(std::to_string(s.embedding.token_types) + " token types");
    parts.push_back("no LM head");
  } else {
    parts.push_back(s.embedding.tied ? "tied embeddings" : "untied LM head");
    if (s.output.bias) parts.back() += " with a bias";
  }
  return join(parts) + ".";
}

const FamilyInfo* family_of(const std::string& model_type) {
  for (const FamilyInfo& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fs::exists(path) ? ErrorKind::Io : ErrorKind::NotFound, path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_snapshot_hash(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The model's name from where its config lies: a directory's name, a
// Hugging Face cache snapshot's repository ("models--org--name/snapshots/<hash>").
std::string name_from_directory(const fs::path& dir) {
  fs::path abs = fs::absolute(dir).lexically_normal();
  if (abs.filename().empty()) abs = abs.parent_path();
  const std::string leaf = abs.filename().string();
  if (is_snapshot_hash(leaf) && abs.parent_path().filename() == "snapshots") {
    const std::string repo = abs.parent_path().parent_path().filename().string();
    const size_t last = repo.rfind("--");
    if (repo.rfind("models--", 0) == 0 && last != std::string::npos) return repo.substr(last + 2);
  }
  return leaf;
}

// "{layer}" and "{expert}" match one or more decimal digits.
bool matches_pattern(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  for (std::string_view hole : {std::string_view("{layer}"), std::string_view("{expert}")}) {
    if (pattern.substr(0, hole.size()) == hole) {
      size_t digits = 0;
      while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
      for (size_t n = 1; n <= digits; ++n)
        if (matches_pattern(pattern.substr(hole.size()), name.substr(n))) return true;
      return false;
    }
  }
  return !name.empty() && pattern[0] == name[0] && matches_pattern(pattern.substr(1), name.substr(1));
}

bool has_weights(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".safetensors" || ext == ".gguf" ||
                                e.path().filename() == "model.safetensors.index.json"))
      return true;
  }
  return false;
}

// The spec against the checkpoint in `dir`: equal parameter counts, or an
// ImportError naming both and the first names only one side has.
CheckpointCheck check_checkpoint(const spec::Spec& spec, const fs::path& dir, const std::string& config_file) {
  weights::Checkpoint checkpoint(dir.string());
  CheckpointCheck check;
  check.path = checkpoint.path();
  check.spec_params = spec::make_report(spec).total_params;
  std::set<std::string> seen;
  std::vector<std::string> extra;  // in the checkpoint, not in the manifest
  const spec::Manifest manifest = spec::build_manifest(spec);
  std::vector<std::string> expected;
  for (const spec::TensorSpec& t : manifest.tensors) expected.push_back(t.name);
  // Names as the runtime will match them (a fine-tuned GPT-2's
  // "transformer." prefix, a doubled or missing "model.").
  checkpoint.match_names(expected);
  const std::set<std::string> expected_set(expected.begin(), expected.end());
  const std::vector<std::string> ignored = spec::ignored_patterns(spec);
  for (const weights::Checkpoint::Tensor& t : checkpoint.tensors()) {
    const weights::TensorInfo& info = *t.info;
    if (!seen.insert(t.name).second) continue;  // a name held by two shards counts once
    if (std::any_of(ignored.begin(), ignored.end(),
                    [&](const std::string& p) { return matches_pattern(p, t.name); })) {
      ++check.ignored_tensors;
      continue;
    }
    int64_t n = 1;
    for (const int64_t dim : info.shape) n *= dim;
    check.checkpoint_elements += n;
    if (!expected_set.count(t.name)) extra.push_back(t.name);
  }
  if (check.checkpoint_elements == check.spec_params) return check;

  std::vector<std::string> problems;
  problems.push_back(config_file + ": the imported spec has " + format_count(check.spec_params) +
                     " parameters, but the checkpoint " + check.path + " holds " +
                     format_count(check.checkpoint_elements) + " (" +
                     (check.ignored_tensors ? std::to_string(check.ignored_tensors) + " tensors ignored by weights.ignore"
                                            : std::string("no tensor ignored")) +
                     ")");
  constexpr size_t kShown = 5;
  const auto list = [&](const std::vector<std::string>& names, const std::string& what) {
    if (names.empty()) return;
    std::vector<std::string> head(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), kShown)));
    std::string line = config_file + ": " + std::to_string(names.size()) + " " + what + ": " + join(head);
    if (names.size() > kShown) line += ", …";
    problems.push_back(line);
  };
  list(extra, "tensors in the checkpoint that the spec's manifest does not have");
  std::vector<std::string> missing;
  for (const spec::TensorSpec& t : manifest.tensors)
    if (!seen.count(t.name)) missing.push_back(t.name);
  list(missing, "tensors of the spec's manifest that the checkpoint lacks");
  throw ImportError(problems);
}

// A sentence-transformers directory's pooling (modules.json: a Pooling
// module's config.json, and a Normalize module), written to the spec's
// [pooling]. Nothing when the directory has no modules.json.
void read_sentence_transformers(const fs::path& dir, TomlDoc& doc) {
  const fs::path modules_path = dir / "modules.json";
  std::error_code ec;
  if (!fs::exists(modules_path, ec)) return;
  const auto parse = [](const fs::path& path) {
    try {
      return json::parse(read_text(path.string()));
    } catch (const json::exception& e) {
      throw Error(ErrorKind::BadFile, path.string() + ": not valid JSON: " + e.what());
    }
  };
  const json modules = parse(modules_path);
  if (!modules.is_array()) throw Error(ErrorKind::BadFile, modules_path.string() + ": expected an array of modules");
  TomlTable& pooling = *doc.find("pooling");
  for (const json& m : modules) {
    const std::string type = string_in(m, "type").value_or("");
    if (type == "sentence_transformers.models.Normalize") {
      pooling.set("normalize", true, "modules.json: a Normalize module (L2)");
      continue;
    }
    if (type != "sentence_transformers.models.Pooling") continue;
    const fs::path config_path = dir / string_in(m, "path").value_or("") / "config.json";
    const json config = parse(config_path);
    const auto mode = [&](const char* key) { return config.contains(key) && config[key].is_boolean() && config[key].get<bool>(); };
    std::vector<std::string> modes;
    for (const char* key : {"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_lasttoken",
                            "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
      if (mode(key)) modes.emplace_back(key);
    if (modes.size() != 1)
      throw ImportError({config_path.string() + ": " + std::to_string(modes.size()) +
                         " pooling modes are set; the spec pools one way (cls, mean or last token)"});
    const std::string& on = modes.front();
    const char* kind = on == "pooling_mode_cls_token" ? "cls" : on == "pooling_mode_mean_tokens" ? "mean"
                       : on == "pooling_mode_lasttoken" ? "last" : nullptr;
    if (!kind)
      throw ImportError({config_path.string() + ": " + on + " is not supported; the spec pools by cls, mean or last token"});
    pooling.set("kind", kind, config_path.parent_path().filename().string() + "/config.json: " + on);
  }
}

}  // namespace

std::vector<std::string> supported_hf_model_types() {
  std::vector<std::string> out;
  for (const FamilyInfo& f : kFamilies) out.emplace_back(f.model_type);
  return out;
}

TomlDoc import_hf_config(const json& config, const ImportOptions& options) {
  if (!config.is_object()) throw ImportError({options.file + ": expected a JSON object, found " + shown(config).substr(0, 40)});
  const std::string supported = join(supported_hf_model_types());
  if (!config.contains("model_type") || !config["model_type"].is_string())
    throw ImportError({options.file + ": no model_type (a string); supported model types: " + supported});
  const std::string model_type = config["model_type"].get<std::string>();
  const FamilyInfo* info = family_of(model_type);
  if (info == nullptr)
    throw ImportError({options.file + ": model_type \"" + model_type + "\" is not supported; supported model types: " +
                       supported});

  TomlDoc doc = Importer(config, *info, options).run();

  // The document must read back as a valid spec: anything else is a bug here.
  const std::string text = doc.render();
  spec::Diagnostics diagnostics(options.file + " (imported spec)");
  const auto spec = spec::parse_spec_string(text, diagnostics.file(), diagnostics);
  // lathe's own size limits (262,144 tensors, 2^48 parameters) are the
  // config's problem, not the importer's.
  if (!spec && std::all_of(diagnostics.items().begin(), diagnostics.items().end(), [](const spec::Diagnostic& d) {
        return d.message.find("lathe handles at most") != std::string::npos;
      })) {
    std::vector<std::string> problems;
    for (const spec::Diagnostic& d : diagnostics.items()) problems.push_back(options.file + ": " + d.message);
    throw ImportError(problems);
  }
  if (!spec)
    throw Error(ErrorKind::InvalidArgument, "internal error: the spec imported from " + options.file +
                                                " does not read back:\n" + diagnostics.format() + "--- spec ---\n" + text);
  const std::string name_or_path = string_in(config, "_name_or_path").value_or("");
  doc.header(name_or_path.empty() ? spec->name + ", imported from " + options.file + " by `lathe import`."
                                  : spec->name + " (" + name_or_path + "), imported from its config.json by `lathe import`.");
  doc.header(std::string("model_type \"") + info->model_type + "\": " + summary(*spec));
  return doc;
}

ImportResult import_hf(const std::string& path, ImportOptions options) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  const fs::path config_path = is_dir ? fs::path(path) / "config.json" : fs::path(path);
  const std::string text = read_text(config_path.string());
  if (options.file == ImportOptions{}.file) options.file = config_path.string();
  json config;
  try {
    config = parse_python_json(text);
  } catch (const json::exception& e) {  // what() says the line and column
    throw Error(ErrorKind::BadFile, config_path.string() + ": not valid JSON: " + e.what());
  }
  if (!config.is_object()) throw Error(ErrorKind::BadFile, config_path.string() + ": expected a JSON object");

  if (options.name.empty()) {
    std::string raw;
    if (!is_dir && config_path.filename() != "config.json") raw = config_path.stem().string();
    else raw = name_from_directory(config_path.parent_path().empty() ? fs::path(".") : config_path.parent_path());
    if (raw.empty() || raw == "." || is_snapshot_hash(raw))
      raw = fs::path(string_in(config, "_name_or_path").value_or("")).filename().string();
    options.name = sanitize_model_name(raw);
  }

  const fs::path dir = config_path.parent_path().empty() ? fs::path(".") : config_path.parent_path();
  // generation_config.json: the decoder's first token, as generate() takes it.
  if (const fs::path generation = dir / "generation_config.json"; fs::exists(generation, ec)) {
    json g;
    try {
      g = json::parse(read_text(generation.string()));
    } catch (const json::exception& e) {
      throw Error(ErrorKind::BadFile, generation.string() + ": not valid JSON: " + e.what());
    }
    if (g.is_object() && g.contains("decoder_start_token_id") && g["decoder_start_token_id"].is_number_integer())
      options.generation_decoder_start = g["decoder_start_token_id"].get<int64_t>();
  }

  ImportResult result;
  result.doc = import_hf_config(config, options);
  const TomlValue* stack = result.doc.find("model")->get("stack");
  if (stack && stack->text() == "\"encoder\"") read_sentence_transformers(dir, result.doc);
  result.text = result.doc.render();
  spec::Diagnostics diagnostics(options.file);
  auto spec = spec::parse_spec_string(result.text, options.file, diagnostics);
  if (!spec) throw Error(ErrorKind::InvalidArgument, "internal error: " + diagnostics.format());
  result.spec = std::move(*spec);

  if (options.check_weights && has_weights(dir)) result.checkpoint = check_checkpoint(result.spec, dir, options.file);
  return result;
}

}  // namespace lathe::importer
