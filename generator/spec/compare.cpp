#include "generator/spec/compare.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <set>

namespace lathe::spec {
namespace {

std::string text(int64_t v) { return std::to_string(v); }
std::string text(bool v) { return v ? "true" : "false"; }
std::string text(double v) {  // the shortest form that reads back as v
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, end) : std::string("?");
}
std::string text(const std::string& v) {
  std::string out = "\"";
  out += v;
  out += '"';
  return out;
}
template <class E>
  requires std::is_enum_v<E>
std::string text(E v) {
  std::string out = "\"";  // appended, not "\"" + …: GCC 12's -Wrestrict misfires on that at -O2
  out += name(v);
  out += '"';
  return out;
}
std::string text(const std::optional<double>& v) { return v ? text(*v) : "(none)"; }
std::string text(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + text(items[i]);
  return out + "]";
}
std::string text(const std::vector<int64_t>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + std::to_string(items[i]);
  return out + "]";
}
std::string text(const std::vector<bool>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + text(static_cast<bool>(items[i]));
  return out + "]";
}

class Differences {
 public:
  template <class T>
  void field(const std::string& path, const T& a, const T& b) {
    if (!(a == b)) lines_.push_back(path + ": " + text(a) + " vs " + text(b));
  }
  void line(std::string s) { lines_.push_back(std::move(s)); }
  std::vector<std::string> take() { return std::move(lines_); }

 private:
  std::vector<std::string> lines_;
};

// Which of `layers` layers are windowed: the meaning of sliding_window + window_pattern.
std::vector<bool> windowed_layers(const Attention& a, int64_t layers) {
  std::vector<bool> out;
  for (int64_t i = 0; i < layers; ++i) out.push_back(a.windowed(i));
  return out;
}

// The tables the decoder and the vision tower share, under `key` ("norm.",
// "vision.norm.").
void compare_norm(Differences& d, const std::string& key, const Norm& a, const Norm& b) {
  d.field(key + "kind", a.kind, b.kind);
  d.field(key + "eps", a.eps, b.eps);
  d.field(key + "placement", a.placement, b.placement);
  d.field(key + "unit_offset", a.unit_offset, b.unit_offset);
  d.field(key + "bias", a.bias, b.bias);
  d.field(key + "final", a.final_norm, b.final_norm);
  d.field(key + "parallel_shared", a.parallel_shared, b.parallel_shared);
}

void compare_attention(Differences& d, const std::string& key, const Attention& a, const Attention& b,
                       int64_t layers_a, int64_t layers_b) {
  d.field(key + "q_bias", a.q_bias, b.q_bias);
  d.field(key + "k_bias", a.k_bias, b.k_bias);
  d.field(key + "v_bias", a.v_bias, b.v_bias);
  d.field(key + "o_bias", a.o_bias, b.o_bias);
  d.field(key + "scale", a.scale, b.scale);
  d.field(key + "softcap", a.softcap, b.softcap);
  d.field(key + "qk_norm", a.qk_norm, b.qk_norm);
  d.field(key + "sliding_window", a.sliding_window, b.sliding_window);
  if (layers_a == layers_b && windowed_layers(a, layers_a) != windowed_layers(b, layers_b))
    d.line(key + "window_pattern: " + text(a.window_pattern) + " vs " + text(b.window_pattern) +
           " (windowed layers differ)");
}

void compare_mlp(Differences& d, const std::string& key, const Mlp& a, const Mlp& b) {
  d.field(key + "activation", a.activation, b.activation);
  d.field(key + "gated", a.gated, b.gated);
  d.field(key + "bias", a.bias, b.bias);
  d.field(key + "fused_gate_up", a.fused_gate_up, b.fused_gate_up);
}

// Module paths by role, under `key` ("weights.names.").
void compare_names(Differences& d, const std::string& key, const std::map<Role, std::string>& na,
                   const std::map<Role, std::string>& nb) {
  std::set<Role> roles;
  for (const auto& [role, path] : na) roles.insert(role);
  for (const auto& [role, path] : nb) roles.insert(role);
  for (const Role role : roles) {
    const auto ia = na.find(role);
    const auto ib = nb.find(role);
    const std::string ta = ia == na.end() ? "(none)" : text(ia->second);
    const std::string tb = ib == nb.end() ? "(none)" : text(ib->second);
    if (ta != tb) d.line(key + std::string(name(role)) + ": " + ta + " vs " + tb);
  }
}

// [weights] or [vision.weights] (`key`): the dtypes, the layout, the names by
// role, then the second set of layer names, an encoder–decoder's encoder
// layers' ("encoder_names.") or a tower's global layers' ("global_names.").
void compare_weights(Differences& d, const std::string& key, const std::string& second_names, const Weights& a,
                     const Weights& b) {
  d.field(key + "dtype", a.dtype, b.dtype);
  d.field(key + "vector_dtype", a.vector_dtype, b.vector_dtype);
  d.field(key + "layout", a.layout, b.layout);
  d.field(key + "fused_qkv", a.fused_qkv, b.fused_qkv);
  d.field(key + "qkv_layout", a.qkv_layout, b.qkv_layout);
  d.field(key + "preset", a.preset, b.preset);
  d.field(key + "max_part_bytes", a.max_part_bytes, b.max_part_bytes);
  d.field(key + "ignore", a.ignore, b.ignore);
  compare_names(d, key + "names.", a.names, b.names);
  compare_names(d, key + second_names, a.encoder_names, b.encoder_names);
  std::set<Role> typed;
  for (const auto& [role, dtypes] : a.role_dtypes) typed.insert(role);
  for (const auto& [role, dtypes] : b.role_dtypes) typed.insert(role);
  for (const Role role : typed) {
    auto list = [&](const Weights& w) {
      const auto it = w.role_dtypes.find(role);
      if (it == w.role_dtypes.end()) return std::string("(none)");
      std::string out;
      for (DType dt : it->second) out += (out.empty() ? "" : ", ") + std::string(dtype_name(dt));
      return it->second.size() > 1 ? "[" + out + "]" : out;
    };
    if (list(a) != list(b)) d.line(key + "dtypes." + std::string(name(role)) + ": " + list(a) + " vs " + list(b));
  }
}

// [vision.projector]: the kind, then the keys both kinds read (a pooled
// projector has no activation or bias; only merge_mlp merges).
void compare_projector(Differences& d, const Projector& a, const Projector& b) {
  d.field("vision.projector.kind", a.kind, b.kind);
  const auto both = [&](std::initializer_list<ProjectorKind> kinds) {
    const auto in = [&](ProjectorKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
    return in(a.kind) && in(b.kind);
  };
  using enum ProjectorKind;
  if (both({Mlp, MergeMlp})) {
    d.field("vision.projector.activation", a.activation, b.activation);
    d.field("vision.projector.intermediate", a.intermediate, b.intermediate);
  }
  if (both({Mlp, MergeMlp, Linear})) d.field("vision.projector.bias", a.bias, b.bias);
  if (both({MergeMlp})) d.field("vision.projector.merge", a.merge, b.merge);
  if (both({Pooled})) d.field("vision.projector.tokens", a.tokens, b.tokens);
  if (both({MergeMlp, Pooled})) {
    d.field("vision.projector.norm", a.norm, b.norm);
    d.field("vision.projector.norm_unit_offset", a.norm_unit_offset, b.norm_unit_offset);
    d.field("vision.projector.eps", a.eps, b.eps);
  }
}

void compare_vision(Differences& d, const Vision& a, const Vision& b) {
  d.field("vision", a.enabled, b.enabled);
  if (!a.enabled || !b.enabled) return;
  d.field("vision.connection", a.connection, b.connection);
  d.field("vision.channels", a.channels, b.channels);
  d.field("vision.patch", a.patch, b.patch);
  d.field("vision.image_size", a.image_size, b.image_size);
  d.field("vision.longest_edge", a.longest_edge, b.longest_edge);
  d.field("vision.tiles", a.tiles, b.tiles);
  d.field("vision.hidden", a.dims.hidden, b.dims.hidden);
  d.field("vision.layers", a.dims.layers, b.dims.layers);
  d.field("vision.heads", a.dims.heads, b.dims.heads);
  d.field("vision.head_dim", a.dims.head_dim, b.dims.head_dim);
  d.field("vision.intermediate", a.dims.intermediate, b.dims.intermediate);
  compare_norm(d, "vision.norm.", a.norm, b.norm);
  compare_attention(d, "vision.attention.", a.attention, b.attention, a.dims.layers, b.dims.layers);
  compare_mlp(d, "vision.mlp.", a.mlp, b.mlp);
  d.field("vision.positions", a.positions, b.positions);
  if (a.positions == VisionPositions::Rope2D && b.positions == VisionPositions::Rope2D) {
    d.field("vision.rope_theta", a.rope_theta, b.rope_theta);
    d.field("vision.rope_pairing", a.rope_pairing, b.rope_pairing);
  }
  d.field("vision.class_token", a.class_token, b.class_token);
  d.field("vision.patch_bias", a.patch_bias, b.patch_bias);
  d.field("vision.pre_norm", a.pre_norm, b.pre_norm);
  d.field("vision.post_norm", a.post_norm, b.post_norm);
  // The hidden state read, however counted (−1 and 24 of 24 layers are one).
  if (a.dims.layers != b.dims.layers || a.layers_run() != b.layers_run())
    d.field("vision.feature_layer", a.feature_layer, b.feature_layer);
  d.field("vision.extra_feature_layers", a.extra_feature_layers, b.extra_feature_layers);
  d.field("vision.global_layers", a.global_layers, b.global_layers);
  // Without a class token there is no row to drop.
  if (a.class_token || b.class_token) d.field("vision.drop_class_token", a.drop_class_token, b.drop_class_token);
  d.field("vision.image_bidirectional", a.image_bidirectional, b.image_bidirectional);
  d.field("vision.cross_layers", a.cross_layers, b.cross_layers);
  compare_projector(d, a.projector, b.projector);
  d.field("vision.tokens.marker", a.tokens.marker, b.tokens.marker);
  d.field("vision.tokens.image", a.tokens.image, b.tokens.image);
  d.field("vision.tokens.row_end", a.tokens.row_end, b.tokens.row_end);
  d.field("vision.tokens.end", a.tokens.end, b.tokens.end);
  d.field("vision.tokens.prefix", a.tokens.prefix, b.tokens.prefix);
  d.field("vision.tokens.suffix", a.tokens.suffix, b.tokens.suffix);
  compare_weights(d, "vision.weights.", "global_names.", a.weights, b.weights);
}

}  // namespace

std::vector<std::string> spec_differences(const Spec& a, const Spec& b) {
  Differences d;
  d.field("model.stack", a.stack, b.stack);
  d.field("model.decoder_start", a.decoder_start, b.decoder_start);
  d.field("dims.encoder_layers", a.encoder_layers(), b.encoder_layers());
  d.field("embedding.token_types", a.embedding.token_types, b.embedding.token_types);
  d.field("embedding.rows", a.embedding_rows(), b.embedding_rows());
  d.field("pooling.kind", a.pooling.kind, b.pooling.kind);
  d.field("pooling.normalize", a.pooling.normalize, b.pooling.normalize);
  d.field("dims.hidden", a.dims.hidden, b.dims.hidden);
  d.field("dims.layers", a.dims.layers, b.dims.layers);
  d.field("dims.heads", a.dims.heads, b.dims.heads);
  d.field("dims.kv_heads", a.dims.kv_heads, b.dims.kv_heads);
  d.field("dims.head_dim", a.dims.head_dim, b.dims.head_dim);
  d.field("dims.intermediate", a.dims.intermediate, b.dims.intermediate);
  d.field("dims.vocab", a.dims.vocab, b.dims.vocab);
  d.field("dims.max_context", a.dims.max_context, b.dims.max_context);

  compare_norm(d, "norm.", a.norm, b.norm);
  compare_attention(d, "attention.", a.attention, b.attention, a.dims.layers, b.dims.layers);

  const Position& ap = a.position;
  const Position& bp = b.position;
  d.field("position.kind", ap.kind, bp.kind);
  d.field("position.pairing", ap.pairing, bp.pairing);
  d.field("position.rotary_dim", ap.rotary_dim, bp.rotary_dim);
  d.field("position.theta", ap.theta, bp.theta);
  d.field("position.local_theta", ap.local_theta, bp.local_theta);
  d.field("position.offset", ap.offset, bp.offset);
  d.field("position.table_size", ap.table_size, bp.table_size);
  if (ap.kind == PositionKind::Relative && bp.kind == PositionKind::Relative) {
    d.field("position.buckets", ap.buckets, bp.buckets);
    d.field("position.max_distance", ap.max_distance, bp.max_distance);
  }
  const RopeScalingParams& as = ap.scaling;
  const RopeScalingParams& bs = bp.scaling;
  d.field("position.scaling.kind", as.kind, bs.kind);
  d.field("position.scaling.factor", as.factor, bs.factor);
  d.field("position.scaling.low_freq_factor", as.low_freq_factor, bs.low_freq_factor);
  d.field("position.scaling.high_freq_factor", as.high_freq_factor, bs.high_freq_factor);
  d.field("position.scaling.original_max_context", as.original_max_context, bs.original_max_context);
  d.field("position.scaling.beta_fast", as.beta_fast, bs.beta_fast);
  d.field("position.scaling.beta_slow", as.beta_slow, bs.beta_slow);
  d.field("position.scaling.attention_factor", as.attention_factor, bs.attention_factor);
  d.field("position.scaling.mscale", as.mscale, bs.mscale);
  d.field("position.scaling.mscale_all_dim", as.mscale_all_dim, bs.mscale_all_dim);

  compare_mlp(d, "mlp.", a.mlp, b.mlp);

  d.field("mla", a.mla.enabled, b.mla.enabled);
  if (a.mla.enabled && b.mla.enabled) {
    d.field("mla.q_lora_rank", a.mla.q_lora_rank, b.mla.q_lora_rank);
    d.field("mla.kv_lora_rank", a.mla.kv_lora_rank, b.mla.kv_lora_rank);
    d.field("mla.qk_nope_head_dim", a.mla.qk_nope_head_dim, b.mla.qk_nope_head_dim);
    d.field("mla.qk_rope_head_dim", a.mla.qk_rope_head_dim, b.mla.qk_rope_head_dim);
    d.field("mla.v_head_dim", a.mla.v_head_dim, b.mla.v_head_dim);
    d.field("mla.split_kv_b", a.mla.split_kv_b, b.mla.split_kv_b);
  }
  d.field("ssm.kind", a.ssm.kind, b.ssm.kind);
  if (a.ssm.enabled() && b.ssm.enabled()) {
    d.field("ssm.d_state", a.ssm.d_state, b.ssm.d_state);
    d.field("ssm.d_conv", a.ssm.d_conv, b.ssm.d_conv);
    d.field("ssm.d_inner", a.ssm.d_inner, b.ssm.d_inner);
    d.field("ssm.dt_rank", a.ssm.dt_rank, b.ssm.dt_rank);
    d.field("ssm.heads", a.ssm.heads, b.ssm.heads);
    d.field("ssm.head_dim", a.ssm.head_dim, b.ssm.head_dim);
    d.field("ssm.groups", a.ssm.groups, b.ssm.groups);
    d.field("ssm.dt_min", a.ssm.dt_min, b.ssm.dt_min);
    d.field("ssm.dt_max", a.ssm.dt_max, b.ssm.dt_max);
    d.field("ssm.a_log", a.ssm.a_log, b.ssm.a_log);
    d.field("ssm.attention_layers", a.ssm.attention_layers, b.ssm.attention_layers);
    d.field("ssm.conv_bias", a.ssm.conv_bias, b.ssm.conv_bias);
    d.field("ssm.bias", a.ssm.bias, b.ssm.bias);
  }
  d.field("moe.experts", a.moe.experts, b.moe.experts);
  if (a.moe.enabled() && b.moe.enabled()) {
    d.field("moe.top_k", a.moe.top_k, b.moe.top_k);
    d.field("moe.norm_topk_prob", a.moe.norm_topk_prob, b.moe.norm_topk_prob);
    d.field("moe.expert_intermediate", a.moe.expert_intermediate, b.moe.expert_intermediate);
    d.field("moe.shared_experts", a.moe.shared_experts, b.moe.shared_experts);
    d.field("moe.shared_intermediate", a.moe.shared_intermediate, b.moe.shared_intermediate);
    d.field("moe.shared_expert_gate", a.moe.shared_expert_gate, b.moe.shared_expert_gate);
    d.field("moe.scoring", a.moe.scoring, b.moe.scoring);
    d.field("moe.correction_bias", a.moe.correction_bias, b.moe.correction_bias);
    d.field("moe.groups", a.moe.groups, b.moe.groups);
    d.field("moe.topk_groups", a.moe.topk_groups, b.moe.topk_groups);
    d.field("moe.group_score", a.moe.group_score, b.moe.group_score);
    d.field("moe.routed_scaling_factor", a.moe.routed_scaling_factor, b.moe.routed_scaling_factor);
    d.field("moe.sparse_step", a.moe.sparse_step, b.moe.sparse_step);
    if (a.moe.dense_layers != b.moe.dense_layers) d.line("moe.dense_layers differ");
  }

  d.field("embedding.tied", a.embedding.tied, b.embedding.tied);
  d.field("embedding.norm", a.embedding.norm, b.embedding.norm);
  // The factor the model multiplies by, however written ("sqrt_hidden" is
  // a number once the dtype is known).
  if (a.embedding.scale != b.embedding.scale)
    d.line("embedding.scale: " +
           (a.embedding.scale_sqrt_hidden ? "\"sqrt_hidden\" (" + text(a.embedding.scale) + ")" : text(a.embedding.scale)) +
           " vs " +
           (b.embedding.scale_sqrt_hidden ? "\"sqrt_hidden\" (" + text(b.embedding.scale) + ")" : text(b.embedding.scale)));
  d.field("output.softcap", a.output.softcap, b.output.softcap);
  d.field("output.bias", a.output.bias, b.output.bias);
  d.field("output.scale", a.output.scale, b.output.scale);

  compare_weights(d, "weights.", "encoder_names.", a.weights, b.weights);
  compare_vision(d, a.vision, b.vision);

  d.field("cache.dtype", a.cache.dtype, b.cache.dtype);
  return d.take();
}

}  // namespace lathe::spec
