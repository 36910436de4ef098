// Spec to GGUF (gguf_import.hpp's gguf_twin and gguf_metadata_from_spec):
// the architecture llama.cpp would name a spec, what it cannot say, and
// the metadata its converter writes.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/manifest.hpp"
#include "generator/import/gguf_families.hpp"
#include "generator/import/gguf_import.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::importer {

using spec::Spec;
using weights::GgufValue;
using namespace gguf_families;

namespace {

const Arch& arch_of(const Spec& s) {
  auto pick = [](std::string_view name) -> const Arch& { return *find_arch(name); };
  using spec::NormPlacement;
  using spec::QKNorm;
  if (s.ssm.hybrid()) {
    if (!s.ssm.mamba2())
      throw Error(ErrorKind::Unsupported, "ssm.kind: llama.cpp's Mamba hybrid, jamba, is not read or written yet "
                                          "(granitehybrid's mixers are Mamba-2 mixers)");
    return pick("granitehybrid");
  }
  if (s.ssm.enabled()) return pick(s.ssm.mamba2() ? "mamba2" : "mamba");
  if (s.mla.enabled) return pick("deepseek2");
  if (s.encoder_decoder()) {
    if (s.position.kind != spec::PositionKind::Relative)
      throw Error(ErrorKind::Unsupported, "position.kind: llama.cpp's one encoder-decoder, t5, has T5's relative "
                                          "positions (it converts no BART)");
    return pick("t5");
  }
  if (s.encoder()) {
    switch (s.position.kind) {
      case spec::PositionKind::Learned: return pick("bert");
      case spec::PositionKind::Rope: return pick("nomic-bert");
      case spec::PositionKind::Relative: return pick("t5encoder");
      default:
        throw Error(ErrorKind::Unsupported, "position.kind: llama.cpp's encoders (bert, nomic-bert, t5encoder) have "
                                            "learned, RoPE or relative positions");
    }
  }
  if (s.moe.enabled()) {
    if (s.moe.deepseek_routing())
      throw Error(ErrorKind::Unsupported, "moe.scoring, correction_bias, groups, routed_scaling_factor: llama.cpp "
                                          "routes so in deepseek2 alone, whose attention is latent ([mla])");
    if (s.moe.shared_experts > 1)
      throw Error(ErrorKind::Unsupported, "moe.shared_experts: llama.cpp's qwen2moe has one shared expert");
    if (s.moe.shared_experts > 0) {
      if (s.moe.norm_topk_prob) throw Error(ErrorKind::Unsupported, "moe.norm_topk_prob: llama.cpp's qwen2moe does not renormalize");
      return pick("qwen2moe");
    }
    if (s.moe.sparse_step != 1 || !s.moe.dense_layers.empty())
      throw Error(ErrorKind::Unsupported, "moe.dense_layers: llama.cpp's MoE architectures have no dense layers");
    if (s.attention.qk_norm == QKNorm::PerHead) return pick("qwen3moe");
    if (!s.moe.norm_topk_prob || s.attention.q_bias)
      throw Error(ErrorKind::Unsupported, "moe: llama.cpp runs Mixtral-style experts (renormalized, no biases) as llama");
  }
  if (s.position.kind == spec::PositionKind::Learned) return pick("gpt2");
  if (s.position.kind == spec::PositionKind::Alibi) return pick(s.embedding.norm ? "bloom" : "mpt");
  if (s.norm.kind == spec::NormKind::LayerNorm && s.position.kind == spec::PositionKind::Rope) {
    if (s.position.pairing == spec::RopePairing::Interleaved)
      throw Error(ErrorKind::Unsupported, "position.pairing: llama.cpp converts no GPT-J (interleaved RoPE with LayerNorms)");
    if (s.output.bias) return pick("phi2");
    if (s.attention.q_bias || s.norm.placement != NormPlacement::Parallel) return pick("gptneox");
    return pick("falcon");
  }
  if (s.norm.placement == NormPlacement::Sandwich) return pick(s.attention.qk_norm == QKNorm::PerHead ? "gemma3" : "gemma2");
  if (s.norm.placement == NormPlacement::BranchOutput) return pick("olmo2");
  if (s.embedding.scale_sqrt_hidden) return pick("gemma");
  if (s.attention.qk_norm == QKNorm::PerHead) return pick("qwen3");
  if (s.weights.fused_qkv && s.mlp.fused_gate_up != spec::FusedGateUp::None) return pick("phi3");
  if (s.attention.q_bias) return pick("qwen2");
  return pick("llama");
}

// What llama.cpp's encoders and its T5 compute (encoder_sections,
// t5_sections) and a spec of the architecture arch_of picked says otherwise:
// each an Error naming the field.
void encoder_refusals(const Spec& s, std::string_view arch) {
  auto refuse = [&](const std::string& field, const std::string& why) {
    throw Error(ErrorKind::Unsupported, field + ": llama.cpp's " + std::string(arch) + " " + why);
  };
  using spec::Activation;
  if (s.pooling.kind != spec::Pooling::None && !s.pooling.normalize)
    refuse("pooling.normalize", "L2-normalizes pooled embeddings (embd_normalize 2); a GGUF file cannot say otherwise");
  if (s.moe.enabled()) refuse("moe", "has no experts");
  if (s.attention.sliding_window > 0) refuse("attention.sliding_window", "attends over the whole input");
  if (s.attention.qk_norm != spec::QKNorm::None) refuse("attention.qk_norm", "has no q/k norms");
  if (s.norm.unit_offset) refuse("norm.unit_offset", "reads norm weights as they are");
  if (s.embedding.scale != 1.0 || s.embedding.scale_sqrt_hidden) refuse("embedding.scale", "does not scale embeddings");
  if (arch == "t5") {
    const double tied_scale = 1.0 / std::sqrt(static_cast<double>(s.dims.hidden));
    // What a file says of the head is whether output.weight is there.
    if (s.embedding.tied && std::abs(s.output.scale - tied_scale) > 1e-9 * tied_scale)
      throw Error(ErrorKind::Unsupported, "output.scale: a GGUF t5 file without output.weight is read as T5's tied "
                                          "head, scaled by hidden^-0.5 (" + toml_float(tied_scale) + ")");
    if (!s.embedding.tied && s.output.scale != 1.0)
      throw Error(ErrorKind::Unsupported,
                  "output.scale: a GGUF t5 file with output.weight is read as an unscaled head (scale 1)");
    if (s.output.bias) refuse("output.bias", "has no bias of the logits");
    if (s.output.softcap > 0) refuse("output.softcap", "does not cap the logits");
  }
  if (arch == "t5encoder" || arch == "t5") {
    if (s.norm.kind != spec::NormKind::RMSNorm || s.norm.placement != spec::NormPlacement::Pre || !s.norm.final_norm ||
        s.norm.bias)
      refuse("norm", "has pre-norm RMS blocks and a final norm");
    if (s.embedding.norm) refuse("embedding.norm", "has no norm of the embeddings");
    if (s.attention.q_bias || s.attention.k_bias || s.attention.v_bias || s.attention.o_bias || s.mlp.bias)
      refuse(s.mlp.bias ? "mlp.bias" : "attention.bias", "has no biases");
    if (s.weights.fused_qkv) refuse("weights.fused_qkv", "has q, k and v apart");
    if (s.attention.effective_scale(s.dims.head_dim) != 1.0) refuse("attention.scale", "does not scale the scores (1.0)");
    if (s.position.max_distance != 128) refuse("position.max_distance", "fixes it at 128");
    if (s.mlp.gated ? s.mlp.activation != Activation::GeluTanh : s.mlp.activation != Activation::ReLU)
      refuse("mlp.activation", "computes a gated tanh GELU (gelu_tanh), or an ungated ReLU (relu)");
    return;
  }
  if (s.norm.kind != spec::NormKind::LayerNorm || s.norm.placement != spec::NormPlacement::Post || s.norm.final_norm)
    refuse("norm", "has post-norm LayerNorm blocks and no final norm");
  if (!s.embedding.norm) refuse("embedding.norm", "normalizes the embeddings (token_embd_norm)");
  if (arch == "nomic-bert") {
    if (!s.mlp.gated || s.mlp.activation != Activation::SiLU || s.mlp.bias)
      refuse("mlp", "computes SwiGLU without biases (gated silu, bias = false)");
    if (s.mlp.fused_gate_up != spec::FusedGateUp::None) refuse("mlp.fused_gate_up", "has ffn_gate and ffn_up apart");
    if (s.position.pairing != spec::RopePairing::Neox) refuse("position.pairing", "rotates halves (neox)");
    if (s.position.scaling.kind != spec::RopeScaling::None) refuse("position.scaling", "does not scale RoPE");
    return;
  }
  if (s.mlp.gated || s.mlp.activation != Activation::GeluErf)
    refuse("mlp.activation", "file is read as BERT's exact GELU, ungated (gelu_erf)");
  if (s.position.offset != 0)
    refuse("position.offset", "counts positions from row 0 (its converter cuts RoBERTa's first rows off)");
}

}  // namespace

namespace {

// Every architecture's keys: general.*, and the vocabulary, context, width
// and `blocks` (block_count) under `arch`.
std::map<std::string, GgufValue> common_metadata(const Spec& s, std::string_view arch, int64_t blocks) {
  const std::string a = std::string(arch) + ".";
  const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
  std::map<std::string, GgufValue> m;
  m["general.architecture"] = std::string(arch);
  m["general.name"] = s.name;
  m["general.file_type"] = file_type(s.weights.dtype);
  m[a + "vocab_size"] = u32(s.dims.vocab);
  m[a + "context_length"] = u32(s.dims.max_context);
  m[a + "embedding_length"] = u32(s.dims.hidden);
  m[a + "block_count"] = u32(blocks);
  return m;
}

// The ssm.* keys of llama.cpp's mamba, mamba2 and granitehybrid (its
// converter's), added to `out`, or what they cannot say: an Error naming the field.
void ssm_keys(const Spec& s, std::string_view an, std::map<std::string, GgufValue>& out) {
  auto refuse = [&](const std::string& field, const std::string& why) {
    throw Error(ErrorKind::Unsupported, field + ": llama.cpp's " + std::string(an) + " " + why);
  };
  const spec::Ssm& m = s.ssm;
  if (m.a_log) refuse("ssm.a_log", "files hold A itself (ssm_a = -exp(A_log)): a twin has a_log = false");
  if (m.bias) refuse("ssm.bias", "has no in_proj or out_proj biases");
  if (!m.conv_bias) refuse("ssm.conv_bias", "has a conv bias");
  if (m.dt_limited()) refuse("ssm.dt_min", "does not clamp dt");
  if ((!m.mamba2() || an == "granitehybrid") && m.d_inner != 2 * s.dims.hidden)
    refuse("ssm.d_inner", "takes d_inner = 2 × hidden");
  const std::string a = std::string(an) + ".";
  const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
  out[a + "attention.layer_norm_rms_epsilon"] = GgufValue(static_cast<float>(s.norm.eps));
  out[a + "ssm.conv_kernel"] = u32(m.d_conv);
  out[a + "ssm.inner_size"] = u32(m.d_inner);
  out[a + "ssm.state_size"] = u32(m.d_state);
  out[a + "ssm.time_step_rank"] = u32(m.mamba2() ? m.heads : m.dt_rank);
  if (m.mamba2()) out[a + "ssm.group_count"] = u32(m.groups);
  else out[a + "ssm.dt_b_c_rms"] = false;
}

// llama.cpp's mamba and mamba2 metadata (its converter's keys), or what it
// cannot say: an Error naming the field.
std::map<std::string, GgufValue> ssm_metadata(const Spec& s, std::string_view an) {
  const std::string a = std::string(an) + ".";
  const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
  std::map<std::string, GgufValue> out = common_metadata(s, an, s.dims.layers);
  out[a + "feed_forward_length"] = u32(0);    // "unused, but required when loading" (the converter)
  out[a + "attention.head_count"] = u32(0);
  ssm_keys(s, an, out);
  return out;
}

// llama.cpp's granitehybrid metadata as its converter writes a Bamba's
// (conversion/granite.py): Llama's keys, attention.head_count_kv one i32 per
// layer (0 for a Mamba-2 layer), mamba2's ssm.* keys, rope.scaling.finetuned
// (true: the attention layers turn RoPE). rope.dimension_count is the
// config's attn_rotary_emb, which Bamba's checkpoints give. Or what it
// cannot say: an Error naming the field.
std::map<std::string, GgufValue> granitehybrid_metadata(const Spec& s) {
  auto refuse = [&](const std::string& field, const std::string& why) {
    throw Error(ErrorKind::Unsupported, field + ": llama.cpp's granitehybrid " + why);
  };
  using spec::RopePairing;
  if (s.position.kind != spec::PositionKind::Rope || s.position.pairing != RopePairing::Interleaved)
    refuse("position.pairing", "turns adjacent (interleaved) pairs, its q/k rows permuted for them");
  if (s.position.scaling.kind != spec::RopeScaling::None) refuse("position.scaling", "does not scale RoPE");
  if (std::abs(s.attention.effective_scale(s.dims.head_dim) * std::sqrt(static_cast<double>(s.dims.head_dim)) - 1) > 1e-9)
    refuse("attention.scale", "scales Bamba's scores by 1/sqrt(head_dim)");
  if (s.embedding.scale != 1.0 || s.embedding.scale_sqrt_hidden) refuse("embedding.scale", "is read without Granite's multipliers");
  if (s.output.scale != 1.0 || s.output.softcap > 0) refuse("output.scale", "is read without Granite's multipliers");
  if (s.moe.enabled()) refuse("moe", "is read without Granite 4.0's experts");
  if (s.dims.head_dim * s.dims.heads != s.dims.hidden) refuse("dims.head_dim", "converter drops head_dim (hidden / heads)");
  if (s.attention.qk_norm != spec::QKNorm::None || s.attention.sliding_window > 0 || s.weights.fused_qkv)
    refuse("attention", "has q, k and v apart, no q/k norms, no window");
  if (s.norm.kind != spec::NormKind::RMSNorm || s.norm.placement != spec::NormPlacement::Pre)
    refuse("norm", "has pre-norm RMS blocks");
  if (!s.mlp.gated || s.mlp.activation != spec::Activation::SiLU || s.mlp.fused_gate_up != spec::FusedGateUp::None)
    refuse("mlp", "computes SwiGLU (gated silu), gate and up apart");
  const std::string a = "granitehybrid.";
  const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
  std::map<std::string, GgufValue> m = common_metadata(s, "granitehybrid", s.dims.layers);
  m[a + "feed_forward_length"] = u32(s.dims.intermediate);
  m[a + "attention.head_count"] = u32(s.dims.heads);
  weights::GgufArray kv{weights::GgufType::I32, {}};  // Python ints: gguf-py writes an i32 array
  for (int64_t l = 0; l < s.dims.layers; ++l)
    kv.items.emplace_back(static_cast<int32_t>(s.ssm.attention_at(l) ? s.dims.kv_heads : 0));
  m[a + "attention.head_count_kv"] = std::move(kv);
  m[a + "rope.dimension_count"] = u32(s.position.rotary_dim);
  m[a + "rope.freq_base"] = GgufValue(static_cast<float>(s.position.theta));
  m[a + "rope.scaling.finetuned"] = true;
  ssm_keys(s, "granitehybrid", m);
  return m;
}

// llama.cpp's deepseek2 metadata (its converter's keys), or what it cannot
// say: an Error naming the field.
std::map<std::string, GgufValue> mla_metadata(const Spec& s) {
  auto refuse = [&](const std::string& field, const std::string& why) {
    throw Error(ErrorKind::Unsupported, field + ": llama.cpp's deepseek2 " + why);
  };
  const spec::Mla& mla = s.mla;
  const spec::Moe& moe = s.moe;
  const auto& sc = s.position.scaling;
  if (!mla.split_kv_b) refuse("mla.split_kv_b", "files split kv_b_proj into attn_k_b and attn_v_b: a twin has split_kv_b = true");
  if (s.position.pairing != spec::RopePairing::Interleaved) refuse("position.pairing", "turns adjacent (interleaved) pairs");
  if (sc.kind != spec::RopeScaling::None && sc.kind != spec::RopeScaling::Yarn) refuse("position.scaling.kind", "runs yarn or none");
  if (sc.kind == spec::RopeScaling::Yarn && sc.mscale != sc.mscale_all_dim)
    refuse("position.scaling.mscale", "leaves cos and sin unscaled (mscale = mscale_all_dim)");
  if (sc.kind == spec::RopeScaling::Yarn && sc.mscale_all_dim == 0)
    refuse("position.scaling.mscale_all_dim", "scales YaRN by DeepSeek's mscale_all_dim (yarn_log_multiplier)");
  if (sc.kind == spec::RopeScaling::Yarn && sc.attention_factor && *sc.attention_factor != 1.0)
    refuse("position.scaling.attention_factor", "leaves cos and sin unscaled (1)");
  const double m_all = sc.kind == spec::RopeScaling::Yarn ? spec::yarn_mscale(sc.factor, sc.mscale_all_dim) : 1.0;
  const double release = m_all * m_all / std::sqrt(static_cast<double>(mla.qk_head_dim()));
  if (std::abs(s.attention.effective_scale(s.dims.head_dim) / release - 1) > 1e-9)
    refuse("attention.scale", "scales by the release's rule (1/sqrt(qk_head_dim), times m(factor, mscale_all_dim)²)");
  int64_t dense = 0;
  if (moe.enabled()) {
    if (moe.groups > 1 && moe.group_score != spec::GroupScore::Top2Sum)
      refuse("moe.group_score", "scores a group by the sum of its best two experts (top2_sum)");
    if (moe.shared_experts > 0 && moe.shared_intermediate != moe.expert_intermediate)
      refuse("moe.shared_intermediate", "makes each shared expert as wide as a routed one");
    if (moe.shared_expert_gate) refuse("moe.shared_expert_gate", "does not gate its shared experts");
    while (dense < s.dims.layers && !moe.sparse(dense)) ++dense;
    for (int64_t l = dense; l < s.dims.layers; ++l)
      if (!moe.sparse(l)) refuse("moe.dense_layers", "has dense layers only before its first sparse one");
  }
  const std::string a = "deepseek2.";
  const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
  const auto f32 = [](double v) { return GgufValue(static_cast<float>(v)); };
  std::map<std::string, GgufValue> m = common_metadata(s, "deepseek2", s.dims.layers);
  m[a + "feed_forward_length"] = u32(s.dims.intermediate);
  m[a + "attention.head_count"] = u32(s.dims.heads);
  m[a + "attention.head_count_kv"] = u32(1);
  m[a + "attention.layer_norm_rms_epsilon"] = f32(s.norm.eps);
  if (mla.q_lora_rank > 0) m[a + "attention.q_lora_rank"] = u32(mla.q_lora_rank);
  m[a + "attention.kv_lora_rank"] = u32(mla.kv_lora_rank);
  m[a + "attention.key_length"] = u32(mla.cache_width());
  m[a + "attention.value_length"] = u32(mla.kv_lora_rank);
  m[a + "attention.key_length_mla"] = u32(mla.qk_head_dim());
  m[a + "attention.value_length_mla"] = u32(mla.v_head_dim);
  m[a + "rope.dimension_count"] = u32(mla.qk_rope_head_dim);
  m[a + "rope.freq_base"] = f32(s.position.theta);
  if (sc.kind == spec::RopeScaling::Yarn) {
    m[a + "rope.scaling.type"] = std::string("yarn");
    m[a + "rope.scaling.factor"] = f32(sc.factor);
    m[a + "rope.scaling.original_context_length"] = u32(sc.original_max_context);
    m[a + "rope.scaling.yarn_beta_fast"] = f32(sc.beta_fast);
    m[a + "rope.scaling.yarn_beta_slow"] = f32(sc.beta_slow);
    m[a + "rope.scaling.yarn_log_multiplier"] = f32(0.1 * sc.mscale_all_dim);
  }
  m[a + "leading_dense_block_count"] = u32(moe.enabled() ? dense : s.dims.layers);
  m[a + "expert_feed_forward_length"] = u32(moe.enabled() ? moe.expert_intermediate : s.dims.intermediate);
  m[a + "expert_shared_count"] = u32(moe.shared_experts);
  if (moe.enabled()) {
    m[a + "expert_count"] = u32(moe.experts);
    m[a + "expert_used_count"] = u32(moe.top_k);
    if (moe.routed_scaling_factor != 1.0) m[a + "expert_weights_scale"] = f32(moe.routed_scaling_factor);
    if (moe.norm_topk_prob) m[a + "expert_weights_norm"] = true;
    m[a + "expert_gating_func"] = u32(moe.scoring == spec::MoeScoring::Sigmoid ? 2 : 1);
    if (moe.groups > 1) {
      m[a + "expert_group_count"] = u32(moe.groups);
      m[a + "expert_group_used_count"] = u32(moe.topk_groups);
    }
  }
  return m;
}

}  // namespace

spec::Spec gguf_twin(const spec::Spec& spec) {
  Spec s = spec;
  const Arch& arch = arch_of(s);
  if (arch.interleaved) s.position.pairing = spec::RopePairing::Interleaved;
  if (arch.gemma) s.norm.unit_offset = false;
  if (arch.gemma && s.embedding.scale_sqrt_hidden) {  // what import_gguf writes: the bf16 root, as a number
    s.embedding.scale_sqrt_hidden = false;
    s.embedding.scale = gemma_embedding_scale(s.dims.hidden);
  }
  // The scale llama.cpp implies: written only where it is not 1/sqrt(head_dim).
  const double implied = 1.0 / std::sqrt(static_cast<double>(
                             scale_by_hidden(arch.name, s.dims.layers) ? s.dims.hidden / s.dims.heads : s.dims.head_dim));
  if (s.attention.scale && std::abs(*s.attention.scale - implied) < 1e-12 * implied)
    s.attention.scale = scale_by_hidden(arch.name, s.dims.layers) ? std::optional<double>(implied) : std::nullopt;
  if (arch.ssm || arch.hybrid) s.ssm.a_log = false;  // the converter writes A = −exp(A_log)
  if (arch.name == "deepseek2") s.mla.split_kv_b = true;  // the converter splits kv_b_proj
  s.weights.preset = "gguf";
  s.weights.names = spec::preset_names("gguf", s.norm.placement);
  if (arch.name == "t5encoder")
    for (const auto& [role, path] : t5encoder_names()) s.weights.names[role] = path;
  if (arch.name == "t5") {
    for (const auto& [role, path] : t5_names()) s.weights.names[role] = path;
    s.weights.encoder_names = t5_layer_names("enc");
  }
  if (arch.name == "falcon" && s.norm.placement == spec::NormPlacement::Parallel && !s.norm.parallel_shared)
    s.weights.names[spec::Role::MlpNorm] = "blk.{layer}.attn_norm_2";
  s.weights.qkv_layout = spec::QkvLayout::Blocks;  // the converter reorders per-head and grouped rows to q | k | v
  s.weights.vector_dtype = DType::F32;
  s.weights.layout = Layout::OutIn;  // the converter transposes Conv1D weights
  s.weights.ignore.clear();
  // llama.cpp's file holds llama3 scaling as factors the spec computes itself.
  if (s.position.kind == spec::PositionKind::Rope && s.position.scaling.kind == spec::RopeScaling::Llama3)
    s.weights.ignore.push_back(kRopeFreqs);
  s.cache = spec::Cache{};  // the KV cache's dtype is a build choice a GGUF file does not state
  s.vision = spec::Vision{};  // llama.cpp writes a vision tower to a file of its own (mmproj), not the decoder's
  s.locations.clear();
  return s;
}

std::map<std::string, GgufValue> gguf_metadata_from_spec(const spec::Spec& s) {
  const Arch& arch = arch_of(s);
  auto refuse = [](const std::string& what) { throw Error(ErrorKind::Unsupported, what); };
  if (arch.ssm) return ssm_metadata(s, arch.name);
  if (arch.hybrid) return granitehybrid_metadata(s);
  if (arch.name == "deepseek2") return mla_metadata(s);
  if (arch.interleaved && s.position.pairing != spec::RopePairing::Interleaved)
    refuse("position.pairing: llama.cpp's Llama files pair RoPE dims interleaved (their q/k rows permuted)");
  if (s.position.scaling.kind == spec::RopeScaling::DynamicNtk)
    refuse("position.scaling.kind: llama.cpp has no dynamic_ntk scaling");
  if (s.position.local_theta && *s.position.local_theta != 10000.0)
    refuse("position.local_theta: llama.cpp fixes the windowed layers' base at 10000");
  const int64_t scalar = scale_by_hidden(arch.name, s.dims.layers) ? s.dims.hidden / s.dims.heads : s.dims.head_dim;
  if (arch.name != "t5encoder" && arch.name != "t5" && std::abs(s.attention.effective_scale(s.dims.head_dim) * std::sqrt(static_cast<double>(scalar)) - 1) > 1e-9)
    refuse("attention.scale: llama.cpp scales this model's scores by 1/sqrt(" + std::to_string(scalar) + ")");
  if (s.embedding.scale != 1.0 && !arch.gemma) refuse("embedding.scale: only llama.cpp's Gemma scales embeddings");
  if (arch.name == "falcon" && s.position.rotary_dim != s.dims.head_dim)
    refuse("position.rotary_dim: llama.cpp's falcon rotates the whole head");
  if (arch.layernorm && !arch.encoder && !(arch.name == "gpt2" || s.mlp.activation == spec::Activation::GeluErf ||
                          s.mlp.activation == spec::Activation::GeluTanh))
    refuse("mlp.activation: llama.cpp's " + std::string(arch.name) + " computes a GELU");
  if (arch.layernorm && !arch.encoder && arch.name != "gpt2" && s.mlp.activation != spec::Activation::GeluErf &&
      std::string_view(gelu_of(arch.name)) == "gelu_erf")
    refuse("mlp.activation: a GGUF " + std::string(arch.name) + " file is read as the model's exact GELU (gelu_erf)");
  if (arch.layernorm && !arch.encoder && arch.name != "gpt2" && s.mlp.activation != spec::Activation::GeluTanh &&
      std::string_view(gelu_of(arch.name)) == "gelu_tanh")
    refuse("mlp.activation: a GGUF " + std::string(arch.name) + " file is read as the model's tanh GELU (gelu_tanh)");

  if (arch.encoder || arch.encdec) encoder_refusals(s, arch.name);

  const std::string a = std::string(arch.name) + ".";
  const auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
  const auto f32 = [](double v) { return GgufValue(static_cast<float>(v)); };
  // llama.cpp's t5: block_count counts the encoder's layers.
  std::map<std::string, GgufValue> m = common_metadata(s, arch.name, arch.encdec ? s.dims.encoder_layers : s.dims.layers);
  m[a + "feed_forward_length"] = u32(s.dims.intermediate);
  m[a + "attention.head_count"] = u32(s.dims.heads);
  m[a + "attention.head_count_kv"] = u32(s.dims.kv_heads);
  if (s.dims.head_dim != s.dims.hidden / s.dims.heads || arch.encdec) {  // T5's converter writes d_kv always
    m[a + "attention.key_length"] = u32(s.dims.head_dim);
    m[a + "attention.value_length"] = u32(s.dims.head_dim);
  }
  m[a + (s.norm.kind == spec::NormKind::LayerNorm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon")] =
      f32(s.norm.eps);
  if (s.position.kind == spec::PositionKind::Rope) {
    m[a + "rope.dimension_count"] = u32(s.position.rotary_dim);
    m[a + "rope.freq_base"] = f32(s.position.theta);
    // llama3 scaling has no keys: the file's rope_freqs.weight (llama3_rope_freqs) says it.
    const auto& sc = s.position.scaling;
    if (sc.kind == spec::RopeScaling::Linear || sc.kind == spec::RopeScaling::Yarn) {
      m[a + "rope.scaling.type"] = std::string(spec::name(sc.kind));
      m[a + "rope.scaling.factor"] = f32(sc.factor);
      if (sc.kind == spec::RopeScaling::Yarn) m[a + "rope.scaling.original_context_length"] = u32(sc.original_max_context);
    }
  }
  if (s.attention.sliding_window > 0) m[a + "attention.sliding_window"] = u32(s.attention.sliding_window);
  if (arch.name == "gptneox") m[a + "use_parallel_residual"] = s.norm.placement == spec::NormPlacement::Parallel;
  if (arch.name == "mpt") m[a + "attention.max_alibi_bias"] = f32(8.0);
  if (s.attention.softcap > 0) m[a + "attn_logit_softcapping"] = f32(s.attention.softcap);
  if (s.output.softcap > 0) m[a + "final_logit_softcapping"] = f32(s.output.softcap);
  if (arch.encoder) {
    m[a + "attention.causal"] = false;
    // include/llama.h's llama_pooling_type: mean 1, cls 2, last 3.
    const int64_t pooling = s.pooling.kind == spec::Pooling::Mean  ? 1
                            : s.pooling.kind == spec::Pooling::Cls ? 2
                            : s.pooling.kind == spec::Pooling::Last ? 3 : 0;
    if (pooling > 0) m[a + "pooling_type"] = u32(pooling);
    if (arch.name == "t5encoder") m[a + "attention.relative_buckets_count"] = u32(s.position.buckets);
    // llama.cpp's bert loader needs a count even where the file has no table.
    else m["tokenizer.ggml.token_type_count"] = u32(std::max<int64_t>(s.embedding.token_types, 1));
  }
  if (arch.encdec) {
    m[a + "decoder_block_count"] = u32(s.dims.layers);
    m[a + "decoder_start_token_id"] = u32(s.decoder_start);
    m[a + "attention.relative_buckets_count"] = u32(s.position.buckets);
    m[a + "attention.layer_norm_epsilon"] = f32(s.norm.eps);  // written beside the RMS key, as the converter does
  }
  if (s.moe.enabled()) {
    m[a + "expert_count"] = u32(s.moe.experts);
    m[a + "expert_used_count"] = u32(s.moe.top_k);
    if (arch.name != "llama") m[a + "expert_feed_forward_length"] = u32(s.moe.expert_intermediate);
    if (s.moe.shared_experts > 0) m[a + "expert_shared_feed_forward_length"] = u32(s.moe.shared_intermediate);
  }
  return m;
}

}  // namespace lathe::importer
