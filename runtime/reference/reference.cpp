#include "runtime/reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>

namespace lathe::reference {

using spec::Role;

namespace {

[[noreturn]] void unsupported(const std::string& field) {
  throw std::invalid_argument("reference: not supported: " + field);
}

// splitmix64: small, portable, the same on every platform (std::uniform_*
// distributions are not).
uint64_t next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }
// torch's softplus (beta 1, threshold 20): linear above the threshold.
double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }

// A state-space layer's decay A from what the checkpoint holds: A_log
// (A = −exp(A_log)), or A itself (llama.cpp's ssm_a).
double ssm_a(const spec::Ssm& m, float stored) {
  return m.a_log ? -std::exp(static_cast<double>(stored)) : static_cast<double>(stored);
}

double uniform(uint64_t& state) {  // [-1, 1)
  return static_cast<double>(next(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

void check_supported(const spec::Spec& s) {
  if (s.position.kind == spec::PositionKind::Sinusoidal) unsupported("position.kind");
  if (s.position.kind == spec::PositionKind::Rope) {
    if (s.position.rotary_dim % 2 != 0 || s.position.rotary_dim > s.dims.head_dim)
      unsupported("position.rotary_dim");
  }
  if ((!s.ssm.enabled() || s.ssm.hybrid()) && s.dims.heads % s.dims.kv_heads != 0) unsupported("dims.kv_heads");
}

}  // namespace

Weights random_weights(const spec::Spec& spec, uint64_t seed, float scale) {
  Weights w;
  uint64_t state = seed;
  // The model's tensors, then a vision tower's (its norms' unit offset its projector's own).
  const auto fill = [&](const spec::Manifest& manifest, bool vision) {
    for (const spec::TensorSpec& t : manifest.tensors) {
      std::vector<float> values(static_cast<size_t>(t.elements()));
      const bool unit_offset =
          vision ? t.role == Role::ProjNorm && spec.vision.projector.norm_unit_offset : spec.norm.unit_offset;
      const bool near_one = is_norm(t.role) && !t.bias && !unit_offset;
      for (float& v : values) {
        const double u = uniform(state);
        const std::optional<double> ssm = ssm_parameter(t.role, t.bias, spec.ssm.a_log, (u + 1.0) / 2.0);
        v = static_cast<float>(ssm ? *ssm : (near_one ? 1.0 : 0.0) + scale * u);
      }
      std::vector<float>& stored = w.tensors[t.name];
      if (t.slice > 0) stored.insert(stored.end(), values.begin(), values.end());  // the next slice of a stack
      else stored = std::move(values);
    }
  };
  fill(spec::build_manifest(spec), false);
  fill(spec::build_vision_manifest(spec), true);
  return w;
}

std::span<const float> Weights::of(const std::string& name, int64_t slice, int64_t elements) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw std::invalid_argument("reference: missing tensor " + name);
  const size_t first = static_cast<size_t>(std::max<int64_t>(slice, 0) * elements);
  const bool fits = slice >= 0 ? it->second.size() >= first + static_cast<size_t>(elements)
                               : it->second.size() == static_cast<size_t>(elements);
  if (!fits)
    throw std::invalid_argument("reference: tensor " + name + " has " + std::to_string(it->second.size()) +
                                " elements, the manifest says " + std::to_string(elements) +
                                (slice >= 0 ? " in slice " + std::to_string(slice) : ""));
  return std::span<const float>(it->second).subspan(first, static_cast<size_t>(elements));
}

Rope rope_of(const spec::Spec& spec, int64_t seq_len) {
  const spec::Position& pos = spec.position;
  const spec::RopeScalingParams& sc = pos.scaling;
  const int64_t dim = pos.rotary_dim;
  double theta = pos.theta;
  // Dynamic NTK: past the original context the base grows with the
  // sequence length of the call, θ · (f · L / O − (f − 1))^(d / (d − 2)).
  if (sc.kind == spec::RopeScaling::DynamicNtk && seq_len > sc.original_max_context) {
    const double ratio = sc.factor * static_cast<double>(seq_len) / static_cast<double>(sc.original_max_context) -
                         (sc.factor - 1.0);
    theta *= std::pow(ratio, static_cast<double>(dim) / static_cast<double>(dim - 2));
  }
  Rope rope;
  for (int64_t i = 0; i < dim / 2; ++i)
    rope.inv_freq.push_back(1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim)));
  switch (sc.kind) {
    case spec::RopeScaling::None:
    case spec::RopeScaling::DynamicNtk:  // the base, above
      break;
    case spec::RopeScaling::Linear:
      for (double& f : rope.inv_freq) f /= sc.factor;
      break;
    case spec::RopeScaling::Llama3: {
      // Long wavelengths are slowed by `factor`, short ones kept, and those
      // between blended by where the old context falls in the band.
      const double old_context = static_cast<double>(sc.original_max_context);
      const double low_wavelen = old_context / sc.low_freq_factor;
      const double high_wavelen = old_context / sc.high_freq_factor;
      for (double& f : rope.inv_freq) {
        const double wavelen = 2.0 * std::numbers::pi / f;
        if (wavelen < high_wavelen) continue;
        if (wavelen > low_wavelen) {
          f /= sc.factor;
          continue;
        }
        const double smooth = (old_context / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        f = (1.0 - smooth) * f / sc.factor + smooth * f;
      }
      break;
    }
    case spec::RopeScaling::Yarn: {
      // Dims that turn fewer than beta_slow times over the original context
      // are interpolated (slowed by `factor`), those that turn more than
      // beta_fast times extrapolated (kept), with a linear ramp between;
      // cos and sin are scaled by the attention factor.
      const double base = pos.theta, d = static_cast<double>(dim);
      const double original = static_cast<double>(sc.original_max_context);
      auto correction_dim = [&](double rotations) {
        return d * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
      };
      const double low = std::max(std::floor(correction_dim(sc.beta_fast)), 0.0);
      double high = std::min(std::ceil(correction_dim(sc.beta_slow)), d - 1.0);
      if (low == high) high += 0.001;
      for (size_t i = 0; i < rope.inv_freq.size(); ++i) {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolation = 1.0 - ramp;  // the share kept as it was
        const double f = rope.inv_freq[i];
        rope.inv_freq[i] = f / sc.factor * (1.0 - extrapolation) + f * extrapolation;
      }
      rope.scale = sc.attention_factor ? *sc.attention_factor : 0.1 * std::log(sc.factor) + 1.0;
      break;
    }
  }
  return rope;
}

namespace {

// Turns each of a head's `half` pairs by angle(i), cos and sin scaled by `scale`.
template <class Angle>
void rotate_pairs(double* head, int64_t half, spec::RopePairing pairing, double scale, Angle angle) {
  for (int64_t i = 0; i < half; ++i) {
    const double a_i = angle(i);
    const double c = std::cos(a_i) * scale, s = std::sin(a_i) * scale;
    const int64_t a = pairing == spec::RopePairing::Neox ? i : 2 * i;
    const int64_t b = pairing == spec::RopePairing::Neox ? i + half : 2 * i + 1;
    const double x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
  }
}

}  // namespace

void apply_rope(double* head, const Rope& rope, spec::RopePairing pairing, int64_t position) {
  rotate_pairs(head, static_cast<int64_t>(rope.inv_freq.size()), pairing, rope.scale,
               [&](int64_t i) { return static_cast<double>(position) * rope.inv_freq[static_cast<size_t>(i)]; });
}

void apply_rope_2d(double* head, const Rope& rope, int64_t row, int64_t col, spec::RopePairing pairing) {
  const int64_t half = static_cast<int64_t>(rope.inv_freq.size()), quarter = half / 2;
  rotate_pairs(head, half, pairing, 1.0, [&](int64_t i) {
    return i < quarter ? static_cast<double>(row) * rope.inv_freq[static_cast<size_t>(2 * i)]
                       : static_cast<double>(col) * rope.inv_freq[static_cast<size_t>(2 * (i - quarter) + 1)];
  });
}

void apply_rope(double* head, int64_t rotary_dim, double theta, spec::RopePairing pairing, int64_t position) {
  Rope rope;
  for (int64_t i = 0; i < rotary_dim / 2; ++i)
    rope.inv_freq.push_back(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim)));
  apply_rope(head, rope, pairing, position);
}

int64_t relative_bucket(int64_t r, bool bidirectional, int64_t buckets, int64_t max_distance) {
  int64_t bucket = 0;
  if (bidirectional) {
    buckets /= 2;
    if (r > 0) bucket += buckets;
    r = std::abs(r);
  } else {
    r = -std::min<int64_t>(r, 0);
  }
  const int64_t max_exact = buckets / 2;
  if (r < max_exact) return bucket + r;
  const float large = std::log(static_cast<float>(r) / static_cast<float>(max_exact)) /
                      static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact))) *
                      static_cast<float>(buckets - max_exact);
  return bucket + std::min<int64_t>(max_exact + static_cast<int64_t>(large), buckets - 1);
}

Reference::Reference(const spec::Spec& spec, const Weights& weights) : spec_(spec) {
  check_supported(spec_);
  if (spec_.position.kind == spec::PositionKind::Rope) {
    rope_ = rope_of(spec_);
    // Gemma 3's windowed layers: a default RoPE of their own base.
    if (spec_.position.local_theta)
      for (int64_t i = 0; i < spec_.position.rotary_dim / 2; ++i)
        local_rope_.inv_freq.push_back(std::pow(*spec_.position.local_theta,
                                                -2.0 * static_cast<double>(i) / static_cast<double>(spec_.position.rotary_dim)));
  }
  for (const spec::TensorSpec& t : spec::build_manifest(spec_).tensors) {
    const bool one_row = t.shape.size() == 1 && read_as_matrix(t.role, t.bias, 1);  // [1, N]
    tensors_[{t.role, t.bias, t.layer, t.expert}] =
        Tensor{weights.of(t.name, t.slice, t.elements()).data(), one_row ? std::vector<int64_t>{1, t.shape[0]} : t.shape};
  }

  // A vision tower: its layers a Reference of their own (a tiled tower's
  // global layers another, with their gates), its patch embedding, class
  // token, tile tables and projector here.
  if (spec_.vision.enabled) {
    const spec::Vision& v = spec_.vision;
    tower_ = std::make_unique<Reference>(spec::vision_tower(spec_), weights);
    if (v.positions == spec::VisionPositions::Rope2D) tower_->rope_2d_side_ = v.grid();
    if (v.global_layers > 0) global_ = std::make_unique<Reference>(spec::vision_global_layers(spec_), weights);
    for (const spec::TensorSpec& t : spec::build_vision_manifest(spec_).tensors) {
      const Tensor value{weights.of(t.name, t.slice, t.elements()).data(), t.shape};
      if (spec::component_of(t.role) == spec::Component::Vision) tensors_[{t.role, t.bias, t.layer, t.expert}] = value;
      else if (t.role == Role::PosEmbed && v.tiles > 0) tile_positions_ = value;
      // (The vision manifest numbers the global layers after the local ones.)
      else if (t.role == Role::AttnGate) global_->layers_.at(static_cast<size_t>(t.layer - v.dims.layers)).attn_gate = value.data;
      else if (t.role == Role::MlpGate) global_->layers_.at(static_cast<size_t>(t.layer - v.dims.layers)).mlp_gate = value.data;
    }
  }

  if (spec_.dims.vocab > 0) embed_ = tensor(Role::Embed, false, -1);
  if (!spec_.encoder()) lm_head_ = spec_.embedding.tied ? embed_ : tensor(Role::LmHead, false, -1);
  lm_head_bias_ = optional(Role::LmHead, true, -1);
  if (!lm_head_bias_) lm_head_bias_ = optional(Role::LogitsBias, false, -1);  // BART's final_logits_bias
  if (spec_.embedding.token_types > 0) token_types_ = tensor(Role::TokenTypes, false, -1);
  // Each stack's tables: an encoder–decoder's encoder has its own.
  const auto stack_of = [&](Role pos, Role rel, Role embed_norm, Role final_norm, bool bidirectional, int64_t first,
                            int64_t end) {
    Stack st;
    if (spec_.position.kind == spec::PositionKind::Learned) st.pos_embed = tensor(pos, false, -1);
    if (spec_.position.kind == spec::PositionKind::Relative) st.rel_bias = tensor(rel, false, -1);
    if (spec_.embedding.norm) st.embed_norm = norm(embed_norm, -1);
    if (spec_.norm.final_norm) st.final_norm = norm(final_norm, -1);
    st.bidirectional = bidirectional;
    st.first = static_cast<size_t>(first);
    st.end = static_cast<size_t>(end);
    return st;
  };
  stack_ = stack_of(Role::PosEmbed, Role::RelBias, Role::EmbedNorm, Role::FinalNorm, spec_.encoder(),
                    spec_.encoder_layers(), spec_.blocks());
  if (spec_.encoder_decoder())
    encoder_stack_ = stack_of(Role::EncoderPosEmbed, Role::EncoderRelBias, Role::EncoderEmbedNorm, Role::EncoderFinalNorm,
                              true, 0, spec_.encoder_layers());
  if (spec_.position.kind == spec::PositionKind::Alibi) {
    // Head h (1-based) of the first 2^k ≤ heads heads: 2^(−8h/2^k); the
    // rest interleave in at the odd steps of 2^(k+1) heads (BLOOM's
    // build_alibi_tensor, MPT's gen_slopes).
    const int64_t heads = spec_.dims.heads;
    const int64_t closest = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(heads))));
    const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(closest)) - 3)));
    for (int64_t h = 1; h <= closest; ++h) alibi_slopes_.push_back(std::pow(base, static_cast<double>(h)));
    const double extra = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(2 * closest)) - 3)));
    for (int64_t h = 1; static_cast<int64_t>(alibi_slopes_.size()) < heads; h += 2)
      alibi_slopes_.push_back(std::pow(extra, static_cast<double>(h)));
  }

  layers_.resize(static_cast<size_t>(spec_.blocks()));
  for (int64_t l = 0; l < spec_.blocks(); ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    if (spec_.ssm.layer(l)) {
      L.ssm_norm = norm(Role::SsmNorm, l);
      L.ssm_in = linear(Role::SsmIn, l);
      L.ssm_conv = tensor(Role::SsmConv, false, l).data;
      L.ssm_conv_bias = optional(Role::SsmConv, true, l);
      if (spec_.ssm.mamba2()) {
        L.ssm_dt_bias = tensor(Role::SsmDtBias, false, l).data;
        L.ssm_gate_norm = norm(Role::SsmGateNorm, l);
      } else {
        L.ssm_x = linear(Role::SsmX, l);
        L.ssm_dt = linear(Role::SsmDt, l);
      }
      L.ssm_a_log = tensor(Role::SsmA, false, l).data;
      L.ssm_d = tensor(Role::SsmD, false, l).data;
      L.ssm_out = linear(Role::SsmOut, l);
      if (!spec_.ssm.hybrid()) continue;
      // A hybrid's state-space layer: its MLP after the mixer (pre-norm, dense).
      L.mlp_norm = norm(Role::MlpNorm, l);
      L.mlp = mlp_weights(Role::Gate, Role::Up, Role::Down, l, -1);
      continue;
    }
    if (spec_.vision.cross_layer(l)) {
      // MllamaCrossAttentionDecoderLayer: no self-attention; its norms
      // before each branch, the cross-attention and the gates.
      L.image_cross = true;
      L.attn_norm = norm(Role::AttnNorm, l);
      L.mlp_norm = norm(Role::MlpNorm, l);
      L.cross_q = linear(Role::CrossQ, l);
      L.cross_k = linear(Role::CrossK, l);
      L.cross_v = linear(Role::CrossV, l);
      L.cross_o = linear(Role::CrossO, l);
      L.cross_q_norm = norm(Role::CrossQNorm, l);
      L.cross_k_norm = norm(Role::CrossKNorm, l);
      L.attn_gate = tensor(Role::AttnGate, false, l).data;
      L.mlp_gate = tensor(Role::MlpGate, false, l).data;
      L.mlp = mlp_weights(Role::Gate, Role::Up, Role::Down, l, -1);
      continue;
    }
    if (spec_.encoder_decoder() && l >= spec_.encoder_layers()) {
      L.cross_norm = norm(Role::CrossNorm, l);
      L.cross_q = linear(Role::CrossQ, l);
      L.cross_k = linear(Role::CrossK, l);
      L.cross_v = linear(Role::CrossV, l);
      L.cross_o = linear(Role::CrossO, l);
    }
    const spec::NormPlacement placement = spec_.norm.placement;
    if (placement != spec::NormPlacement::BranchOutput && (l > 0 || spec_.norm.first_attn_norm))
      L.attn_norm = norm(Role::AttnNorm, l);
    if (placement != spec::NormPlacement::BranchOutput &&
        !(placement == spec::NormPlacement::Parallel && spec_.norm.parallel_shared))
      L.mlp_norm = norm(Role::MlpNorm, l);
    if (placement == spec::NormPlacement::Sandwich || placement == spec::NormPlacement::BranchOutput) {
      L.attn_post_norm = norm(Role::AttnPostNorm, l);
      L.mlp_post_norm = norm(Role::MlpPostNorm, l);
    }
    if (spec_.attention.qk_norm != spec::QKNorm::None) {
      L.q_norm = norm(Role::QNorm, l);
      L.k_norm = norm(Role::KNorm, l);
    }
    if (spec_.mla.enabled) {
      if (spec_.mla.q_lora_rank > 0) {
        L.q_a = linear(Role::QA, l);
        L.q_a_norm = norm(Role::QANorm, l);
        L.q_b = linear(Role::QB, l);
      } else {
        L.q = linear(Role::Q, l);
      }
      L.kv_a = linear(Role::KvA, l);
      L.kv_a_norm = norm(Role::KvANorm, l);
      L.kv_b = spec_.mla.split_kv_b ? joined_kv_b(l) : linear(Role::KvB, l);
    } else if (spec_.weights.fused_qkv) {
      L.qkv = linear(Role::Qkv, l);
    } else {
      L.q = linear(Role::Q, l);
      L.k = linear(Role::K, l);
      L.v = linear(Role::V, l);
    }
    L.o = linear(Role::O, l);
    if (spec_.moe.sparse(l)) {
      const spec::Moe& m = spec_.moe;
      L.router = linear(Role::Router, l);
      if (m.correction_bias) L.router_bias = tensor(Role::RouterBias, false, l).data;
      for (int64_t e = 0; e < m.experts; ++e)
        L.experts.push_back(mlp_weights(Role::ExpertGate, Role::ExpertUp, Role::ExpertDown, l, e));
      if (m.shared_experts > 0) L.shared = mlp_weights(Role::SharedGate, Role::SharedUp, Role::SharedDown, l, -1);
      if (m.shared_expert_gate) L.shared_gate = linear(Role::SharedExpertGate, l);
    } else if (spec_.mlp.gated && spec_.mlp.fused_gate_up != spec::FusedGateUp::None) {
      L.mlp.gate_up = linear(Role::GateUp, l);
      L.mlp.down = linear(Role::Down, l);
    } else {
      L.mlp = mlp_weights(Role::Gate, Role::Up, Role::Down, l, -1);
    }
  }
}

Reference::MlpW Reference::mlp_weights(Role gate, Role up, Role down, int64_t layer, int64_t expert) const {
  MlpW w;
  if (spec_.mlp.gated) w.gate = linear(gate, layer, expert);
  w.up = linear(up, layer, expert);
  w.down = linear(down, layer, expert);
  return w;
}

const Reference::Tensor& Reference::tensor(Role role, bool bias, int64_t layer, int64_t expert) const {
  auto it = tensors_.find({role, bias, layer, expert});
  if (it == tensors_.end())
    throw std::invalid_argument(std::string("reference: the manifest has no ") + spec::name(role) +
                                (bias ? " bias" : " weight") +
                                (layer >= 0 ? " in layer " + std::to_string(layer) : std::string()) +
                                (expert >= 0 ? " of expert " + std::to_string(expert) : std::string()));
  return it->second;
}

const float* Reference::optional(Role role, bool bias, int64_t layer, int64_t expert) const {
  auto it = tensors_.find({role, bias, layer, expert});
  return it == tensors_.end() ? nullptr : it->second.data;
}

Reference::Linear Reference::linear(Role role, int64_t layer, int64_t expert) const {
  Linear l;
  l.weight = tensor(role, false, layer, expert);
  l.bias = optional(role, true, layer, expert);
  l.transposed = spec_.weights.layout == spec::Layout::InOut && spec::is_linear(role);
  l.out = l.weight.shape.at(l.transposed ? 1 : 0);
  l.in = l.weight.shape.at(l.transposed ? 0 : 1);
  return l;
}

Reference::Linear Reference::joined_kv_b(int64_t layer) {
  const spec::Mla& m = spec_.mla;
  const int64_t heads = spec_.dims.heads, nope = m.qk_nope_head_dim, rank = m.kv_lora_rank, vd = m.v_head_dim;
  const float* k_b = tensor(Role::KB, false, layer).data;  // [heads][rank][nope]
  const float* v_b = tensor(Role::VB, false, layer).data;  // [heads][vd][rank]
  std::vector<float>& kv = joined_.emplace_back(static_cast<size_t>(heads * (nope + vd) * rank));
  for (int64_t h = 0; h < heads; ++h) {
    float* head = kv.data() + h * (nope + vd) * rank;  // W_UK [nope][rank], then W_UV [vd][rank]
    for (int64_t i = 0; i < nope; ++i)
      for (int64_t j = 0; j < rank; ++j) head[i * rank + j] = k_b[(h * rank + j) * nope + i];
    std::copy_n(v_b + h * vd * rank, vd * rank, head + nope * rank);
  }
  Linear l;
  l.weight = Tensor{kv.data(), {heads * (nope + vd), rank}};
  l.out = heads * (nope + vd);
  l.in = rank;
  return l;
}

Reference::NormW Reference::norm(Role role, int64_t layer) const {
  return NormW{tensor(role, false, layer).data, optional(role, true, layer)};
}

std::vector<double> Reference::apply(const Linear& l, const std::vector<double>& x) const {
  std::vector<double> y(static_cast<size_t>(l.out), 0.0);
  const float* w = l.weight.data;
  if (l.transposed) {  // W[i][o]
    for (int64_t i = 0; i < l.in; ++i) {
      const float* row = w + i * l.out;
      const double xi = x[static_cast<size_t>(i)];
      for (int64_t o = 0; o < l.out; ++o) y[static_cast<size_t>(o)] += static_cast<double>(row[o]) * xi;
    }
  } else {  // W[o][i]
    for (int64_t o = 0; o < l.out; ++o) {
      const float* row = w + o * l.in;
      double sum = 0;
      for (int64_t i = 0; i < l.in; ++i) sum += static_cast<double>(row[i]) * x[static_cast<size_t>(i)];
      y[static_cast<size_t>(o)] = sum;
    }
  }
  if (l.bias)
    for (int64_t o = 0; o < l.out; ++o) y[static_cast<size_t>(o)] += static_cast<double>(l.bias[o]);
  return y;
}

std::vector<double> Reference::normalize(const NormW& n, const std::vector<double>& x) const {
  return norm_values(spec_.norm.kind, spec_.norm.eps, spec_.norm.unit_offset, n.weight, n.bias, x);
}

std::vector<double> norm_values(spec::NormKind kind, double eps, bool unit_offset, const float* weight, const float* bias,
                                const std::vector<double>& x) {
  const size_t d = x.size();
  double mean = 0;
  if (kind == spec::NormKind::LayerNorm) {
    for (double v : x) mean += v;
    mean /= static_cast<double>(d);
  }
  double var = 0;
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(d);
  const double inv = 1.0 / std::sqrt(var + eps);
  std::vector<double> y(d);
  for (size_t i = 0; i < d; ++i) {
    const double scale = static_cast<double>(weight[i]) + (unit_offset ? 1.0 : 0.0);
    y[i] = (x[i] - mean) * inv * scale + (bias ? static_cast<double>(bias[i]) : 0.0);
  }
  return y;
}

// transformers' MambaMixer.slow_forward, one token at a time (its decode
// path; a prefill is these steps in turn, from the zero state).
std::vector<double> Reference::mamba(Layer& L, const std::vector<double>& h) const {
  const spec::Ssm& m = spec_.ssm;
  const size_t inner = static_cast<size_t>(m.d_inner), state = static_cast<size_t>(m.d_state);
  const size_t rank = static_cast<size_t>(m.dt_rank);
  if (L.scan_state.empty()) L.scan_state.assign(inner * state, 0.0);

  // in_proj: the first d_inner rows are the scan's input x, the rest the gate z.
  const std::vector<double> xz = apply(L.ssm_in, h);
  const std::vector<double> u = causal_conv(L, xz.data(), inner);

  // x_proj: dt (dt_rank), then B and C (d_state each); dt_proj with its bias, softplus.
  const std::vector<double> p = apply(L.ssm_x, u);
  const std::vector<double> dt_low(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(rank));
  std::vector<double> dt = apply(L.ssm_dt, dt_low);
  for (double& v : dt) v = softplus(v);
  const double* B = p.data() + rank;
  const double* C = B + state;

  // The selective scan: h = exp(dt·A)·h + dt·B·u, y = C·h + D·u, gated by SiLU(z).
  std::vector<double> y(inner);
  for (size_t c = 0; c < inner; ++c) {
    double* hs = L.scan_state.data() + c * state;
    double sum = 0;
    for (size_t n = 0; n < state; ++n) {
      const double A = ssm_a(m, L.ssm_a_log[c * state + n]);
      hs[n] = std::exp(dt[c] * A) * hs[n] + dt[c] * B[n] * u[c];
      sum += C[n] * hs[n];
    }
    y[c] = (sum + static_cast<double>(L.ssm_d[c]) * u[c]) * silu(xz[inner + c]);
  }
  return apply(L.ssm_out, y);
}

// The causal depthwise convolution (Conv1d, groups = channels, padding
// d_conv − 1, the first seq_len outputs), then SiLU: channel c's output is
// Σ_k w[c][k] · input[t − (d_conv − 1) + k], tap d_conv − 1 on this token.
std::vector<double> Reference::causal_conv(Layer& L, const double* in, size_t channels) const {
  const size_t taps = static_cast<size_t>(spec_.ssm.d_conv);
  if (L.conv_state.empty()) L.conv_state.assign(channels * (taps - 1), 0.0);
  std::vector<double> u(channels);
  for (size_t c = 0; c < channels; ++c) {
    const float* w = L.ssm_conv + c * taps;
    double* window = L.conv_state.data() + c * (taps - 1);
    double sum = static_cast<double>(w[taps - 1]) * in[c];
    for (size_t k = 0; k + 1 < taps; ++k) sum += static_cast<double>(w[k]) * window[k];
    if (L.ssm_conv_bias) sum += static_cast<double>(L.ssm_conv_bias[c]);
    u[c] = silu(sum);
    // Slide the window: drop the oldest input, append this token's.
    for (size_t k = 0; k + 2 < taps; ++k) window[k] = window[k + 1];
    if (taps > 1) window[taps - 2] = in[c];
  }
  return u;
}

// transformers' Mamba2Mixer.torch_forward in its one-token (cached) form, as
// mamba_ssm's Mamba2.step: in_proj to [z | x | B | C | dt], the conv and
// SiLU over x, B and C, per head one step dt and one decay A, the B and C of
// its group; the output gated by SiLU(z), then RMS-normed per group of
// d_inner / groups channels (mamba_ssm's RMSNormGated with group_size;
// transformers norms all of d_inner at once, the same for one group).
std::vector<double> Reference::mamba2(Layer& L, const std::vector<double>& h) const {
  const spec::Ssm& m = spec_.ssm;
  const size_t inner = static_cast<size_t>(m.d_inner), state = static_cast<size_t>(m.d_state);
  const size_t heads = static_cast<size_t>(m.heads), groups = static_cast<size_t>(m.groups);
  const size_t head_dim = inner / heads, heads_per_group = heads / groups;
  if (L.scan_state.empty()) L.scan_state.assign(inner * state, 0.0);

  const std::vector<double> p = apply(L.ssm_in, h);
  const double* z = p.data();
  const std::vector<double> u = causal_conv(L, p.data() + inner, static_cast<size_t>(m.conv_channels()));
  const double* dt_raw = p.data() + inner + static_cast<size_t>(m.conv_channels());
  const double* x = u.data();
  const double* B = x + inner;            // [groups][state]
  const double* C = B + groups * state;   // [groups][state]

  std::vector<double> y(inner);
  for (size_t hd = 0; hd < heads; ++hd) {
    double dt = softplus(dt_raw[hd] + static_cast<double>(L.ssm_dt_bias[hd]));
    dt = std::min(std::max(dt, m.dt_min), m.dt_max);
    const double A = ssm_a(m, L.ssm_a_log[hd]);
    const double decay = std::exp(dt * A);
    const size_t g = hd / heads_per_group;
    for (size_t i = 0; i < head_dim; ++i) {
      const size_t c = hd * head_dim + i;
      double* hs = L.scan_state.data() + c * state;
      double sum = 0;
      for (size_t n = 0; n < state; ++n) {
        hs[n] = decay * hs[n] + dt * B[g * state + n] * x[c];
        sum += C[g * state + n] * hs[n];
      }
      y[c] = (sum + static_cast<double>(L.ssm_d[hd]) * x[c]) * silu(z[c]);
    }
  }
  // The gated norm, each group on its own (the model's RMS norm, validated).
  const size_t width = inner / groups;
  for (size_t g = 0; g < groups; ++g) {
    const auto first = y.begin() + static_cast<std::ptrdiff_t>(g * width);
    const std::vector<double> normed =
        normalize(NormW{L.ssm_gate_norm.weight + g * width, nullptr}, std::vector<double>(first, first + static_cast<std::ptrdiff_t>(width)));
    std::copy(normed.begin(), normed.end(), first);
  }
  return apply(L.ssm_out, y);
}

double Reference::activate(double x) const { return activation(spec_.mlp.activation, x); }

double activation(spec::Activation kind, double x) {
  switch (kind) {
    case spec::Activation::SiLU: return silu(x);
    case spec::Activation::GeluErf: return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    case spec::Activation::GeluTanh: {
      const double k = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case spec::Activation::ReLU: return x > 0 ? x : 0.0;
    case spec::Activation::GeluQuick: return x / (1.0 + std::exp(-1.702 * x));
  }
  return x;
}

std::vector<double> Reference::mlp(const MlpW& w, const std::vector<double>& x) const {
  std::vector<double> a;
  if (w.gate_up.weight.data) {  // a fused gate_up: its halves in the spec's order
    const std::vector<double> both = apply(w.gate_up, x);
    const size_t width = both.size() / 2;
    const bool gate_first = spec_.mlp.fused_gate_up == spec::FusedGateUp::GateUp;
    for (size_t i = 0; i < width; ++i)
      a.push_back(activate(both[gate_first ? i : width + i]) * both[gate_first ? width + i : i]);
  } else if (spec_.mlp.gated) {
    const std::vector<double> gate = apply(w.gate, x), up = apply(w.up, x);
    for (size_t i = 0; i < gate.size(); ++i) a.push_back(activate(gate[i]) * up[i]);
  } else {
    for (double u : apply(w.up, x)) a.push_back(activate(u));
  }
  return apply(w.down, a);
}

// Mixtral / Qwen-MoE: softmax over every expert's router logit, the top_k
// largest (equal ones by lowest index, as torch.topk), their weights
// renormalized to sum 1 when norm_topk_prob, the weighted sum of those
// experts' MLPs; plus the shared expert, scaled by sigmoid(shared_gate · x).
// DeepSeek: sigmoid scores (V3); experts chosen by score + correction bias
// (V3) but weighted by the score; only among the experts of the
// topk_groups best groups, a group scored by its best expert (V2) or its
// best two (V3); the weights times routed_scaling_factor.
std::vector<double> Reference::moe(const Layer& L, const std::vector<double>& x) const {
  const spec::Moe& m = spec_.moe;
  const std::vector<double> logits = apply(L.router, x);
  std::vector<double> p(logits.size());
  if (m.scoring == spec::MoeScoring::Sigmoid) {
    for (size_t e = 0; e < p.size(); ++e) p[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  } else {
    const double top = *std::max_element(logits.begin(), logits.end());
    double total = 0;
    for (size_t e = 0; e < p.size(); ++e) total += (p[e] = std::exp(logits[e] - top));
    for (double& v : p) v /= total;
  }
  std::vector<double> by(p);  // what the experts are chosen by
  if (L.router_bias)
    for (size_t e = 0; e < by.size(); ++e) by[e] += L.router_bias[e];
  if (m.groups > 1) {
    const size_t n = by.size() / static_cast<size_t>(m.groups);
    std::vector<double> group(static_cast<size_t>(m.groups));
    for (size_t g = 0; g < group.size(); ++g) {
      std::vector<double> members(by.begin() + static_cast<std::ptrdiff_t>(g * n),
                                  by.begin() + static_cast<std::ptrdiff_t>((g + 1) * n));
      std::sort(members.begin(), members.end(), std::greater<>());
      group[g] = m.group_score == spec::GroupScore::Top2Sum ? members[0] + members[1] : members[0];
    }
    std::vector<size_t> groups(group.size());
    std::iota(groups.begin(), groups.end(), size_t{0});
    std::stable_sort(groups.begin(), groups.end(), [&](size_t a, size_t b) { return group[a] > group[b]; });
    // The experts of the other groups are never chosen.
    for (size_t r = static_cast<size_t>(m.topk_groups); r < groups.size(); ++r)
      for (size_t e = groups[r] * n; e < (groups[r] + 1) * n; ++e) by[e] = -std::numeric_limits<double>::infinity();
  }
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return by[a] > by[b]; });
  order.resize(static_cast<size_t>(m.top_k));
  double chosen = 0;
  for (size_t e : order) chosen += p[e];
  std::vector<double> out(x.size(), 0.0);
  for (size_t e : order) {
    const double weight = (m.norm_topk_prob ? p[e] / chosen : p[e]) * m.routed_scaling_factor;
    const std::vector<double> y = mlp(L.experts[e], x);
    for (size_t i = 0; i < out.size(); ++i) out[i] += weight * y[i];
  }
  if (m.shared_experts > 0) {
    const std::vector<double> y = mlp(L.shared, x);
    const double gate = m.shared_expert_gate ? 1.0 / (1.0 + std::exp(-apply(L.shared_gate, x)[0])) : 1.0;
    for (size_t i = 0; i < out.size(); ++i) out[i] += gate * y[i];
  }
  return out;
}

void Reference::reset() {
  cache_len_ = 0;
  for (size_t l = stack_.first; l < stack_.end; ++l) {
    Layer& L = layers_[l];
    L.k_cache.clear();
    L.v_cache.clear();
    L.conv_state.clear();
    L.scan_state.clear();
    if (L.image_cross) L.cross_k_cache.clear(), L.cross_v_cache.clear();
  }
  cross_allowed_.clear();
  cross_open_ = false;
}

void Reference::check_tokens(const std::vector<int32_t>& tokens) const {
  for (int32_t t : tokens)
    if (t < 0 || t >= spec_.embedding_rows())
      throw std::out_of_range("reference: token " + std::to_string(t) + " outside the vocabulary of " +
                              std::to_string(spec_.embedding_rows()));
}

std::vector<float> Reference::forward(const std::vector<int32_t>& tokens) {
  if (spec_.encoder()) return encode(tokens);
  const int64_t vocab = spec_.dims.vocab;
  if (spec_.encoder_decoder() && source_len_ == 0)
    throw std::invalid_argument("reference: an encoder-decoder's decoder attends to a source: call source() first");
  begin_pass(tokens);
  std::vector<float> logits(tokens.size() * static_cast<size_t>(vocab));
  // Causal attention: processing the tokens one by one, each seeing the cache
  // up to and including itself, is the prefill.
  for (size_t i = 0; i < tokens.size(); ++i) {
    token(tokens[i], cache_len_, logits.data() + i * static_cast<size_t>(vocab));
    ++cache_len_;
  }
  return logits;
}

void Reference::begin_pass(const std::vector<int32_t>& tokens) {
  check_tokens(tokens);
  const int64_t end = cache_len_ + static_cast<int64_t>(tokens.size());
  if (end > spec_.dims.max_context)
    throw std::out_of_range("reference: " + std::to_string(end) + " positions exceed dims.max_context = " +
                            std::to_string(spec_.dims.max_context));
  // Dynamic NTK rotates every token of a call by the call's length.
  if (spec_.position.kind == spec::PositionKind::Rope && spec_.position.scaling.kind == spec::RopeScaling::DynamicNtk)
    rope_ = rope_of(spec_, end);
}

// One token's residual stream before the blocks: its embedding, position and
// token type (row 0), and the embedding norm.
std::vector<double> Reference::embed_row(const Stack& stack, int32_t tok, int64_t p, const float* spliced) const {
  const size_t hidden = static_cast<size_t>(spec_.dims.hidden);
  std::vector<double> x(hidden);
  for (size_t i = 0; i < hidden; ++i)
    x[i] = spliced ? static_cast<double>(spliced[i])
               : static_cast<double>(embed_.data[static_cast<size_t>(tok) * hidden + i]) * spec_.embedding.scale;
  if (spec_.position.kind == spec::PositionKind::Learned) {
    const int64_t row = p + spec_.position.offset;
    if (row >= stack.pos_embed.shape.at(0))
      throw std::out_of_range("reference: position " + std::to_string(p) + " past the position table");
    for (size_t i = 0; i < hidden; ++i)
      x[i] += static_cast<double>(stack.pos_embed.data[static_cast<size_t>(row) * hidden + i]);
  }
  if (token_types_.data)  // row 0: one segment
    for (size_t i = 0; i < hidden; ++i) x[i] += static_cast<double>(token_types_.data[i]);
  if (spec_.embedding.norm) x = normalize(stack.embed_norm, x);
  return x;
}

// The block's q, k and v of one token from its (normed) input h at position
// p: projected, q/k-normed and rotated.
void Reference::project_qkv(const Layer& L, const std::vector<double>& h, int64_t p, bool windowed,
                            std::vector<double>& q, std::vector<double>& k, std::vector<double>& v) const {
  const spec::Dims& d = spec_.dims;
  const int64_t hd = d.head_dim;
  const int64_t q_width = d.heads * hd, kv_width = d.kv_heads * hd;
  const int64_t group = d.heads / d.kv_heads;
  q.assign(static_cast<size_t>(q_width), 0.0);
  k.assign(static_cast<size_t>(kv_width), 0.0);
  v.assign(static_cast<size_t>(kv_width), 0.0);
  if (spec_.weights.fused_qkv) {
    const std::vector<double> qkv = apply(L.qkv, h);
    // Head-sized pieces of the fused rows: q | k | v, or [q k v] per head
    // (GPT-NeoX, BLOOM), or per KV head its G query heads, k, v (Falcon).
    auto copy = [&](std::vector<double>& to, int64_t to_head, int64_t from_unit) {
      std::copy_n(qkv.begin() + from_unit * hd, hd, to.begin() + to_head * hd);
    };
    switch (spec_.weights.qkv_layout) {
      case QkvLayout::Blocks:
        for (int64_t hh = 0; hh < d.heads; ++hh) copy(q, hh, hh);
        for (int64_t g = 0; g < d.kv_heads; ++g) copy(k, g, d.heads + g), copy(v, g, d.heads + d.kv_heads + g);
        break;
      case QkvLayout::PerHead:
        for (int64_t hh = 0; hh < d.heads; ++hh) copy(q, hh, 3 * hh), copy(k, hh, 3 * hh + 1), copy(v, hh, 3 * hh + 2);
        break;
      case QkvLayout::Grouped:
        for (int64_t g = 0; g < d.kv_heads; ++g) {
          for (int64_t j = 0; j < group; ++j) copy(q, g * group + j, g * (group + 2) + j);
          copy(k, g, g * (group + 2) + group);
          copy(v, g, g * (group + 2) + group + 1);
        }
        break;
    }
  } else {
    q = apply(L.q, h);
    k = apply(L.k, h);
    v = apply(L.v, h);
  }
  // q/k norms (RMSNorm, before RoPE): each head over head_dim (Qwen3,
  // Gemma 3) or each projection whole (OLMo 2).
  if (spec_.attention.qk_norm != spec::QKNorm::None) {
    const bool per_head = spec_.attention.qk_norm == spec::QKNorm::PerHead;
    auto rms_norm = [&](std::vector<double>& values, const NormW& n, int64_t width) {
      for (int64_t start = 0; start < static_cast<int64_t>(values.size()); start += width) {
        double sum = 0;
        for (int64_t i = 0; i < width; ++i) sum += values[start + i] * values[start + i];
        const double inv = 1.0 / std::sqrt(sum / static_cast<double>(width) + spec_.norm.eps);
        for (int64_t i = 0; i < width; ++i) {
          const double w = static_cast<double>(n.weight[per_head ? i : start + i]);
          values[start + i] *= inv * (spec_.norm.unit_offset ? 1.0 + w : w);
        }
      }
    };
    rms_norm(q, L.q_norm, per_head ? hd : q_width);
    rms_norm(k, L.k_norm, per_head ? hd : kv_width);
  }
  if (rope_2d_side_ > 0) {
    for (int64_t hh = 0; hh < d.heads; ++hh) apply_rope_2d(q.data() + hh * hd, rope_, p / rope_2d_side_, p % rope_2d_side_, spec_.position.pairing);
    for (int64_t hh = 0; hh < d.kv_heads; ++hh) apply_rope_2d(k.data() + hh * hd, rope_, p / rope_2d_side_, p % rope_2d_side_, spec_.position.pairing);
  } else if (spec_.position.kind == spec::PositionKind::Rope) {
    const Rope& rope = windowed && spec_.position.local_theta ? local_rope_ : rope_;
    for (int64_t hh = 0; hh < d.heads; ++hh)
      apply_rope(q.data() + hh * hd, rope, spec_.position.pairing, p);
    for (int64_t hh = 0; hh < d.kv_heads; ++hh)
      apply_rope(k.data() + hh * hd, rope, spec_.position.pairing, p);
  }
}

// DeepseekV2Attention of one token: q from q_proj (or q_a_proj, its norm,
// q_b_proj); the latent and the rotary key from kv_a_proj_with_mqa, the
// latent normed, then kv_b_proj's k_nope and v of every head; RoPE on q's
// and the key's rotary parts (the key's shared by every head).
void Reference::project_mla(const Layer& L, const std::vector<double>& h, int64_t p, std::vector<double>& q,
                            std::vector<double>& k, std::vector<double>& v) const {
  const spec::Mla& m = spec_.mla;
  const int64_t heads = spec_.dims.heads, nope = m.qk_nope_head_dim, rope = m.qk_rope_head_dim;
  const int64_t qk = m.qk_head_dim(), vd = m.v_head_dim, rank = m.kv_lora_rank;
  q = m.q_lora_rank > 0 ? apply(L.q_b, normalize(L.q_a_norm, apply(L.q_a, h))) : apply(L.q, h);
  const std::vector<double> kva = apply(L.kv_a, h);
  const std::vector<double> latent = normalize(L.kv_a_norm, std::vector<double>(kva.begin(), kva.begin() + rank));
  std::vector<double> k_pe(kva.begin() + rank, kva.end());
  apply_rope(k_pe.data(), rope_, spec_.position.pairing, p);
  const std::vector<double> kv = apply(L.kv_b, latent);  // per head: k_nope, then v
  k.assign(static_cast<size_t>(heads * qk), 0.0);
  v.assign(static_cast<size_t>(heads * vd), 0.0);
  for (int64_t hh = 0; hh < heads; ++hh) {
    apply_rope(q.data() + hh * qk + nope, rope_, spec_.position.pairing, p);
    std::copy_n(kv.begin() + hh * (nope + vd), nope, k.begin() + hh * qk);
    std::copy_n(k_pe.begin(), rope, k.begin() + hh * qk + nope);
    std::copy_n(kv.begin() + hh * (nope + vd) + nope, vd, v.begin() + hh * vd);
  }
}

// Attention of the query row at position p over the cached keys
// [first, last]: softmax of the scaled (soft-capped, ALiBi-shifted) scores.
std::vector<double> Reference::attend(const std::vector<double>& k_cache, const std::vector<double>& v_cache,
                                     const std::vector<double>& q, int64_t p, int64_t first, int64_t last,
                                     const Stack* stack, HeadWidths widths, const std::vector<char>* allowed) const {
  const spec::Dims& d = spec_.dims;
  const int64_t hd = widths.qk > 0 ? widths.qk : d.head_dim, vd = widths.v > 0 ? widths.v : hd;
  const int64_t kv_heads = widths.kv_heads > 0 ? widths.kv_heads : d.kv_heads;
  const int64_t group = d.heads / kv_heads;
  const double scale = spec_.attention.effective_scale(hd);
  const double softcap = spec_.attention.softcap;
  std::vector<double> attn(static_cast<size_t>(d.heads * vd), 0.0);
  std::vector<double> scores(static_cast<size_t>(last - first + 1));
  for (int64_t hh = 0; hh < d.heads; ++hh) {
    const int64_t kvh = hh / group;
    const double* qh = q.data() + hh * hd;
    double max_score = -INFINITY;
    for (int64_t j = first; j <= last; ++j) {
      if (allowed && !(*allowed)[static_cast<size_t>(j)]) {
        scores[static_cast<size_t>(j - first)] = -INFINITY;
        continue;
      }
      const double* kj = k_cache.data() + (j * kv_heads + kvh) * hd;
      double s = 0;
      for (int64_t e = 0; e < hd; ++e) s += qh[e] * kj[e];
      s *= scale;
      if (softcap > 0) s = softcap * std::tanh(s / softcap);
      if (!alibi_slopes_.empty()) s += alibi_slopes_[static_cast<size_t>(hh)] * static_cast<double>(j - p);
      if (stack && stack->rel_bias.data) {
        const int64_t b =
            relative_bucket(j - p, stack->bidirectional, spec_.position.buckets, spec_.position.max_distance);
        s += static_cast<double>(stack->rel_bias.data[b * d.heads + hh]);
      }
      scores[static_cast<size_t>(j - first)] = s;
      max_score = std::max(max_score, s);
    }
    double total = 0;
    for (double& s : scores) total += (s = std::exp(s - max_score));
    double* out = attn.data() + hh * vd;
    for (int64_t j = first; j <= last; ++j) {
      const double w = scores[static_cast<size_t>(j - first)] / total;
      const double* vj = v_cache.data() + (j * kv_heads + kvh) * vd;
      for (int64_t e = 0; e < vd; ++e) out[e] += w * vj[e];
    }
  }
  return attn;
}

// The rest of a block after attention: the output projection, residual adds,
// norms and the MLP (or experts), from the block's input and its attention
// branch's normed input h.
void Reference::finish_block(const Layer& L, int64_t layer, std::vector<double>& x, const std::vector<double>& block_in,
                             std::vector<double> h, const std::vector<double>& attn) const {
  const size_t hidden = static_cast<size_t>(spec_.dims.hidden);
  using Placement = spec::NormPlacement;
  const Placement placement = spec_.norm.placement;
  const bool norm_in = attention_norm_in();
  const bool norm_out = placement == Placement::Sandwich || placement == Placement::BranchOutput;
  std::vector<double> o = apply(L.o, attn);
  if (norm_out) o = normalize(L.attn_post_norm, o);
  const double attn_gate = L.attn_gate ? std::tanh(static_cast<double>(*L.attn_gate)) : 1.0;
  for (size_t i = 0; i < hidden; ++i) x[i] += attn_gate * o[i];
  if (placement == Placement::Post) x = normalize(L.attn_norm, x);
  // An encoder–decoder's decoder layer: cross-attention to every source
  // position, no position bias (T5's EncDecAttention, BART's encoder_attn).
  if (L.cross_q.weight.data) {
    const std::vector<double> q = apply(L.cross_q, norm_in ? normalize(L.cross_norm, x) : x);
    const std::vector<double> c = apply(L.cross_o, attend(L.cross_k_cache, L.cross_v_cache, q, 0, 0, source_len_ - 1, nullptr));
    for (size_t i = 0; i < hidden; ++i) x[i] += c[i];
    if (placement == Placement::Post) x = normalize(L.cross_norm, x);
  }

  // MLP: of the block's input beside the attention (parallel: one shared
  // norm or its own), else of the stream after it.
  if (placement == Placement::Parallel) {
    if (!spec_.norm.parallel_shared) h = normalize(L.mlp_norm, block_in);
  } else {
    h = norm_in ? normalize(L.mlp_norm, x) : x;
  }
  std::vector<double> down = spec_.moe.sparse(layer) ? moe(L, h) : mlp(L.mlp, h);
  if (norm_out) down = normalize(L.mlp_post_norm, down);
  const double mlp_gate = L.mlp_gate ? std::tanh(static_cast<double>(*L.mlp_gate)) : 1.0;
  for (size_t i = 0; i < hidden; ++i) x[i] += mlp_gate * down[i];
  if (placement == Placement::Post) x = normalize(L.mlp_norm, x);
}

// Norms before each branch (pre, sandwich, parallel), after it (sandwich,
// branch_output: x + N(F(·))), or after the residual add (post).
bool Reference::attention_norm_in() const {
  using Placement = spec::NormPlacement;
  const Placement placement = spec_.norm.placement;
  return placement == Placement::Pre || placement == Placement::Sandwich || placement == Placement::Parallel;
}

std::vector<std::vector<double>> Reference::run_encoder(const Stack& stack, const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  check_tokens(tokens);
  if (T > spec_.dims.max_context)
    throw std::out_of_range("reference: " + std::to_string(T) + " tokens exceed dims.max_context = " +
                            std::to_string(spec_.dims.max_context));
  // Layer by layer: every token's keys and values are computed before any
  // row attends, and each row attends to all of them (a windowed layer: to
  // those at most sliding_window away on either side, ModernBERT's local
  // attention).
  std::vector<std::vector<double>> x;
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < T; ++p) {
    x.push_back(embed_row(stack, tokens[static_cast<size_t>(p)], p));
    positions.push_back(p);
  }
  run_layers(stack, x, positions, stack.first, stack.end);
  if (spec_.norm.final_norm)
    for (std::vector<double>& row : x) row = normalize(stack.final_norm, row);
  return x;
}

void Reference::run_layers(const Stack& stack, std::vector<std::vector<double>>& x, const std::vector<int64_t>& positions,
                           size_t begin, size_t end, const std::vector<char>* real) const {
  const int64_t T = static_cast<int64_t>(x.size());
  for (size_t l = begin; l < end; ++l) {
    const Layer& L = layers_[l];
    const bool windowed = spec_.attention.windowed(static_cast<int64_t>(l));
    const int64_t radius = windowed ? spec_.attention.sliding_window : T;
    std::vector<std::vector<double>> h(x.size()), q(x.size());
    std::vector<double> keys, values;
    for (int64_t i = 0; i < T; ++i) {
      const size_t r = static_cast<size_t>(i);
      h[r] = attention_norm_in() && L.attn_norm.weight ? normalize(L.attn_norm, x[r]) : x[r];
      std::vector<double> k, v;
      project_qkv(L, h[r], positions[r], windowed, q[r], k, v);
      keys.insert(keys.end(), k.begin(), k.end());
      values.insert(values.end(), v.begin(), v.end());
    }
    for (int64_t i = 0; i < T; ++i) {
      const size_t r = static_cast<size_t>(i);
      const std::vector<double> block_in = x[r];
      const int64_t first = std::max<int64_t>(0, i - radius), last = std::min<int64_t>(T - 1, i + radius);
      // (A row's index is its position but in a 2D tower, which has no window or bias.)
      const std::vector<char>* reads = real && !(*real)[r] ? real : nullptr;
      finish_block(L, static_cast<int64_t>(l), x[r], block_in, h[r],
                   attend(keys, values, q[r], positions[r], first, last, &stack, {}, reads));
    }
  }
}

std::vector<float> Reference::encode(const std::vector<int32_t>& tokens) {
  if (!spec_.encoder()) throw std::invalid_argument("reference: encode() runs encoders (model.stack = \"encoder\")");
  std::vector<float> out;
  for (const std::vector<double>& row : run_encoder(stack_, tokens))
    for (double value : row) out.push_back(static_cast<float>(value));
  return out;
}

void Reference::source(const std::vector<int32_t>& tokens) {
  if (!spec_.encoder_decoder())
    throw std::invalid_argument("reference: source() runs encoder-decoders (model.stack = \"encoder-decoder\")");
  if (tokens.empty()) throw std::invalid_argument("reference: an empty source");
  const std::vector<std::vector<double>> memory = run_encoder(encoder_stack_, tokens);
  for (size_t l = stack_.first; l < stack_.end; ++l) {
    Layer& L = layers_[l];
    L.cross_k_cache.clear();
    L.cross_v_cache.clear();
    for (const std::vector<double>& row : memory) {
      const std::vector<double> k = apply(L.cross_k, row), v = apply(L.cross_v, row);
      L.cross_k_cache.insert(L.cross_k_cache.end(), k.begin(), k.end());
      L.cross_v_cache.insert(L.cross_v_cache.end(), v.begin(), v.end());
    }
  }
  source_len_ = static_cast<int64_t>(tokens.size());
  reset();
}

void Reference::token(int32_t tok, int64_t p, float* logits) {
  const spec::Dims& d = spec_.dims;
  const size_t hidden = static_cast<size_t>(d.hidden);
  std::vector<double> x = embed_row(stack_, tok, p);
  for (size_t l = stack_.first; l < stack_.end; ++l) {
    Layer& L = layers_[l];
    if (spec_.ssm.layer(static_cast<int64_t>(l))) {  // MambaBlock: x + mixer(norm(x))
      const std::vector<double> hn = normalize(L.ssm_norm, x);
      const std::vector<double> out = spec_.ssm.mamba2() ? mamba2(L, hn) : mamba(L, hn);
      for (size_t i = 0; i < hidden; ++i) x[i] += out[i];
      if (spec_.ssm.hybrid()) {  // then the layer's MLP: x + MLP(N(x))
        const std::vector<double> down = mlp(L.mlp, normalize(L.mlp_norm, x));
        for (size_t i = 0; i < hidden; ++i) x[i] += down[i];
      }
      continue;
    }
    if (L.image_cross) {  // skipped without images
      if (!cross_allowed_.empty()) image_cross_block(L, x);
      continue;
    }
    const std::vector<double> block_in = x;
    const std::vector<double> h = attention_norm_in() && L.attn_norm.weight ? normalize(L.attn_norm, x) : x;
    const bool windowed = spec_.attention.windowed(static_cast<int64_t>(l));
    std::vector<double> q, k, v;
    // Latent attention: every head its own expanded key (nope + rope wide) and value.
    const spec::Mla& m = spec_.mla;
    const HeadWidths widths = m.enabled ? HeadWidths{m.qk_head_dim(), m.v_head_dim, d.heads} : HeadWidths{};
    if (m.enabled) project_mla(L, h, p, q, k, v);
    else project_qkv(L, h, p, windowed, q, k, v);
    L.k_cache.insert(L.k_cache.end(), k.begin(), k.end());
    L.v_cache.insert(L.v_cache.end(), v.begin(), v.end());
    const int64_t first = windowed ? std::max<int64_t>(0, p - spec_.attention.sliding_window + 1) : 0;
    finish_block(L, static_cast<int64_t>(l), x, block_in, h,
                 attend(L.k_cache, L.v_cache, q, p, first, p, &stack_, widths));
  }
  logits_of(std::move(x), logits);
}

void Reference::logits_of(std::vector<double> x, float* logits) const {
  const spec::Dims& d = spec_.dims;
  const size_t hidden = static_cast<size_t>(d.hidden);
  if (spec_.norm.final_norm) x = normalize(stack_.final_norm, x);
  for (int64_t t = 0; t < d.vocab; ++t) {
    const float* row = lm_head_.data + static_cast<size_t>(t) * hidden;
    double sum = 0;
    for (size_t i = 0; i < hidden; ++i) sum += static_cast<double>(row[i]) * x[i];
    sum *= spec_.output.scale;  // T5's tied head: hidden^-0.5
    if (lm_head_bias_) sum += static_cast<double>(lm_head_bias_[t]);
    const double cap = spec_.output.softcap;
    logits[t] = static_cast<float>(cap > 0 ? cap * std::tanh(sum / cap) : sum);
  }
}

}  // namespace lathe::reference
