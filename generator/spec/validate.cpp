// The architecture contract. Each rule reports at the key that breaks it.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"

namespace lathe::spec {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

// Bounds on the whole model, far above any real one (the largest have well
// under 10^5 tensors and about 10^12 parameters). Each field has its range, but
// layers × experts can ask build_manifest for millions of tensors (gigabytes,
// minutes), and parameter counts past 2^61 overflow the int64 sums of the
// manifest and the report.
constexpr int64_t kMaxTensors = int64_t{1} << 18;
constexpr double kMaxParams = 281474976710656.0;  // 2^48

// Tensors and parameters of the full model, counted in double from the
// sample manifest, so that nothing is built at full size or overflows.
std::pair<double, double> model_size(const Spec& s, const Manifest& sample) {
  double tensors = 0, params = 0;
  for (const TensorSpec& t : sample.tensors) {
    double copies = 1, elements = 1;
    // The sample has one layer of each stack: an encoder–decoder's layer 0 is its encoder's.
    if (t.layer >= 0) copies *= static_cast<double>(s.encoder_decoder() && t.layer == 0 ? s.dims.encoder_layers : s.dims.layers);
    if (t.expert >= 0) copies *= static_cast<double>(s.moe.experts);
    for (int64_t n : t.shape) elements *= static_cast<double>(n);
    tensors += copies;
    params += copies * elements;
  }
  return {tensors, params};
}

// A tensor the architecture has and `key` does not name; `preset_key` is
// the preset that could ("weights.preset", "vision.weights.preset").
std::string not_set(const std::string& key, const std::string& preset_key, const std::string& preset) {
  return key + " is not set: the architecture has this tensor (" +
         (preset.empty() ? "set " + preset_key + " or name it" : "preset \"" + preset + "\" does not name it") + ")";
}

std::string sci(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

// A state-space model: every layer a Mamba block (in_proj, conv, scan,
// out_proj) behind an RMS pre-norm, and nothing of attention or MLP layers.
void validate_ssm(const Spec& s, Diagnostics& diag) {
  auto at = [&](const std::string& path, std::string message) { diag.error(s.where(path), std::move(message)); };
  const Ssm& m = s.ssm;
  const int64_t d = s.dims.hidden;
  if (s.locations.count("ssm.d_inner") && s.locations.count("ssm.expand") && m.d_inner != m.expand * d)
    at("ssm.d_inner", "d_inner (" + num(m.d_inner) + ") is not expand (" + num(m.expand) + ") × dims.hidden (" + num(d) +
                          ") = " + num(m.expand * d));
  if (m.mamba2()) {
    // Mamba-2: heads of head_dim channels, sharing B and C in groups.
    if (m.heads * m.head_dim != m.d_inner)
      at(s.locations.count("ssm.heads") ? "ssm.heads" : "ssm.head_dim",
         "heads (" + num(m.heads) + ") × head_dim (" + num(m.head_dim) + ") = " + num(m.heads * m.head_dim) +
             ", but d_inner is " + num(m.d_inner) + ": a Mamba-2 layer's heads split d_inner");
    if (m.heads % m.groups != 0)
      at("ssm.groups", "heads (" + num(m.heads) + ") is not a multiple of groups (" + num(m.groups) +
                           "): each group's B and C serve heads / groups heads");
    if (m.dt_min > m.dt_max)
      at("ssm.dt_min", "dt_min (" + sci(m.dt_min) + ") is above dt_max (" + sci(m.dt_max) + ")");
    if (s.locations.count("ssm.dt_rank"))
      at("ssm.dt_rank", "a Mamba-2 layer has no dt_proj: its dt comes from in_proj, one a head (remove dt_rank)");
  } else {
    for (const char* key : {"ssm.heads", "ssm.head_dim", "ssm.groups", "ssm.dt_min", "ssm.dt_max"})
      if (s.locations.count(key))
        at(key, std::string(key) + " is a Mamba-2 field: a Mamba (v1) layer's dt is per channel (kind = \"mamba2\"?)");
  }
  if (m.dt_rank > m.d_inner)
    at("ssm.dt_rank", "dt_rank (" + num(m.dt_rank) + ") is larger than d_inner (" + num(m.d_inner) +
                          "): dt_proj maps dt_rank values to d_inner");
  if (m.d_state > m.d_inner)
    at("ssm.d_state", "d_state (" + num(m.d_state) + ") is larger than d_inner (" + num(m.d_inner) + ")");
  if (s.stack != Stack::Decoder)
    at("model.stack", "a state-space model is a causal decoder: model.stack = \"decoder\"");
  if (s.norm.placement != NormPlacement::Pre)
    at("norm.placement", "a Mamba block is pre-norm: x + mixer(norm(x)) (norm.placement = \"pre\")");
  if (m.hybrid()) {
    // A hybrid: decoder blocks whose mixer is attention in the listed
    // layers, the state-space mixer in the others, an MLP in every one.
    std::vector<int64_t> seen;
    for (int64_t l : m.attention_layers) {
      if (l >= s.dims.layers)
        at("ssm.attention_layers", "attention_layers names layer " + num(l) + ", but the model has " +
                                       num(s.dims.layers) + " layers");
      else if (std::find(seen.begin(), seen.end(), l) != seen.end())
        at("ssm.attention_layers", "attention_layers names layer " + num(l) + " twice");
      seen.push_back(l);
    }
    if (static_cast<int64_t>(seen.size()) >= s.dims.layers)
      at("ssm.attention_layers", "every layer is an attention layer: a model without state-space layers has no [ssm]");
    if (s.attention.sliding_window > 0)
      at("attention.sliding_window", "a hybrid's attention layers attend to every key: sliding windows are not supported with [ssm] yet");
    if (s.locations.count("moe"))
      at("moe", "a hybrid's layers are attention or state-space mixers with dense MLPs: [moe] is not supported with "
                "[ssm] yet");
  } else {
    const std::string kind = "a " + std::string(name(m.kind)) + " model's layers";
    for (const char* key : {"dims.heads", "dims.kv_heads", "dims.head_dim", "dims.intermediate"})
      if (s.locations.count(key)) at(key, kind + " have no attention or MLP: remove " + std::string(key));
    for (const char* table : {"attention", "position", "mlp", "moe"})
      if (s.locations.count(table))
        at(table, kind + " have no " + (std::string(table) == "position" ? "positions" : table) + ": remove [" +
                      table + "] (a hybrid lists its attention layers in ssm.attention_layers)");
    if (s.locations.count("cache"))
      at("cache", kind + " keep an f32 state per sequence, no KV cache: remove [cache]");
  }
  if (s.norm.kind != NormKind::RMSNorm) at("norm.kind", "a Mamba block's norms are RMS norms");
  if (s.norm.unit_offset) at("norm.unit_offset", "a Mamba block's norms scale by w, not 1 + w");
}

// Multi-head latent attention: DeepSeek's widths and what its attention has
// (no biases, no q/k norms, no windows; RoPE on the rotary part).
void validate_mla(const Spec& s, Diagnostics& diag) {
  auto at = [&](const std::string& path, std::string message) { diag.error(s.where(path), std::move(message)); };
  const Mla& m = s.mla;
  for (const char* key : {"dims.kv_heads", "dims.head_dim"})
    if (s.locations.count(key))
      at(key, std::string("under [mla] the heads' widths are mla.qk_nope_head_dim, qk_rope_head_dim and v_head_dim, "
                          "and every head shares the latent: remove ") + key);
  if (m.qk_rope_head_dim % 2 != 0)
    at("mla.qk_rope_head_dim", "qk_rope_head_dim (" + num(m.qk_rope_head_dim) + ") must be even: RoPE turns pairs");
  if (s.position.kind != PositionKind::Rope)
    at("position.kind", "latent attention rotates its rotary key part: position.kind = \"rope\"");
  else if (s.locations.count("position.rotary_dim") && s.position.rotary_dim != m.qk_rope_head_dim)
    at("position.rotary_dim", "under [mla] RoPE turns the qk_rope_head_dim (" + num(m.qk_rope_head_dim) +
                                  ") rotary dims of each head, not " + num(s.position.rotary_dim) + ": remove rotary_dim");
  // The cache holds kv_lora_rank + qk_rope_head_dim values a token as 16-byte texels.
  if (m.cache_width() % 8 != 0)
    at("mla.kv_lora_rank", "kv_lora_rank + qk_rope_head_dim (" + num(m.cache_width()) + ") must be a multiple of 8");
  const Attention& a = s.attention;
  for (const char* key : {"attention.bias", "attention.q_bias", "attention.k_bias", "attention.v_bias", "attention.o_bias"})
    if (s.locations.count(key) && (a.q_bias || a.k_bias || a.v_bias || a.o_bias))
      at(key, "latent attention's projections have no biases");
  if (a.qk_norm != QKNorm::None) at("attention.qk_norm", "latent attention has no q/k norms (its latents have their own)");
  if (a.sliding_window > 0) at("attention.sliding_window", "latent attention sees every earlier key");
  if (s.weights.fused_qkv) at("weights.fused_qkv", "latent attention has no fused q/k/v projection");
  if (s.stack != Stack::Decoder) at("model.stack", "latent attention is a causal decoder's (model.stack = \"decoder\")");
  if (s.ssm.enabled()) at("mla", "a model's layers are latent attention or state-space blocks, not both");
  if (s.norm.kind != NormKind::RMSNorm) at("norm.kind", "the latents' norms are RMS norms (norm.kind = \"rmsnorm\")");
  if (s.norm.unit_offset) at("norm.unit_offset", "the latents' norms scale by w, not 1 + w");
}

// [vision]: the tower's shapes, its geometry against its patches, the
// projector against both widths, the image tokens against the vocabulary, and
// a name for every tensor of the tower (its manifest at full size: a tower
// has tens of layers, no experts).
void validate_vision(const Spec& s, Diagnostics& diag) {
  auto at = [&](const std::string& path, std::string message) { diag.error(s.where(path), std::move(message)); };
  auto given = [&](const std::string& path) { return s.locations.count(path) > 0; };
  const Vision& v = s.vision;
  const Dims& d = v.dims;
  if (s.stack != Stack::Decoder || s.ssm.enabled())
    at("vision", "[vision] feeds a decoder's prompt (model.stack = \"decoder\", attention layers)");
  if (!d.head_dim_explicit && d.hidden % d.heads != 0)
    at("vision.heads", "vision.hidden (" + num(d.hidden) + ") is not a multiple of vision.heads (" + num(d.heads) +
                           "); set vision.head_dim if the head width is not hidden / heads");

  // Geometry.
  if (v.image_size == 0 && v.longest_edge == 0)
    at("vision", "[vision] needs image_size (images resized to a square) or longest_edge (variable sizes)");
  if (v.image_size > 0 && v.longest_edge > 0)
    at("vision.longest_edge", "image_size (a fixed square) and longest_edge (variable sizes) exclude each other; keep one");
  if (v.image_size > 0 && v.image_size % v.patch != 0)
    at("vision.image_size", "image_size (" + num(v.image_size) + ") is not a multiple of vision.patch (" + num(v.patch) + ")");
  if (v.grid() > 4096)
    at("vision.patch", "an image of " + num(std::max(v.image_size, v.longest_edge)) + " pixels a side has " +
                           num(v.grid()) + " patches a side; lathe handles at most 4096");
  if (v.positions == VisionPositions::Rope2D) {
    if (d.head_dim % 4 != 0)
      at("vision.positions", "2D RoPE splits each head's rotary pairs between rows and columns: head_dim (" +
                                 num(d.head_dim) + ") must be a multiple of 4");
    if (v.class_token) at("vision.class_token", "a class token has no row or column for 2D RoPE (vision.positions = \"learned\")");
  } else if (given("vision.rope_theta")) {
    at("vision.rope_theta", "rope_theta is 2D RoPE's base (vision.positions = \"rope_2d\")");
  } else if (given("vision.rope_pairing")) {
    at("vision.rope_pairing", "rope_pairing is 2D RoPE's (vision.positions = \"rope_2d\")");
  }
  if (v.positions == VisionPositions::Learned && v.longest_edge > 0)
    at("vision.longest_edge", "a learned table of positions has one row per patch of a fixed-size image: variable sizes "
                              "take vision.positions = \"rope_2d\"");
  if (v.post_norm && v.layers_run() != d.layers)
    at("vision.post_norm", "post_norm is of the last layer's output: the features read hidden state " +
                               num(v.feature_layer) + " (set feature_layer = -1)");
  if (given("vision.drop_class_token") && v.drop_class_token && !v.class_token)
    at("vision.drop_class_token", "drop_class_token drops the class token's row: set vision.class_token = true");
  const int64_t states = d.layers + 1;  // hidden_states: the embeddings, then each layer's output
  if (v.feature_layer >= states || v.feature_layer < -states)
    at("vision.feature_layer", "feature_layer (" + num(v.feature_layer) + ") is not a hidden state of a " +
                                   num(d.layers) + "-layer tower (0 … " + num(d.layers) + ", or −1 … −" + num(states) + ")");
  for (int64_t l : v.extra_feature_layers)
    if (l > d.layers) at("vision.extra_feature_layers", "hidden state " + num(l) + " of a " + num(d.layers) + "-layer tower");

  // The tower's blocks: pre-norm encoder layers.
  if (v.norm.placement != NormPlacement::Pre) at("vision.norm.placement", "the vision towers lathe knows are pre-norm");
  if (given("vision.norm.final")) at("vision.norm.final", "the tower's output norm is vision.post_norm");
  if (v.norm.kind == NormKind::RMSNorm && v.norm.bias) at("vision.norm.bias", "an rmsnorm has no bias; remove it");
  if (v.attention.qk_norm != QKNorm::None || v.attention.sliding_window > 0 || v.attention.softcap > 0)
    at("vision.attention", "a tower's attention is plain: every patch sees every patch of its image");
  if (v.mlp.fused_gate_up != FusedGateUp::None) at("vision.mlp.fused_gate_up", "a tower's MLP is not fused");

  // Tiles (Llama 3.2 Vision).
  if (v.tiles > 0 && (v.image_size == 0 || !v.class_token || v.positions != VisionPositions::Learned))
    at("vision.tiles", "tiles of image_size² each need a fixed image_size, a class token and learned positions");
  if (v.global_layers > 0 && v.tiles == 0) at("vision.global_layers", "global layers follow a tiled tower's (vision.tiles)");

  // The projector.
  const Projector& j = v.projector;
  const int64_t g = v.grid();
  if (j.kind == ProjectorKind::MergeMlp && v.image_size > 0 && g % j.merge != 0)
    at("vision.projector.merge", "a grid of " + num(g) + " patches a side is not whole blocks of merge (" + num(j.merge) + ")");
  if (j.kind == ProjectorKind::Pooled) {
    const int64_t side = j.pooled_side();
    if (j.tokens == 0) at("vision.projector", "a pooled projector needs tokens (an image's tokens, a square: 256)");
    else if (side * side != j.tokens || v.image_size == 0 || g % side != 0)
      at("vision.projector.tokens", "tokens (" + num(j.tokens) + ") must be the square of a divisor of the fixed grid (" +
                                        num(g) + " patches a side)");
  }
  if (!v.extra_feature_layers.empty() && j.kind != ProjectorKind::Linear && j.kind != ProjectorKind::Mlp)
    at("vision.extra_feature_layers", "features of several layers side by side feed an mlp or linear projector");
  if (j.kind == ProjectorKind::Pooled && given("vision.projector.bias") && j.bias)
    at("vision.projector.bias", "Gemma 3's pooled projection has no bias");
  if (j.norm == NormKind::RMSNorm && j.norm_unit_offset && j.kind != ProjectorKind::Pooled)
    at("vision.projector.norm_unit_offset", "norm_unit_offset is the pooled projector's Gemma norm");

  // The connection and its tokens.
  const bool splice = v.connection == VisionConnection::Splice;
  if (v.tokens.marker < 0) at("vision.tokens", "[vision.tokens] needs marker: the token a prompt holds where an image goes");
  auto in_vocab = [&](const std::string& key, int64_t id) {
    if (id >= s.dims.vocab)
      at("vision.tokens." + key, key + " (" + num(id) + ") is not below dims.vocab (" + num(s.dims.vocab) + ")");
  };
  // (The marker is read, never written: it may be a row past the vocabulary.)
  if (v.tokens.marker >= s.embedding_rows())
    at("vision.tokens.marker", "marker (" + num(v.tokens.marker) + ") is not a row of the token table (" +
                                   (s.embedding.rows > 0 ? "embedding.rows = " + num(s.embedding.rows)
                                                         : "dims.vocab = " + num(s.dims.vocab)) +
                                   ")");
  if (given("vision.tokens.image")) in_vocab("image", v.tokens.image);  // (else the marker)
  in_vocab("row_end", v.tokens.row_end);
  in_vocab("end", v.tokens.end);
  for (int64_t id : v.tokens.prefix) in_vocab("prefix", id);
  for (int64_t id : v.tokens.suffix) in_vocab("suffix", id);
  if (!splice && v.image_bidirectional)
    at("vision.image_bidirectional", "image_bidirectional is a splice's: the image's tokens in the prompt");
  if (splice && !v.cross_layers.empty())
    at("vision.cross_layers", "cross_layers are a cross_attention connection's (vision.connection)");
  if (!splice) {
    if (v.cross_layers.empty()) at("vision.connection", "a cross_attention connection needs vision.cross_layers");
    std::set<int64_t> seen_layers;
    for (int64_t l : v.cross_layers)
      if (l >= s.dims.layers || !seen_layers.insert(l).second)
        at("vision.cross_layers", "layer " + num(l) + (l >= s.dims.layers ? " is not a decoder layer (dims.layers = " +
                                                                                num(s.dims.layers) + ")"
                                                                          : " is listed twice"));
    if (v.tokens.row_end >= 0 || v.tokens.end >= 0 || !v.tokens.prefix.empty() || !v.tokens.suffix.empty())
      at("vision.tokens", "a cross_attention connection keeps the marker one token: row_end, end, prefix and suffix "
                          "are a splice's");
  }

  // Size, in double before any manifest is built: the tower's largest
  // tables and its layers within lathe's bounds.
  const double h = static_cast<double>(d.hidden);
  const double positions = static_cast<double>(v.grid()) * static_cast<double>(v.grid()) + 1.0;
  const double tile_table = positions * h * static_cast<double>(std::max<int64_t>(v.tiles, 1)) *
                            static_cast<double>(v.aspect_ratios() + 1);
  const double layers = static_cast<double>(d.layers + v.global_layers) * h *
                        (4.0 * static_cast<double>(d.heads * d.head_dim) + 3.0 * static_cast<double>(d.intermediate));
  if (tile_table + layers > kMaxParams)
    at("vision", "the tower has about " + sci(tile_table + layers) + " parameters; lathe handles at most 2^48 (" +
                     sci(kMaxParams) + ")");

  // Names: every tensor of the tower, the projector and the decoder's
  // cross-attention layers.
  if (!diag.empty()) return;
  std::set<std::string> reported;
  auto unnamed = [&](Role role, const std::string& table, const std::string& preset) {
    const std::string key = table + std::string(name(role));
    // ("vision.weights.names." → "vision.weights.preset")
    const std::string preset_key = table.substr(0, table.rfind('.', table.size() - 2) + 1) + "preset";
    if (reported.insert(key).second) at(key, not_set(key, preset_key, preset));
  };
  // A local layer's tensors are weights.names', a global layer's (whose
  // roles the local layers' share) weights.global_names'.
  for (const TensorSpec& t : build_vision_manifest(s).tensors)
    if (t.name.rfind("<unnamed ", 0) == 0) {
      const bool global = t.layer >= 0 && v.weights.names.count(t.role);
      unnamed(t.role, global ? "vision.weights.global_names." : "vision.weights.names.", v.weights.preset);
    }
  if (!splice) {
    Spec upto = s;  // the decoder up to its first cross-attention layer, one expert
    upto.dims.layers = v.cross_layers.front() + 1;
    upto.moe.experts = std::min<int64_t>(s.moe.experts, 1);
    for (const TensorSpec& t : build_manifest(upto).tensors)
      if (t.layer == v.cross_layers.front() && t.name.rfind("<unnamed ", 0) == 0)
        unnamed(t.role, "weights.names.", s.weights.preset);
  }
}

}  // namespace

void validate(const Spec& s, Diagnostics& diag) {
  auto at = [&](const std::string& path, std::string message) { diag.error(s.where(path), std::move(message)); };
  const Dims& d = s.dims;

  // Shapes (of attention layers: a state-space model has none).
  const bool attention = !s.ssm.enabled() || s.ssm.hybrid();
  if (attention && !d.head_dim_explicit && d.hidden % d.heads != 0)
    at("dims.heads", "hidden (" + num(d.hidden) + ") is not a multiple of heads (" + num(d.heads) +
                         "); set dims.head_dim if the head width is not hidden / heads");
  if (attention && d.heads % d.kv_heads != 0)
    at("dims.kv_heads", "heads (" + num(d.heads) + ") is not a multiple of kv_heads (" + num(d.kv_heads) + ")");

  // Norms.
  if (s.norm.kind == NormKind::RMSNorm && s.norm.bias) at("norm.bias", "an rmsnorm has no bias; remove norm.bias");
  if (!s.norm.first_attn_norm && s.norm.placement != NormPlacement::Pre)
    at("norm.first_attn_norm", "first_attn_norm = false leaves out a pre-norm block's attention norm: placement must be \"pre\"");

  // Attention.
  const Attention& a = s.attention;
  if (a.sliding_window > d.max_context)
    at("attention.sliding_window", "sliding_window (" + num(a.sliding_window) + ") is larger than dims.max_context (" +
                                       num(d.max_context) + ")");
  if (!a.window_pattern.empty() && a.sliding_window == 0)
    at("attention.window_pattern", "window_pattern needs attention.sliding_window");
  if (s.weights.fused_qkv && !(a.q_bias == a.k_bias && a.k_bias == a.v_bias))
    at("weights.fused_qkv", "a fused qkv tensor has one bias for q, k and v: set attention.q_bias, k_bias and v_bias alike");
  if (s.weights.qkv_layout != QkvLayout::Blocks && !s.weights.fused_qkv)
    at("weights.qkv_layout", "qkv_layout orders the rows of a fused q/k/v tensor: set weights.fused_qkv = true");
  if (s.weights.qkv_layout == QkvLayout::PerHead && d.heads != d.kv_heads)
    at("weights.qkv_layout", "a per_head layout holds q, k and v of each head: heads (" + num(d.heads) +
                                 ") must equal kv_heads (" + num(d.kv_heads) + "); use \"grouped\"");

  // Per-role dtypes: matrices of the model, an array one dtype per layer.
  for (const auto& [role, dtypes] : s.weights.role_dtypes) {
    const std::string key = "weights.dtypes." + std::string(name(role));
    const bool per_layer = is_linear(role);
    if (is_norm(role))
      at(key, "a norm's scale is a vector: its dtype is weights.vector_dtype");
    else if (dtypes.size() > 1 && !per_layer)
      at(key, std::string(name(role)) + " is not per layer: give one dtype, not an array");
    else if (dtypes.size() > 1 && static_cast<int64_t>(dtypes.size()) != s.blocks())
      at(key, "an array of " + num(static_cast<int64_t>(dtypes.size())) + " dtypes; the model has " + num(s.blocks()) +
                  " layers (one per layer, encoder layers first, or one string for all)");
  }

  // Positions.
  const Position& p = s.position;
  if (p.kind == PositionKind::Rope) {
    // (Latent attention's rotary width is mla.qk_rope_head_dim: validate_mla.)
    if (p.rotary_dim > d.head_dim && !s.mla.enabled)
      at("position.rotary_dim", "rotary_dim (" + num(p.rotary_dim) + ") is larger than head_dim (" + num(d.head_dim) + ")");
    if (p.rotary_dim % 2 != 0 && !s.mla.enabled)
      at("position.rotary_dim", "rotary_dim (" + num(p.rotary_dim) + ") must be even");
    if (p.local_theta && a.sliding_window == 0)
      at("position.local_theta", "local_theta applies to windowed layers, but attention.sliding_window is not set");
    const RopeScalingParams& r = p.scaling;
    if (r.kind == RopeScaling::Llama3) {
      if (r.original_max_context == 0)
        at("position.scaling", "llama3 scaling needs position.scaling.original_max_context");
      if (r.high_freq_factor <= r.low_freq_factor)
        at("position.scaling.high_freq_factor", "high_freq_factor must be larger than low_freq_factor");
    }
    if (r.kind == RopeScaling::Yarn && r.original_max_context == 0)
      at("position.scaling", "yarn scaling needs position.scaling.original_max_context");
    if (r.kind == RopeScaling::DynamicNtk) {
      if (r.original_max_context == 0)
        at("position.scaling", "dynamic_ntk scaling needs position.scaling.original_max_context");
      else if (r.original_max_context >= d.max_context)
        at("position.scaling.original_max_context",
           "dynamic_ntk scales positions past original_max_context (" + num(r.original_max_context) +
               "), but dims.max_context is " + num(d.max_context) + ": none would be");
    }
  } else {
    for (const char* key : {"position.pairing", "position.rotary_dim", "position.theta", "position.local_theta",
                            "position.scaling"})
      if (s.locations.count(key))
        at(key, std::string(key) + " applies to rope positions, but position.kind is \"" + name(p.kind) + "\"");
  }
  if (p.kind == PositionKind::Relative) {
    if (s.stack == Stack::Decoder)
      at("position.kind", "relative positions run in T5's stacks: model.stack = \"encoder\" or \"encoder-decoder\"");
    if (p.buckets < 4 || p.buckets % 2 != 0)
      at("position.buckets", "buckets (" + num(p.buckets) + ") must be even and at least 4: half are exact distances" +
                                 std::string(s.encoder() ? ", each half of a bidirectional table" : ""));
    else if (p.max_distance <= (s.encoder() ? p.buckets / 4 : p.buckets / 2))
      at("position.max_distance", "max_distance (" + num(p.max_distance) + ") must exceed the exact distances (" +
                                      num(s.encoder() ? p.buckets / 4 : p.buckets / 2) + ")");
  } else {
    for (const char* key : {"position.buckets", "position.max_distance"})
      if (s.locations.count(key)) at(key, std::string(key) + " applies to relative positions only");
  }
  if (p.kind == PositionKind::Learned) {
    if (p.table_size < d.max_context + p.offset)
      at("position.table_size", "the learned position table has " + num(p.table_size) + " rows, fewer than max_context + offset (" +
                                    num(d.max_context + p.offset) + ")");
  } else {
    for (const char* key : {"position.offset", "position.table_size"})
      if (s.locations.count(key)) at(key, std::string(key) + " applies to learned positions only");
  }

  // MLP.
  if (s.mlp.fused_gate_up != FusedGateUp::None && !s.mlp.gated)
    at("mlp.fused_gate_up", "fused_gate_up needs a gated MLP (mlp.gated = true)");
  if (s.mlp.fused_gate_up != FusedGateUp::None && s.moe.enabled())
    at("mlp.fused_gate_up", "fused_gate_up is not defined for MoE experts");

  // MoE.
  const Moe& m = s.moe;
  if (m.enabled()) {
    if (m.top_k > m.experts)
      at("moe.top_k", "top_k (" + num(m.top_k) + ") is larger than experts (" + num(m.experts) + ")");
    if (m.shared_experts == 0 && s.locations.count("moe.shared_intermediate"))
      at("moe.shared_intermediate", "shared_intermediate needs moe.shared_experts");
    if (m.shared_experts == 0 && m.shared_expert_gate)
      at("moe.shared_expert_gate", "shared_expert_gate needs moe.shared_experts");
    // Group-limited routing (DeepSeek n_group, topk_group): equal groups of
    // consecutive experts, enough of them kept to hold top_k experts.
    const int64_t per_group = m.experts / m.groups;
    if (m.groups == 1) {
      for (const char* key : {"moe.topk_groups", "moe.group_score"})
        if (s.locations.count(key)) at(key, std::string(key) + " needs moe.groups > 1");
    } else if (m.experts % m.groups != 0) {
      at("moe.groups", "experts (" + num(m.experts) + ") is not a multiple of groups (" + num(m.groups) + ")");
    } else if (m.topk_groups > m.groups) {
      at("moe.topk_groups", "topk_groups (" + num(m.topk_groups) + ") is larger than groups (" + num(m.groups) + ")");
    } else if (m.top_k <= m.experts && m.top_k > m.topk_groups * per_group) {
      at(s.locations.count("moe.topk_groups") ? "moe.topk_groups" : "moe.groups",
         "top_k (" + num(m.top_k) + ") is larger than the experts of the kept groups (topk_groups · experts / groups = " +
             num(m.topk_groups * per_group) + ")");
    } else if (m.group_score == GroupScore::Top2Sum && per_group < 2) {
      at("moe.group_score", "top2_sum scores a group by its best two experts, but each group has " + num(per_group));
    }
    for (int64_t l : m.dense_layers)
      if (l >= d.layers)
        at("moe.dense_layers", "dense_layers names layer " + num(l) + ", but the model has " + num(d.layers) + " layers");
  }

  // A token table longer than the vocabulary: rows read, never written
  // (Llama 3.2 Vision's image token).
  if (s.embedding.rows > 0) {
    if (s.embedding.rows < d.vocab)
      at("embedding.rows", "rows (" + num(s.embedding.rows) + ") is below dims.vocab (" + num(d.vocab) +
                               "): the table holds every token the head writes");
    else if (s.embedding.tied)
      at("embedding.rows", "a tied table is the LM head's: dims.vocab rows (embedding.tied)");
    else if (!(s.vision.enabled && s.vision.connection == VisionConnection::CrossAttention))
      at("embedding.rows", "rows past dims.vocab hold a cross_attention [vision]'s image token (Llama 3.2 Vision)");
  }

  // The stack. An encoder attends both ways over one input at a time and
  // ends at its hidden states: no LM head, and no feature that only a
  // causal cache defines.
  if (s.encoder()) {
    if (s.embedding.tied) at("embedding.tied", "an encoder has no LM head to tie (model.stack = \"encoder\")");
    if (s.output.bias || s.output.softcap > 0 || s.output.scale != 1.0)
      at(s.output.bias ? "output.bias" : s.output.softcap > 0 ? "output.softcap" : "output.scale",
         "an encoder ends at its hidden states: [output] applies to an LM head (model.stack = \"encoder\")");
    if (p.kind == PositionKind::Alibi)
      at("position.kind", "ALiBi is defined for causal stacks only (model.stack = \"encoder\")");
    if (s.embedding.token_types > 0 && p.kind != PositionKind::Learned)
      at("embedding.token_types", "token types are added with learned positions (position.kind = \"learned\")");
    if (s.norm.placement != NormPlacement::Post && !s.norm.final_norm)
      at("norm.final", "an encoder's hidden states end at a norm: a final norm (norm.final = true) or post placement");
  } else {
    if (s.pooling.kind != Pooling::None || s.locations.count("pooling"))
      at("pooling", "pooling makes one vector of an encoder's hidden states: set model.stack = \"encoder\"");
    if (s.embedding.token_types > 0)
      at("embedding.token_types", "token types are an encoder's segment embeddings: set model.stack = \"encoder\"");
  }

  // An encoder–decoder: two stacks of the same widths and block kind, the
  // decoder's layers attending to the encoder's output. What varies per
  // layer, or needs the one-stack cache, is left out.
  if (s.encoder_decoder()) {
    if (s.decoder_start < 0)
      at("model.stack", "an encoder-decoder's decoder starts from a token: set model.decoder_start (T5: 0, BART: 2)");
    else if (s.decoder_start >= d.vocab)
      at("model.decoder_start", "decoder_start (" + num(s.decoder_start) + ") is outside the vocabulary (" +
                                    num(d.vocab) + " tokens)");
    if (s.norm.placement != NormPlacement::Pre && s.norm.placement != NormPlacement::Post)
      at("norm.placement", "an encoder-decoder's blocks are pre-norm (T5) or post-norm (BART)");
    if (!s.norm.first_attn_norm) at("norm.first_attn_norm", "first_attn_norm = false is an encoder's (ModernBERT)");
    if (m.enabled()) at("moe", "an encoder-decoder's MLPs are dense");
    if (a.sliding_window > 0) at("attention.sliding_window", "an encoder-decoder's attention sees every key");
    if (a.qk_norm != QKNorm::None) at("attention.qk_norm", "q/k norms are not defined for cross-attention");
    if (s.weights.fused_qkv) at("weights.fused_qkv", "an encoder-decoder's projections are separate tensors");
    if (p.kind == PositionKind::Alibi) at("position.kind", "ALiBi is defined for causal stacks only");
    if (p.kind == PositionKind::Rope && p.scaling.kind == RopeScaling::DynamicNtk)
      at("position.scaling", "dynamic_ntk scaling is not defined for an encoder-decoder");
    if (s.embedding.token_types > 0) at("embedding.token_types", "token types are an encoder's segment embeddings");
  } else {
    if (s.locations.count("model.decoder_start"))
      at("model.decoder_start", "decoder_start is an encoder-decoder's (model.stack = \"encoder-decoder\")");
    if (s.locations.count("dims.encoder_layers"))
      at("dims.encoder_layers", "encoder_layers counts an encoder-decoder's encoder layers (model.stack = "
                                "\"encoder-decoder\"); dims.layers counts this stack's");
    if (!s.weights.encoder_names.empty() && s.locations.count("weights.encoder_names"))
      at("weights.encoder_names", "encoder_names name an encoder-decoder's encoder layers (model.stack = "
                                  "\"encoder-decoder\")");
  }

  if (s.ssm.enabled()) validate_ssm(s, diag);
  if (s.mla.enabled) validate_mla(s, diag);
  if (s.vision.enabled) validate_vision(s, diag);
  if (!s.mla.enabled && s.locations.count("position.scaling.mscale_all_dim") && p.scaling.kind != RopeScaling::Yarn)
    at("position.scaling.mscale_all_dim", "mscale_all_dim is DeepSeek's YaRN: position.scaling.kind = \"yarn\"");

  // Size.
  const Manifest sample = build_sample_manifest(s);
  const auto [tensors, params] = model_size(s, sample);
  if (tensors > static_cast<double>(kMaxTensors))
    at(m.enabled() ? "moe.experts" : "dims.layers",
       "the model has " + num(static_cast<int64_t>(tensors)) + " tensors; lathe handles at most " + num(kMaxTensors));
  if (params > kMaxParams)
    at("dims", "the model has " + sci(params) + " parameters; lathe handles at most 2^48 (" + sci(kMaxParams) + ")");

  // Weights: every tensor the architecture has must have a name, with a
  // {layer} exactly when the tensor is per layer. An expert role's name has
  // an {expert} (a tensor per expert) or not (the layer's experts stacked in
  // one tensor, as llama.cpp stores them), the same for the three roles.
  // An encoder–decoder's encoder layers are named by weights.encoder_names.
  std::set<std::pair<Role, bool>> seen;
  std::optional<std::pair<Role, bool>> expert_naming;  // the first expert role's, and whether it stacks
  for (const TensorSpec& t : sample.tensors) {
    const Role role = t.role;
    const bool encoder_layer = s.encoder_decoder() && t.layer == 0;  // the sample's one encoder layer
    if (!seen.insert({role, encoder_layer}).second) continue;
    const auto& names = encoder_layer ? s.weights.encoder_names : s.weights.names;
    auto it = names.find(role);
    const std::string key = (encoder_layer ? "weights.encoder_names." : "weights.names.") + std::string(name(role));
    if (it == names.end()) {
      at(key, not_set(key, "weights.preset", s.weights.preset));
      continue;
    }
    const bool per_layer = t.layer >= 0;
    const bool per_expert = t.expert >= 0;
    if (per_layer && it->second.find("{layer}") == std::string::npos)
      at(key, key + " (\"" + it->second + "\") names a tensor of every layer but has no {layer}");
    if (!per_layer && it->second.find("{layer}") != std::string::npos)
      at(key, key + " (\"" + it->second + "\") names one tensor of the model but has a {layer}");
    if (!per_expert && it->second.find("{expert}") != std::string::npos)
      at(key, key + " (\"" + it->second + "\") is not per expert but has an {expert}");
    if (per_expert) {
      const bool stacked = it->second.find("{expert}") == std::string::npos;
      if (!expert_naming) expert_naming = {role, stacked};
      else if (expert_naming->second != stacked)
        at(key, key + " (\"" + it->second + "\") " +
                    (stacked ? "has no {expert} (the experts stacked in one tensor)" : "has an {expert}") +
                    " but weights.names." + std::string(name(expert_naming->first)) +
                    (stacked ? " has one" : " has none") + ": name the experts' tensors alike");
    }
  }
}

void validate_draft(const Spec& model, const Spec& draft, Diagnostics& model_diagnostics,
                    Diagnostics& draft_diagnostics) {
  // The model verifies a row of proposals in one pass and cuts its cache
  // back to the last accepted one: a causal decoder's KV cache can be, a
  // state-space layer's running state cannot.
  const std::string with = " (--draft " + draft.file + ")";
  if (model.stack != Stack::Decoder)
    model_diagnostics.error(model.where("model.stack"),
                            std::string("an ") + name(model.stack) + " cannot verify a draft's proposals" + with +
                                ": speculative decoding needs a decoder");
  else if (model.ssm.enabled())
    model_diagnostics.error(model.where("ssm"), "a model of state-space (Mamba) layers cannot verify a draft's "
                                                "proposals" + with + ": its state cannot be cut back after rejected ones");

  const std::string of = "the draft of " + model.file;
  if (draft.dims.vocab != model.dims.vocab)
    draft_diagnostics.error(draft.where("dims.vocab"), "[dims] vocab = " + num(draft.dims.vocab) + ", the model's (" +
                                                           model.file + ") is " + num(model.dims.vocab) +
                                                           ": a draft proposes the model's tokens");
  if (draft.stack != Stack::Decoder)
    draft_diagnostics.error(draft.where("model.stack"), std::string("stack = \"") + name(draft.stack) + "\": " + of +
                                                            " must be a decoder: it proposes the next tokens");
  if (draft.vision.enabled)
    draft_diagnostics.error(draft.where("vision"), "[vision]: " + of + " must be a plain decoder: it proposes text "
                                                                       "tokens, the model reads the images");
  if (draft.ssm.enabled())
    draft_diagnostics.error(draft.where("ssm"), "[ssm]: " + of + " cannot have state-space (Mamba) layers: their "
                                                                 "state cannot be cut back after rejected proposals");
}

}  // namespace lathe::spec
