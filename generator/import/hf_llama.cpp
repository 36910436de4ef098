// The Hugging Face importer's Llama family (Llama, Mistral, Mixtral, Qwen,
// Gemma, Phi-3, OLMo 2, DeepSeek): widths, norms, attention and windows,
// positions and their scaling, the MLP, experts and embeddings.
#include "generator/import/hf_importer.hpp"

namespace lathe::importer::hf {

void Importer::read_llama_like() {
  TomlTable& d = t("dims");
  CoreKeys row = kLlamaCore;
  if (f_ == Family::Mixtral)
    row.intermediate_note = "intermediate_size (per expert)";
  else if (f_ == Family::Qwen2Moe || f_ == Family::Qwen3Moe)
    row.intermediate_note = "intermediate_size (dense MLP width; experts use moe_intermediate_size)";
  const Core core = read_core_heads(row);
  const Config::Field<int64_t>& hidden = core.hidden;
  const Config::Field<int64_t>& heads = core.heads;
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
  std::string heads_note = heads.note;
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
  else if (f_ == Family::Bamba || f_ == Family::MllamaText) kv_default = 8;
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
  read_core_widths(row, core);

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

Config::Field<double> Importer::epsilon(const char* key, double fallback) {
  auto eps = c_.number_or(key, fallback);
  if (eps.given && (eps.value <= 0 || eps.value > 1)) c_.value_error(key, c_.at(key), "must be in (0, 1]");
  return eps;
}

void Importer::read_norm() {
  double eps_default = 1e-6;
  if (f_ == Family::Mixtral || f_ == Family::Phi3 || f_ == Family::Olmo2 || f_ == Family::MllamaText) eps_default = 1e-5;
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

void Importer::read_attention() {
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
    case Family::MllamaText:
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

void Importer::set_qkv_bias(TomlTable& a, bool on, const std::string& note) {
  a.set("q_bias", on, note).set("k_bias", on).set("v_bias", on).set("o_bias", false);
}

void Importer::read_window() {
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

std::optional<LayerKinds> Importer::layer_types() {
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

void Importer::read_position() {
  TomlTable& p = t("position");
  p.set("kind", "rope");
  p.set("pairing", "neox", "HF " + std::string(info_.model_class) + " checkpoints rotate halves");

  const double theta_default = f_ == Family::Gemma3Text ? 1e6 : f_ == Family::MllamaText ? 500000.0 : 10000.0;
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

void Importer::read_gemma3_rope_parameters(const json& rp) {
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

std::optional<double> Importer::number_in(const json& obj, const std::string& where, const char* key) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  if (!obj[key].is_number() || !std::isfinite(obj[key].get<double>())) {
    c_.error(where + "." + key + " = " + shown(obj[key]) + ": expected a number");
    return std::nullopt;
  }
  return obj[key].get<double>();
}

void Importer::read_rotary(const json* scaling, const std::string& scaling_key) {
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

void Importer::read_scaling(const json& s, const std::string& key) {
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
      if (!(*v > 0 && *v <= 1e6)) c_.error(key + "." + k + " = " + shown(*v) + ": must be in (0, 1e6]");
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

void Importer::read_deepseek() {
  const bool v3 = f_ == Family::DeepseekV3;
  const Core core = read_core_heads(kDeepseekCore);
  const Config::Field<int64_t>& layers = core.layers;
  t("dims").set("heads", core.heads.value, "num_attention_heads (each a query head over the shared latent)");
  // Every head reads the one latent: the spec has no KV heads to give.
  c_.use("num_key_value_heads");
  read_core_widths(kDeepseekCore, core);

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

void Importer::read_activation(const char* key, const char* fallback) {
  if (auto act = read_activation_key(c_, key, fallback)) t("mlp").set("activation", act->value, act->note);
}

void Importer::read_mlp() {
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

void Importer::read_moe() {
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

void Importer::check_top_k(const Config::Field<int64_t>& experts, const Config::Field<int64_t>& top_k) {
  if (top_k.value > experts.value)
    c_.error(top_k.note + " = " + std::to_string(top_k.value) + " is larger than " + experts.note + " = " +
             std::to_string(experts.value));
}

void Importer::read_embedding() {
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

}  // namespace lathe::importer::hf
