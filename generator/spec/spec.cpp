#include <cmath>

#include "generator/spec/parse.hpp"
#include "generator/spec/spec.hpp"

namespace lathe::spec {

const char* name(NormKind v) { return v == NormKind::RMSNorm ? "rmsnorm" : "layernorm"; }
const char* name(NormPlacement v) {
  switch (v) {
    case NormPlacement::Pre: return "pre";
    case NormPlacement::Post: return "post";
    case NormPlacement::Sandwich: return "sandwich";
    case NormPlacement::Parallel: return "parallel";
    case NormPlacement::BranchOutput: return "branch_output";
  }
  return "?";
}
const char* name(Activation v) {
  switch (v) {
    case Activation::SiLU: return "silu";
    case Activation::GeluErf: return "gelu_erf";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::ReLU: return "relu";
  }
  return "?";
}
const char* name(QKNorm v) { return v == QKNorm::None ? "none" : v == QKNorm::PerHead ? "per_head" : "whole"; }
const char* name(PositionKind v) {
  switch (v) {
    case PositionKind::Rope: return "rope";
    case PositionKind::Alibi: return "alibi";
    case PositionKind::Learned: return "learned";
    case PositionKind::Sinusoidal: return "sinusoidal";
    case PositionKind::None: return "none";
  }
  return "?";
}
const char* name(RopePairing v) { return v == RopePairing::Neox ? "neox" : "interleaved"; }
const char* name(RopeScaling v) {
  switch (v) {
    case RopeScaling::None: return "none";
    case RopeScaling::Linear: return "linear";
    case RopeScaling::DynamicNtk: return "dynamic_ntk";
    case RopeScaling::Yarn: return "yarn";
    case RopeScaling::Llama3: return "llama3";
  }
  return "?";
}
const char* name(FusedGateUp v) { return v == FusedGateUp::None ? "none" : v == FusedGateUp::GateUp ? "gate_up" : "up_gate"; }
const char* name(DType v) { return spelling(v).key.data(); }
const char* name(Layout v) { return v == Layout::OutIn ? "out_in" : "in_out"; }

double bytes_per_element(DType v) {
  switch (v) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 34.0 / 32.0;  // an f16 scale and 32 int8 per block
  }
  return 4;
}

const char* name(Role r) { return spelling(r).key.data(); }

std::optional<Role> role_from_name(const std::string& word) {
  for (const RoleSpelling& n : kRoleSpellings)
    if (word == n.key) return n.role;
  return std::nullopt;
}

std::vector<std::string> role_names() {
  std::vector<std::string> out;
  for (const RoleSpelling& n : kRoleSpellings) out.emplace_back(n.key);
  return out;
}

double Attention::effective_scale(int64_t head_dim) const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

Loc Spec::where(const std::string& path) const {
  // The key itself, else the nearest enclosing table that was written.
  std::string p = path;
  while (true) {
    auto it = locations.find(p);
    if (it != locations.end()) return it->second;
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) return Loc{};
    p.resize(dot);
  }
}

std::vector<std::string> preset_list() { return {"hf-llama", "hf-gpt2", "gguf"}; }

std::map<Role, std::string> preset_names(const std::string& preset, NormPlacement placement) {
  std::map<Role, std::string> n;
  const bool four_norms = placement == NormPlacement::Sandwich || placement == NormPlacement::BranchOutput;
  if (preset == "hf-llama") {
    const std::string L = "model.layers.{layer}.";
    n[Role::Embed] = "model.embed_tokens";
    n[Role::AttnNorm] = L + "input_layernorm";
    if (four_norms) {
      // Gemma 2/3 and OLMo 2 give post_attention_layernorm to the attention branch.
      n[Role::AttnPostNorm] = L + "post_attention_layernorm";
      n[Role::MlpNorm] = L + "pre_feedforward_layernorm";
      n[Role::MlpPostNorm] = L + "post_feedforward_layernorm";
    } else {
      n[Role::MlpNorm] = L + "post_attention_layernorm";
    }
    n[Role::Q] = L + "self_attn.q_proj";
    n[Role::K] = L + "self_attn.k_proj";
    n[Role::V] = L + "self_attn.v_proj";
    n[Role::Qkv] = L + "self_attn.qkv_proj";
    n[Role::O] = L + "self_attn.o_proj";
    n[Role::QNorm] = L + "self_attn.q_norm";
    n[Role::KNorm] = L + "self_attn.k_norm";
    n[Role::Gate] = L + "mlp.gate_proj";
    n[Role::Up] = L + "mlp.up_proj";
    n[Role::GateUp] = L + "mlp.gate_up_proj";
    n[Role::Down] = L + "mlp.down_proj";
    n[Role::Router] = L + "block_sparse_moe.gate";
    n[Role::ExpertGate] = L + "block_sparse_moe.experts.{expert}.w1";
    n[Role::ExpertUp] = L + "block_sparse_moe.experts.{expert}.w3";
    n[Role::ExpertDown] = L + "block_sparse_moe.experts.{expert}.w2";
    n[Role::SharedGate] = L + "mlp.shared_expert.gate_proj";
    n[Role::SharedUp] = L + "mlp.shared_expert.up_proj";
    n[Role::SharedDown] = L + "mlp.shared_expert.down_proj";
    n[Role::SharedExpertGate] = L + "mlp.shared_expert_gate";
    n[Role::FinalNorm] = "model.norm";
    n[Role::LmHead] = "lm_head";
  } else if (preset == "hf-gpt2") {
    const std::string L = "h.{layer}.";
    n[Role::Embed] = "wte";
    n[Role::PosEmbed] = "wpe";
    n[Role::AttnNorm] = L + "ln_1";
    n[Role::Qkv] = L + "attn.c_attn";
    n[Role::O] = L + "attn.c_proj";
    n[Role::MlpNorm] = L + "ln_2";
    n[Role::Up] = L + "mlp.c_fc";
    n[Role::Down] = L + "mlp.c_proj";
    n[Role::FinalNorm] = "ln_f";
    n[Role::LmHead] = "lm_head";
  } else if (preset == "gguf") {
    const std::string L = "blk.{layer}.";
    n[Role::Embed] = "token_embd";
    n[Role::PosEmbed] = "position_embd";
    n[Role::AttnNorm] = L + "attn_norm";
    n[Role::AttnPostNorm] = L + "post_attention_norm";
    n[Role::MlpNorm] = L + "ffn_norm";
    n[Role::MlpPostNorm] = L + "post_ffw_norm";
    n[Role::Q] = L + "attn_q";
    n[Role::K] = L + "attn_k";
    n[Role::V] = L + "attn_v";
    n[Role::Qkv] = L + "attn_qkv";
    n[Role::O] = L + "attn_output";
    n[Role::QNorm] = L + "attn_q_norm";
    n[Role::KNorm] = L + "attn_k_norm";
    n[Role::Gate] = L + "ffn_gate";
    n[Role::Up] = L + "ffn_up";
    n[Role::GateUp] = L + "ffn_up";  // Phi-3: gate and up in one tensor
    n[Role::Down] = L + "ffn_down";
    n[Role::Router] = L + "ffn_gate_inp";
    n[Role::FinalNorm] = "output_norm";
    n[Role::LmHead] = "output";
  }
  return n;
}

}  // namespace lathe::spec
