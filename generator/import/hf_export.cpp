#include "generator/import/hf_export.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "generator/import/hf_core_keys.hpp"
#include "generator/import/hf_import.hpp"
#include "generator/spec/compare.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/error.hpp"

namespace lathe::importer {
namespace {

using nlohmann::json;
using namespace lathe::spec;

[[noreturn]] void refuse(const Spec& s, const std::string& why) {
  throw Error(ErrorKind::InvalidArgument,
              (s.file.empty() ? s.name : s.file) + ": no supported Hugging Face config expresses this spec: " + why);
}

// The families whose specs name their tensors one by one (no preset): told
// by the embedding's and the attention's module paths.
std::string named_family(const Spec& s) {
  if (!s.weights.preset.empty()) return "";
  const auto name = [&](Role r) {
    auto it = s.weights.names.find(r);
    return it == s.weights.names.end() ? std::string() : it->second;
  };
  const std::string embed = name(Role::Embed);
  if (embed == "model.embeddings.tok_embeddings") return "modernbert";
  if (embed == "gpt_neox.embed_in") return "gpt_neox";
  if (embed == "model.embed_tokens" && name(Role::FinalNorm) == "model.final_layernorm") return "phi";
  if (embed == "transformer.wte") return name(Role::Qkv).find("attn.Wqkv") != std::string::npos ? "mpt" : "gptj";
  if (embed == "transformer.word_embeddings") return s.embedding.norm ? "bloom" : "falcon";
  return "";
}

std::string model_type_of(const Spec& s) {
  if (s.encoder() && s.weights.preset == "hf-bert") return s.position.offset > 0 ? "roberta" : "bert";
  if ((s.encoder() || s.encoder_decoder()) && s.weights.preset == "hf-t5") return "t5";
  // mBART's blocks are pre-norm, BART's post-norm; the names are the same.
  if (s.encoder_decoder() && s.weights.preset == "hf-bart")
    return s.norm.placement == NormPlacement::Pre ? "mbart" : "bart";
  if (const std::string named = named_family(s); !named.empty()) return named;
  if (s.weights.preset == "hf-gpt2") return "gpt2";
  if (s.norm.placement == NormPlacement::Sandwich)
    return s.position.local_theta || s.attention.qk_norm == QKNorm::PerHead ? "gemma3_text" : "gemma2";
  if (s.norm.placement == NormPlacement::BranchOutput) return "olmo2";
  if (s.moe.deepseek_routing())
    refuse(s, "moe.scoring, correction_bias, groups, routed_scaling_factor: DeepSeek's routing (deepseek_v2/v3 come "
              "with latent attention, not supported yet)");
  if (s.moe.enabled())
    return s.moe.shared_experts > 0                  ? "qwen2_moe"
           : s.attention.qk_norm == QKNorm::PerHead ? "qwen3_moe"
                                                    : "mixtral";
  if (s.weights.preset == "hf-llama" && s.weights.fused_qkv && s.mlp.fused_gate_up != FusedGateUp::None) return "phi3";
  if (s.norm.unit_offset && s.norm.placement == NormPlacement::Pre) return "gemma";
  if (s.attention.q_bias && s.attention.k_bias && s.attention.v_bias && !s.attention.o_bias) return "qwen2";
  if (s.attention.qk_norm == QKNorm::PerHead) return "qwen3";
  if (s.attention.sliding_window > 0) return "mistral";
  return "llama";
}

const char* architecture_of(const std::string& type) {
  if (type == "gpt2") return "GPT2LMHeadModel";
  if (type == "gemma2") return "Gemma2ForCausalLM";
  if (type == "gemma3_text") return "Gemma3ForCausalLM";
  if (type == "gemma") return "GemmaForCausalLM";
  if (type == "olmo2") return "Olmo2ForCausalLM";
  if (type == "qwen2_moe") return "Qwen2MoeForCausalLM";
  if (type == "qwen3_moe") return "Qwen3MoeForCausalLM";
  if (type == "mixtral") return "MixtralForCausalLM";
  if (type == "phi3") return "Phi3ForCausalLM";
  if (type == "mllama_text_model") return "MllamaForCausalLM";
  if (type == "qwen2") return "Qwen2ForCausalLM";
  if (type == "qwen3") return "Qwen3ForCausalLM";
  if (type == "mistral") return "MistralForCausalLM";
  if (type == "gpt_neox") return "GPTNeoXForCausalLM";
  if (type == "phi") return "PhiForCausalLM";
  if (type == "gptj") return "GPTJForCausalLM";
  if (type == "falcon") return "FalconForCausalLM";
  if (type == "bloom") return "BloomForCausalLM";
  if (type == "mpt") return "MptForCausalLM";
  return "LlamaForCausalLM";
}

std::string hf_activation(Activation a, bool gpt2) {
  switch (a) {
    case Activation::SiLU: return "silu";
    case Activation::GeluErf: return "gelu";
    case Activation::GeluTanh: return gpt2 ? "gelu_new" : "gelu_pytorch_tanh";
    case Activation::ReLU: return "relu";
    case Activation::GeluQuick: return "quick_gelu";
  }
  return "silu";
}

// A number as JSON: integral values as integers (256, not 256.0).
json number(double v) {
  if (v == std::trunc(v) && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
  return v;
}

json rope_scaling(const Spec& s) {
  const RopeScalingParams& r = s.position.scaling;
  switch (r.kind) {
    case RopeScaling::None: return nullptr;
    case RopeScaling::Linear: return {{"rope_type", "linear"}, {"factor", r.factor}};
    case RopeScaling::DynamicNtk: return {{"rope_type", "dynamic"}, {"factor", r.factor}};
    case RopeScaling::Llama3:
      return {{"rope_type", "llama3"},
              {"factor", r.factor},
              {"low_freq_factor", r.low_freq_factor},
              {"high_freq_factor", r.high_freq_factor},
              {"original_max_position_embeddings", r.original_max_context}};
    case RopeScaling::Yarn: {
      json y = {{"rope_type", "yarn"},
                {"factor", r.factor},
                {"original_max_position_embeddings", r.original_max_context},
                {"beta_fast", r.beta_fast},
                {"beta_slow", r.beta_slow}};
      // (An attention factor the mscales imply is written as the mscales.)
      if (r.mscale > 0) y["mscale"] = number(r.mscale);
      if (r.mscale_all_dim > 0) y["mscale_all_dim"] = number(r.mscale_all_dim);
      if (r.attention_factor && !(r.mscale > 0 && r.mscale_all_dim > 0)) y["attention_factor"] = *r.attention_factor;
      return y;
    }
  }
  return nullptr;
}

json layer_types(const Spec& s) {
  json types = json::array();
  for (int64_t i = 0; i < s.dims.layers; ++i)
    types.push_back(s.attention.windowed(i) ? "sliding_attention" : "full_attention");
  return types;
}

json torch_dtype(const Spec& s) {
  switch (s.weights.dtype) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    default:
      refuse(s, "weights.dtype: \"" + std::string(dtype_name(s.weights.dtype)) + "\": a config.json's torch_dtype has no " +
                    std::string(spelling(s.weights.dtype).enumerator) + " blocks");
  }
  return "float32";
}

// The config's model type and core dimensions, under the keys the importer
// reads them from (the family's row), the MLP width as its rule says it.
json core_config(const Spec& s, const char* architecture, const std::string& type, const hf::CoreKeys& row) {
  const Dims& d = s.dims;
  json c = {{"architectures", {architecture}}, {"model_type", type}};
  c[row.hidden.key] = d.hidden;
  c[row.layers.key] = d.layers;
  if (row.heads.key) c[row.heads.key] = d.heads;
  switch (row.width) {
    case hf::Width::Key:
    case hf::Width::KeyDefault4x:
      if (row.intermediate.key) c[row.intermediate.key] = d.intermediate;
      break;
    case hf::Width::KeyElse4x:
      c[row.intermediate.key] = d.intermediate == 4 * d.hidden ? json(nullptr) : json(d.intermediate);
      break;
    case hf::Width::Always4x:
      break;
    case hf::Width::Ratio:
      c[row.intermediate.key] = number(static_cast<double>(d.intermediate) / static_cast<double>(d.hidden));
      break;
  }
  c[row.vocab.key] = d.vocab;
  if (row.context.key) c[row.context.key] = d.max_context;
  if (row.eps) c[row.eps] = s.norm.eps;
  return c;
}

json gpt2_config(const Spec& s) {
  json c = core_config(s, "GPT2LMHeadModel", "gpt2", hf::kGpt2Core);
  c.update({{"n_ctx", s.dims.max_context},
            {"activation_function", hf_activation(s.mlp.activation, true)},
            {"scale_attn_weights", !(s.attention.scale && *s.attention.scale == 1.0)},
            {"tie_word_embeddings", s.embedding.tied},
            {"torch_dtype", torch_dtype(s)}});
  return c;
}

json llama_like_config(const Spec& s, const std::string& type) {
  const Dims& d = s.dims;
  const bool gemma = type == "gemma" || type == "gemma2" || type == "gemma3_text";
  json c = core_config(s, architecture_of(type), type, hf::kLlamaCore);
  c["num_key_value_heads"] = d.kv_heads;
  if (gemma || type == "qwen3" || d.head_dim * d.heads != d.hidden) c["head_dim"] = d.head_dim;
  c["rms_norm_eps"] = s.norm.eps;
  c["rope_theta"] = s.position.theta;
  c["rope_scaling"] = rope_scaling(s);
  if (gemma) c["hidden_activation"] = hf_activation(s.mlp.activation, false);
  c["hidden_act"] = hf_activation(s.mlp.activation, false);
  c["tie_word_embeddings"] = s.embedding.tied;
  c["torch_dtype"] = torch_dtype(s);

  const Attention& a = s.attention;
  if (type == "llama" || type == "qwen3" || type == "qwen3_moe" || type == "olmo2" || gemma)
    c["attention_bias"] = a.q_bias;
  if (type == "llama") c["mlp_bias"] = s.mlp.bias;
  if (type == "qwen2_moe") c["qkv_bias"] = a.q_bias;

  const json window = a.sliding_window > 0 ? json(a.sliding_window) : json(nullptr);
  if (type == "mistral" || type == "mixtral" || type == "phi3") c["sliding_window"] = window;
  if (type == "qwen2" || type == "qwen3" || type == "qwen2_moe" || type == "qwen3_moe") {
    c["use_sliding_window"] = a.sliding_window > 0;
    c["sliding_window"] = window;
    // Qwen2Attention windows the layers from max_window_layers on; layer_types
    // says it for any pattern.
    int64_t first = d.layers;
    for (int64_t i = d.layers - 1; i >= 0 && a.windowed(i); --i) first = i;
    c["max_window_layers"] = first;
    if (a.sliding_window > 0) c["layer_types"] = layer_types(s);
  }
  if (type == "gemma2" || type == "gemma3_text") {
    if (a.scale) {
      // scale = query_pre_attn_scalar^-1/2; written as the integer it was.
      const double scalar = 1.0 / (*a.scale * *a.scale);
      const double rounded = std::round(scalar);
      c["query_pre_attn_scalar"] =
          std::fabs(scalar - rounded) <= 1e-9 * std::fabs(scalar) ? number(rounded) : json(scalar);
    }
    c["attn_logit_softcapping"] = a.softcap > 0 ? json(a.softcap) : json(nullptr);
    c["final_logit_softcapping"] = s.output.softcap > 0 ? json(s.output.softcap) : json(nullptr);
    c["sliding_window"] = window;
    c["layer_types"] = layer_types(s);
  }
  if (type == "gemma3_text") {
    c["rope_local_base_freq"] = s.position.local_theta.value_or(s.position.theta);
    // sliding_window_pattern for the transformers versions before layer_types.
    const auto& p = a.window_pattern;
    bool standard = !p.empty() && !p.back();
    for (size_t i = 0; i + 1 < p.size(); ++i) standard = standard && p[i];
    if (standard) c["sliding_window_pattern"] = static_cast<int64_t>(p.size());
  }
  if (type == "phi3" && s.position.rotary_dim != d.head_dim)
    c["partial_rotary_factor"] = static_cast<double>(s.position.rotary_dim) / static_cast<double>(d.head_dim);
  if (type == "mixtral") {
    c["num_local_experts"] = s.moe.experts;
    c["num_experts_per_tok"] = s.moe.top_k;
  }
  if (type == "qwen2_moe" || type == "qwen3_moe") {
    c["num_experts"] = s.moe.experts;
    c["num_experts_per_tok"] = s.moe.top_k;
    c["norm_topk_prob"] = s.moe.norm_topk_prob;
    c["moe_intermediate_size"] = s.moe.expert_intermediate;
    c["decoder_sparse_step"] = s.moe.sparse_step;
    c["mlp_only_layers"] = s.moe.dense_layers;
    // Qwen2-MoE's shared expert; Qwen3-MoE has none.
    if (type == "qwen2_moe") c["shared_expert_intermediate_size"] = s.moe.shared_intermediate;
  }
  return c;
}

// The rotated fraction of each head, as GPT-NeoX's rotary_pct and Phi's
// partial_rotary_factor say it.
json rotary_fraction(const Spec& s) {
  return number(static_cast<double>(s.position.rotary_dim) / static_cast<double>(s.dims.head_dim));
}

json dtype_and_tie(json c, const Spec& s) {
  c["tie_word_embeddings"] = s.embedding.tied;
  c["torch_dtype"] = torch_dtype(s);
  return c;
}

json gpt_neox_config(const Spec& s) {
  json c = core_config(s, "GPTNeoXForCausalLM", "gpt_neox", hf::kGptNeoxCore);
  c.update({{"use_parallel_residual", s.norm.placement == NormPlacement::Parallel},
            {"attention_bias", s.attention.q_bias},
            {"rotary_pct", rotary_fraction(s)},
            {"rotary_emb_base", number(s.position.theta)},
            {"rope_scaling", rope_scaling(s)},
            {"hidden_act", hf_activation(s.mlp.activation, false)}});
  return dtype_and_tie(c, s);
}

json phi_config(const Spec& s) {
  json c = core_config(s, "PhiForCausalLM", "phi", hf::kPhiCore);
  c.update({{"num_key_value_heads", s.dims.kv_heads},
            {"partial_rotary_factor", rotary_fraction(s)},
            {"rope_theta", s.position.theta},
            {"rope_scaling", rope_scaling(s)},
            {"qk_layernorm", false},
            {"hidden_act",
             s.mlp.activation == Activation::GeluTanh ? "gelu_new" : hf_activation(s.mlp.activation, false)}});
  return dtype_and_tie(c, s);
}

json gptj_config(const Spec& s) {
  json c = core_config(s, "GPTJForCausalLM", "gptj", hf::kGptjCore);
  c.update({{"rotary_dim", s.position.rotary_dim == s.dims.head_dim ? json(nullptr) : json(s.position.rotary_dim)},
            {"activation_function", hf_activation(s.mlp.activation, true)}});
  return dtype_and_tie(c, s);
}

json falcon_config(const Spec& s) {
  const Dims& d = s.dims;
  const bool new_arch = s.weights.qkv_layout == QkvLayout::Grouped;
  const bool multi_query = s.weights.qkv_layout == QkvLayout::Blocks;
  json c = core_config(s, "FalconForCausalLM", "falcon", hf::kFalconCore);
  c.update({{"num_kv_heads", new_arch ? d.kv_heads : d.heads},
            {"new_decoder_architecture", new_arch},
            {"multi_query", multi_query},
            {"parallel_attn", s.norm.placement == NormPlacement::Parallel},
            {"bias", s.attention.q_bias},
            {"alibi", false},
            {"rope_theta", s.position.theta},
            {"rope_scaling", rope_scaling(s)},
            {"activation", hf_activation(s.mlp.activation, false)}});
  if (new_arch) c["num_ln_in_parallel_attn"] = s.norm.parallel_shared ? 1 : 2;
  return dtype_and_tie(c, s);
}

json bloom_config(const Spec& s) {
  json c = core_config(s, "BloomForCausalLM", "bloom", hf::kBloomCore);
  c["apply_residual_connection_post_layernorm"] = false;
  return dtype_and_tie(c, s);
}

// BERT, and RoBERTa when positions start past the padding row.
json bert_config(const Spec& s, const std::string& type) {
  json c = core_config(s, type == "bert" ? "BertModel" : "RobertaModel", type, hf::kBertCore);
  c.update({{"torch_dtype", torch_dtype(s)},
            {"max_position_embeddings", s.position.table_size},
            {"type_vocab_size", s.embedding.token_types},
            {"layer_norm_eps", s.norm.eps},
            {"hidden_act", hf_activation(s.mlp.activation, false)},
            {"position_embedding_type", "absolute"}});
  if (type == "roberta") c["pad_token_id"] = s.position.offset - 1;
  return c;
}

// T5EncoderModel, or T5ForConditionalGeneration for an encoder-decoder:
// feed_forward_proj names the MLP ("relu", "gated-gelu").
json t5_config(const Spec& s) {
  const Dims& d = s.dims;
  const std::string act = s.mlp.activation == Activation::GeluTanh && s.mlp.gated ? "gelu" : hf_activation(s.mlp.activation, false);
  json c = {{"architectures", {s.encoder_decoder() ? "T5ForConditionalGeneration" : "T5EncoderModel"}},
            {"model_type", "t5"},
            {"d_model", d.hidden},
            {"d_kv", d.head_dim},
            {"d_ff", d.intermediate},
            {"num_layers", s.encoder_decoder() ? d.encoder_layers : d.layers},
            {"num_heads", d.heads},
            {"vocab_size", d.vocab},
            {"n_positions", d.max_context},
            {"layer_norm_epsilon", s.norm.eps},
            {"relative_attention_num_buckets", s.position.buckets},
            {"relative_attention_max_distance", s.position.max_distance},
            {"feed_forward_proj", (s.mlp.gated ? "gated-" : "") + act},
            {"torch_dtype", torch_dtype(s)}};
  if (s.encoder_decoder())
    c.update({{"num_decoder_layers", d.layers},
              {"is_encoder_decoder", true},
              {"decoder_start_token_id", s.decoder_start},
              {"tie_word_embeddings", s.embedding.tied}});
  return c;
}

// BartForConditionalGeneration, or mBART's: the stacks' widths alike.
json bart_config(const Spec& s, const std::string& type) {
  const Dims& d = s.dims;
  return {{"architectures", {type == "mbart" ? "MBartForConditionalGeneration" : "BartForConditionalGeneration"}},
          {"model_type", type},
          {"d_model", d.hidden},
          {"encoder_layers", d.encoder_layers},
          {"decoder_layers", d.layers},
          {"encoder_attention_heads", d.heads},
          {"decoder_attention_heads", d.heads},
          {"encoder_ffn_dim", d.intermediate},
          {"decoder_ffn_dim", d.intermediate},
          {"vocab_size", d.vocab},
          {"max_position_embeddings", d.max_context},
          {"activation_function", hf_activation(s.mlp.activation, false)},
          {"scale_embedding", s.embedding.scale != 1.0},
          {"is_encoder_decoder", true},
          {"decoder_start_token_id", s.decoder_start},
          {"tie_word_embeddings", s.embedding.tied},
          {"torch_dtype", torch_dtype(s)}};
}

// ModernBertModel: the local layers by global_attn_every_n_layers, which
// only a pattern [global, local × (n − 1)] can say.
json modernbert_config(const Spec& s) {
  const std::vector<bool>& pattern = s.attention.window_pattern;
  const int64_t every = pattern.empty() ? 1 : static_cast<int64_t>(pattern.size());  // 1: every layer global
  bool regular = !pattern.empty() && !pattern[0];
  for (size_t i = 1; i < pattern.size(); ++i) regular = regular && pattern[i];
  if (s.attention.sliding_window > 0 && !regular)
    refuse(s, "attention.window_pattern: ModernBERT's configs make every n-th layer global, from layer 0");
  json c = core_config(s, "ModernBertModel", "modernbert", hf::kModernBertCore);
  c.update({{"torch_dtype", torch_dtype(s)},
            {"norm_bias", s.norm.bias},
            {"attention_bias", s.attention.q_bias},
            {"mlp_bias", s.mlp.bias},
            {"hidden_activation", hf_activation(s.mlp.activation, false)},
            {"global_rope_theta", s.position.theta},
            {"local_rope_theta", s.position.local_theta.value_or(s.position.theta)},
            {"local_attention", s.attention.sliding_window > 0 ? 2 * s.attention.sliding_window : 128},
            {"global_attn_every_n_layers", every}});
  return c;
}

json mpt_config(const Spec& s) {
  json attn = {{"attn_type", "multihead_attention"}, {"alibi", true}, {"alibi_bias_max", 8}, {"clip_qkv", nullptr},
               {"qk_ln", false}, {"prefix_lm", false}};
  attn["softmax_scale"] = s.attention.scale ? json(*s.attention.scale) : json(nullptr);
  json c = core_config(s, "MptForCausalLM", "mpt", hf::kMptCore);
  c.update({{"no_bias", true}, {"learned_pos_emb", false}, {"attn_config", attn}});
  return dtype_and_tie(c, s);
}

}  // namespace

// The config must import back to this very spec: else the fields that
// would change are refused.
json round_trip(const Spec& s, json config, const std::string& type) {
  ImportOptions options;
  options.name = s.name;
  options.file = "config.json (exported)";
  options.warn = [](const std::string&) {};
  std::vector<std::string> differences;
  try {
    const std::string text = import_hf_config(config, options).render();
    Diagnostics diagnostics(options.file);
    auto back = parse_spec_string(text, options.file, diagnostics);
    if (!back) throw Error(ErrorKind::InvalidArgument, diagnostics.format());
    back->cache = s.cache;  // a build choice: no config.json holds it
    back->pooling = s.pooling;  // sentence-transformers' modules beside config.json hold it
    // Gemma 3's "\n\n" around an image: tokenizer.json's id, no config's
    // (gemma3_keys checked the spec's prefix and suffix hold boi and eoi so).
    ImageTokens& k = back->vision.tokens;
    const ImageTokens& spec_tokens = s.vision.tokens;
    if (type == "gemma3" && spec_tokens.prefix.size() == 2 && k.prefix == std::vector{spec_tokens.prefix[1]} &&
        k.suffix == std::vector{spec_tokens.suffix[0]}) {
      k.prefix = spec_tokens.prefix;
      k.suffix = spec_tokens.suffix;
    }
    differences = spec_differences(s, *back);
  } catch (const ImportError& e) {
    differences = e.problems();
  }
  if (!differences.empty()) {
    std::string as = "model_type \"" + type + "\"";
    if (config.contains("text_config")) as += " (text_config " + config["text_config"]["model_type"].dump() + ")";
    std::string why = "as " + as + " these fields would change (spec vs config):";
    for (const std::string& d : differences) why += "\n  " + d;
    refuse(s, why);
  }
  return config;
}

// time_step_limit when it is not (0, Infinity), its default: Python's json
// writes Infinity, JSON (and so nlohmann's dump) has no such token.
void time_step_limit(json& c, const Ssm& m) {
  if (m.dt_limited()) c["time_step_limit"] = {number(m.dt_min), m.dt_max};
}

// BambaConfig: Llama's decoder blocks, a Mamba-2 mixer but in the attention layers.
json bamba_config(const Spec& s) {
  if (s.weights.preset != "hf-bamba")
    refuse(s, "ssm.attention_layers: a hybrid's config is BambaConfig, whose checkpoints have the hf-bamba preset's names");
  const Ssm& m = s.ssm;
  if (!m.mamba2()) refuse(s, "ssm.kind: BambaConfig's mixers are Mamba-2 mixers");
  json c = core_config(s, "BambaForCausalLM", "bamba", hf::kLlamaCore);  // BambaConfig: Llama's keys
  c.update({{"num_key_value_heads", s.dims.kv_heads},
            {"rms_norm_eps", number(s.norm.eps)},
            {"rope_theta", number(s.position.theta)},
            {"hidden_act", "silu"},
            {"attn_layer_indices", m.attention_layers},
            {"mamba_n_heads", m.heads},
            {"mamba_d_head", m.head_dim},
            {"mamba_n_groups", m.groups},
            {"mamba_d_state", m.d_state},
            {"mamba_d_conv", m.d_conv},
            {"mamba_expand", m.expand},
            {"mamba_conv_bias", m.conv_bias},
            {"mamba_proj_bias", m.bias}});
  time_step_limit(c, m);
  return dtype_and_tie(c, s);
}

// MambaConfig or Mamba2Config: every layer a Mamba or Mamba-2 block.
json mamba_config(const Spec& s) {
  if (s.weights.preset != "hf-mamba")
    refuse(s, "ssm: a Mamba model's config is MambaConfig or Mamba2Config, whose checkpoints have the hf-mamba preset's names");
  const Ssm& m = s.ssm;
  const bool two = m.mamba2();
  json c = core_config(s, two ? "Mamba2ForCausalLM" : "MambaForCausalLM", two ? "mamba2" : "mamba",
                       two ? hf::kMamba2Core : hf::kMambaCore);
  c.update({{"state_size", m.d_state},
            {"conv_kernel", m.d_conv},
            {"expand", m.expand},
            {"use_conv_bias", m.conv_bias},
            {"use_bias", m.bias},
            {"hidden_act", "silu"},
            {"layer_norm_epsilon", number(s.norm.eps)}});
  if (two) {
    c["num_heads"] = m.heads;
    c["head_dim"] = m.head_dim;
    c["n_groups"] = m.groups;
    c["rms_norm"] = true;
    time_step_limit(c, m);
  } else {
    c["intermediate_size"] = m.d_inner;
    c["time_step_rank"] = m.dt_rank;
  }
  return dtype_and_tie(c, s);
}

// DeepseekV2Config / DeepseekV3Config: latent attention with DeepSeek's MoE
// (V3 when it routes by sigmoid scores or a correction bias, else V2).
json deepseek_config(const Spec& s) {
  if (s.weights.preset != "hf-llama")
    refuse(s, "mla: a DeepSeek config's checkpoints have the hf-llama preset's attention names");
  const Dims& d = s.dims;
  const Mla& m = s.mla;
  const Moe& e = s.moe;
  const bool v3 = e.enabled() && (e.scoring == MoeScoring::Sigmoid || e.correction_bias);
  const std::string type = v3 ? "deepseek_v3" : "deepseek_v2";
  json c = core_config(s, v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM", type, hf::kDeepseekCore);
  c.update({{"num_key_value_heads", d.heads},
            {"q_lora_rank", m.q_lora_rank > 0 ? json(m.q_lora_rank) : json(nullptr)},
            {"kv_lora_rank", m.kv_lora_rank},
            {"qk_nope_head_dim", m.qk_nope_head_dim},
            {"qk_rope_head_dim", m.qk_rope_head_dim},
            {"v_head_dim", m.v_head_dim},
            {"rms_norm_eps", s.norm.eps},
            {"rope_theta", s.position.theta},
            {"rope_scaling", rope_scaling(s)},
            {"attention_bias", false},
            {"hidden_act", hf_activation(s.mlp.activation, false)}});
  if (!e.enabled()) {
    c["n_routed_experts"] = nullptr;
    return dtype_and_tie(c, s);
  }
  // The dense layers must be the first k, or those off a layer frequency.
  int64_t first = 0;
  while (first < d.layers && !e.sparse(first)) ++first;
  int64_t freq = 1;
  while (freq < d.layers && first + freq < d.layers && !e.sparse(first + freq)) ++freq;
  for (int64_t l = 0; l < d.layers; ++l)
    if (e.sparse(l) != (l >= first && l % freq == 0))
      refuse(s, "moe.dense_layers: DeepSeek's configs make layer l sparse iff l ≥ first_k_dense_replace and "
                "l % moe_layer_freq == 0");
  c["n_routed_experts"] = e.experts;
  c["num_experts_per_tok"] = e.top_k;
  c["moe_intermediate_size"] = e.expert_intermediate;
  c["n_shared_experts"] = e.shared_experts;
  c["first_k_dense_replace"] = first;
  c["moe_layer_freq"] = freq;
  c["scoring_func"] = e.scoring == MoeScoring::Sigmoid ? "sigmoid" : "softmax";
  c["topk_method"] = e.correction_bias ? "noaux_tc" : e.groups > 1 ? "group_limited_greedy" : "greedy";
  c["n_group"] = e.groups;
  c["topk_group"] = e.topk_groups;
  c["norm_topk_prob"] = e.norm_topk_prob;
  c["routed_scaling_factor"] = e.routed_scaling_factor;
  return dtype_and_tie(c, s);
}

namespace {

// The decoder's config: the whole model's without [vision], or a
// multimodal config's text_config. `text_type`: the model type its config
// class reads the text_config as (Gemma3Config's gemma3_text); empty: the
// one the spec's features say.
json decoder_config(const Spec& s, const std::string& text_type = "") {
  if (s.ssm.hybrid()) return bamba_config(s);
  if (s.ssm.enabled()) return mamba_config(s);
  if (s.mla.enabled) return deepseek_config(s);
  // What no model type has, said plainly before the round trip would.
  const std::string named = named_family(s);
  const bool alibi_family = named == "bloom" || named == "mpt";
  const bool bert = s.encoder() && s.weights.preset == "hf-bert";
  const bool bart = s.encoder_decoder() && s.weights.preset == "hf-bart";
  if (s.encoder_decoder() && s.weights.preset != "hf-t5" && !bart)
    refuse(s, "model.stack: \"encoder-decoder\": the supported configs are T5's (weights.preset = \"hf-t5\") and "
              "BART's or mBART's (\"hf-bart\")");
  if (s.position.kind != PositionKind::Rope && !(s.position.kind == PositionKind::Learned && s.weights.preset == "hf-gpt2") &&
      !(s.position.kind == PositionKind::Learned && bert) &&
      !(s.position.kind == PositionKind::Relative && s.stack != Stack::Decoder && s.weights.preset == "hf-t5") &&
      !(s.position.kind == PositionKind::Learned && bart) &&
      !(s.position.kind == PositionKind::Alibi && alibi_family))
    refuse(s, std::string("position.kind: \"") + name(s.position.kind) +
                  "\": the supported configs have rope positions, learned ones with the hf-gpt2, hf-bert or hf-bart "
                  "preset, relative ones with hf-t5, or alibi under BLOOM's or MPT's tensor names");
  const bool parallel_family = named == "gpt_neox" || named == "phi" || named == "gptj" || named == "falcon";
  if ((s.norm.placement == NormPlacement::Post && !bert && !bart) || (s.norm.placement == NormPlacement::Parallel && !parallel_family))
    refuse(s, std::string("norm.placement: \"") + name(s.norm.placement) +
                  "\": no supported model type places its norms so (parallel: GPT-NeoX, Phi, GPT-J and Falcon, "
                  "under their tensor names)");
  if (is_block_dtype(s.weights.dtype)) torch_dtype(s);

  const std::string type = text_type.empty() ? model_type_of(s) : text_type;
  json config;
  if (type == "gpt2") config = gpt2_config(s);
  else if (type == "gpt_neox") config = gpt_neox_config(s);
  else if (type == "phi") config = phi_config(s);
  else if (type == "gptj") config = gptj_config(s);
  else if (type == "falcon") config = falcon_config(s);
  else if (type == "bloom") config = bloom_config(s);
  else if (type == "mpt") config = mpt_config(s);
  else if (type == "bert" || type == "roberta") config = bert_config(s, type);
  else if (type == "t5") config = t5_config(s);
  else if (type == "bart" || type == "mbart") config = bart_config(s, type);
  else if (type == "modernbert") config = modernbert_config(s);
  else config = llama_like_config(s, type);
  // transformers' dynamic NTK scales past max_position_embeddings: the
  // context the spec's scaling starts from (the spec's own is its reach).
  if (s.position.scaling.kind == RopeScaling::DynamicNtk) config["max_position_embeddings"] = s.position.scaling.original_max_context;
  return config;
}

// ---- multimodal configs: the decoder and its [vision] --------------------------

// The multimodal config class of a splice [vision], as the importer reads
// it back (hf_vision.cpp): the tower by the preset that names its tensors,
// the class by the tower and the projector. llava: a CLIP or Pixtral tower
// and an mlp; mistral3: Pixtral and merge_mlp; gemma3: SigLIP and pooled.
std::string multimodal_type_of(const Spec& s) {
  const Vision& v = s.vision;
  const std::string& preset = v.weights.preset;
  const ProjectorKind kind = v.projector.kind;
  if (v.connection == VisionConnection::CrossAttention) {
    if (preset != "hf-mllama")
      refuse(s, "vision.weights.preset: " + (preset.empty() ? std::string("none") : "\"" + preset + "\"") +
                    ": the cross_attention config lathe writes is mllama's, its tower named by \"hf-mllama\"");
    if (kind != ProjectorKind::Linear)
      refuse(s, std::string("vision.projector.kind: \"") + name(kind) + "\": MllamaConfig's projector is \"linear\"");
    return "mllama";
  }
  if (preset == "hf-mllama")
    refuse(s, "vision.connection: \"splice\": an hf-mllama tower's config (mllama) reads it through cross-attention");
  if ((preset == "hf-clip" || preset == "hf-pixtral") && kind == ProjectorKind::Mlp) return "llava";
  if (preset == "hf-pixtral" && kind == ProjectorKind::MergeMlp) return "mistral3";
  if (preset == "hf-siglip" && kind == ProjectorKind::Pooled) return "gemma3";
  if (preset != "hf-clip" && preset != "hf-pixtral" && preset != "hf-siglip")
    refuse(s, "vision.weights.preset: " + (preset.empty() ? std::string("none") : "\"" + preset + "\"") +
                  ": the towers a supported multimodal config names are CLIP's (\"hf-clip\": llava), Pixtral's "
                  "(\"hf-pixtral\": llava, mistral3) and SigLIP's (\"hf-siglip\": gemma3)");
  const char* takes = preset == "hf-clip"      ? "LlavaConfig's \"mlp\""
                      : preset == "hf-pixtral" ? "LlavaConfig's \"mlp\" or Mistral3Config's \"merge_mlp\""
                                               : "Gemma3Config's \"pooled\"";
  refuse(s, std::string("vision.projector.kind: \"") + name(kind) + "\": the projector of a " + preset +
                " tower's config is " + takes);
}

// MllamaVisionConfig's keys, as its saved configs write them.
json mllama_vision_config(const Spec& s) {
  const Vision& v = s.vision;
  const Dims& d = v.dims;
  const json ratios = v.tile_arrangements();
  return {{"model_type", "mllama_vision_model"},
          {"hidden_size", d.hidden},
          {"intermediate_size", d.intermediate},
          {"num_hidden_layers", d.layers},
          {"attention_heads", d.heads},
          {"num_channels", v.channels},
          {"patch_size", v.patch},
          {"image_size", v.image_size},
          {"hidden_act", hf_activation(v.mlp.activation, false)},
          {"max_num_tiles", v.tiles},
          {"supported_aspect_ratios", ratios},
          {"num_global_layers", v.global_layers},
          {"intermediate_layers_indices", v.extra_feature_layers},
          {"vision_output_dim", d.hidden * (1 + static_cast<int64_t>(v.extra_feature_layers.size()))},
          {"norm_eps", v.norm.eps}};
}

// vision_config: CLIPVisionConfig's, PixtralVisionConfig's or
// SiglipVisionConfig's keys, each one the importer reads written out.
json vision_config(const Spec& s) {
  const Vision& v = s.vision;
  const Dims& d = v.dims;
  if (v.weights.preset == "hf-mllama") return mllama_vision_config(s);
  const bool pixtral = v.weights.preset == "hf-pixtral";
  if (pixtral ? v.longest_edge == 0 : v.image_size == 0)
    refuse(s, pixtral ? "vision.image_size: a Pixtral tower's config gives the longest edge of an image that keeps its "
                        "aspect (vision.longest_edge), not a fixed square"
                      : "vision.longest_edge: CLIP's and SigLIP's configs give a fixed square (vision.image_size)");
  json c = {{"hidden_size", d.hidden},          {"intermediate_size", d.intermediate},
            {"num_hidden_layers", d.layers},    {"num_attention_heads", d.heads},
            {"num_channels", v.channels},       {"patch_size", v.patch},
            {"hidden_act", hf_activation(v.mlp.activation, false)}};
  if (pixtral) {
    // PixtralVisionConfig: image_size is the longest edge, head_dim hidden / heads.
    c.update({{"model_type", "pixtral"}, {"image_size", v.longest_edge}, {"head_dim", d.hidden / d.heads},
              {"rope_theta", v.rope_theta}});
    return c;
  }
  c.update({{"model_type", v.weights.preset == "hf-clip" ? "clip_vision_model" : "siglip_vision_model"},
            {"image_size", v.image_size},
            {"layer_norm_eps", v.norm.eps}});
  return c;
}

std::string ids_text(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

// Gemma3Config's keys: the image's tokens, the pooled projector's, and
// whether the checkpoint holds SigLIP's pooling head (the importer adds its
// tensors to weights.ignore unless vision_use_head = false).
void gemma3_keys(const Spec& s, json& c) {
  const Vision& v = s.vision;
  const ImageTokens& k = v.tokens;
  // Gemma3Processor writes "\n\n", <start_of_image> (boi), the image tokens,
  // <end_of_image> (eoi), "\n\n". The config holds boi, the image token and
  // eoi; the id of "\n\n" is tokenizer.json's (the importer looks it up
  // there; imported without one, prefix and suffix are boi and eoi alone).
  const bool plain = k.prefix.size() == 1 && k.suffix.size() == 1;
  const bool newlines = k.prefix.size() == 2 && k.suffix.size() == 2 && k.prefix[0] == k.suffix[1];
  if (!(plain || newlines) || k.prefix.back() != k.marker)
    refuse(s, "vision.tokens.prefix = " + ids_text(k.prefix) + ", vision.tokens.suffix = " + ids_text(k.suffix) +
                  ": Gemma3Processor writes [\"\\n\\n\", boi] before an image's tokens and [eoi, \"\\n\\n\"] after "
                  "them (boi: vision.tokens.marker; without \"\\n\\n\": [boi] and [eoi])");
  if (v.projector.eps != v.norm.eps)
    refuse(s, "vision.projector.eps = " + json(v.projector.eps).dump() +
                  ": Gemma3MultiModalProjector's mm_soft_emb_norm takes vision_config's layer_norm_eps, "
                  "vision.norm.eps (" + json(v.norm.eps).dump() + ")");
  c["boi_token_index"] = k.marker;
  c["image_token_index"] = k.image;
  c["eoi_token_index"] = k.suffix.front();
  c["mm_tokens_per_image"] = v.projector.tokens;
  // The head's tensors, in weights.ignore after the decoder's own.
  const std::vector<std::string> head = hf::siglip_head_tensors();
  const std::vector<std::string>& ignore = s.weights.ignore;
  c["vision_config"]["vision_use_head"] =
      ignore.size() >= head.size() && std::equal(head.begin(), head.end(), ignore.end() - head.size());
}

// LlavaConfig's and Mistral3Config's keys.
void llava_keys(const Spec& s, const std::string& type, json& c) {
  const Vision& v = s.vision;
  const ImageTokens& k = v.tokens;
  c["image_token_index"] = k.marker;
  c["vision_feature_layer"] = v.feature_layer;
  c["projector_hidden_act"] = hf_activation(v.projector.activation, false);
  c["multimodal_projector_bias"] = v.projector.bias;
  if (type == "llava") c["vision_feature_select_strategy"] = v.class_token && v.drop_class_token ? "default" : "full";
  if (type == "mistral3") {
    if (v.projector.eps != s.norm.eps)
      refuse(s, "vision.projector.eps = " + json(v.projector.eps).dump() +
                    ": Mistral3MultiModalProjector's norm takes text_config's rms_norm_eps, the decoder's norm.eps (" +
                    json(s.norm.eps).dump() + ")");
    c["spatial_merge_size"] = v.projector.merge;
  }
  // Pixtral's [IMG_BREAK] and [IMG_END]: the keys the importer reads before
  // tokenizer.json (transformers keeps a config's keys it does not know).
  if (v.weights.preset == "hf-pixtral") {
    if (k.row_end >= 0) c["image_break_token_id"] = k.row_end;
    if (k.end >= 0) c["image_end_token_id"] = k.end;
  }
}

// A spec with [vision] as a multimodal config of model type `type`: the
// decoder's config as text_config, the tower's as vision_config, the
// projector and the image tokens at the top.
json multimodal_config(const Spec& s, const std::string& type) {
  json text = decoder_config(s, type == "gemma3" ? "gemma3_text" : type == "mllama" ? "mllama_text_model" : "");
  const char* architecture = type == "llava"      ? "LlavaForConditionalGeneration"
                             : type == "mistral3" ? "Mistral3ForConditionalGeneration"
                             : type == "mllama"   ? "MllamaForConditionalGeneration"
                                                  : "Gemma3ForConditionalGeneration";
  // MllamaTextConfig: the layers that cross-attend; its token table's 8
  // rows past the vocabulary are the modeling code's, no key's.
  if (type == "mllama") text["cross_attention_layers"] = s.vision.cross_layers;
  json c = {{"architectures", {architecture}}, {"model_type", type}};
  // The whole model's dtype, at the top; the decoder's class is the model's.
  if (text.contains("torch_dtype")) c["torch_dtype"] = text["torch_dtype"];
  text.erase("torch_dtype");
  text.erase("architectures");
  c["text_config"] = std::move(text);
  c["vision_config"] = vision_config(s);
  if (type == "gemma3") gemma3_keys(s, c);
  else if (type == "mllama") c["image_token_index"] = s.vision.tokens.marker;
  else llava_keys(s, type, c);
  return c;
}

}  // namespace

json hf_config_from_spec(const Spec& s) {
  const std::string multimodal = s.vision.enabled ? multimodal_type_of(s) : "";
  json config = multimodal.empty() ? decoder_config(s) : multimodal_config(s, multimodal);
  const std::string type = config["model_type"];
  return round_trip(s, std::move(config), type);
}

}  // namespace lathe::importer
