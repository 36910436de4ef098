#include "generator/emit/emit_cpp.hpp"

#include <kainjow/mustache.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "generator/spec/manifest.hpp"

namespace lathe::embedded {
std::string_view templates(std::string_view name);
}

namespace lathe::emit {
namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;
using namespace lathe::spec;


const char* activation_enum(spec::Activation a) {
  switch (a) {
    case spec::Activation::SiLU: return "Activation::SiLU";
    case spec::Activation::GeluErf: return "Activation::GeluErf";
    case spec::Activation::GeluTanh: return "Activation::GeluTanh";
    case spec::Activation::ReLU: return "Activation::ReLU";
  }
  return "?";
}

// The handle type of a manifest tensor, in math orientation.
std::string handle_type(const TensorSpec& t, Layout layout) {
  if (t.shape.size() == 1) return "typed::Vector<" + std::to_string(t.shape[0]) + ">";
  const bool transposed = layout == Layout::InOut && is_linear(t.role);
  const int64_t rows = transposed ? t.shape[1] : t.shape[0];
  const int64_t cols = transposed ? t.shape[0] : t.shape[1];
  return "typed::Weight<" + std::to_string(rows) + ", " + std::to_string(cols) + ">";
}

std::string member_name(const TensorSpec& t) { return std::string(spec::name(t.role)) + (t.bias ? "_bias" : ""); }

class Lines {
 public:
  explicit Lines(const Spec& s) : s_(s) {}
  // A schedule statement attributed to the spec key that decides it.
  void add(const std::string& key, const std::string& code) {
    data item;
    item.set("code", code);
    const Loc loc = s_.where(key);
    if (loc.line > 0) {
      data line;
      line.set("line", std::to_string(loc.line));
      item.set("line", line);
    }
    list_.push_back(item);
  }
  kainjow::mustache::list take() { return std::move(list_); }

 private:
  const Spec& s_;
  kainjow::mustache::list list_;
};

void lower_forward(const Spec& s, const std::map<std::string, bool>& has, Lines& out) {
  const Dims& d = s.dims;
  const std::string q_width = std::to_string(d.heads * d.head_dim);
  const std::string kv_width = std::to_string(d.kv_heads * d.head_dim);
  auto bias = [&](const std::string& role) {
    return has.count(role + "_bias") ? ", weights." + role + "_bias[layer]" : std::string();
  };
  auto norm = [&](const std::string& x, const std::string& role, const std::string& index) {
    const std::string w = "weights." + role + index;
    if (s.norm.kind == NormKind::RMSNorm) return "r.rmsnorm(" + x + ", " + w + ", norm_eps)";
    if (!s.norm.bias) return "r.layernorm(" + x + ", " + w + ", norm_eps)";
    return "r.layernorm(" + x + ", " + w + ", weights." + role + "_bias" + index + ", norm_eps)";
  };

  out.add("embedding", "auto x = r.embed(weights.embed, embedding_scale);");
  if (s.position.kind == PositionKind::Learned)
    out.add("position.kind", "x = r.add_positions(x, weights.pos_embed, position_offset);");
  out.add("dims.layers", "for (int32_t layer = 0; layer < layers; ++layer) {");
  out.add("norm.kind", "  auto h = " + norm("x", "attn_norm", "[layer]") + ";");
  if (s.weights.fused_qkv) {
    out.add("weights.fused_qkv", "  auto qkv = r.matmul(weights.qkv[layer], h" + bias("qkv") + ");");
    out.add("dims.heads", "  auto q = r.template split<0, " + q_width + ">(qkv);");
    out.add("dims.kv_heads", "  auto k = r.template split<" + q_width + ", " + kv_width + ">(qkv);");
    out.add("dims.kv_heads", "  auto v = r.template split<" + q_width + " + " + kv_width + ", " + kv_width + ">(qkv);");
  } else {
    out.add("dims.heads", "  auto q = r.matmul(weights.q[layer], h" + bias("q") + ");");
    out.add("dims.kv_heads", "  auto k = r.matmul(weights.k[layer], h" + bias("k") + ");");
    out.add("dims.kv_heads", "  auto v = r.matmul(weights.v[layer], h" + bias("v") + ");");
  }
  if (s.position.kind == PositionKind::Rope)
    out.add("position", std::string("  r.template rope<heads, kv_heads, head_dim, rotary_dim>(q, k, RopePairing::") +
                            (s.position.pairing == RopePairing::Neox ? "Neox" : "Interleaved") + ", rope_theta);");
  out.add("dims.kv_heads", "  auto a = r.template attention<heads, kv_heads, head_dim>(q, k, v, layer, attention_scale);");
  out.add("dims.hidden", "  x = r.add(x, r.matmul(weights.o[layer], a" + bias("o") + "));");
  out.add("norm.placement", "  auto m = " + norm("x", "mlp_norm", "[layer]") + ";");
  const std::string act = activation_enum(s.mlp.activation);
  const std::string width = std::to_string(d.intermediate);
  if (s.mlp.gated && s.mlp.fused_gate_up != FusedGateUp::None) {
    const bool gate_first = s.mlp.fused_gate_up == FusedGateUp::GateUp;
    out.add("mlp.fused_gate_up", "  auto gu = r.matmul(weights.gate_up[layer], m" + bias("gate_up") + ");");
    out.add("mlp.fused_gate_up", "  auto g = r.template split<" + std::string(gate_first ? "0" : width) + ", " + width + ">(gu);");
    out.add("mlp.fused_gate_up", "  auto u = r.template split<" + std::string(gate_first ? width : "0") + ", " + width + ">(gu);");
    out.add("mlp.activation", "  auto f = r.gated(g, u, " + act + ");");
  } else if (s.mlp.gated) {
    out.add("dims.intermediate", "  auto g = r.matmul(weights.gate[layer], m" + bias("gate") + ");");
    out.add("dims.intermediate", "  auto u = r.matmul(weights.up[layer], m" + bias("up") + ");");
    out.add("mlp.activation", "  auto f = r.gated(g, u, " + act + ");");
  } else {
    out.add("dims.intermediate", "  auto u = r.matmul(weights.up[layer], m" + bias("up") + ");");
    out.add("mlp.activation", "  auto f = r.activation(u, " + act + ");");
  }
  out.add("dims.hidden", "  x = r.add(x, r.matmul(weights.down[layer], f" + bias("down") + "));");
  out.add("dims.layers", "}");
  if (s.norm.final_norm) out.add("norm.final", "x = " + norm("x", "final_norm", "") + ";");
  out.add("embedding.tied", "r.logits(weights.lm_head, x);");
}

}  // namespace

bool check_supported(const Spec& s, Diagnostics& diag) {
  const size_t before = diag.size();
  auto refuse = [&](const std::string& key, const std::string& what) {
    diag.error(s.where(key), "not supported yet: " + key + (what.empty() ? "" : " (" + what + ")"));
  };
  if (s.norm.placement != NormPlacement::Pre) refuse("norm.placement", std::string("\"") + name(s.norm.placement) + "\"");
  if (s.norm.unit_offset) refuse("norm.unit_offset", "");
  if (s.attention.qk_norm != QKNorm::None) refuse("attention.qk_norm", "");
  if (s.attention.softcap > 0) refuse("attention.softcap", "");
  if (s.attention.sliding_window > 0) refuse("attention.sliding_window", "");
  if (s.attention.scale) refuse(s.locations.count("attention.scale") ? "attention.scale" : "attention.query_pre_attn_scalar", "");
  if (s.position.kind != PositionKind::Rope && s.position.kind != PositionKind::Learned)
    refuse("position.kind", std::string("\"") + name(s.position.kind) + "\"");
  if (s.position.scaling.kind != RopeScaling::None)
    refuse("position.scaling.kind", std::string("\"") + name(s.position.scaling.kind) + "\"");
  if (s.position.local_theta) refuse("position.local_theta", "");
  if (s.moe.enabled()) refuse("moe", "");
  if (s.embedding.scale != 1.0) refuse("embedding.scale", "");
  if (s.output.softcap > 0) refuse("output.softcap", "");
  if (s.cache.dtype != DType::F16 && s.cache.dtype != DType::F32)
    refuse("cache.dtype", std::string("\"") + name(s.cache.dtype) + "\"");
  // matmul.comp reads weight rows in 16-byte texels: 8 values of a 16-bit
  // dtype (4 of f32), and q/k/v in pairs of dims.
  const int64_t texel = device_dtype(s.weights.dtype) == DType::F32 ? 4 : 8;
  auto multiple = [&](const std::string& key, int64_t value, int64_t of) {
    if (value % of != 0)
      refuse(key, std::to_string(value) + " is not a multiple of " + std::to_string(of) + " (the kernels' texel width)");
  };
  multiple("dims.hidden", s.dims.hidden, texel);
  multiple("dims.intermediate", s.dims.intermediate, texel);
  multiple(s.dims.head_dim_explicit ? "dims.head_dim" : "dims.heads", s.dims.heads * s.dims.head_dim, texel);
  // Attention reads the cache in 16-byte texels of a head row.
  multiple(s.dims.head_dim_explicit ? "dims.head_dim" : "dims.heads", s.dims.head_dim,
           s.cache.dtype == DType::F16 ? 8 : 4);
  if (s.weights.dtype == DType::Q8_0) {
    // Q8_0 blocks of 32 run along each stored row.
    for (const TensorSpec& t : build_sample_manifest(s).tensors) {
      if (t.shape.size() == 2 && t.dtype == DType::Q8_0 && t.shape[1] % 32 != 0)
        refuse("weights.dtype", "\"q8_0\": " + t.name + " has rows of " + std::to_string(t.shape[1]) +
                                   " values, not a multiple of the 32 of a Q8_0 block");
    }
  }
  return diag.size() == before;
}

std::string number_literal(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, v);
  std::string s = buffer;
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // keep it a floating-point literal
  return s;
}

std::string model_namespace(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "m_" + out;
  return out;
}

std::string emit_model_header(const Spec& s, const std::string& spec_path, const std::string& header_name) {
  const Dims& d = s.dims;
  const Manifest manifest = build_manifest(s);

  data root;
  root.set("spec_file", spec_path);
  root.set("name", s.name);
  if (!s.source.empty()) root.set("source", s.source);
  root.set("namespace", model_namespace(s.name));

  kainjow::mustache::list constants;
  auto constant = [&](const std::string& ident, const std::string& type, const std::string& value,
                      const std::string& key, const std::string& comment) {
    data c;
    c.set("ident", ident);
    c.set("type", type);
    c.set("value", value);
    c.set("line", std::to_string(std::max<uint32_t>(1, s.where(key).line)));
    if (!comment.empty()) c.set("comment", comment);
    constants.push_back(c);
  };
  auto i = [](int64_t v) { return std::to_string(v); };
  constant("hidden", "int64_t", i(d.hidden), "dims.hidden", "d");
  constant("layers", "int32_t", i(d.layers), "dims.layers", "");
  constant("heads", "int64_t", i(d.heads), "dims.heads", "H_q");
  constant("kv_heads", "int64_t", i(d.kv_heads), "dims.kv_heads", "H_kv; query head h reads KV head h / (H_q / H_kv)");
  constant("head_dim", "int64_t", i(d.head_dim), d.head_dim_explicit ? "dims.head_dim" : "dims.heads", "d_h");
  constant("head_dim_explicit", "bool", d.head_dim_explicit ? "true" : "false", "dims.head_dim", "");
  constant("intermediate", "int64_t", i(d.intermediate), "dims.intermediate", "");
  constant("vocab", "int64_t", i(d.vocab), "dims.vocab", "");
  constant("max_context", "int64_t", i(d.max_context), "dims.max_context", "");
  constant("norm_eps", "double", number_literal(s.norm.eps), "norm.eps", name(s.norm.kind));
  constant("rotary_dim", "int64_t", i(s.position.rotary_dim), "position.rotary_dim", name(s.position.pairing));
  constant("rope_theta", "double", number_literal(s.position.theta), "position.theta", "");
  constant("position_offset", "int64_t", i(s.position.offset), "position.offset", "learned positions");
  constant("attention_scale", "double", number_literal(s.attention.effective_scale(d.head_dim)), "attention.scale", "");
  constant("sliding_window", "int64_t", i(s.attention.sliding_window), "attention.sliding_window", "0: none");
  constant("embedding_scale", "double", number_literal(s.embedding.scale), "embedding.scale", "");
  constant("tied_embeddings", "bool", s.embedding.tied ? "true" : "false", "embedding.tied", "");
  constant("cache_dtype", "DType", "DType::" + std::string(spelling(s.cache.dtype).enumerator), "cache.dtype",
           "KV cache elements");
  root.set("constants", constants);

  kainjow::mustache::list asserts;
  auto contract = [&](const std::string& expr, const std::string& message, const std::string& key) {
    data a;
    a.set("expr", expr);
    a.set("message", message);
    a.set("line", std::to_string(std::max<uint32_t>(1, s.where(key).line)));
    asserts.push_back(a);
  };
  contract("head_dim_explicit || hidden == heads * head_dim", "hidden is not heads * head_dim (d = H_q * d_h)", "dims.heads");
  contract("heads % kv_heads == 0", "heads is not a multiple of kv_heads", "dims.kv_heads");
  contract("rotary_dim % 2 == 0 && rotary_dim <= head_dim", "rotary_dim must be even and at most head_dim",
           "position.rotary_dim");
  contract("sliding_window <= max_context", "sliding_window is larger than max_context", "attention.sliding_window");
  root.set("asserts", asserts);

  kainjow::mustache::list entries;
  std::map<std::string, bool> has;
  std::map<std::string, std::string> member_types;
  std::map<std::string, int> member_dims;  // 0: global, 1: per layer, 2: per layer and expert
  std::map<std::string, bool> member_transposed;  // stored [in, out]
  std::vector<std::string> member_order;
  kainjow::mustache::list assignments;
  for (size_t t = 0; t < manifest.tensors.size(); ++t) {
    const TensorSpec& ts = manifest.tensors[t];
    data e;
    e.set("role", std::string(spelling(ts.role).enumerator));
    e.set("bias", ts.bias ? "true" : "false");
    e.set("layer", i(ts.layer));
    e.set("expert", i(ts.expert));
    e.set("name", ts.name);
    e.set("rank", i(static_cast<int64_t>(ts.shape.size())));
    e.set("shape", "{" + i(ts.shape[0]) + ", " + i(ts.shape.size() > 1 ? ts.shape[1] : 1) + "}");
    e.set("dtype", std::string(spelling(ts.dtype).enumerator));
    entries.push_back(e);

    const std::string member = member_name(ts);
    if (!has.count(member)) {
      has[member] = true;
      member_order.push_back(member);
      member_types[member] = handle_type(ts, s.weights.layout);
      member_dims[member] = ts.expert >= 0 ? 2 : ts.layer >= 0 ? 1 : 0;
      member_transposed[member] = s.weights.layout == Layout::InOut && is_linear(ts.role) && !ts.bias;
    }
    std::string lhs = member;
    if (ts.layer >= 0) lhs += "[" + i(ts.layer) + "]";
    if (ts.expert >= 0) lhs += "[" + i(ts.expert) + "]";
    data a;
    a.set("lhs", lhs);
    a.set("rhs", "{" + i(static_cast<int64_t>(t)) + "}");
    assignments.push_back(a);
  }
  if (s.embedding.tied) {
    // The LM head is the embedding matrix: same tensor, same handle type.
    member_order.push_back("lm_head");
    member_types["lm_head"] = member_types["embed"];
    member_dims["lm_head"] = 0;
    data a;
    a.set("lhs", "lm_head");
    a.set("rhs", "w.embed");
    assignments.push_back(a);
    has["lm_head"] = true;
  }
  kainjow::mustache::list members;
  for (const std::string& m : member_order) {
    std::string type = member_types[m];
    if (member_dims[m] == 2) type = "std::array<" + type + ", " + i(s.moe.experts) + ">";
    if (member_dims[m] >= 1) type = "std::array<" + type + ", " + i(d.layers) + ">";
    data item;
    item.set("ident", m);
    item.set("type", type);
    item.set("transposed", member_transposed[m] ? "true" : "false");
    if (m == "lm_head" && s.embedding.tied) item.set("comment", "tied: the embedding matrix");
    members.push_back(item);
  }
  root.set("manifest", entries);
  root.set("layout", s.weights.layout == Layout::OutIn ? "OutIn" : "InOut");
  kainjow::mustache::list ignore;
  for (const std::string& pattern : s.weights.ignore) {
    data p;
    p.set("pattern", pattern);
    ignore.push_back(p);
  }
  root.set("ignore", ignore);
  root.set("ignore_count", std::to_string(s.weights.ignore.size()));
  root.set("total_params", i(manifest.total_elements()));
  root.set("members", members);
  root.set("assignments", assignments);

  Lines lines(s);
  lower_forward(s, has, lines);
  root.set("schedule", lines.take());

  mustache tmpl{std::string(lathe::embedded::templates("model.hpp.mustache"))};
  tmpl.set_custom_escape([](const std::string& text) { return text; });
  std::string text = tmpl.render(root);
  if (!tmpl.is_valid()) throw std::runtime_error("templates/model.hpp.mustache: " + tmpl.error_message());

  // `#line LATHE_RESET_LINE` returns attribution to the generated file itself.
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line == "#line LATHE_RESET_LINE") line = "#line " + std::to_string(n + 1) + " \"" + header_name + "\"";
    out << line << "\n";
  }
  return out.str();
}

std::string emit_model_source(const Spec& s, const std::string& spec_path) {
  data root;
  root.set("spec_file", spec_path);
  root.set("namespace", model_namespace(s.name));
  mustache tmpl{std::string(lathe::embedded::templates("model.cpp.mustache"))};
  tmpl.set_custom_escape([](const std::string& text) { return text; });
  std::string text = tmpl.render(root);
  if (!tmpl.is_valid()) throw std::runtime_error("templates/model.cpp.mustache: " + tmpl.error_message());
  return text;
}

bool write_if_changed(const std::string& path, const std::string& text) {
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream current;
      current << in.rdbuf();
      if (current.str() == text) return false;
    }
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot write");
  out << text;
  if (!out) throw std::runtime_error(path + ": write failed");
  return true;
}

}  // namespace lathe::emit
