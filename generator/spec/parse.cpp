// Reading the TOML spec: a small schema-driven reader over toml++ that marks
// every key it consumes, so that whatever is left is an unknown key.
#include "generator/spec/parse.hpp"

#include <toml++/toml.h>

#include <cmath>
#include <fstream>
#include <set>
#include <span>
#include <sstream>

namespace lathe::spec {
namespace {

Loc loc_of(const toml::node& node) {
  const auto& begin = node.source().begin;
  return Loc{begin.line, begin.column};
}

const char* type_word(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}


// Reads one TOML table. Every get_* marks its key as known; finish() reports
// the keys nobody asked for, with a suggestion from the known ones.
class Table {
 public:
  Table(const toml::table* table, std::string path, Loc loc, Spec& spec, Diagnostics& diag)
      : table_(table), path_(std::move(path)), loc_(loc), spec_(spec), diag_(diag) {
    if (table_ != nullptr) spec_.locations[path_] = loc_;
  }

  bool present() const { return table_ != nullptr; }
  Loc loc() const { return loc_; }
  bool has(std::string_view key) {
    known_.insert(std::string(key));
    return table_ != nullptr && table_->contains(key);
  }

  std::optional<int64_t> integer(std::string_view key, bool required, int64_t min, int64_t max) {
    const toml::node* node = node_of(key, required);
    if (node == nullptr) return std::nullopt;
    // Type first: toml++'s value<int64_t>() of a float casts it to int64
    // before checking its range, undefined for 1e300.
    if (!node->is_integer()) return wrong_type(key, *node, "an integer");
    auto value = node->value<int64_t>();
    if (!value) return wrong_type(key, *node, "an integer");
    if (*value < min || *value > max) {
      error(*node, full(key) + " must be " + range_text(min, max) + " (found " + std::to_string(*value) + ")");
      return std::nullopt;
    }
    return value;
  }

  // Floats accept integers too (theta = 10000).
  std::optional<double> number(std::string_view key, bool required, double min, double max, bool min_exclusive) {
    const toml::node* node = node_of(key, required);
    if (node == nullptr) return std::nullopt;
    if (!node->is_number()) return wrong_type(key, *node, "a number");
    const double value = *node->value<double>();
    if (!std::isfinite(value) || value < min || (min_exclusive && value == min) || value > max) {
      std::ostringstream out;
      out << full(key) << " must be " << (min_exclusive ? "greater than " : "at least ") << min;
      if (max < 1e300) out << " and at most " << max;
      out << " (found " << value << ")";
      error(*node, out.str());
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> boolean(std::string_view key) {
    const toml::node* node = node_of(key, false);
    if (node == nullptr) return std::nullopt;
    if (!node->is_boolean()) return wrong_type(key, *node, "true or false");
    return node->value<bool>();
  }

  std::optional<std::string> string(std::string_view key, bool required) {
    const toml::node* node = node_of(key, required);
    if (node == nullptr) return std::nullopt;
    if (!node->is_string()) return wrong_type(key, *node, "a string");
    return node->value<std::string>();
  }

  template <class E>
  std::optional<E> choice(std::string_view key, bool required, std::span<const Spelling<E>> choices = spellings(E{})) {
    const toml::node* node = node_of(key, required);
    if (node == nullptr) return std::nullopt;
    std::vector<std::string> words;
    for (const auto& c : choices) words.emplace_back(c.key);
    if (!node->is_string()) return wrong_type(key, *node, "one of " + join(words));
    const std::string value = *node->value<std::string>();
    for (const auto& c : choices)
      if (value == c.key) return c.value;
    std::string message = full(key) + ": unknown value \"" + value + "\"; expected one of " + join(words);
    const std::string near = closest_match(value, words);
    if (!near.empty()) message += " (did you mean \"" + near + "\"?)";
    error(*node, message);
    return std::nullopt;
  }

  const toml::array* array(std::string_view key) {
    const toml::node* node = node_of(key, false);
    if (node == nullptr) return nullptr;
    if (!node->is_array()) {
      wrong_type(key, *node, "an array");
      return nullptr;
    }
    return node->as_array();
  }

  // An array of layer numbers (integers from 0; their range against
  // dims.layers is validate's), or nothing with an error at the first
  // item that is not one.
  std::vector<int64_t> layer_numbers(std::string_view key) {
    std::vector<int64_t> out;
    if (const toml::array* items = array(key)) {
      for (const toml::node& item : *items) {
        if (!item.is_integer() || *item.value<int64_t>() < 0) {
          error(item, full(key) + ": expected layer numbers (integers from 0), found " + std::string(type_word(item)));
          return {};
        }
        out.push_back(*item.value<int64_t>());
      }
    }
    return out;
  }

  const toml::node* raw(std::string_view key) { return node_of(key, false); }

  Table sub(std::string_view key) {
    const toml::node* node = node_of(key, false);
    if (node != nullptr && !node->is_table()) {
      wrong_type(key, *node, "a table");
      node = nullptr;
    }
    return Table(node ? node->as_table() : nullptr, full(key), node ? loc_of(*node) : loc_, spec_, diag_);
  }

  // Unknown keys are errors, with the nearest known key as a suggestion.
  void finish() {
    if (table_ == nullptr) return;
    const std::vector<std::string> known(known_.begin(), known_.end());
    for (const auto& [key, node] : *table_) {
      const std::string k(key.str());
      if (known_.count(k)) continue;
      std::string message = "unknown key '" + full(k) + "'";
      const std::string near = closest_match(k, known);
      if (!near.empty()) message += " (did you mean '" + full(near) + "'?)";
      const auto& begin = key.source().begin;
      diag_.error(begin.line > 0 ? Loc{begin.line, begin.column} : loc_of(node), message);
    }
  }

  std::string full(std::string_view key) const { return path_.empty() ? std::string(key) : path_ + "." + std::string(key); }
  void error(const toml::node& node, std::string message) { diag_.error(loc_of(node), std::move(message)); }
  void error_here(std::string message) { diag_.error(loc_, std::move(message)); }

 private:
  const toml::node* node_of(std::string_view key, bool required) {
    known_.insert(std::string(key));
    const toml::node* node = table_ != nullptr ? table_->get(key) : nullptr;
    if (node == nullptr) {
      if (required)
        diag_.error(loc_, table_ != nullptr ? "missing required key '" + full(key) + "'"
                                            : "missing required table [" + path_ + "] (with key '" + std::string(key) + "')");
      return nullptr;
    }
    spec_.locations[full(key)] = loc_of(*node);
    return node;
  }

  std::nullopt_t wrong_type(std::string_view key, const toml::node& node, const std::string& expected) {
    error(node, full(key) + ": expected " + expected + ", found " + type_word(node));
    return std::nullopt;
  }

  static std::string range_text(int64_t min, int64_t max) {
    if (max == INT64_MAX) return "at least " + std::to_string(min);
    return "between " + std::to_string(min) + " and " + std::to_string(max);
  }

  static std::string join(const std::vector<std::string>& words) {
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) out += (i ? ", " : "") + ("\"" + words[i] + "\"");
    return out;
  }

  const toml::table* table_;
  std::string path_;
  Loc loc_;
  Spec& spec_;
  Diagnostics& diag_;
  std::set<std::string> known_;
};

constexpr int64_t kMaxDim = int64_t{1} << 24;      // no real width is near 16 Mi
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxContext = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 1024;
constexpr size_t kMaxTensorName = 256;  // GGUF allows 64; Hugging Face names are under 100

// Enumerated keys take the words of their vocabulary's table
// (core/contract.hpp, core/spec.hpp); the KV cache only the dtypes its
// kernels store.
constexpr Spelling<DType> kCacheDTypes[] = {{DType::F32, "f32", "F32"}, {DType::F16, "f16", "F16"}};
// [ssm] kind: the kinds of state-space layer defined (none is its absence).
constexpr Spelling<SsmKind> kSsmKinds[] = {{SsmKind::Mamba, "mamba", "Mamba"}, {SsmKind::Mamba2, "mamba2", "Mamba2"}};

template <class T>
void set(T& field, const std::optional<T>& value) {
  if (value) field = *value;
}

void read_model(Table t, Spec& s) {
  set(s.name, t.string("name", true));
  set(s.source, t.string("source", false));
  set(s.stack, t.choice<Stack>("stack", false));
  set(s.decoder_start, t.integer("decoder_start", false, 0, kMaxVocab));
  t.finish();
}

// head_dim: written, or hidden / heads.
void read_head_dim(Table& t, Dims& d) {
  if (auto hd = t.integer("head_dim", false, 1, 4096)) {
    d.head_dim = *hd;
    d.head_dim_explicit = true;
  } else if (d.heads > 0) {
    d.head_dim = d.hidden / d.heads;
  }
}

// `attention`: the model has attention and MLP layers (not a state-space
// model's only), whose widths are then required.
void read_dims(Table t, Spec& s, bool attention) {
  Dims& d = s.dims;
  set(d.hidden, t.integer("hidden", true, 1, kMaxDim));
  set(d.layers, t.integer("layers", true, 1, kMaxLayers));
  d.encoder_layers = d.layers;
  set(d.encoder_layers, t.integer("encoder_layers", false, 1, kMaxLayers));
  set(d.heads, t.integer("heads", attention, 1, 4096));
  d.kv_heads = d.heads;
  set(d.kv_heads, t.integer("kv_heads", false, 1, 4096));
  read_head_dim(t, d);
  set(d.intermediate, t.integer("intermediate", attention, 1, kMaxDim));
  set(d.vocab, t.integer("vocab", true, 1, kMaxVocab));
  set(d.max_context, t.integer("max_context", true, 1, kMaxContext));
  t.finish();
}

void read_norm(Table t, Spec& s) {
  Norm& n = s.norm;
  set(n.kind, t.choice<NormKind>("kind", false));
  n.bias = n.kind == NormKind::LayerNorm;
  set(n.eps, t.number("eps", false, 0.0, 1.0, true));
  set(n.placement, t.choice<NormPlacement>("placement", false));
  set(n.unit_offset, t.boolean("unit_offset"));
  set(n.bias, t.boolean("bias"));
  set(n.final_norm, t.boolean("final"));
  set(n.first_attn_norm, t.boolean("first_attn_norm"));
  set(n.parallel_shared, t.boolean("parallel_shared"));
  t.finish();
}

void read_attention(Table t, Spec& s) {
  Attention& a = s.attention;
  if (auto all = t.boolean("bias")) a.q_bias = a.k_bias = a.v_bias = a.o_bias = *all;
  set(a.q_bias, t.boolean("q_bias"));
  set(a.k_bias, t.boolean("k_bias"));
  set(a.v_bias, t.boolean("v_bias"));
  set(a.o_bias, t.boolean("o_bias"));
  auto scale = t.number("scale", false, 0.0, 1e300, true);
  auto scalar = t.number("query_pre_attn_scalar", false, 0.0, 1e300, true);
  if (scale && scalar)
    t.error(*t.raw("query_pre_attn_scalar"),
            "attention.scale and attention.query_pre_attn_scalar both set the score scale; keep one");
  if (scale) a.scale = *scale;
  if (scalar) a.scale = 1.0 / std::sqrt(*scalar);
  set(a.softcap, t.number("softcap", false, 0.0, 1e300, false));
  set(a.qk_norm, t.choice<QKNorm>("qk_norm", false));
  set(a.sliding_window, t.integer("sliding_window", false, 1, kMaxContext));
  if (const toml::array* pattern = t.array("window_pattern")) {
    for (const toml::node& item : *pattern) {
      if (!item.is_boolean()) {
        t.error(item, "attention.window_pattern: expected booleans (true: windowed layer), found " +
                          std::string(type_word(item)));
        a.window_pattern.clear();
        break;
      }
      a.window_pattern.push_back(*item.value<bool>());
    }
    if (pattern->empty()) t.error(*t.raw("window_pattern"), "attention.window_pattern must not be empty");
  }
  t.finish();
}

void read_position(Table t, Spec& s) {
  Position& p = s.position;
  set(p.kind, t.choice<PositionKind>("kind", false));
  set(p.pairing, t.choice<RopePairing>("pairing", false));
  set(p.rotary_dim, t.integer("rotary_dim", false, 1, 4096));
  set(p.theta, t.number("theta", false, 0.0, 1e300, true));
  if (auto lt = t.number("local_theta", false, 0.0, 1e300, true)) p.local_theta = *lt;
  set(p.offset, t.integer("offset", false, 0, kMaxContext));
  set(p.table_size, t.integer("table_size", false, 1, kMaxContext));
  set(p.buckets, t.integer("buckets", false, 2, 1024));
  set(p.max_distance, t.integer("max_distance", false, 1, kMaxContext));

  Table sc = t.sub("scaling");
  RopeScalingParams& r = p.scaling;
  set(r.kind, sc.choice<RopeScaling>("kind", sc.present()));
  set(r.factor, sc.number("factor", false, 0.0, 1e6, true));
  set(r.low_freq_factor, sc.number("low_freq_factor", false, 0.0, 1e6, true));
  set(r.high_freq_factor, sc.number("high_freq_factor", false, 0.0, 1e6, true));
  set(r.original_max_context, sc.integer("original_max_context", false, 1, kMaxContext));
  set(r.beta_fast, sc.number("beta_fast", false, 0.0, 1e6, true));
  set(r.beta_slow, sc.number("beta_slow", false, 0.0, 1e6, true));
  if (auto af = sc.number("attention_factor", false, 0.0, 1e6, true)) r.attention_factor = *af;
  set(r.mscale, sc.number("mscale", false, 0.0, 1e6, true));
  set(r.mscale_all_dim, sc.number("mscale_all_dim", false, 0.0, 1e6, true));
  sc.finish();
  t.finish();
}

void read_mlp(Table t, Spec& s) {
  Mlp& m = s.mlp;
  set(m.activation, t.choice<Activation>("activation", false));
  set(m.gated, t.boolean("gated"));
  set(m.bias, t.boolean("bias"));
  set(m.fused_gate_up, t.choice<FusedGateUp>("fused_gate_up", false));
  t.finish();
}

void read_moe(Table t, Spec& s) {
  Moe& m = s.moe;
  if (!t.present()) return;
  set(m.experts, t.integer("experts", true, 1, 4096));
  set(m.top_k, t.integer("top_k", true, 1, 4096));
  set(m.norm_topk_prob, t.boolean("norm_topk_prob"));
  set(m.expert_intermediate, t.integer("expert_intermediate", false, 1, kMaxDim));
  set(m.shared_experts, t.integer("shared_experts", false, 0, 4096));
  set(m.shared_intermediate, t.integer("shared_intermediate", false, 1, kMaxDim));
  set(m.shared_expert_gate, t.boolean("shared_expert_gate"));
  set(m.scoring, t.choice<MoeScoring>("scoring", false));
  set(m.correction_bias, t.boolean("correction_bias"));
  set(m.groups, t.integer("groups", false, 1, 32));
  set(m.topk_groups, t.integer("topk_groups", false, 1, 32));
  set(m.group_score, t.choice<GroupScore>("group_score", false));
  set(m.routed_scaling_factor, t.number("routed_scaling_factor", false, 0.0, 1e6, true));
  set(m.sparse_step, t.integer("sparse_step", false, 1, 1024));
  m.dense_layers = t.layer_numbers("dense_layers");
  t.finish();
}

// [ssm]: a state-space model's layers (Mamba, Mamba-2: every layer).
void read_ssm(Table t, Spec& s) {
  Ssm& m = s.ssm;
  if (!t.present()) return;
  set(m.kind, t.choice<SsmKind>("kind", true, kSsmKinds));
  set(m.d_state, t.integer("d_state", false, 1, 4096));
  set(m.d_conv, t.integer("d_conv", false, 1, 64));
  set(m.expand, t.integer("expand", false, 1, 64));
  set(m.d_inner, t.integer("d_inner", false, 1, kMaxDim));
  set(m.dt_rank, t.integer("dt_rank", false, 1, kMaxDim));
  set(m.heads, t.integer("heads", false, 1, kMaxDim));
  set(m.head_dim, t.integer("head_dim", false, 1, kMaxDim));
  set(m.groups, t.integer("groups", false, 1, kMaxDim));
  set(m.dt_min, t.number("dt_min", false, 0.0, 1e300, false));
  set(m.dt_max, t.number("dt_max", false, 0.0, 1e300, true));
  set(m.conv_bias, t.boolean("conv_bias"));
  set(m.bias, t.boolean("bias"));
  set(m.a_log, t.boolean("a_log"));
  m.attention_layers = t.layer_numbers("attention_layers");
  t.finish();
}

// [mla]: multi-head latent attention (DeepSeek-V2/V3).
void read_mla(Table t, Spec& s) {
  Mla& m = s.mla;
  if (!t.present()) return;
  m.enabled = true;
  set(m.q_lora_rank, t.integer("q_lora_rank", false, 1, kMaxDim));
  set(m.kv_lora_rank, t.integer("kv_lora_rank", true, 1, kMaxDim));
  set(m.qk_nope_head_dim, t.integer("qk_nope_head_dim", true, 1, 4096));
  set(m.qk_rope_head_dim, t.integer("qk_rope_head_dim", true, 1, 4096));
  set(m.v_head_dim, t.integer("v_head_dim", true, 1, 4096));
  set(m.split_kv_b, t.boolean("split_kv_b"));
  t.finish();
}

void read_embedding(Table t, Spec& s) {
  Embedding& e = s.embedding;
  set(e.tied, t.boolean("tied"));
  set(e.norm, t.boolean("norm"));
  set(e.token_types, t.integer("token_types", false, 1, 1024));
  set(e.rows, t.integer("rows", false, 1, int64_t{1} << 31));
  if (const toml::node* scale = t.raw("scale")) {
    if (scale->is_string() && *scale->value<std::string>() == "sqrt_hidden") {
      e.scale_sqrt_hidden = true;
    } else if (scale->is_number() && *scale->value<double>() > 0 && std::isfinite(*scale->value<double>())) {
      e.scale = *scale->value<double>();
    } else {
      t.error(*scale, "embedding.scale: expected a positive number or \"sqrt_hidden\", found " +
                          std::string(type_word(*scale)));
    }
  }
  t.finish();
}

void read_output(Table t, Spec& s) {
  set(s.output.softcap, t.number("softcap", false, 0.0, 1e300, false));
  set(s.output.bias, t.boolean("bias"));
  set(s.output.scale, t.number("scale", false, 0.0, 1e300, true));
  t.finish();
}

// [weights.dtypes]: role = "q6_k" (every layer) or role = ["q6_k", "q4_k", …]
// (one per layer; validate() checks the count). Matrices only: a block dtype
// is refused for nothing here, the kernels' widths are checked by lathe gen.
void read_role_dtypes(Table t, Weights& w) {
  if (!t.present()) return;
  const std::vector<std::string> words = [] {
    std::vector<std::string> out;
    for (const auto& c : spellings(DType{})) out.emplace_back(c.key);
    return out;
  }();
  auto one = [&](const toml::node& node, const std::string& key) -> std::optional<DType> {
    const std::optional<std::string> text = node.value<std::string>();
    if (!node.is_string() || !text) {
      t.error(node, t.full(key) + ": expected a dtype or an array of dtypes (one per layer), found " + type_word(node));
      return std::nullopt;
    }
    if (auto d = from_key<DType>(*text)) return d;
    std::string message = t.full(key) + ": unknown dtype \"" + *text + "\"";
    const std::string near = closest_match(*text, words);
    if (!near.empty()) message += " (did you mean \"" + near + "\"?)";
    t.error(node, message);
    return std::nullopt;
  };
  for (const std::string& role : role_names()) {
    const toml::node* node = t.raw(role);
    if (node == nullptr) continue;
    std::vector<DType> dtypes;
    if (const toml::array* list = node->as_array()) {
      if (list->empty()) t.error(*node, t.full(role) + ": an empty array; give one dtype per layer");
      for (const toml::node& item : *list)
        if (auto d = one(item, role)) dtypes.push_back(*d);
      if (dtypes.size() != list->size()) continue;
    } else if (auto d = one(*node, role)) {
      dtypes.push_back(*d);
    } else {
      continue;
    }
    w.role_dtypes[*role_from_name(role)] = std::move(dtypes);
  }
  t.finish();
}

// [weights.names] and [weights.encoder_names]: role = "module.path.{layer}".
void read_names(Table names, const std::string& key, std::map<Role, std::string>& out) {
  if (!names.present()) return;
  for (const std::string& role : role_names()) {
    auto path = names.string(role, false);
    if (!path) continue;
    // The manifest copies each name into every layer's and expert's tensor:
    // a long one would cost its length times up to 2^18 tensors.
    if (path->size() > kMaxTensorName)
      names.error(*names.raw(role), key + role + " is " + std::to_string(path->size()) +
                                        " characters long; tensor names are at most " + std::to_string(kMaxTensorName));
    else
      out[*role_from_name(role)] = *path;
  }
  names.finish();
}

// A weights table's ignore: tensor-name patterns.
void read_ignore(Table& t, Weights& w) {
  if (const toml::array* ignore = t.array("ignore"))
    for (const toml::node& item : *ignore) {
      if (!item.is_string()) t.error(item, t.full("ignore") + ": expected tensor-name patterns (strings)");
      else w.ignore.push_back(*item.value<std::string>());
    }
}

void read_weights(Table t, Spec& s) {
  Weights& w = s.weights;
  set(w.dtype, t.choice<DType>("dtype", false));
  // Unless written, the vector dtype follows the preset and the dtype (resolve_defaults).
  if (const toml::node* v = t.raw("vector_dtype")) {
    auto vd = t.choice<DType>("vector_dtype", false);
    if (vd && is_block_dtype(*vd))
      t.error(*v, "weights.vector_dtype: " + std::string(dtype_name(*vd)) +
                      " blocks hold matrices only; vectors are f32, f16 or bf16");
    else set(w.vector_dtype, vd);
  }
  set(w.max_part_bytes, t.integer("max_part_bytes", false, 1024, int64_t{1} << 40));
  set(w.layout, t.choice<Layout>("layout", false));
  set(w.fused_qkv, t.boolean("fused_qkv"));
  set(w.qkv_layout, t.choice<QkvLayout>("qkv_layout", false));
  if (auto preset = t.string("preset", false)) {
    w.preset = *preset;
    w.names = preset_names(w.preset, s.norm.placement, s.stack);
    if (s.encoder_decoder()) w.encoder_names = preset_encoder_names(w.preset, s.norm.placement);
    if (w.names.empty()) {
      std::string message = "weights.preset: unknown preset \"" + w.preset + "\"";
      const std::string near = closest_match(w.preset, preset_list());
      if (!near.empty()) message += " (did you mean \"" + near + "\"?)";
      t.error(*t.raw("preset"), message);
    }
  }
  read_ignore(t, w);
  read_role_dtypes(t.sub("dtypes"), w);
  read_names(t.sub("names"), "weights.names.", w.names);
  read_names(t.sub("encoder_names"), "weights.encoder_names.", w.encoder_names);
  t.finish();
}

void read_pooling(Table t, Spec& s) {
  set(s.pooling.kind, t.choice<Pooling>("kind", t.present()));
  set(s.pooling.normalize, t.boolean("normalize"));
  t.finish();
}

void read_cache(Table t, Spec& s) {
  set(s.cache.dtype, t.choice<DType>("dtype", false, kCacheDTypes));
  t.finish();
}

// [vision.tokens]: ids of the decoder's vocabulary (their range against
// dims.vocab is validate's).
void read_image_tokens(Table t, ImageTokens& k) {
  set(k.marker, t.integer("marker", false, 0, kMaxVocab));
  set(k.image, t.integer("image", false, 0, kMaxVocab));
  set(k.row_end, t.integer("row_end", false, 0, kMaxVocab));
  set(k.end, t.integer("end", false, 0, kMaxVocab));
  k.prefix = t.layer_numbers("prefix");
  k.suffix = t.layer_numbers("suffix");
  t.finish();
}

void read_projector(Table t, Projector& p) {
  set(p.kind, t.choice<ProjectorKind>("kind", false));
  set(p.activation, t.choice<Activation>("activation", false));
  set(p.bias, t.boolean("bias"));
  set(p.intermediate, t.integer("intermediate", false, 1, kMaxDim));
  set(p.merge, t.integer("merge", false, 1, 64));
  set(p.tokens, t.integer("tokens", false, 1, kMaxContext));
  set(p.norm, t.choice<NormKind>("norm", false));
  set(p.norm_unit_offset, t.boolean("norm_unit_offset"));
  set(p.eps, t.number("eps", false, 0.0, 1.0, true));
  t.finish();
}

// [vision]: the tower's geometry and widths at its top, its norms,
// attention and MLP in the sub-tables the decoder's take ([vision.norm],
// [vision.attention], [vision.mlp]: the same readers, into a Spec of the
// tower), its projector, its image tokens and its weights.
void read_vision(Table t, Spec& s) {
  Vision& v = s.vision;
  if (!t.present()) return;
  v.enabled = true;
  set(v.connection, t.choice<VisionConnection>("connection", false));
  set(v.channels, t.integer("channels", false, 1, 16));
  set(v.patch, t.integer("patch", true, 1, 1024));
  set(v.image_size, t.integer("image_size", false, 1, 1 << 16));
  set(v.longest_edge, t.integer("longest_edge", false, 1, 1 << 16));
  set(v.tiles, t.integer("tiles", false, 1, 64));
  Dims& d = v.dims;
  set(d.hidden, t.integer("hidden", true, 1, kMaxDim));
  set(d.layers, t.integer("layers", true, 1, kMaxLayers));
  set(d.heads, t.integer("heads", true, 1, 4096));
  d.kv_heads = d.heads;
  read_head_dim(t, d);
  set(d.intermediate, t.integer("intermediate", true, 1, kMaxDim));
  set(v.positions, t.choice<VisionPositions>("positions", false));
  set(v.rope_theta, t.number("rope_theta", false, 0.0, 1e300, true));
  set(v.rope_pairing, t.choice<RopePairing>("rope_pairing", false));
  set(v.class_token, t.boolean("class_token"));
  set(v.patch_bias, t.boolean("patch_bias"));
  set(v.pre_norm, t.boolean("pre_norm"));
  set(v.post_norm, t.boolean("post_norm"));
  set(v.feature_layer, t.integer("feature_layer", false, -kMaxLayers, kMaxLayers));
  v.extra_feature_layers = t.layer_numbers("extra_feature_layers");
  set(v.global_layers, t.integer("global_layers", false, 0, kMaxLayers));
  set(v.drop_class_token, t.boolean("drop_class_token"));
  set(v.image_bidirectional, t.boolean("image_bidirectional"));
  v.cross_layers = t.layer_numbers("cross_layers");

  // The tower's norm, attention and MLP read as the decoder's are, into a
  // Spec of the tower; its keys' positions go to the model's spec.
  Spec tower;
  tower.norm.placement = NormPlacement::Pre;
  tower.norm.kind = NormKind::LayerNorm;
  tower.norm.bias = true;
  tower.mlp.activation = Activation::GeluErf;
  tower.mlp.gated = false;
  tower.mlp.bias = true;
  tower.attention.q_bias = tower.attention.k_bias = tower.attention.v_bias = tower.attention.o_bias = true;
  read_norm(t.sub("norm"), tower);  // layernorm, with a bias unless told
  read_attention(t.sub("attention"), tower);
  read_mlp(t.sub("mlp"), tower);
  v.norm = tower.norm;
  v.attention = tower.attention;
  v.mlp = tower.mlp;
  read_projector(t.sub("projector"), v.projector);
  read_image_tokens(t.sub("tokens"), v.tokens);

  Table w = t.sub("weights");
  set(v.weights.dtype, w.choice<DType>("dtype", false));
  set(v.weights.layout, w.choice<Layout>("layout", false));
  if (auto preset = w.string("preset", false)) {
    v.weights.preset = *preset;
    v.weights.names = vision_preset_names(*preset, v);
    v.weights.encoder_names = vision_preset_global_names(*preset);
    if (v.weights.names.empty()) {
      std::string message = "vision.weights.preset: unknown preset \"" + *preset + "\"";
      const std::string near = closest_match(*preset, vision_preset_list());
      if (!near.empty()) message += " (did you mean \"" + near + "\"?)";
      w.error(*w.raw("preset"), message);
    }
  }
  read_ignore(w, v.weights);
  read_role_dtypes(w.sub("dtypes"), v.weights);
  read_names(w.sub("names"), "vision.weights.names.", v.weights.names);
  read_names(w.sub("global_names"), "vision.weights.global_names.", v.weights.encoder_names);
  w.finish();
  t.finish();
}

// x rounded to `bits` significant bits, ties to even (bf16: 8, f16: 11),
// for a positive normal x.
double round_to_significant_bits(double x, int bits) {
  int exponent = 0;
  const double mantissa = std::frexp(x, &exponent);  // [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(mantissa, bits)), exponent - bits);
}

// Defaults that depend on other fields.
void resolve_defaults(Spec& s) {
  RopeScalingParams& sc = s.position.scaling;
  if (sc.kind == RopeScaling::Yarn && !sc.attention_factor && sc.mscale > 0 && sc.mscale_all_dim > 0)
    sc.attention_factor = yarn_mscale(sc.factor, sc.mscale) / yarn_mscale(sc.factor, sc.mscale_all_dim);
  if (s.mla.enabled) {
    // The cache's and the attention kernel's geometry: one head of the latent
    // and the rotary key; the rotation on the key's rotary part only. The
    // score scale is of the heads' q·k width (nope + rope), times DeepSeek's
    // YaRN magnitude squared.
    const Mla& m = s.mla;
    s.dims.kv_heads = 1;
    s.dims.head_dim = m.cache_width();
    s.dims.head_dim_explicit = true;
    if (s.position.rotary_dim == 0) s.position.rotary_dim = m.qk_rope_head_dim;
    if (!s.attention.scale) {
      double scale = 1.0 / std::sqrt(static_cast<double>(m.qk_head_dim()));
      if (sc.kind == RopeScaling::Yarn && sc.mscale_all_dim > 0) {
        const double ms = yarn_mscale(sc.factor, sc.mscale_all_dim);
        scale *= ms * ms;
      }
      s.attention.scale = scale;
    }
  }
  if (s.position.rotary_dim == 0) s.position.rotary_dim = s.dims.head_dim;
  if (s.position.table_size == 0) s.position.table_size = s.dims.max_context + s.position.offset;
  if (s.moe.expert_intermediate == 0) s.moe.expert_intermediate = s.dims.intermediate;
  if (s.moe.shared_intermediate == 0) s.moe.shared_intermediate = s.moe.expert_intermediate;
  if (s.ssm.enabled()) {
    // transformers' MambaConfig: intermediate_size = expand · hidden_size,
    // time_step_rank "auto" = ceil(hidden_size / 16).
    if (s.ssm.d_inner == 0) s.ssm.d_inner = s.ssm.expand * s.dims.hidden;
    if (s.ssm.mamba2()) {
      // Mamba2Config: state_size 128, num_heads = d_inner / head_dim; no dt_proj.
      if (!s.locations.count("ssm.d_state")) s.ssm.d_state = 128;
      if (s.ssm.heads == 0) s.ssm.heads = s.ssm.d_inner / s.ssm.head_dim;
    } else if (s.ssm.dt_rank == 0) {
      s.ssm.dt_rank = (s.dims.hidden + 15) / 16;
    }
    // No attention: no positions either (a hybrid's attention layers have them).
    if (!s.ssm.hybrid() && !s.locations.count("position")) s.position.kind = PositionKind::None;
  }
  if (s.moe.topk_groups == 0) s.moe.topk_groups = s.moe.groups;
  if (!s.locations.count("weights.vector_dtype"))
    s.weights.vector_dtype = s.weights.preset == "gguf" || is_block_dtype(s.weights.dtype) ? DType::F32 : s.weights.dtype;
  // Hugging Face's Gemma multiplies by sqrt(hidden) as a tensor of the
  // embeddings' dtype: rounded to bf16 or f16 when the checkpoint is (sqrt(1152)
  // = 33.94 is 34.0 in bf16).
  if (s.vision.enabled) {
    Vision& v = s.vision;
    if (v.projector.intermediate == 0) v.projector.intermediate = s.dims.hidden;
    if (!s.locations.count("vision.weights.dtype")) v.weights.dtype = s.weights.dtype;
    // (llama.cpp's mmproj files keep vectors in f32, as its text files do.)
    v.weights.vector_dtype =
        is_block_dtype(v.weights.dtype) || v.weights.preset == "gguf" ? DType::F32 : v.weights.dtype;
    if (v.tokens.image < 0) v.tokens.image = v.tokens.marker;
    // The rows of the tower's one pass: an image's (a tiled tower's: every
    // tile's rows, then their padding rows).
    const int64_t rows = v.positions_count();
    v.dims.max_context = v.tiles > 0 ? v.tiles * (rows + tile_padding(rows)) : rows;
  }
  if (s.embedding.scale_sqrt_hidden) {
    const double root = std::sqrt(static_cast<double>(s.dims.hidden));
    const int bits = s.weights.dtype == DType::BF16 ? 8 : s.weights.dtype == DType::F16 ? 11 : 0;
    s.embedding.scale = bits ? round_to_significant_bits(root, bits) : root;
  }
}

}  // namespace

std::optional<Spec> parse_spec_string(std::string_view text, const std::string& file, Diagnostics& diag) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    diag.error(Loc{begin.line, begin.column}, std::string(e.description()));
    return std::nullopt;
  }

  Spec s;
  s.file = file;
  Table top(&root, "", Loc{1, 1}, s, diag);
  // Order matters only where a default depends on an earlier table:
  // norm before weights (norm names follow the placement).
  read_model(top.sub("model"), s);
  {
    // A state-space model's layers have no attention or MLP widths (a
    // hybrid's, attention layers listed in [ssm], do).
    const toml::table* ssm = root["ssm"].as_table();
    const toml::array* hybrid = ssm ? (*ssm)["attention_layers"].as_array() : nullptr;
    Table dims = top.sub("dims");
    if (!dims.present()) diag.error(Loc{1, 1}, "missing required table [dims]");
    else read_dims(dims, s, !ssm || (hybrid && !hybrid->empty()));
  }
  read_norm(top.sub("norm"), s);
  read_attention(top.sub("attention"), s);
  read_position(top.sub("position"), s);
  read_mlp(top.sub("mlp"), s);
  read_moe(top.sub("moe"), s);
  read_ssm(top.sub("ssm"), s);
  read_mla(top.sub("mla"), s);
  read_embedding(top.sub("embedding"), s);
  read_output(top.sub("output"), s);
  read_weights(top.sub("weights"), s);
  read_cache(top.sub("cache"), s);
  read_pooling(top.sub("pooling"), s);
  read_vision(top.sub("vision"), s);
  top.finish();
  resolve_defaults(s);

  if (!diag.empty()) return std::nullopt;
  validate(s, diag);
  if (!diag.empty()) return std::nullopt;
  return s;
}

std::optional<Spec> parse_spec_file(const std::string& path, Diagnostics& diag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diag.error(Loc{}, "cannot open the spec file");
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_spec_string(text.str(), path, diag);
}

}  // namespace lathe::spec
