#include "generator/spec/compare.hpp"

#include <charconv>
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

// Which layers are windowed: the meaning of sliding_window + window_pattern.
std::vector<bool> windowed_layers(const Spec& s) {
  std::vector<bool> out;
  for (int64_t i = 0; i < s.dims.layers; ++i) out.push_back(s.attention.windowed(i));
  return out;
}

}  // namespace

std::vector<std::string> spec_differences(const Spec& a, const Spec& b) {
  Differences d;
  d.field("model.stack", a.stack, b.stack);
  d.field("model.decoder_start", a.decoder_start, b.decoder_start);
  d.field("dims.encoder_layers", a.encoder_layers(), b.encoder_layers());
  d.field("embedding.token_types", a.embedding.token_types, b.embedding.token_types);
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

  d.field("norm.kind", a.norm.kind, b.norm.kind);
  d.field("norm.eps", a.norm.eps, b.norm.eps);
  d.field("norm.placement", a.norm.placement, b.norm.placement);
  d.field("norm.unit_offset", a.norm.unit_offset, b.norm.unit_offset);
  d.field("norm.bias", a.norm.bias, b.norm.bias);
  d.field("norm.final", a.norm.final_norm, b.norm.final_norm);
  d.field("norm.parallel_shared", a.norm.parallel_shared, b.norm.parallel_shared);

  const Attention& aa = a.attention;
  const Attention& ba = b.attention;
  d.field("attention.q_bias", aa.q_bias, ba.q_bias);
  d.field("attention.k_bias", aa.k_bias, ba.k_bias);
  d.field("attention.v_bias", aa.v_bias, ba.v_bias);
  d.field("attention.o_bias", aa.o_bias, ba.o_bias);
  d.field("attention.scale", aa.scale, ba.scale);
  d.field("attention.softcap", aa.softcap, ba.softcap);
  d.field("attention.qk_norm", aa.qk_norm, ba.qk_norm);
  d.field("attention.sliding_window", aa.sliding_window, ba.sliding_window);
  if (a.dims.layers == b.dims.layers && windowed_layers(a) != windowed_layers(b))
    d.line("attention.window_pattern: " + text(aa.window_pattern) + " vs " + text(ba.window_pattern) +
           " (windowed layers differ)");

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

  d.field("mlp.activation", a.mlp.activation, b.mlp.activation);
  d.field("mlp.gated", a.mlp.gated, b.mlp.gated);
  d.field("mlp.bias", a.mlp.bias, b.mlp.bias);
  d.field("mlp.fused_gate_up", a.mlp.fused_gate_up, b.mlp.fused_gate_up);

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

  const Weights& aw = a.weights;
  const Weights& bw = b.weights;
  d.field("weights.dtype", aw.dtype, bw.dtype);
  d.field("weights.vector_dtype", aw.vector_dtype, bw.vector_dtype);
  d.field("weights.layout", aw.layout, bw.layout);
  d.field("weights.fused_qkv", aw.fused_qkv, bw.fused_qkv);
  d.field("weights.qkv_layout", aw.qkv_layout, bw.qkv_layout);
  d.field("weights.preset", aw.preset, bw.preset);
  d.field("weights.max_part_bytes", aw.max_part_bytes, bw.max_part_bytes);
  d.field("weights.ignore", aw.ignore, bw.ignore);
  // Module paths by role: the decoder's and stack tensors', then an
  // encoder–decoder's encoder layers'.
  const auto names = [&](const std::string& key, const std::map<Role, std::string>& na,
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
  };
  names("weights.names.", aw.names, bw.names);
  names("weights.encoder_names.", aw.encoder_names, bw.encoder_names);
  std::set<Role> typed;
  for (const auto& [role, dtypes] : aw.role_dtypes) typed.insert(role);
  for (const auto& [role, dtypes] : bw.role_dtypes) typed.insert(role);
  for (const Role role : typed) {
    auto list = [&](const Weights& w) {
      const auto it = w.role_dtypes.find(role);
      if (it == w.role_dtypes.end()) return std::string("(none)");
      std::string out;
      for (DType dt : it->second) out += (out.empty() ? "" : ", ") + std::string(dtype_name(dt));
      return it->second.size() > 1 ? "[" + out + "]" : out;
    };
    if (list(aw) != list(bw)) d.line("weights.dtypes." + std::string(name(role)) + ": " + list(aw) + " vs " + list(bw));
  }

  d.field("cache.dtype", a.cache.dtype, b.cache.dtype);
  return d.take();
}

}  // namespace lathe::spec
