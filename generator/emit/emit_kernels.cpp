#include "generator/emit/emit_kernels.hpp"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <numbers>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "generator/emit/coop_khr.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/lower/model_plan.hpp"

namespace lathe::emit {
namespace {

using namespace lathe::spec;
using lower::KernelKey;

std::string define(const std::string& name, const std::string& value) { return "#define " + name + " " + value + "\n"; }
std::string define(const std::string& name, int64_t value) { return define(name, std::to_string(value) + "u"); }
std::string flag(const std::string& name, bool value) { return define(name, value ? "1" : "0"); }

std::string upper(std::string_view word) {
  std::string out(word);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// common.glsl's WDTYPE: the DType's number (0 f32, 1 f16, 2 bf16, 3 q8_0 …
// 10 q6_k), and for a block dtype where a row's planes lie (core/contract.hpp's
// device_row, which the upload follows): W_TPR texels per row, W_QH_AT and
// W_SCALE_AT the planes' first texels within it, W_BODY texels per block body.
std::string weight_constants(DType d, int64_t cols) {
  const DeviceRow row = device_row(d, cols);
  if (is_block_dtype(d) && cols % dtype_layout(d).elements != 0)
    throw std::runtime_error("kernels: rows of " + std::to_string(cols) + " values are not whole " + name(d) + " blocks");
  return define("WDTYPE", std::to_string(static_cast<int>(d))) + define("W_TPR", row.texels) +
         define("W_QH_AT", row.qh_at) + define("W_SCALE_AT", row.scale_at) +
         define("W_BODY", device_blocks(d).body.bytes / 16);
}

// common.glsl's ACT_* names: an activation's index in its table plus one.
std::string activation_constants() {
  std::string out = define("ACT_NONE", "0");
  for (const Spelling<Activation>& a : kActivationSpellings)
    out += define("ACT_" + upper(a.key), std::to_string(index_of(a.value) + 1));
  return out;
}

int act_constant(const lower::Epilogue& e) {
  if (!e.gated && !e.activation) return 0;
  return 1 + static_cast<int>(index_of(e.act));
}

// The interface block of a family's instance: its push constants and the
// binding numbers of its named bindings (core/kernels.hpp).
std::string interface_constants(const kernels::FamilyInfo& f) {
  std::string out;
  for (size_t i = 0; i < f.bindings.size(); ++i) out += define("BINDING_" + std::string(f.bindings[i].name), std::to_string(i));
  return out + activation_constants() + glsl_block(push_layout(f.family));
}

// RoPE's inverse frequency per pair of rotary dims, and the factor on cos
// and sin, for the spec's scaling (Hugging Face transformers'
// modeling_rope_utils.py is the contract; computed in double here, the
// shader multiplies by the position in f32).
struct RopeTable {
  std::vector<double> inv_freq;
  double scale = 1.0;
};

// `local`: the windowed layers' table, position.local_theta's and unscaled
// (Gemma 3 rotates them with a default RoPE of rope_local_base_freq).
RopeTable rope_table(const Spec& s, bool local) {
  const RopeScalingParams& sc = s.position.scaling;
  const int64_t rot = s.position.rotary_dim;
  const double theta = local ? s.position.local_theta.value() : s.position.theta;
  RopeTable t;
  for (int64_t i = 0; i < rot / 2; ++i)
    t.inv_freq.push_back(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot)));
  if (s.position.rope_grid > 0) {
    // 2D (Pixtral): pair j < rot / 4 turns by the row at frequency 2j, the
    // rest by the column at 2(j − rot / 4) + 1 (the kernel picks the
    // coordinate by j).
    std::vector<double> two_d;
    for (size_t j = 0; j < t.inv_freq.size(); j += 2) two_d.push_back(t.inv_freq[j]);
    for (size_t j = 1; j < t.inv_freq.size(); j += 2) two_d.push_back(t.inv_freq[j]);
    t.inv_freq = std::move(two_d);
    return t;
  }
  if (local) return t;
  if (sc.kind == RopeScaling::Linear) {
    for (double& f : t.inv_freq) f /= sc.factor;
  } else if (sc.kind == RopeScaling::Llama3) {
    // Wavelengths above original/low_freq_factor are slowed by factor, those
    // below original/high_freq_factor kept, the band between blended.
    const double original = static_cast<double>(sc.original_max_context);
    for (double& f : t.inv_freq) {
      const double wavelength = 2.0 * std::numbers::pi / f;
      if (wavelength > original / sc.low_freq_factor) {
        f /= sc.factor;
      } else if (wavelength >= original / sc.high_freq_factor) {
        const double smooth = (original / wavelength - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        f = (1.0 - smooth) * f / sc.factor + smooth * f;
      }
    }
  } else if (sc.kind == RopeScaling::Yarn) {
    // Pair i is interpolated (f / factor) below the correction range
    // [low, high] of dims, kept above it, ramped linearly across it.
    const double d = static_cast<double>(rot);
    const double original = static_cast<double>(sc.original_max_context);
    auto correction = [&](double rotations) {
      return d * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(s.position.theta));
    };
    const double low = std::max(0.0, std::floor(correction(sc.beta_fast)));
    const double high = std::min(d - 1.0, std::ceil(correction(sc.beta_slow)));
    const double span = high > low ? high - low : 0.001;
    for (size_t i = 0; i < t.inv_freq.size(); ++i) {
      const double interpolated = std::clamp((static_cast<double>(i) - low) / span, 0.0, 1.0);
      t.inv_freq[i] = t.inv_freq[i] * (1.0 - interpolated) + t.inv_freq[i] / sc.factor * interpolated;
    }
    t.scale = sc.attention_factor.value_or(0.1 * std::log(sc.factor) + 1.0);
  }
  return t;
}

// ALiBi's slope of each query head (Press et al.; BLOOM's and MPT's closed
// form): for the largest power of two P ≤ H, slope i (1-based) of the first
// P heads is 2^(−8i/P); heads past P take the odd powers 1, 3, 5, … of
// 2^(−8/(2P)), i.e. every other slope of 2P heads.
std::vector<double> alibi_slopes(int64_t heads) {
  int64_t p = 1;
  while (p * 2 <= heads) p *= 2;
  std::vector<double> slopes;
  for (int64_t i = 1; i <= p; ++i) slopes.push_back(std::pow(2.0, -8.0 * static_cast<double>(i) / static_cast<double>(p)));
  for (int64_t i = 1; static_cast<int64_t>(slopes.size()) < heads; i += 2)
    slopes.push_back(std::pow(2.0, -8.0 * static_cast<double>(i) / static_cast<double>(2 * p)));
  return slopes;
}

// T5's bucket of each relative position r = j − i in [−M, M], M =
// max_distance (beyond it the bucket stays): bidirectional, half the
// buckets for r > 0; of |r| (or, causal, of −min(r, 0)), the first half
// exact and the rest logarithmic up to M. In float32 as transformers and
// Mesh TensorFlow compute it, truncated. `both`: an encoder's table, else
// a decoder's (causal: j ≤ i).
std::vector<int64_t> relative_buckets(const Spec& s, bool both) {
  const int64_t M = s.position.max_distance;
  std::vector<int64_t> out;
  for (int64_t r = -M; r <= M; ++r) {
    int64_t n = s.position.buckets, bucket = 0, d = 0;
    if (both) {
      n /= 2;
      bucket = r > 0 ? n : 0;
      d = r < 0 ? -r : r;
    } else {
      d = r < 0 ? -r : 0;
    }
    const int64_t exact = n / 2;
    if (d < exact) {
      bucket += d;
    } else {
      const float scaled = std::log(static_cast<float>(d) / static_cast<float>(exact)) /
                           static_cast<float>(std::log(static_cast<double>(M) / static_cast<double>(exact))) *
                           static_cast<float>(n - exact);
      bucket += std::min<int64_t>(exact + static_cast<int64_t>(scaled), n - 1);
    }
    out.push_back(bucket);
  }
  return out;
}

std::string uint_array(const std::string& name, const std::vector<int64_t>& values) {
  std::string out = "const uint " + name + "[" + std::to_string(values.size()) + "] = uint[](";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]) + "u";
  return out + ");\n";
}

std::string float_array(const std::string& name, const std::vector<double>& values) {
  std::string out = "const float " + name + "[" + std::to_string(values.size()) + "] = float[](";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + number_literal(values[i], 9);
  return out + ");\n";
}

std::string head_constants(const Spec& s) {
  return define("HQ", s.dims.heads) + define("HKV", s.dims.kv_heads) + define("DH", s.dims.head_dim) +
         define("G", s.dims.heads / s.dims.kv_heads) + flag("CACHE_F16", s.cache.dtype == DType::F16);
}

// The constants of one instance, by family: the key's own and the spec's
// single-valued ones (eps, theta, scale, head counts).
std::string family_constants(const Spec& s, const KernelKey& k) {
  switch (k.family) {
    case kernels::Family::Embed:
      return define("D", k.width) + weight_constants(k.dtype, k.width) +
             define("SCALE", number_literal(s.embedding.scale, 9)) + flag("POSITIONS", k.positions) +
             flag("TYPES", k.types) + define("POS_OFFSET", s.position.offset) + flag("ROWS", k.rows) +
             flag("SPLICE", k.splice) + flag("CLASS", k.class_row);
    case kernels::Family::Norm: {
      if (k.pool > 0) {  // a pooled projector's norm: its own kind, eps and scale
        const Projector& j = s.vision.projector;
        return define("N", k.width) + define("GROUP", k.width) + define("EPS", number_literal(j.eps, 9)) +
               flag("LAYER_NORM", j.norm == NormKind::LayerNorm) + flag("HAS_BIAS", j.norm == NormKind::LayerNorm) +
               flag("UNIT_OFFSET", j.norm_unit_offset) + flag("RESIDUAL", false) + flag("POOLED", true) +
               define("POOL", k.pool) + define("POOL_GRID", k.pool_grid) + flag("MERGED", false) + define("MERGE", 0) +
               flag("ZEROED", false) + define("ZERO_FROM", 0) +
               flag("HEAD_SCALE", false) + flag("ROW_MASK", false);
      }
      if (k.merge > 0) {  // Mistral 3's patch merger: the projector's RMS norm
        const Projector& j = s.vision.projector;
        return define("N", k.width) + define("GROUP", k.width) + define("EPS", number_literal(j.eps, 9)) +
               flag("LAYER_NORM", false) + flag("HAS_BIAS", false) + flag("UNIT_OFFSET", false) +
               flag("RESIDUAL", false) + flag("POOLED", false) + flag("MERGED", true) + define("MERGE", k.merge) +
               flag("ZEROED", false) + define("ZERO_FROM", 0) +
               flag("HEAD_SCALE", false) + flag("ROW_MASK", false);
      }
      // A norm per group (Mamba-2's gated norm) is a plain RMSNorm of each group.
      const bool model_norm = k.group == 0;
      return define("N", k.width) + define("GROUP", model_norm ? k.width : k.group) +
             define("EPS", number_literal(s.norm.eps, 9)) +
             flag("LAYER_NORM", model_norm && s.norm.kind == NormKind::LayerNorm) +
             flag("HAS_BIAS", model_norm && s.norm.bias) + flag("UNIT_OFFSET", model_norm && s.norm.unit_offset) +
             flag("RESIDUAL", k.residual) + flag("POOLED", false) + flag("MERGED", false) + define("MERGE", 0) +
             flag("ZEROED", k.zero_from > 0) + define("ZERO_FROM", k.zero_from) + flag("HEAD_SCALE", k.head_scale) +
             flag("ROW_MASK", k.row_mask);
    }
    case kernels::Family::Matmul: {
      const lower::Epilogue& e = k.epilogue;
      const int norm = !e.norm ? 0 : s.norm.kind == NormKind::RMSNorm ? 1 : 2;
      return define("K", k.width) + weight_constants(k.dtype, k.width) + flag("HAS_BIAS", e.bias) +
             flag("GATED", e.gated) + define("ACT", std::to_string(act_constant(e))) + flag("RESIDUAL", e.residual) +
             flag("RESIDUAL_GATED", e.residual_gated) + define("NORM", std::to_string(norm)) + define("NORM_EPS", number_literal(s.norm.eps, 9)) +
             flag("NORM_BIAS", e.norm && s.norm.bias) + flag("NORM_UNIT_OFFSET", e.norm && s.norm.unit_offset) +
             flag("SOFTCAPPED", e.softcap) + define("SOFTCAP", number_literal(e.softcap ? s.output.softcap : 0.0, 9)) +
             flag("SCALED", e.scaled) + define("OUT_SCALE", number_literal(e.scaled ? s.output.scale : 1.0, 9)) +
             flag("EXPERT_MODE", e.experts != 0) + define("EXPERTS", e.experts ? s.moe.experts : 0) +
             define("TOPK", e.experts ? s.moe.top_k : 0) +
             define("PART_EXPERTS", e.part_experts ? e.part_experts : (e.experts ? s.moe.experts : 0)) +
             flag("X_OF_SLOT", e.experts == 2) + define("XQ_ROW_WORDS", kernels::xq_row_words(k.width));
    }
    case kernels::Family::RopeKv: {
      const int64_t rot = k.width;
      std::string constants = head_constants(s) + flag("ROPE", rot > 0) + define("ROT", rot) +
                              flag("NEOX", k.pairing == RopePairing::Neox);
      // q/k norms: 1 each head over DH, 2 each projection whole (core/spec.hpp's QKNorm).
      // 3: latent attention's kv_a_layernorm, of k's first kv_lora_rank values (then no V is written).
      // 4: k's heads alone (an image's cross-attention keys).
      const int qk_norm = !k.qk_norm      ? 0
                          : k.k_norm_only ? 4
                          : k.latent      ? 3
                          : s.attention.qk_norm == QKNorm::PerHead ? 1
                                                                   : 2;
      constants += define("QK_NORM", std::to_string(qk_norm)) + define("QK_EPS", number_literal(s.norm.eps, 9)) +
                   flag("QK_UNIT_OFFSET", s.norm.unit_offset) + define("ROT_OFF", k.rot_offset) +
                   define("LATENT", k.latent ? s.mla.kv_lora_rank : int64_t{0}) +
                   flag("ROPE_2D", rot > 0 && s.position.rope_grid > 0) +
                   define("ROPE_GRID", rot > 0 ? s.position.rope_grid : int64_t{0});
      if (rot > 0) {
        const RopeTable table = rope_table(s, k.local);
        constants += define("ROPE_SCALE", number_literal(table.scale, 9)) + float_array("INV_FREQ", table.inv_freq);
        // Dynamic NTK: the base grows with the call's length at run time
        // (the windowed layers' own base, position.local_theta, stays).
        const bool dynamic = s.position.scaling.kind == RopeScaling::DynamicNtk && !k.local;
        constants += flag("NTK_DYNAMIC", dynamic) + define("NTK_FACTOR", number_literal(s.position.scaling.factor, 9)) +
                     define("NTK_ORIGINAL", dynamic ? s.position.scaling.original_max_context : int64_t{0});
      }
      return constants;
    }
    case kernels::Family::Attention: {
      // Cross-attention adds no position bias (T5's encoder–decoder attention).
      const bool relative = s.position.kind == PositionKind::Relative && !k.cross;
      if (k.head_tile <= 0 || (s.dims.heads / s.dims.kv_heads) % k.head_tile != 0)
        throw std::logic_error("kernels: an attention instance without a head tile dividing HQ / HKV");
      return head_constants(s) + define("GT", k.head_tile) +
             define("SCALE", number_literal(s.attention.effective_scale(s.dims.head_dim), 9)) +
             flag("SOFTCAPPED", s.attention.softcap > 0) + define("SOFTCAP", number_literal(s.attention.softcap, 9)) +
             define("WINDOW", k.window) + flag("BIDIRECTIONAL", k.bidirectional) + flag("ALIBI", s.position.kind == PositionKind::Alibi) +
             (s.position.kind == PositionKind::Alibi ? float_array("SLOPES", alibi_slopes(s.dims.heads)) : "") +
             flag("CROSS", k.cross) + flag("CROSS_IMAGES", k.image_cross) + flag("IMAGE_SPANS", k.image_spans) +
             define("IMAGE_ROWS", k.image_spans ? s.vision.image_features() : 0) + flag("RELATIVE", relative) +
             define("REL_MAX", relative ? s.position.max_distance : int64_t{0}) +
             (relative ? uint_array("REL_BUCKET", relative_buckets(s, k.bidirectional)) : "");
    }
    case kernels::Family::Tiles:
      return define("D", k.width) + weight_constants(k.dtype, k.width) + define("FORM", std::to_string(k.tile_form)) +
             define("TILES", k.tiles) + define("TILE_ROWS", k.tile_rows) + define("PAD", k.tile_pad) +
             define("STATES", k.states) + define("STACK_SLOT", k.slot);
    case kernels::Family::AttentionCombine: return define("HQ", s.dims.heads) + define("DH", s.dims.head_dim);
    case kernels::Family::Argmax: return define("V", s.dims.vocab);
    case kernels::Family::MoeRoute:
    {
      const spec::Moe& m = s.moe;
      return define("E", m.experts) + define("TOPK", m.top_k) + flag("NORM_TOPK", m.norm_topk_prob) +
             define("LOGITS_STRIDE", k.stride) + flag("SIGMOID", m.scoring == spec::MoeScoring::Sigmoid) +
             flag("CORRECTION_BIAS", m.correction_bias) + flag("GROUPED", m.groups > 1) + define("GROUPS", m.groups) +
             define("TOPK_GROUPS", m.topk_groups) + flag("GROUP_TOP2", m.group_score == spec::GroupScore::Top2Sum) +
             flag("SCALED", m.routed_scaling_factor != 1.0) + define("ROUTED_SCALE", number_literal(m.routed_scaling_factor, 9));
    }
    case kernels::Family::MoeCombine:
      return define("D", s.dims.hidden) + define("E", s.moe.experts) + define("TOPK", s.moe.top_k) +
             flag("SHARED", k.shared > 0) + flag("SHARED_GATED", k.shared > 1) + define("GATE_STRIDE", k.stride) + define("GATE_OFFSET", k.offset);
    case kernels::Family::SsmConv:
      return define("CH", s.ssm.conv_channels()) + define("XOFF", s.ssm.conv_offset()) +
             define("XSTRIDE", s.ssm.in_width()) + define("DC", s.ssm.d_conv) + flag("CONV_BIAS", s.ssm.conv_bias) +
             flag("WINDOWED", s.ssm.d_conv > 1) + define("CPW", kernels::kSsmChannelsPerGroup);
    case kernels::Family::SsmScan:
      return define("DI", s.ssm.d_inner) + define("N", s.ssm.d_state) + define("R", s.ssm.dt_rank) +
             flag("A_LOG", s.ssm.a_log) + define("CPW", kernels::kSsmChannelsPerGroup);
    case kernels::Family::Mamba2Scan:
    case kernels::Family::Mamba2Chunk: {
      const std::string both =
          define("DI", s.ssm.d_inner) + define("N", s.ssm.d_state) + define("H", s.ssm.heads) +
          define("G", s.ssm.groups) + define("XSTRIDE", s.ssm.in_width()) + flag("A_LOG", s.ssm.a_log) +
          define("DT_MIN", number_literal(s.ssm.dt_min, 9)) + flag("DT_CLAMP", s.ssm.dt_upper() > 0) +
          define("DT_MAX", number_literal(s.ssm.dt_upper(), 9));
      if (k.family == kernels::Family::Mamba2Scan) return both + define("CPW", kernels::kSsmChannelsPerGroup);
      return both + define("Q", kernels::kMamba2ChunkRows) +
             define("PB", kernels::mamba2_chunk_channels(s.ssm.d_inner / s.ssm.heads, s.ssm.d_state)) +
             define("THREADS", kernels::kMamba2ChunkThreads);
    }
    case kernels::Family::Mla:
      return define("H", s.dims.heads) + define("NOPE", s.mla.qk_nope_head_dim) + define("ROPE", s.mla.qk_rope_head_dim) +
             define("RANK", s.mla.kv_lora_rank) + define("VD", s.mla.v_head_dim) + flag("QUERY", k.query) +
             flag("SPLIT", k.split) + flag("ROPE_ONLY", k.expand);
    case kernels::Family::Quantize: {
      const lower::Epilogue& e = k.epilogue;  // its norm: the matmuls' that read xq
      const int norm = !e.norm ? 0 : s.norm.kind == NormKind::RMSNorm ? 1 : 2;
      // experts 2: the expert down projection's input, whose rows are the
      // slots (TOPK a token row): a workgroup quantizes a token row's slots.
      return define("K", k.width) + define("XQ_ROW_WORDS", kernels::xq_row_words(k.width)) +
             define("GROUP_BLOCKS", kernels::kQuantizeGroupBlocks) + define("ROW_FACTOR", e.experts == 2 ? s.moe.top_k : int64_t{1}) +
             define("NORM", std::to_string(norm)) + define("NORM_EPS", number_literal(s.norm.eps, 9)) +
             flag("NORM_BIAS", e.norm && s.norm.bias) + flag("NORM_UNIT_OFFSET", e.norm && s.norm.unit_offset);
    }
    case kernels::Family::MlaPrefill:
      return head_constants(s) + define("H", s.dims.heads) + define("NOPE", s.mla.qk_nope_head_dim) +
             define("ROPE", s.mla.qk_rope_head_dim) + define("RANK", s.mla.kv_lora_rank) +
             define("VD", s.mla.v_head_dim) + flag("SPLIT", k.split) + flag("EXPAND", k.expand) +
             define("KB", kernels::kMlaExpandKeys) +
             define("SCALE", number_literal(s.attention.effective_scale(s.dims.head_dim), 9)) +
             flag("SOFTCAPPED", s.attention.softcap > 0) + define("SOFTCAP", number_literal(s.attention.softcap, 9));
  }
  throw std::logic_error("kernels: unknown family");
}

}  // namespace

KernelInstance kernel_instance(const Spec& s, const KernelKey& key) {
  const kernels::FamilyInfo& f = kernels::family(key.family);
  KernelInstance k;
  k.name = key.name();
  k.source.file = std::string(f.file);
  k.push = &push_layout(key.family);
  k.source.constants = family_constants(s, key) + interface_constants(f);
  return k;
}

std::vector<KernelInstance> kernel_instances(const Spec& s, const lower::Plan& plan) {
  std::vector<KernelInstance> out;
  for (const KernelKey& key : plan.kernels) out.push_back(kernel_instance(s, key));
  return out;
}

std::vector<KernelInstance> kernel_instances(const Spec& s) {
  spec::Diagnostics diagnostics(s.file);
  const auto model = lower::plan_model(s, diagnostics);
  if (!model) throw std::runtime_error(diagnostics.format());
  return kernel_instances(s, model->plan);
}

std::vector<KernelInstance> tower_kernel_instances(const Spec& s) {
  spec::Diagnostics diagnostics(s.file);
  const auto tower = lower::plan_tower(s, diagnostics);
  if (!tower) throw std::runtime_error(diagnostics.format());
  return kernel_instances(lower::tower_spec(s), tower->plan);
}

std::vector<kernels::Layout> planned_layouts(std::span<const plan::DeviceClass> classes) {
  std::vector<kernels::Layout> out;
  for (const plan::DeviceClass& c : classes)
    for (const plan::Tile* t : {&c.decode, &c.prefill, &c.batch})
      if (std::find(out.begin(), out.end(), t->layout()) == out.end()) out.push_back(t->layout());
  std::sort(out.begin(), out.end());
  return out;
}

kernels::Layout module_layout(kernels::Layout layout, DType dtype) {
  if (layout == kernels::Layout::Dot && !is_block_dtype(dtype)) return kernels::Layout::Rows;
  return layout;
}

KernelSource layout_source(const KernelSource& source, kernels::Layout layout) {
  KernelSource out = source;
  out.file = std::string(kernels::layout_file(layout));
  return out;
}

namespace {

// The CoopKhr module of a Coop one (of shaders/<file>), checked as far as
// it can be here.
std::vector<uint32_t> coop_khr_module(const std::vector<uint32_t>& coop,
                                      std::string_view file = kernels::layout_file(kernels::Layout::Coop)) {
  const std::vector<uint32_t> khr = coop_khr_from_nv(coop);
  if (const std::string problems = check_coop_khr(khr); !problems.empty())
    throw ShaderError("shaders/" + std::string(file) + ": its KHR cooperative-matrix rewrite: " + problems);
  return khr;
}

}  // namespace

std::vector<uint32_t> compile_layout(const KernelSource& source, kernels::Layout layout) {
  if (layout != kernels::Layout::CoopKhr) return compile_kernel(layout_source(source, layout));
  return coop_khr_module(compile_kernel(layout_source(source, kernels::Layout::Coop)));
}

std::vector<kernels::Layout> flash_layouts(std::span<const plan::DeviceClass> classes) {
  std::vector<kernels::Layout> out;
  for (const plan::DeviceClass& c : classes)
    if (c.flash.rows > 0 && std::find(out.begin(), out.end(), c.prefill.layout()) == out.end()) out.push_back(c.prefill.layout());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint32_t> compile_flash(const KernelSource& source, kernels::Layout layout) {
  KernelSource flash = source;
  flash.file = std::string(kernels::flash_file(layout));
  if (layout != kernels::Layout::CoopKhr) return compile_kernel(flash);
  return coop_khr_module(compile_kernel(flash), flash.file);
}

std::vector<CompiledKernel> compile_kernels(const Spec& s, const lower::Plan& plan) {
  const std::vector<kernels::Layout> layouts = planned_layouts(plan.classes), flash = flash_layouts(plan.classes);
  std::vector<CompiledKernel> out;
  std::vector<KernelInstance> instances = kernel_instances(s, plan);
  for (size_t i = 0; i < instances.size(); ++i) {
    CompiledKernel c{std::move(instances[i]), {}, {}};
    c.layout_module.fill(0xff);
    const KernelKey& key = plan.kernels[i];
    if (key.family != kernels::Family::Matmul) {
      c.modules.push_back({c.instance.source.file, compile_kernel(c.instance.source)});
      c.layout_module.fill(0);
      // attention: a prompt on a class with flash tiles runs the flash
      // module of its matmuls' layout (KHR's rewritten from NV's where both are).
      if (key.family == kernels::Family::Attention)
        for (kernels::Layout l : flash) {
          const uint8_t coop = c.layout_module[static_cast<size_t>(kernels::Layout::Coop)];
          std::vector<uint32_t> spirv = l == kernels::Layout::CoopKhr && coop != 0
                                            ? coop_khr_module(c.modules[coop].spirv, kernels::flash_file(l))
                                            : compile_flash(c.instance.source, l);
          c.layout_module[static_cast<size_t>(l)] = static_cast<uint8_t>(c.modules.size());
          c.modules.push_back({std::string(kernels::flash_file(l)), std::move(spirv)});
        }
    } else {
      std::map<kernels::Layout, uint8_t> compiled;  // by the layout whose module it is
      for (kernels::Layout l : layouts) {
        const kernels::Layout m = module_layout(l, key.dtype);
        auto [at, fresh] = compiled.emplace(m, static_cast<uint8_t>(c.modules.size()));
        if (fresh) {
          // KHR's module is NV's rewritten: the coop file compiles once.
          const auto coop = compiled.find(kernels::Layout::Coop);
          std::vector<uint32_t> spirv = m == kernels::Layout::CoopKhr && coop != compiled.end()
                                            ? coop_khr_module(c.modules[coop->second].spirv)
                                            : compile_layout(c.instance.source, m);
          c.modules.push_back({std::string(kernels::layout_file(m)), std::move(spirv)});
        }
        c.layout_module[static_cast<size_t>(l)] = at->second;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string emit_kernels_source(const Spec& s, const std::string& spec_path, const std::vector<CompiledKernel>& kernels,
                                const std::string& ns, const std::string& header) {
  const std::string space = ns.empty() ? model_namespace(s.name) : ns;
  std::string out = "// Generated by lathe from " + spec_path +
                    " — do not edit. SPIR-V of every kernel instance of the model.\n"
                    "#include <cstddef>\n#include <cstdint>\n#include <iterator>\n\n"
                    "#include \"" + header + "\"\n"
                    "#include \"runtime/model/model_info.hpp\"\n\n"
                    "namespace lathe::models::" + space + " {\n\n";
  out += "namespace {\n";
  // A kernel's modules: <name>_m<i>, its table <name>_modules.
  for (const CompiledKernel& c : kernels) {
    const KernelInstance& k = c.instance;
    std::string table;
    for (size_t m = 0; m < c.modules.size(); ++m) {
      const std::vector<uint32_t>& words = c.modules[m].spirv;
      const std::string id = k.name + "_m" + std::to_string(m);
      out += "// shaders/" + c.modules[m].file + "\nconstexpr uint32_t " + id + "[] = {";
      for (size_t i = 0; i < words.size(); ++i) {
        if (i % 8 == 0) out += "\n   ";
        char word[16];
        std::snprintf(word, sizeof word, " 0x%08x,", words[i]);
        out += word;
      }
      out += "\n};\n";
      table += "    {\"" + c.modules[m].file + "\", " + id + ", std::size(" + id + ")},\n";
    }
    out += "constexpr KernelModule " + k.name + "_modules[] = {\n" + table + "};\n";
  }
  out += "}  // namespace\n\nextern const KernelBinary kernels[] = {\n";
  for (const CompiledKernel& c : kernels) {
    const KernelInstance& k = c.instance;
    std::string layouts;
    for (size_t l = 0; l < c.layout_module.size(); ++l) layouts += (l ? ", " : "") + std::to_string(c.layout_module[l]);
    out += "    {\"" + k.name + "\", " + k.name + "_modules, {" + layouts + "}, sizeof(push::" + k.push->name + ")},\n";
  }
  out += "};\nextern const size_t kernel_count = std::size(kernels);\n\n";
  // Both tables come from the plan's one kernel list; this pins their order.
  out += "static_assert(plan_kernels.size() == " + std::to_string(kernels.size()) + ");\n";
  for (size_t i = 0; i < kernels.size(); ++i)
    out += "static_assert(plan_kernels[" + std::to_string(i) + "].name == std::string_view(\"" + kernels[i].instance.name +
           "\"));\n";
  out += "\n}  // namespace lathe::models::" + space + "\n";
  return out;
}

std::string dump_kernels(const std::vector<CompiledKernel>& kernels) {
  std::string out;
  for (const CompiledKernel& c : kernels) {
    const KernelInstance& k = c.instance;
    for (const CompiledModule& m : c.modules) {
      KernelSource source = k.source;
      source.file = m.file;
      out += "==== " + k.name + " (shaders/" + m.file + ")\n" + assemble_glsl(source) + "\n";
      out += "==== " + k.name + " SPIR-V (shaders/" + m.file + ")\n" + disassemble_spirv(m.spirv) + "\n";
    }
  }
  return out;
}

}  // namespace lathe::emit
