#include "core/manifest.hpp"

#include <algorithm>
#include <set>

namespace lathe::spec {

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t Manifest::total_elements() const {
  int64_t n = 0;
  for (const TensorSpec& t : tensors) n += t.elements();
  return n;
}

std::vector<ManifestEntry> manifest_entries(const Manifest& manifest) {
  std::vector<ManifestEntry> entries;
  entries.reserve(manifest.tensors.size());
  for (const TensorSpec& t : manifest.tensors) {
    // A rank-3 depthwise conv1d weight [rows, 1, cols] as [rows, cols], as the
    // emitted manifest holds it (emit_cpp.cpp); a rank-4 convolution [rows,
    // channels, k, k] as [rows, channels·k²].
    const bool conv = t.shape.size() == 4;
    entries.push_back({t.role, t.bias, static_cast<int32_t>(t.layer), static_cast<int32_t>(t.expert), t.name,
                       static_cast<uint8_t>(t.shape.size()),
                       {t.shape[0], conv ? t.shape[1] * t.shape[2] * t.shape[3] : t.shape.size() > 1 ? t.shape.back() : 1},
                       t.dtype, static_cast<int32_t>(t.slice), conv ? static_cast<int32_t>(t.shape[2]) : 0, t.in_out});
  }
  return entries;
}

const char* name(Component c) {
  switch (c) {
    case Component::Embedding: return "embedding";
    case Component::Attention: return "attention";
    case Component::Mlp: return "mlp";
    case Component::Experts: return "experts";
    case Component::Norms: return "norms";
    case Component::LmHead: return "lm_head";
    case Component::Ssm: return "ssm";
    case Component::Vision: return "vision";
  }
  return "?";
}

Component component_of(Role r) {
  switch (r) {
    case Role::Embed:
    case Role::PosEmbed:
    case Role::TokenTypes: return Component::Embedding;
    case Role::EncoderPosEmbed: return Component::Embedding;
    case Role::RelBias:
    case Role::EncoderRelBias: return Component::Attention;
    case Role::CrossQ:
    case Role::CrossK:
    case Role::CrossV:
    case Role::CrossO: return Component::Attention;
    case Role::EncoderEmbedNorm:
    case Role::EncoderFinalNorm:
    case Role::CrossNorm: return Component::Norms;
    case Role::EmbedNorm: return Component::Norms;
    case Role::Q:
    case Role::K:
    case Role::V:
    case Role::Qkv:
    case Role::O:
    case Role::QNorm:
    case Role::KNorm: return Component::Attention;
    case Role::Gate:
    case Role::Up:
    case Role::GateUp:
    case Role::Down: return Component::Mlp;
    case Role::Router:
    case Role::ExpertGate:
    case Role::ExpertUp:
    case Role::ExpertDown:
    case Role::SharedGate:
    case Role::SharedUp:
    case Role::SharedDown:
    case Role::SharedExpertGate:
    case Role::RouterBias: return Component::Experts;
    case Role::AttnNorm:
    case Role::AttnPostNorm:
    case Role::MlpNorm:
    case Role::MlpPostNorm:
    case Role::FinalNorm: return Component::Norms;
    case Role::LmHead:
    case Role::LogitsBias: return Component::LmHead;
    case Role::SsmNorm: return Component::Norms;
    case Role::SsmIn:
    case Role::SsmConv:
    case Role::SsmX:
    case Role::SsmDt:
    case Role::SsmA:
    case Role::SsmD:
    case Role::SsmOut:
    case Role::SsmDtBias: return Component::Ssm;
    case Role::SsmGateNorm: return Component::Norms;
    case Role::QA:
    case Role::QB:
    case Role::KvA:
    case Role::KvB:
    case Role::KB:
    case Role::VB: return Component::Attention;
    case Role::QANorm:
    case Role::KvANorm:
    case Role::CrossQNorm:
    case Role::CrossKNorm: return Component::Norms;
    case Role::AttnGate: return Component::Attention;
    case Role::MlpGate: return Component::Mlp;
    case Role::PatchEmbed:
    case Role::ClassEmbed:
    case Role::ProjNorm:
    case Role::ProjIn:
    case Role::ProjOut:
    case Role::PatchMerge:
    case Role::TilePosEmbed:
    case Role::PosGate:
    case Role::PreTileEmbed:
    case Role::PreTileGate:
    case Role::PostTileEmbed:
    case Role::PostTileGate: return Component::Vision;
  }
  return Component::Norms;
}


std::vector<std::string> ignored_patterns(const Spec& s) {
  std::vector<std::string> out = s.weights.ignore;
  if (s.vision.enabled) {
    out.insert(out.end(), s.vision.weights.ignore.begin(), s.vision.weights.ignore.end());
    // A tower's output norm the features do not read (CLIP's post_layernorm,
    // which only its pooled output passes): in the checkpoint, not run.
    if (!s.vision.post_norm)
      if (auto it = s.vision.weights.names.find(Role::FinalNorm); it != s.vision.weights.names.end()) {
        out.push_back(it->second + ".weight");
        out.push_back(it->second + ".bias");
      }
  }
  if (s.embedding.tied)
    if (auto it = s.weights.names.find(Role::LmHead); it != s.weights.names.end()) out.push_back(it->second + ".weight");
  return out;
}

std::string expand_name(const std::string& pattern, int64_t layer, int64_t expert) {
  std::string out = pattern;
  auto replace = [&out](const std::string& key, int64_t value) {
    for (size_t at = out.find(key); at != std::string::npos; at = out.find(key, at))
      out.replace(at, key.size(), std::to_string(value));
  };
  if (layer >= 0) replace("{layer}", layer);
  if (expert >= 0) replace("{expert}", expert);
  return out;
}

namespace {

class Builder {
 public:
  explicit Builder(const Spec& spec) : s_(spec) {}

  // A linear map from `in` to `out` features: [out, in] (or [in, out]).
  void linear(Role role, int64_t out, int64_t in, bool bias, int64_t layer = -1, int64_t expert = -1) {
    const bool in_out = s_.weights.layout == Layout::InOut && is_linear(role);
    push(role, false, layer, expert, in_out ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in});
    m_.tensors.back().in_out = in_out;
    if (bias) push(role, true, layer, expert, {out});
  }
  void matrix(Role role, int64_t rows, int64_t cols, int64_t layer = -1) {
    push(role, false, layer, -1, {rows, cols});
  }
  // A tensor of any rank as stored (Mamba's conv1d weight, [d_inner, 1, d_conv]).
  void tensor(Role role, bool bias, int64_t layer, std::vector<int64_t> shape) {
    push(role, bias, layer, -1, std::move(shape));
  }
  // A bias alone: the LM head's (Phi-2), beside a matrix that may be tied.
  void bias(Role role, int64_t width) { push(role, true, -1, -1, {width}); }
  // A tensor named by its path itself, whatever its role (an nn.Parameter:
  // Gemma 3's mm_input_projection_weight, Llama 3.2 Vision's position table).
  void parameter(Role role, std::vector<int64_t> shape) { push(role, false, -1, -1, std::move(shape), true); }
  // A linear map stored [in, out] whatever the layout, named by its path (an
  // nn.Parameter multiplied from the right: Gemma 3's mm_input_projection_weight).
  void parameter_in_out(Role role, int64_t out, int64_t in) {
    parameter(role, {in, out});
    m_.tensors.back().in_out = true;
  }
  void norm(Role role, int64_t width, int64_t layer, bool bias) {
    push(role, false, layer, -1, {width});
    if (bias) push(role, true, layer, -1, {width});
  }

  Manifest take() { return std::move(m_); }

 private:
  void push(Role role, bool bias, int64_t layer, int64_t expert, std::vector<int64_t> shape, bool bare = false) {
    TensorSpec t;
    t.role = role;
    t.bias = bias;
    t.layer = layer;
    t.expert = expert;
    // An encoder–decoder's layers are numbered encoder first: the encoder's
    // are named by weights.encoder_names, each stack's from its layer 0.
    const bool encoder_layer = layer >= 0 && layer < s_.encoder_layers();
    const auto& names = encoder_layer ? s_.weights.encoder_names : s_.weights.names;
    auto it = names.find(role);
    const std::string pattern = it != names.end() ? it->second : "<unnamed " + std::string(name(role)) + ">";
    t.name = expand_name(pattern, layer >= 0 && !encoder_layer ? layer - s_.encoder_layers() : layer, expert) +
             (bare || bare_name(role) ? "" : bias ? ".bias" : ".weight");
    if (expert >= 0 && pattern.find("{expert}") == std::string::npos) t.slice = expert;
    t.shape = std::move(shape);
    t.dtype = t.shape.size() == 1 || is_rel_bias(role) || is_ssm_param(role) ? s_.weights.vector_dtype
                                                                             : s_.weights.matrix_dtype(role, layer);
    m_.tensors.push_back(std::move(t));
  }

  const Spec& s_;
  Manifest m_;
};

void mlp(Builder& b, const Spec& s, Role gate, Role up, Role down, int64_t width, bool bias, int64_t layer,
         int64_t expert) {
  const int64_t d = s.dims.hidden;
  if (s.mlp.gated) b.linear(gate, width, d, bias, layer, expert);
  b.linear(up, width, d, bias, layer, expert);
  b.linear(down, d, width, bias, layer, expert);
}

// A Mamba block (transformers' MambaBlock: norm, then MambaMixer), in the
// mixer's module order. The conv1d weight keeps its stored rank 3 [d_inner,
// 1, d_conv] (torch's Conv1d with groups = d_inner): the kernels read it as
// [d_inner][d_conv] f32, like A_log and D.
void ssm_block(Builder& b, const Spec& s, int64_t l) {
  const Ssm& m = s.ssm;
  b.norm(Role::SsmNorm, s.dims.hidden, l, s.norm.bias);
  b.linear(Role::SsmIn, m.in_width(), s.dims.hidden, m.bias, l);
  // llama.cpp squeezes the conv's middle dim: [channels, d_conv].
  if (s.weights.preset == "gguf") b.tensor(Role::SsmConv, false, l, {m.conv_channels(), m.d_conv});
  else b.tensor(Role::SsmConv, false, l, {m.conv_channels(), 1, m.d_conv});
  if (m.conv_bias) b.tensor(Role::SsmConv, true, l, {m.conv_channels()});
  if (m.mamba2()) {  // Mamba2Mixer: dt from in_proj, one a head
    b.tensor(Role::SsmDtBias, false, l, {m.heads});
    b.tensor(Role::SsmA, false, l, {m.heads});
    b.tensor(Role::SsmD, false, l, {m.heads});
    b.norm(Role::SsmGateNorm, m.d_inner, l, false);
  } else {
    b.linear(Role::SsmX, m.dt_rank + 2 * m.d_state, m.d_inner, false, l);
    b.linear(Role::SsmDt, m.d_inner, m.dt_rank, true, l);
    b.tensor(Role::SsmA, false, l, {m.d_inner, m.d_state});
    b.tensor(Role::SsmD, false, l, {m.d_inner});
  }
  b.linear(Role::SsmOut, s.dims.hidden, m.d_inner, m.bias, l);
}

// A block's attention: its norms, projections and q/k norms, and (`cross`:
// a decoder layer of an encoder–decoder) its cross-attention.
void attention(Builder& b, const Spec& s, int64_t l, bool cross) {
  const Dims& d = s.dims;
  const int64_t q_width = d.heads * d.head_dim;
  const int64_t kv_width = d.kv_heads * d.head_dim;
  const bool nb = s.norm.bias;
  switch (s.norm.placement) {
    case NormPlacement::Pre:
      if (l > 0 || s.norm.first_attn_norm) b.norm(Role::AttnNorm, d.hidden, l, nb);
      break;
    case NormPlacement::Post: b.norm(Role::AttnNorm, d.hidden, l, nb); break;
    case NormPlacement::Sandwich:
      b.norm(Role::AttnNorm, d.hidden, l, nb);
      b.norm(Role::AttnPostNorm, d.hidden, l, nb);
      break;
    case NormPlacement::Parallel: b.norm(Role::AttnNorm, d.hidden, l, nb); break;
    case NormPlacement::BranchOutput: b.norm(Role::AttnPostNorm, d.hidden, l, nb); break;
  }

  const Attention& a = s.attention;
  if (s.mla.enabled) {
    // Multi-head latent attention, in DeepseekV2Attention's module order.
    const Mla& m = s.mla;
    if (m.q_lora_rank > 0) {
      b.linear(Role::QA, m.q_lora_rank, d.hidden, false, l);
      b.norm(Role::QANorm, m.q_lora_rank, l, false);
      b.linear(Role::QB, d.heads * m.qk_head_dim(), m.q_lora_rank, false, l);
    } else {
      b.linear(Role::Q, d.heads * m.qk_head_dim(), d.hidden, false, l);
    }
    b.linear(Role::KvA, m.cache_width(), d.hidden, false, l);
    b.norm(Role::KvANorm, m.kv_lora_rank, l, false);
    if (m.split_kv_b) {
      b.linear(Role::KB, d.heads * m.kv_lora_rank, m.qk_nope_head_dim, false, l);
      b.linear(Role::VB, d.heads * m.v_head_dim, m.kv_lora_rank, false, l);
    } else {
      b.linear(Role::KvB, d.heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank, false, l);
    }
    b.linear(Role::O, d.hidden, d.heads * m.v_head_dim, false, l);
  } else if (s.weights.fused_qkv) {
    b.linear(Role::Qkv, q_width + 2 * kv_width, d.hidden, a.q_bias, l);
  } else {
    b.linear(Role::Q, q_width, d.hidden, a.q_bias, l);
    b.linear(Role::K, kv_width, d.hidden, a.k_bias, l);
    b.linear(Role::V, kv_width, d.hidden, a.v_bias, l);
  }
  if (!s.mla.enabled) b.linear(Role::O, d.hidden, q_width, a.o_bias, l);
  if (a.qk_norm == QKNorm::PerHead) {
    b.norm(Role::QNorm, d.head_dim, l, false);
    b.norm(Role::KNorm, d.head_dim, l, false);
  } else if (a.qk_norm == QKNorm::Whole) {
    b.norm(Role::QNorm, q_width, l, false);
    b.norm(Role::KNorm, kv_width, l, false);
  }

  // A decoder layer of an encoder–decoder: cross-attention, its norm
  // before it (pre) or after its residual add (post).
  if (cross) {
    b.norm(Role::CrossNorm, d.hidden, l, nb);
    b.linear(Role::CrossQ, q_width, d.hidden, a.q_bias, l);
    b.linear(Role::CrossK, kv_width, d.hidden, a.k_bias, l);
    b.linear(Role::CrossV, kv_width, d.hidden, a.v_bias, l);
    b.linear(Role::CrossO, d.hidden, q_width, a.o_bias, l);
  }
}

// A decoder layer that attends to an image's features instead of its own
// tokens (Llama 3.2 Vision's MllamaCrossAttentionDecoderLayer): its norm,
// the cross-attention's projections with their per-head q and k norms, and
// the tanh gates of its two branches.
void image_cross_attention(Builder& b, const Spec& s, int64_t l) {
  const Dims& d = s.dims;
  const int64_t q_width = d.heads * d.head_dim;
  const int64_t kv_width = d.kv_heads * d.head_dim;
  b.norm(Role::AttnNorm, d.hidden, l, s.norm.bias);
  b.linear(Role::CrossQ, q_width, d.hidden, false, l);
  b.linear(Role::CrossK, kv_width, d.hidden, false, l);
  b.linear(Role::CrossV, kv_width, d.hidden, false, l);
  b.linear(Role::CrossO, d.hidden, q_width, false, l);
  b.norm(Role::CrossQNorm, d.head_dim, l, false);
  b.norm(Role::CrossKNorm, d.head_dim, l, false);
  b.tensor(Role::AttnGate, false, l, {1});
  b.tensor(Role::MlpGate, false, l, {1});
}

// One block's tensors: layer l of the model's numbering (an encoder–decoder's
// encoder layers first); `cross`: a decoder layer with cross-attention. A
// hybrid's state-space layer has its Mamba mixer in attention's place, an
// image's cross-attention layer its cross-attention.
void block(Builder& b, const Spec& s, int64_t l, bool cross) {
  const Dims& d = s.dims;
  const bool nb = s.norm.bias;
  if (s.ssm.layer(l)) ssm_block(b, s, l);
  else if (s.vision.cross_layer(l)) image_cross_attention(b, s, l);
  else attention(b, s, l, cross);

  switch (s.norm.placement) {
    case NormPlacement::Pre:
    case NormPlacement::Post: b.norm(Role::MlpNorm, d.hidden, l, nb); break;
    case NormPlacement::Sandwich:
      b.norm(Role::MlpNorm, d.hidden, l, nb);
      b.norm(Role::MlpPostNorm, d.hidden, l, nb);
      break;
    case NormPlacement::Parallel:
      if (!s.norm.parallel_shared) b.norm(Role::MlpNorm, d.hidden, l, nb);
      break;
    case NormPlacement::BranchOutput: b.norm(Role::MlpPostNorm, d.hidden, l, nb); break;
  }

  if (s.moe.sparse(l)) {
    const Moe& m = s.moe;
    b.linear(Role::Router, m.experts, d.hidden, false, l);
    if (m.correction_bias) b.norm(Role::RouterBias, m.experts, l, false);
    for (int64_t e = 0; e < m.experts; ++e)
      mlp(b, s, Role::ExpertGate, Role::ExpertUp, Role::ExpertDown, m.expert_intermediate, s.mlp.bias, l, e);
    if (m.shared_experts > 0) {
      mlp(b, s, Role::SharedGate, Role::SharedUp, Role::SharedDown, m.shared_experts * m.shared_intermediate,
          s.mlp.bias, l, -1);
      // A [1, hidden] linear; llama.cpp stores it as a vector (ffn_gate_inp_shexp).
      if (m.shared_expert_gate && s.weights.preset == "gguf") b.norm(Role::SharedExpertGate, d.hidden, l, false);
      else if (m.shared_expert_gate) b.linear(Role::SharedExpertGate, 1, d.hidden, false, l);
    }
  } else if (s.mlp.gated && s.mlp.fused_gate_up != FusedGateUp::None) {
    b.linear(Role::GateUp, 2 * d.intermediate, d.hidden, s.mlp.bias, l);
    b.linear(Role::Down, d.hidden, d.intermediate, s.mlp.bias, l);
  } else {
    mlp(b, s, Role::Gate, Role::Up, Role::Down, d.intermediate, s.mlp.bias, l, -1);
  }
}


}  // namespace

Manifest build_manifest(const Spec& s) {
  Builder b(s);
  const Dims& d = s.dims;
  const bool nb = s.norm.bias;

  if (d.vocab > 0) b.matrix(Role::Embed, s.embedding_rows(), d.hidden);  // (a vision tower's stack has no token table)

  // An encoder–decoder's encoder stack: its tables, its layers, its final norm.
  const int64_t encoder_layers = s.encoder_layers();
  if (s.encoder_decoder()) {
    if (s.position.kind == PositionKind::Learned) b.matrix(Role::EncoderPosEmbed, s.position.table_size, d.hidden);
    if (s.position.kind == PositionKind::Relative) b.matrix(Role::EncoderRelBias, s.position.buckets, d.heads);
    if (s.embedding.norm) b.norm(Role::EncoderEmbedNorm, d.hidden, -1, nb);
    for (int64_t l = 0; l < encoder_layers; ++l) block(b, s, l, false);
    if (s.norm.final_norm) b.norm(Role::EncoderFinalNorm, d.hidden, -1, nb);
  }
  if (s.position.kind == PositionKind::Learned) b.matrix(Role::PosEmbed, s.position.table_size, d.hidden);
  if (s.embedding.token_types > 0) b.matrix(Role::TokenTypes, s.embedding.token_types, d.hidden);
  // T5: one table for every layer of the stack (its first layer's module holds it).
  if (s.position.kind == PositionKind::Relative) b.matrix(Role::RelBias, s.position.buckets, d.heads);
  if (s.embedding.norm) b.norm(Role::EmbedNorm, d.hidden, -1, nb);
  for (int64_t l = encoder_layers; l < encoder_layers + d.layers; ++l) {
    if (s.ssm.layer(l) && !s.ssm.hybrid()) ssm_block(b, s, l);
    else block(b, s, l, s.encoder_decoder());
  }

  if (s.norm.final_norm) b.norm(Role::FinalNorm, d.hidden, -1, nb);
  if (!s.embedding.tied && !s.encoder()) b.matrix(Role::LmHead, d.vocab, d.hidden);
  if (s.output.bias && s.weights.names.count(Role::LogitsBias)) b.norm(Role::LogitsBias, d.vocab, -1, false);
  else if (s.output.bias) b.bias(Role::LmHead, d.vocab);
  return b.take();
}

Manifest build_vision_manifest(const Spec& s) {
  Manifest m;
  if (!s.vision.enabled) return m;
  const Vision& v = s.vision;
  const Spec tower = vision_tower(s);
  const int64_t h = v.dims.hidden;
  Builder b(tower);
  // The patch embedding: a convolution [hidden, channels, patch, patch].
  b.tensor(Role::PatchEmbed, false, -1, {h, v.channels, v.patch, v.patch});
  if (v.patch_bias) b.tensor(Role::PatchEmbed, true, -1, {h});
  if (v.class_token) b.tensor(Role::ClassEmbed, false, -1, {h});
  if (v.tiles > 0) {
    // Llama 3.2 Vision: the gated position table (a parameter) and its
    // tiles' own, and the aspect ratio's embeddings of each tile before and
    // after the layers.
    const int64_t kinds = v.aspect_ratios() + 1;
    b.parameter(Role::PosEmbed, {v.positions_count(), h});
    b.tensor(Role::PosGate, false, -1, {1});
    b.matrix(Role::TilePosEmbed, kinds, v.tiles * v.positions_count() * h);
    b.matrix(Role::PreTileEmbed, kinds, v.tiles * h);
    b.tensor(Role::PreTileGate, false, -1, {1});
    b.matrix(Role::PostTileEmbed, kinds, v.tiles * h);
    b.tensor(Role::PostTileGate, false, -1, {1});
  }
  m = b.take();
  // The tower's stack: its positions (a learned table, but a tiled
  // tower's), norms and layers, as build_manifest lays out an encoder's.
  for (TensorSpec& t : build_manifest(tower).tensors) m.tensors.push_back(std::move(t));
  if (v.global_layers > 0) {
    // The global layers: named by weights.global_names from their layer 0,
    // each with its two gates.
    const Spec global = vision_global_layers(s);
    Builder g(global);
    for (int64_t l = 0; l < v.global_layers; ++l) {
      block(g, global, l, false);
      g.tensor(Role::AttnGate, false, l, {1});
      g.tensor(Role::MlpGate, false, l, {1});
    }
    // Numbered after the local layers (dims.layers + l): a layer's tensors
    // are told apart by their layer alone.
    for (TensorSpec& t : g.take().tensors) {
      t.layer += v.dims.layers;
      m.tensors.push_back(std::move(t));
    }
  }

  Builder p(tower);
  const Projector& j = v.projector;
  const int64_t features = h * (1 + static_cast<int64_t>(v.extra_feature_layers.size()));
  switch (j.kind) {
    case ProjectorKind::MergeMlp:
      p.norm(Role::ProjNorm, h, -1, j.norm == NormKind::LayerNorm);
      p.linear(Role::PatchMerge, h, h * j.merge * j.merge, false);
      [[fallthrough]];
    case ProjectorKind::Mlp:
      p.linear(Role::ProjIn, j.intermediate, features, j.bias);
      p.linear(Role::ProjOut, s.dims.hidden, j.intermediate, j.bias);
      break;
    case ProjectorKind::Pooled:
      p.norm(Role::ProjNorm, h, -1, j.norm == NormKind::LayerNorm);
      p.parameter_in_out(Role::ProjIn, s.dims.hidden, features);  // Gemma 3's mm_input_projection_weight
      break;
    case ProjectorKind::Linear: p.linear(Role::ProjIn, s.dims.hidden, features, j.bias); break;
  }
  for (TensorSpec& t : p.take().tensors) m.tensors.push_back(std::move(t));
  return m;
}

Manifest build_sample_manifest(const Spec& s) {
  Spec one = s;
  one.dims.layers = std::min<int64_t>(s.dims.layers, 1);
  one.dims.encoder_layers = std::min<int64_t>(s.dims.encoder_layers, 1);
  one.moe.experts = std::min<int64_t>(s.moe.experts, 1);
  return build_manifest(one);
}

}  // namespace lathe::spec
