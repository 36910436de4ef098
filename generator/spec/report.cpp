#include "generator/spec/report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/manifest.hpp"

namespace lathe::spec {
namespace {

// Attention FLOPs of one query attending to `keys` keys in layer l (none in
// a hybrid's state-space layers).
double layer_attention_flops(const Spec& s, int64_t l, int64_t keys) {
  if (s.ssm.layer(l)) return 0;
  const int64_t k = s.attention.windowed(l) ? std::min(keys, s.attention.sliding_window) : keys;
  // q·kᵀ and p·v; in double: heads·head_dim·k overflows int64 for a large --decode context.
  return 4.0 * static_cast<double>(s.dims.heads * s.dims.head_dim) * static_cast<double>(k);
}

// The same, all layers.
double attention_flops(const Spec& s, int64_t keys) {
  double total = 0;
  for (int64_t l = 0; l < s.dims.layers; ++l) total += layer_attention_flops(s, l, keys);
  return total;
}

// Attention FLOPs of prefilling T tokens from an empty cache, all layers: the
// sum of attention_flops(s, t) over t = 1..T, in closed form (a loop over t
// hangs for a large --prefill T).
double prefill_attention_flops(const Spec& s, int64_t T) {
  if (T <= 0) return 0;
  // Σ_{t=1..T} min(t, w)
  auto keys = [T](double w) {
    const double t = static_cast<double>(T);
    return t <= w ? t * (t + 1) / 2 : w * (w + 1) / 2 + (t - w) * w;
  };
  double total = 0;
  for (int64_t l = 0; l < s.dims.layers; ++l) {
    if (s.ssm.layer(l)) continue;
    const double k = s.attention.windowed(l) ? keys(static_cast<double>(s.attention.sliding_window))
                                             : keys(static_cast<double>(T));
    total += 4.0 * static_cast<double>(s.dims.heads * s.dims.head_dim) * k;
  }
  return total;
}

// The cache bytes of a sequence at context L: `per_layer` bytes a position
// in every cache layer, a windowed layer's at most its window. In double:
// exact below 2^53, and the curves' search reaches 2^36 positions of the
// widest caches, past int64.
double kv_bytes(const Spec& s, int64_t per_layer, int64_t L) {
  double kv = 0;
  for (int64_t l = 0; l < s.cache_layers(); ++l)
    kv += static_cast<double>(per_layer) * static_cast<double>(cached_positions(s, l, L));
  return kv;
}

// The components a layer's (or the globals') costs list, in the pictures'
// order: the mixer, then the MLP or experts, then the norms.
constexpr Component kCostOrder[] = {Component::Embedding, Component::Attention, Component::Ssm,
                                    Component::Mlp,       Component::Experts,   Component::Norms,
                                    Component::LmHead,    Component::Vision};

std::vector<ComponentCost> ordered_costs(const std::map<Component, ComponentCost>& costs) {
  std::vector<ComponentCost> out;
  for (Component c : kCostOrder) {
    auto it = costs.find(c);
    if (it == costs.end()) continue;
    out.push_back(it->second);
    out.back().component = name(c);
  }
  return out;
}

}  // namespace

std::string grouped(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  std::ostringstream out;
  out.precision(4);
  out << v << " " << prefixes[i] << unit;
  return out.str();
}

std::string human_bytes(double v) {
  const char* prefixes[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  std::ostringstream out;
  out.precision(4);
  out << v << " " << prefixes[i];
  return out.str();
}

namespace {

// The cache curves of a report whose weights and state are counted: for
// each dtype [cache] dtype accepts, a position's bytes in every cache layer
// (as cache_row_bytes counts them for the runtime), plus the state.
void add_cache_curves(const Spec& s, Report& r) {
  const int64_t state = r.conv_state_bytes + r.scan_state_bytes;
  const std::string kind = s.encoder() ? "K and V of an input" : s.mla.enabled ? "latent cache" : "KV cache";
  struct Curve {
    CacheCurve curve;
    int64_t per_layer;
  };
  std::vector<Curve> curves;
  if (r.ssm) curves.push_back({{"state (f32)", DType::F32, {}, 0, false}, 0});
  if (s.cache_layers() > 0)
    for (DType dt : {DType::F16, DType::F32}) {
      Spec as = s;
      as.cache.dtype = dt;
      curves.push_back({{kind + " (" + name(dt) + ")" + (r.ssm ? " + state" : ""), dt, {}, 0, dt == s.cache.dtype},
                        cache_row_bytes(as) + v_cache_row_bytes(as)});
    }
  // The first context whose cache reaches the weights: a binary search, the
  // bytes rising with L (a cache of windowed layers only may stop short).
  constexpr int64_t kFarthest = int64_t{1} << 36;
  const auto bytes = [&](const Curve& c, int64_t L) { return kv_bytes(s, c.per_layer, L) + static_cast<double>(state); };
  const double weights = static_cast<double>(r.device_weight_bytes);
  for (Curve& c : curves) {
    if (bytes(c, kFarthest) < weights) continue;
    int64_t lo = 1, hi = kFarthest;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (bytes(c, mid) >= weights) hi = mid;
      else lo = mid + 1;
    }
    c.curve.passes_weights_at = lo;
  }
  // Sampled for a log-log picture: at every half octave (a state plus a
  // cache bends there) from ten octaves below the top, a power of two an
  // octave past the farthest crossing short of 2^24 tokens, or max_context.
  constexpr int64_t kLongest = int64_t{1} << 24;
  int64_t top = s.dims.max_context;
  for (const Curve& c : curves)
    if (c.curve.passes_weights_at <= kLongest) top = std::max(top, 2 * c.curve.passes_weights_at);
  int octaves = 0;
  while ((int64_t{1} << octaves) < top) ++octaves;
  std::vector<int64_t> contexts = {s.dims.max_context};
  for (int half = 2 * std::max(0, octaves - 10); half <= 2 * octaves; ++half)
    contexts.push_back(std::llround(std::exp2(half / 2.0)));
  const int64_t lo = contexts[1], hi = contexts.back();
  if (s.attention.sliding_window >= lo && s.attention.sliding_window <= hi) contexts.push_back(s.attention.sliding_window);
  std::sort(contexts.begin(), contexts.end());
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  for (Curve& c : curves) {
    for (int64_t L : contexts) c.curve.bytes_at_context.emplace_back(L, static_cast<int64_t>(bytes(c, L)));
    r.cache_curves.push_back(std::move(c.curve));
  }
}

}  // namespace

VisionCost vision_cost(const Spec& s) {
  const Vision& v = s.vision;
  VisionCost c;
  c.present = true;
  c.connection = name(v.connection);
  c.layers_run = v.layers_run();
  const int64_t h = v.dims.hidden;
  const int64_t g = v.grid();
  const int64_t tiles = std::max<int64_t>(v.tiles, 1);
  c.patches = (g * g + (v.class_token ? 1 : 0)) * tiles;
  const double rows = static_cast<double>(c.patches);
  for (const TensorSpec& t : build_vision_manifest(s).tensors) {
    const int64_t n = t.elements();
    c.params += n;
    const bool projector = t.role == Role::ProjNorm || t.role == Role::ProjIn || t.role == Role::ProjOut ||
                           t.role == Role::PatchMerge;
    if (projector) c.projector_params += n;
    c.device_bytes += t.shape.size() >= 2 && !t.bias ? device_tensor_bytes(t.dtype, 2, t.shape[0], n / t.shape[0]) : n * 4;
    c.checkpoint_bytes += static_cast<int64_t>(std::ceil(static_cast<double>(n) * bytes_per_element(t.dtype)));
  }
  // Each row through the patch embedding and the layers run (the global
  // layers too): their matrices (2 FLOPs a multiply-add) and its attention
  // to every row of its image.
  const spec::Dims& d = v.dims;
  const double q = static_cast<double>(d.heads * d.head_dim), kv = static_cast<double>(d.kv_heads * d.head_dim);
  const double layer_linear = static_cast<double>(h) * (2.0 * q + 2.0 * kv) +
                              static_cast<double>((v.mlp.gated ? 3 : 2) * h * d.intermediate);
  const double patch_linear = static_cast<double>(h * v.channels * v.patch * v.patch);
  const double attention = 4.0 * q * rows;  // a row's q·k and p·v
  c.flops = rows * (2.0 * patch_linear + static_cast<double>(c.layers_run + v.global_layers) *
                                             (2.0 * layer_linear + attention));
  // The projector, on the rows it takes.
  const Projector& j = v.projector;
  const double features = static_cast<double>(h) * static_cast<double>(1 + v.extra_feature_layers.size());
  const double text = static_cast<double>(s.dims.hidden);
  c.features = v.image_features() * tiles;
  const double out = static_cast<double>(c.features);
  const double mlp = features * static_cast<double>(j.intermediate) + static_cast<double>(j.intermediate) * text;
  switch (j.kind) {
    case ProjectorKind::Mlp: c.flops += 2.0 * out * mlp; break;
    case ProjectorKind::MergeMlp:
      c.flops += 2.0 * out * (static_cast<double>(h * h * j.merge * j.merge) + mlp);
      break;
    case ProjectorKind::Pooled: c.flops += 2.0 * out * features * text; break;
    case ProjectorKind::Linear: c.flops += 2.0 * out * features * text; break;
  }
  // Its tokens in the prompt.
  if (v.connection == VisionConnection::CrossAttention) {
    c.tokens = 1;
  } else {
    const int64_t side = j.kind == ProjectorKind::MergeMlp ? g / j.merge : g;
    const bool rows_end = v.tokens.row_end >= 0 && j.kind != ProjectorKind::Pooled;
    c.tokens = c.features + (rows_end ? side : 0) + static_cast<int64_t>(v.tokens.prefix.size() + v.tokens.suffix.size());
  }
  return c;
}

int64_t cached_positions(const Spec& s, int64_t cache_layer, int64_t context) {
  return s.attention.windowed(cache_layer) ? std::min(context, s.attention.sliding_window) : context;
}

int64_t layer_cache_bytes(const Spec& s, int64_t block, int64_t context) {
  if (s.ssm.layer(block)) return s.ssm.conv_state_bytes() + s.ssm.scan_state_bytes();
  return (cache_row_bytes(s) + v_cache_row_bytes(s)) * cached_positions(s, s.cache_index(block), context);
}

Report make_report(const Spec& s, const std::vector<int64_t>& prefill_lengths,
                   const std::vector<int64_t>& decode_contexts) {
  Report r;
  r.name = s.name;
  r.dtype = s.weights.dtype;
  r.kv_dtype = s.cache.dtype;
  r.max_context = s.dims.max_context;
  r.encoder = s.encoder();

  r.encoder_decoder = s.encoder_decoder();

  std::map<Component, int64_t> per_component;
  double linear_active = 0;  // weights multiplied per token (an encoder-decoder: per decode token)
  double linear_encode = 0;  // an encoder-decoder's per source token: the encoder and the cross K/V
  // An encoder-decoder's decode token reads the decoder's weights alone:
  // the encoder and the cross-attention's K and V run once per source.
  const auto encode_only = [&](const TensorSpec& t) {
    if (!s.encoder_decoder()) return false;
    switch (t.role) {
      case Role::EncoderPosEmbed: case Role::EncoderRelBias: case Role::EncoderEmbedNorm: case Role::EncoderFinalNorm:
      case Role::CrossK: case Role::CrossV:
        return true;
      default:
        return t.layer >= 0 && t.layer < s.encoder_layers();
    }
  };
  const Manifest manifest = build_manifest(s);
  // The pictures' breakdown: [block][component], and the global tensors'.
  std::vector<std::map<Component, ComponentCost>> layer_costs(static_cast<size_t>(s.blocks()));
  std::map<Component, ComponentCost> global_costs;
  for (const Spelling<DType>& dt : kDTypeSpellings) r.decode_bytes.emplace_back(dt.value, 0.0);
  r.layer_device_bytes.assign(static_cast<size_t>(s.blocks()), 0);
  for (const TensorSpec& t : manifest.tensors) {
    const int64_t n = t.elements();
    per_component[component_of(t.role)] += n;
    r.total_params += n;
    const bool expert = t.expert >= 0;
    const bool active = !expert || t.expert < s.moe.top_k;
    if (active) r.active_params += n;
    const bool encoding = encode_only(t);
    ComponentCost& cost = (t.layer < 0 ? global_costs : layer_costs.at(static_cast<size_t>(t.layer)))[component_of(t.role)];
    cost.params += n;
    if (active) cost.active_params += n;
    if (!t.bias && is_linear(t.role) && active) {
      (encoding ? linear_encode : linear_active) += static_cast<double>(n);
      if (!encoding) cost.flops += 2.0 * static_cast<double>(n);
    }
    const double read = encoding ? 0.0
                        : t.role == Role::Embed && !s.embedding.tied ? static_cast<double>(s.dims.hidden)
                        : expert ? static_cast<double>(n) * static_cast<double>(s.moe.top_k) / static_cast<double>(s.moe.experts)
                                 : static_cast<double>(n);
    r.decode_weight_bytes += read * bytes_per_element(t.dtype);
    r.checkpoint_bytes += static_cast<int64_t>(std::ceil(static_cast<double>(n) * bytes_per_element(t.dtype)));
    // (A tensor the kernels index as an array, not a matrix, is f32 values on
    // the device: Mamba's conv taps and dt_proj, latent attention's kv_b.)
    const int64_t device = t.shape.size() >= 2 && !read_as_matrix(t.role, t.bias, t.shape.size())
                               ? t.elements() * 4
                               : device_tensor_bytes(t.dtype, t.shape.size(), t.shape[0], t.shape.size() == 2 ? t.shape[1] : 1);
    r.device_weight_bytes += device;
    if (t.layer >= 0) r.layer_device_bytes.at(static_cast<size_t>(t.layer)) += device;
    else if (t.role == Role::FinalNorm || t.role == Role::LmHead || t.role == Role::LogitsBias) r.head_device_bytes += device;
    else r.embedding_device_bytes += device;
    if (t.role == Role::Embed && !t.bias) r.embedding_table_device_bytes += device;
    for (auto& [dt, bytes] : r.decode_bytes)
      bytes += read * bytes_per_element(t.shape.size() == 2 && !is_ssm_param(t.role) ? dt : t.dtype);
  }
  if (s.vision.enabled) {
    r.vision = vision_cost(s);
    per_component[Component::Vision] += r.vision.params;
    global_costs[Component::Vision].params += r.vision.params;  // (an image's work is per image: r.vision.flops)
    r.total_params += r.vision.params;
    r.checkpoint_bytes += r.vision.checkpoint_bytes;
  }
  for (auto& [c, n] : per_component) r.components.emplace_back(name(c), n);

  // The LM head multiplies every token, tied or not; an encoder has none,
  // and each of its rows attends to all T keys of its input.
  const double head = s.encoder() ? 0.0 : static_cast<double>(s.dims.vocab * s.dims.hidden);
  const double matmul = 2.0 * (linear_active + head);
  // An encoder-decoder: a source token's encode (its encoder layers attend
  // to all T keys); a decode token at context L attends to L targets and a
  // source of L.
  const double per_key = 4.0 * static_cast<double>(s.dims.heads * s.dims.head_dim);
  for (int64_t T : prefill_lengths)
    r.prefill_flops_per_token.emplace_back(
        T, s.encoder_decoder()
               ? 2.0 * linear_encode + per_key * static_cast<double>(s.encoder_layers()) * static_cast<double>(T)
               : matmul + (s.encoder() ? attention_flops(s, T) : prefill_attention_flops(s, T) / static_cast<double>(T)));
  if (!s.encoder())
    for (int64_t L : decode_contexts)
      r.decode_flops_per_token.emplace_back(L, matmul + attention_flops(s, L) * (s.encoder_decoder() ? 2.0 : 1.0));

  // The breakdown's attention: each layer's keys at the context the last
  // flops_per_token entry has (an encoder-decoder's decoder layers: their
  // own and the source's), and the LM head.
  const std::vector<int64_t>& breakdown_contexts = s.encoder() ? prefill_lengths : decode_contexts;
  r.breakdown_context = breakdown_contexts.empty() ? 0 : breakdown_contexts.back();
  r.encoder_layers = s.encoder_layers();
  for (int64_t l = 0; l < s.dims.layers; ++l) {
    const double keys = layer_attention_flops(s, l, r.breakdown_context);
    if (keys > 0)
      layer_costs.at(static_cast<size_t>(s.encoder_layers() + l))[Component::Attention].flops +=
          keys * (s.encoder_decoder() ? 2.0 : 1.0);
  }
  if (!s.encoder()) global_costs[Component::LmHead].flops += 2.0 * head;
  for (const auto& costs : layer_costs) r.layer_costs.push_back(ordered_costs(costs));
  r.global_costs = ordered_costs(global_costs);

  // Block dtypes: the blocks' bytes (a Q4_K value costs 144 / 256 bytes).
  for (const Spelling<DType>& dt : kDTypeSpellings)
    r.weight_bytes.emplace_back(dt.value, static_cast<int64_t>(std::ceil(static_cast<double>(r.total_params) *
                                                                          bytes_per_element(dt.value))));

  // A state-space model's sequence holds a fixed state, whatever its length:
  // each layer's convolution window and scan state (f32).
  // (A hybrid's attention layers keep a KV cache instead.)
  if (s.ssm.enabled()) {
    r.ssm = true;
    const int64_t layers = s.dims.layers - static_cast<int64_t>(s.ssm.attention_layers.size());
    r.conv_state_bytes = s.ssm.conv_state_bytes() * layers;
    r.scan_state_bytes = s.ssm.scan_state_bytes() * layers;
  }
  // Every cache of a sequence: an encoder-decoder's encoder layers' (its
  // encode pass's), its decoder's and their cross-attention caches.
  // (Latent attention's: the latent and the rotary key, its values read from them.)
  const int64_t per_layer = s.cache_layers() == 0 ? 0 : cache_row_bytes(s) + v_cache_row_bytes(s);  // K and V
  r.mla = s.mla.enabled;
  r.kv_bytes_per_token = per_layer * s.cache_layers();
  r.kv_bytes_max_context = static_cast<int64_t>(kv_bytes(s, per_layer, s.dims.max_context));
  const int64_t state = r.conv_state_bytes + r.scan_state_bytes;
  std::vector<int64_t> contexts = decode_contexts;
  contexts.push_back(s.dims.max_context);
  for (int64_t L : contexts) {
    if (L > s.dims.max_context) continue;
    if (r.device_bytes_at_context.empty() || r.device_bytes_at_context.back().first != L)
      r.device_bytes_at_context.emplace_back(L, r.device_weight_bytes + static_cast<int64_t>(kv_bytes(s, per_layer, L)) + state);
  }
  add_cache_curves(s, r);
  return r;
}

std::string format_report(const Report& r) {
  std::ostringstream out;
  out << "# " << r.name << "\n\n";
  out << "| component | parameters |\n|---|---:|\n";
  for (const auto& [c, n] : r.components) out << "| " << c << " | " << grouped(n) << " |\n";
  out << "| **total** | **" << grouped(r.total_params) << "** |\n";
  if (r.active_params != r.total_params) out << "| active per token | " << grouped(r.active_params) << " |\n";
  if (r.encoder)
    out << "\nAn encoder: each input runs in one pass, every row attending to every key of it; a pass reads "
        << human_bytes(r.decode_weight_bytes) << " of the checkpoint's weights (" << name(r.dtype) << ").\n";
  else
    out << (r.encoder_decoder ? "\nAn encoder-decoder: a source runs through the encoder in one pass and fills each decoder "
                                "layer's cross-attention cache; then a decode token reads "
                              : "\nA decode token reads ")
        << human_bytes(r.decode_weight_bytes) << " of the checkpoint's weights ("
        << name(r.dtype) << ")" << (r.active_params != r.total_params ? ", its routed experts' only" : "") << ".\n";
  out << "\n| weights stored as | bytes | " << (r.encoder ? "bytes a pass reads" : "bytes per decode token")
      << " |\n|---|---:|---:|\n";
  for (size_t i = 0; i < r.weight_bytes.size(); ++i) {
    const auto& [dt, b] = r.weight_bytes[i];
    out << "| " << name(dt) << " | " << human_bytes(static_cast<double>(b)) << " | "
        << human_bytes(i < r.decode_bytes.size() ? r.decode_bytes[i].second : 0.0) << " |\n";
  }
  out << "| **the spec's dtypes** (" << name(r.dtype) << ") | " << human_bytes(static_cast<double>(r.checkpoint_bytes))
      << " | " << human_bytes(r.decode_weight_bytes) << " |\n";
  out << "\n| on the device | bytes |\n|---|---:|\n";
  out << "| weights (block rows repacked, vectors f32) | " << human_bytes(static_cast<double>(r.device_weight_bytes))
      << " |\n";
  for (const auto& [L, b] : r.device_bytes_at_context)
    out << "| weights + " << (r.encoder                                ? "K and V of an input of "
                                : r.ssm && r.kv_bytes_per_token > 0 ? "KV cache and state at context "
                                : r.ssm                             ? "a sequence's state at context "
                                                                    : "KV cache at context ") << L << " | "
        << human_bytes(static_cast<double>(b)) << " |\n";
  if (r.vision.present) {
    const VisionCost& v = r.vision;
    out << "\n| vision tower (" << v.connection << ") | |\n|---|---:|\n";
    out << "| parameters (tower and projector) | " << grouped(v.params) << " |\n";
    out << "| of which the projector | " << grouped(v.projector_params) << " |\n";
    out << "| layers run (up to the feature layer) | " << v.layers_run << " |\n";
    out << "| rows the tower runs an image (largest) | " << grouped(v.patches) << " |\n";
    out << "| features an image | " << grouped(v.features) << " |\n";
    out << "| tokens an image takes in the prompt | " << grouped(v.tokens) << " |\n";
    out << "| work an image | " << human(v.flops, "FLOP") << " |\n";
    out << "| on the device (weights) | " << human_bytes(static_cast<double>(v.device_bytes)) << " |\n";
  }
  out << "\n| work per token | FLOPs |\n|---|---:|\n";
  for (const auto& [T, f] : r.prefill_flops_per_token)
    out << (r.encoder ? "| an input of T = " : r.encoder_decoder ? "| encode a source token, T = " : "| prefill, T = ") << T << " | " << human(f, "FLOP") << " |\n";
  for (const auto& [L, f] : r.decode_flops_per_token) out << "| decode, context " << L << " | " << human(f, "FLOP") << " |\n";
  if (r.ssm) {
    out << "\n| state per sequence (f32, fixed at every context) | bytes |\n|---|---:|\n";
    out << "| convolution windows | " << human_bytes(static_cast<double>(r.conv_state_bytes)) << " |\n";
    out << "| scan states | " << human_bytes(static_cast<double>(r.scan_state_bytes)) << " |\n";
    out << "| **total** | **" << human_bytes(static_cast<double>(r.conv_state_bytes + r.scan_state_bytes)) << "** |\n";
    if (r.kv_bytes_per_token == 0) return out.str();  // a hybrid's attention layers keep a KV cache too
  }
  out << "\n| " << (r.encoder ? "K and V of a pass" : r.encoder_decoder ? "KV caches (encoder, decoder, cross)"
                     : r.mla ? "latent cache (kv_lora_rank + qk_rope_head_dim a layer)" : "KV cache") << " (" << name(r.kv_dtype) << ") | bytes |\n|---|---:|\n";
  out << "| per token | " << human_bytes(static_cast<double>(r.kv_bytes_per_token)) << " |\n";
  out << "| at max context (" << r.max_context << ") | " << human_bytes(static_cast<double>(r.kv_bytes_max_context)) << " |\n";
  return out.str();
}

nlohmann::json report_json(const Report& r) {
  nlohmann::json j;
  j["name"] = r.name;
  for (const auto& [c, n] : r.components) j["params"][c] = n;
  j["params"]["total"] = r.total_params;
  j["params"]["active_per_token"] = r.active_params;
  j["decode_weight_bytes"] = r.decode_weight_bytes;
  j["checkpoint_dtype"] = name(r.dtype);
  for (const auto& [dt, b] : r.weight_bytes) j["weight_bytes"][name(dt)] = b;
  for (const auto& [dt, b] : r.decode_bytes) j["decode_bytes"][name(dt)] = b;
  j["checkpoint_bytes"] = r.checkpoint_bytes;
  j["device"]["weight_bytes"] = r.device_weight_bytes;
  for (const auto& [L, b] : r.device_bytes_at_context) j["device"]["bytes_at_context"][std::to_string(L)] = b;
  for (const auto& [T, f] : r.prefill_flops_per_token) j["flops_per_token"]["prefill"][std::to_string(T)] = f;
  for (const auto& [L, f] : r.decode_flops_per_token) j["flops_per_token"]["decode"][std::to_string(L)] = f;
  // The pictures' numbers (report_svg points into these).
  const auto costs_json = [](const std::vector<ComponentCost>& costs) {
    nlohmann::json out = nlohmann::json::object();
    for (const ComponentCost& c : costs)
      out[c.component] = {{"params", c.params}, {"active_params", c.active_params}, {"flops", c.flops}};
    return out;
  };
  j["breakdown"]["context"] = r.breakdown_context;
  j["breakdown"]["encoder_layers"] = r.encoder_layers;
  j["breakdown"]["globals"] = costs_json(r.global_costs);
  j["breakdown"]["layers"] = nlohmann::json::array();
  for (const auto& costs : r.layer_costs) j["breakdown"]["layers"].push_back(costs_json(costs));
  if (r.vision.present) {
    const VisionCost& v = r.vision;
    j["vision"] = {{"connection", v.connection}, {"params", v.params}, {"projector_params", v.projector_params},
                   {"layers_run", v.layers_run}, {"patches", v.patches}, {"features", v.features},
                   {"tokens", v.tokens}, {"flops", v.flops}, {"device_bytes", v.device_bytes}};
  }
  j["max_context"] = r.max_context;
  j["cache_curves"] = nlohmann::json::array();
  for (const CacheCurve& c : r.cache_curves) {
    nlohmann::json curve = {
        {"label", c.label}, {"dtype", name(c.dtype)}, {"spec_dtype", c.spec_dtype}, {"passes_weights_at", nullptr}};
    if (c.passes_weights_at > 0) curve["passes_weights_at"] = c.passes_weights_at;
    for (const auto& [L, b] : c.bytes_at_context) curve["bytes_at_context"][std::to_string(L)] = b;
    j["cache_curves"].push_back(std::move(curve));
  }
  if (r.ssm) {
    j["ssm_state"]["conv_bytes"] = r.conv_state_bytes;
    j["ssm_state"]["scan_bytes"] = r.scan_state_bytes;
    j["ssm_state"]["bytes_per_sequence"] = r.conv_state_bytes + r.scan_state_bytes;
    if (r.kv_bytes_per_token == 0) return j;  // a hybrid's attention layers keep a KV cache too
  }
  j["kv_cache"]["dtype"] = name(r.kv_dtype);
  j["kv_cache"]["bytes_per_token"] = r.kv_bytes_per_token;
  j["kv_cache"]["bytes_at_max_context"] = r.kv_bytes_max_context;
  j["kv_cache"]["max_context"] = r.max_context;
  return j;
}

}  // namespace lathe::spec
