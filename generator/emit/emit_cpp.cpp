#include "generator/emit/emit_cpp.hpp"

#include <kainjow/mustache.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/manifest.hpp"
#include "core/plan.hpp"

namespace lathe::embedded {
std::string_view templates(std::string_view name);
}

namespace lathe::emit {
namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;
using namespace lathe::spec;


// The handle type of a manifest tensor, in math orientation.
std::string handle_type(const TensorSpec& t) {
  // A one-row linear stored as a vector (core/contract.hpp) is still a [1, N] weight.
  if (t.shape.size() == 1 && read_as_matrix(t.role, t.bias, 1)) return "typed::Weight<1, " + std::to_string(t.shape[0]) + ">";
  if (t.shape.size() == 1) return "typed::Vector<" + std::to_string(t.shape[0]) + ">";
  // A depthwise conv1d's taps, [rows, 1, cols] as stored (Mamba's conv1d): [rows][cols].
  if (t.shape.size() == 3) return "typed::Weight<" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[2]) + ">";
  // A patch embedding's convolution, [rows, channels, k, k]: [rows][channels · k²].
  if (t.shape.size() == 4)
    return "typed::Weight<" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1] * t.shape[2] * t.shape[3]) + ">";
  const int64_t rows = t.in_out ? t.shape[1] : t.shape[0];
  const int64_t cols = t.in_out ? t.shape[0] : t.shape[1];
  return "typed::Weight<" + std::to_string(rows) + ", " + std::to_string(cols) + ">";
}

// The typed forward(): the graph's ops as calls of typed::Recorder, one
// statement an op, each attributed to the spec key that decides it.
kainjow::mustache::list forward_statements(const Spec& s, const lower::Graph& g) {
  kainjow::mustache::list out;
  auto v = [](uint32_t id) { return "v" + std::to_string(id); };
  for (size_t i = 0; i < g.schedule.ops.size(); ++i) {
    if (i > 0 && i == g.schedule.encode_ops) {  // an encoder-decoder's decoder pass begins
      data item;
      item.set("code", std::string("r.end_encode();"));
      out.push_back(item);
    }
    const typed::Op& op = g.schedule.ops[i];
    const std::string& w = g.handles[i][0];
    const std::string& b = g.handles[i][1];
    const std::string out_var = "auto " + v(op.out) + " = ";
    const std::string act = "Activation::" + std::string(spelling(static_cast<Activation>(op.variant)).enumerator);
    std::string code;
    switch (op.kind) {
      case typed::OpKind::Embed:
        code = out_var + (op.variant == typed::kSplice ? "r.embed_spliced(" : "r.embed(") + w + ", embedding_scale);";
        break;
      case typed::OpKind::Input: code = out_var + "r.template input<" + std::to_string(op.dims[0]) + ">();"; break;
      case typed::OpKind::PosEmbed:
        if (op.extra[0] >= 0) {  // a vision tower's, with its class embedding
          code = out_var + "r.add_positions_class(" + v(op.in[0]) + ", " + w + ", " + g.handles[i][2] + ");";
          break;
        }
        code = out_var + "r.add_positions(" + v(op.in[0]) + ", " + w + ", position_offset" +
               (b.empty() ? "" : ", " + b) + ");";
        break;
      case typed::OpKind::RMSNorm:
        code = out_var +
               (op.variant == typed::kHeadScale ? "r.template rmsnorm_heads<" + std::to_string(op.dims[1]) + ">("
                : op.variant == typed::kImageRows ? std::string("r.rmsnorm_image_rows(")
                : op.dims[1] > 0 ? "r.template rmsnorm_grouped<" + std::to_string(op.dims[1]) + ">("
                                 : std::string("r.rmsnorm(")) +
               v(op.in[0]) + ", " + w + ", norm_eps);";
        break;
      case typed::OpKind::LayerNorm:
        code = out_var + (op.dims[2] > 0 ? "r.template layernorm_head<" + std::to_string(op.dims[2]) + ">(" : "r.layernorm(") +
               v(op.in[0]) + ", " + w + (b.empty() ? "" : ", " + b) + ", norm_eps);";
        break;
      case typed::OpKind::TileEmbed: {
        const std::string layout =
            std::to_string(op.dims[1]) + ", " + std::to_string(op.dims[2]) + ", " + std::to_string(op.dims[3]);
        const auto& h = g.handles[i];
        code = op.variant == typed::kTilePre
                   ? out_var + "r.template tile_embed<" + layout + ">(" + v(op.in[0]) + ", " + h[0] + ", " + h[3] +
                         ", " + h[2] + ", " + h[4] + ", " + h[1] + ", " + h[5] + ");"
                   : out_var + "r.template tile_embed_post<" + layout + ">(" + v(op.in[0]) + ", " + w + ", " + b + ");";
        break;
      }
      case typed::OpKind::FeatureStack:
        code = op.variant == typed::kStackFirst
                   ? out_var + "r.template stack_first<" + std::to_string(op.dims[1]) + ", " + std::to_string(op.dims[2]) +
                         ">(" + v(op.in[1]) + ");"
                   : out_var + "r.template stack_into<" + std::to_string(op.dims[2]) + ">(" + v(op.in[0]) + ", " +
                         v(op.in[1]) + ");";
        break;
      case typed::OpKind::MatMul:
        code = out_var + "r.matmul(" + w + ", " + v(op.in[0]) + (b.empty() ? "" : ", " + b) + ");";
        break;
      case typed::OpKind::Split:
        code = out_var + "r.template split<" + std::to_string(op.dims[0]) + ", " + std::to_string(op.dims[1]) + ">(" +
               v(op.in[0]) + ");";
        break;
      case typed::OpKind::QKNorm:
        if (op.variant == typed::kLatentNorm) {
          code = "r.template latent_norm<heads, mla_kv_lora_rank, mla_qk_rope_head_dim>(" + v(op.in[0]) + ", " +
                 v(op.in[1]) + ", " + b + ", norm_eps);";
          break;
        }
        code = "r.template qk_norm<heads, kv_heads, head_dim>(" + v(op.in[0]) + ", " + v(op.in[1]) + ", " + w + ", " + b +
               ", norm_eps);";
        break;
      case typed::OpKind::Rope:
        if (op.dims[4] > 0) {  // latent attention's rotary part, after the latent
          code = "r.template rope_at<heads, kv_heads, head_dim, rotary_dim, mla_kv_lora_rank>(" + v(op.in[0]) + ", " +
                 v(op.in[1]) + ", RopePairing::" +
                 std::string(spelling(static_cast<RopePairing>(op.variant)).enumerator) + ", rope_theta);";
          break;
        }
        code = "r.template rope<heads, kv_heads, head_dim, rotary_dim>(" + v(op.in[0]) + ", " + v(op.in[1]) +
               ", RopePairing::" + std::string(spelling(static_cast<RopePairing>(op.variant)).enumerator) +
               (op.local ? ", rope_local_theta, true);" : ", rope_theta);");
        break;
      case typed::OpKind::Attention:
        if (op.variant == typed::kCross || op.variant == typed::kImageCross) {
          code = out_var + "r.template " + (op.variant == typed::kCross ? "cross_attention" : "cross_attention_images") +
                 "<heads, kv_heads, head_dim>(" + v(op.in[0]) + ", " + std::to_string(op.layer) + ", attention_scale);";
          break;
        }
        if (op.variant == typed::kImageSpans) {
          code = out_var + "r.template attention_image_spans<heads, kv_heads, head_dim>(" + v(op.in[0]) + ", " +
                 v(op.in[1]) + ", " + v(op.in[2]) + ", " + std::to_string(op.layer) + ", attention_scale" +
                 (op.dims[3] > 0 ? ", sliding_window" : "") + ");";
          break;
        }
        code = out_var + "r.template attention<heads, kv_heads, head_dim>(" + v(op.in[0]) + ", " + v(op.in[1]) + ", " +
               v(op.in[2]) + ", " + std::to_string(op.layer) + ", attention_scale" +
               (op.tensor[0] >= 0 ? std::string(", 0, bidirectional, ") + w
                : op.dims[3] > 0  ? ", sliding_window"
                : op.variant      ? ", 0, bidirectional"
                                  : "") +
               ");";
        break;
      case typed::OpKind::Act: code = out_var + "r.activation(" + v(op.in[0]) + ", " + act + ");"; break;
      case typed::OpKind::GatedAct:
        code = out_var + "r.gated(" + v(op.in[0]) + ", " + v(op.in[1]) + ", " + act + ");";
        break;
      case typed::OpKind::Add:
        code = out_var + (w.empty() ? "r.add(" : "r.add_gated(") + v(op.in[0]) + ", " + v(op.in[1]) +
               (w.empty() ? "" : ", " + w) + ");";
        break;
      case typed::OpKind::Route:
        code = out_var + "r.template route<moe_experts, moe_top_k>(" + v(op.in[0]) + ", " +
               (op.variant ? "true" : "false") + (w.empty() ? "" : ", " + w) + ");";
        break;
      case typed::OpKind::Experts:
        code = out_var + (b.empty() ? "r.template experts_down<moe_experts, moe_top_k>(" + v(op.in[0]) + ", " +
                                          v(op.in[1]) + ", " + w + ");"
                                    : "r.template experts_gated<moe_experts, moe_top_k>(" + v(op.in[0]) + ", " +
                                          v(op.in[1]) + ", " + w + ", " + b + ", " + act + ");");
        break;
      case typed::OpKind::MoeCombine:
        code = out_var + "r.template moe_combine<moe_experts, moe_top_k>(" + v(op.in[0]) + ", " + v(op.in[1]) + ", " +
               v(op.in[2]) + (op.dims[3] > 0 ? ", " + v(op.in[3]) : "") + (op.dims[3] > 1 ? ", " + v(op.in[4]) : "") +
               ");";
        break;
      case typed::OpKind::Output:
        code = "r.template output<output_width>(" + v(op.in[0]) + ");";
        break;
      case typed::OpKind::SsmConv:
        code = out_var + "r.template ssm_conv<ssm_conv_channels, ssm_d_conv, ssm_conv_offset>(" + v(op.in[0]) + ", " + w +
               (b.empty() ? "" : ", " + b) + ", " + std::to_string(op.layer) + ");";
        break;
      case typed::OpKind::SsmScan:
        code = out_var + "r.template ssm_scan<ssm_d_inner, ssm_d_state, ssm_dt_rank>(" + v(op.in[0]) + ", " +
               v(op.in[1]) + ", " + v(op.in[2]) + ", " + w + ", " + g.handles[i][2] + ", " + b + ", " +
               g.handles[i][3] + ", " + std::to_string(op.layer) + ");";
        break;
      case typed::OpKind::Mamba2Scan:
        code = out_var + "r.template mamba2_scan<ssm_d_inner, ssm_d_state, ssm_heads, ssm_groups>(" + v(op.in[0]) +
               ", " + v(op.in[1]) + ", " + w + ", " + b + ", " + g.handles[i][2] + ", ssm_dt_min, ssm_dt_max, " +
               std::to_string(op.layer) + ");";
        break;
      case typed::OpKind::MlaQuery:
      case typed::OpKind::MlaValues:
        code = out_var + "r.template " + (op.kind == typed::OpKind::MlaQuery ? "mla_query" : "mla_values") +
               (op.variant == typed::kSplitKvB ? "_split" : "") +
               "<heads, mla_qk_nope_head_dim, mla_qk_rope_head_dim, mla_kv_lora_rank, mla_v_head_dim>(" + v(op.in[0]) +
               (op.kind == typed::OpKind::MlaValues ? ", " + v(op.in[1]) + ", " + v(op.in[2]) : "") + ", " + w + ");";
        break;
      case typed::OpKind::PoolNorm: {
        const std::string sizes = std::to_string(op.dims[1]) + ", " + std::to_string(op.dims[2]);
        const std::string eps = number_literal(op.param);
        code = op.variant & typed::kPoolLayerNorm
                   ? out_var + "r.template pool_layernorm<" + sizes + ">(" + v(op.in[0]) + ", " + w + ", " + b + ", " +
                         eps + ");"
                   : out_var + "r.template pool_rmsnorm<" + sizes + ">(" + v(op.in[0]) + ", " + w + ", " + eps + ", " +
                         (op.variant & typed::kPoolUnitOffset ? "true" : "false") + ");";
        break;
      }
      case typed::OpKind::MergeNorm:
        code = out_var + "r.template merge_rmsnorm<" + std::to_string(op.dims[1]) + ">(" + v(op.in[0]) + ", " + w +
               ", " + number_literal(op.param) + ");";
        break;
      case typed::OpKind::CrossKv:
        code = "r.template cross_kv<kv_heads, head_dim>(" + v(op.in[0]) + ", " + v(op.in[1]) + ", " +
               (w.empty() ? "" : w + ", ") + std::to_string(op.layer) + ");";
        break;
      case typed::OpKind::Logits:
        code = "r.logits(" + w + ", " + v(op.in[0]) + (b.empty() ? "" : ", " + b) +
               (op.param > 0 || op.scale != 1.0 ? ", logit_softcap" : "") + (op.scale != 1.0 ? ", logit_scale" : "") +
               ");";
        break;
    }
    data item;
    item.set("code", code);
    const Loc loc = s.where(g.keys[i]);
    if (loc.line > 0) {
      data line;
      line.set("line", std::to_string(loc.line));
      item.set("line", line);
    }
    out.push_back(item);
  }
  return out;
}

std::string binding_expr(const plan::Binding& b) {
  if (b.resource == plan::Resource::None) return "{}";
  const plan::ResourceName r = plan::resource_name(b.resource);
  return "plan::" + std::string(r.name) + "(" + (r.indexed ? std::to_string(b.index) : "") + ")";
}

const char* grid_name(plan::Grid g) {
  switch (g) {
    case plan::Grid::Rows: return "Rows";
    case plan::Grid::Heads: return "Heads";
    case plan::Grid::Split: return "Split";
    case plan::Grid::Tiles: return "Tiles";
    case plan::Grid::Single: return "Single";
    case plan::Grid::Experts: return "Experts";
    case plan::Grid::Channels: return "Channels";
    case plan::Grid::Keys: return "Keys";
  }
  return "?";
}

// One dispatch as a designated initializer: its bindings and the push words
// it sets by the names of its family's interface (core/kernels.hpp), in
// their order.
std::string dispatch_initializer(const plan::Dispatch& d, const kernels::FamilyInfo& f) {
  std::string out = "{.kernel = " + std::to_string(d.kernel) + ", .grid = plan::Grid::" + grid_name(d.grid);
  if (d.last_row) out += ", .last_row = true";
  if (d.split_only) out += ", .split_only = true";
  if (d.form == plan::Form::Recurrent) out += ", .form = plan::Form::Recurrent";
  if (d.form == plan::Form::Chunked) out += ", .form = plan::Form::Chunked";
  if (d.form == plan::Form::Absorbed) out += ", .form = plan::Form::Absorbed";
  if (d.form == plan::Form::Expanded) out += ", .form = plan::Form::Expanded";
  if (d.form == plan::Form::Quantized) out += ", .form = plan::Form::Quantized";
  out += ", .groups_x = " + std::to_string(d.groups_x);
  if (d.groups_z != 1) out += ", .groups_z = " + std::to_string(d.groups_z);
  if (d.groups_z_per_row != 0) out += ", .groups_z_per_row = " + std::to_string(d.groups_z_per_row);
  std::string named;
  for (size_t b = 0; b < f.bindings.size(); ++b) {
    if (d.bindings[b].resource == plan::Resource::None) continue;
    named += std::string(named.empty() ? "" : ", ") + "." + std::string(f.bindings[b].name) + " = " + binding_expr(d.bindings[b]);
  }
  out += ",\n     .bindings = plan::bindings(kernels::" + std::string(f.bindings_struct) + "<plan::Binding>{" + named + "})";
  std::string fields;  // a word left out is 0
  for (size_t w = 0; w < f.push.size(); ++w) {
    if (d.push[w] == 0) continue;
    fields += std::string(fields.empty() ? "" : ", ") + "." + std::string(f.push[w].name) + " = " + std::to_string(d.push[w]);
  }
  out += ",\n     .push = push::words(push::" + std::string(f.push_struct) + "{" + fields + "})";
  if (d.layer >= 0) out += ", .layer = " + std::to_string(d.layer);
  if (d.line > 0) out += ", .line = " + std::to_string(d.line);
  if (d.block >= 0) out += ", .block = " + std::to_string(d.block);
  return out + "}";
}

}  // namespace

bool check_supported(const Spec& s, Diagnostics& diag) {
  const size_t before = diag.size();
  auto refuse = [&](const std::string& key, const std::string& what) {
    diag.error(s.where(key), "not supported yet: " + key + (what.empty() ? "" : " (" + what + ")"));
  };
  // rope_kv normalizes q and k as it reads them: no rotation, no kernel for it.
  if (s.attention.qk_norm != QKNorm::None && s.position.kind != PositionKind::Rope)
    refuse("attention.qk_norm", "q/k norms run with rope positions only");
  // Sinusoidal tables would be added by the embedding: no kernel for them yet.
  if (s.position.kind == PositionKind::Sinusoidal)
    refuse("position.kind", std::string("\"") + name(s.position.kind) + "\"");
  if (s.position.local_theta && s.position.kind != PositionKind::Rope)
    refuse("position.local_theta", "a base of the windowed layers' own is a rope setting");
  // Mixtures of experts run routed gated experts of a pre-norm block.
  if (s.moe.enabled()) {
    if (!s.mlp.gated) refuse("mlp.gated", "experts run as gated MLPs only");
    if (s.mlp.bias) refuse("mlp.bias", "experts run without biases");
    if (s.norm.placement != NormPlacement::Pre) refuse("norm.placement", "experts run in pre-norm blocks only");
    // moe_route keeps a bit per expert of its lane's share, 32 at most, on
    // subgroups of 8 lanes or more.
    if (s.moe.experts > 256) refuse("moe.experts", "at most 256 experts");
    // A layer's experts of one role are bound in parts of whole experts
    // (one binding, or as many as max_part_bytes holds each): one expert's
    // matrix must fit a binding.
    for (int64_t l = 0; l < s.dims.layers; ++l) {
      if (!s.moe.sparse(l)) continue;
      const int64_t d = s.dims.hidden, i = s.moe.expert_intermediate;
      const int64_t widest = std::max(device_tensor_bytes(s.weights.matrix_dtype(Role::ExpertGate, l), 2, i, d),
                                      device_tensor_bytes(s.weights.matrix_dtype(Role::ExpertDown, l), 2, d, i));
      if (widest > s.weights.max_part_bytes) {
        refuse("moe.expert_intermediate", "one expert's matrix takes " + std::to_string(widest) +
                                              " bytes, over weights.max_part_bytes (" +
                                              std::to_string(s.weights.max_part_bytes) + "), the most one binding holds");
        break;
      }
    }
  }
  // A [vision] runs its tower as a build of its own (lower::plan_tower says
  // which towers). An image cross-attention decoder's layers: RMS norms and
  // bias-free MLPs (a row that sees no image zeroes its MLP input), and
  // keys its rows' extents can name.
  if (s.vision.enabled && s.vision.connection == VisionConnection::CrossAttention) {
    if (s.norm.kind != NormKind::RMSNorm) refuse("norm.kind", "an image cross-attention decoder's norms are RMS norms");
    if (s.mlp.bias) refuse("mlp.bias", "an image cross-attention layer's MLP zeroes a row without an image by its input");
    if (s.moe.experts > 0) refuse("moe", "an image cross-attention decoder of experts");
    if (s.position.scaling.kind == RopeScaling::DynamicNtk)
      refuse("position.scaling", "dynamic NTK reads a row's extent, which an image cross-attention decoder's rows use");
    if (s.vision.tile_keys() > plan::kMaxImageKeys)
      refuse("vision.tiles", "an image's cross-attention keys over " + std::to_string(plan::kMaxImageKeys));
  }
  if (s.vision.enabled && s.vision.image_bidirectional && s.mla.enabled)
    refuse("vision.image_bidirectional", "latent attention sees keys causally only");
  if (s.vision.enabled && s.vision.image_bidirectional && s.vision.longest_edge > 0)
    refuse("vision.image_bidirectional", "an image's rows see each other both ways only for images of one size "
                                         "(vision.image_size, not longest_edge)");
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
  // Block dtypes run along each stored row: whole blocks per row, rows as
  // stored (no transposing an in_out layout's blocks).
  for (const TensorSpec& t : build_sample_manifest(s).tensors) {
    if (t.shape.size() != 2) continue;
    const auto listed = s.weights.role_dtypes.find(t.role);
    const bool by_role = listed != s.weights.role_dtypes.end();
    const std::vector<DType> dtypes = by_role ? listed->second : std::vector<DType>{s.weights.dtype};
    const std::string key = by_role ? "weights.dtypes." + std::string(name(t.role)) : "weights.dtype";
    for (DType d : dtypes) {
      if (!is_block_dtype(d)) continue;
      const int64_t block = dtype_layout(d).elements;
      const std::string what = "\"" + std::string(dtype_name(d)) + "\": " + t.name;
      if (t.in_out)
        refuse(key, what + " is stored [in, out]; block dtypes run along stored rows of out_in matrices");
      else if (t.shape[1] % block != 0)
        refuse(key, what + " has rows of " + std::to_string(t.shape[1]) + " values, not a multiple of the " +
                        std::to_string(block) + " of a " + std::string(spelling(d).enumerator) + " block");
      else continue;
      break;
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

std::string draft_namespace(const std::string& name) { return model_namespace(name) + "_draft"; }

std::string emit_model_header(const Spec& s, const lower::ModelPlan& model, const std::string& spec_path,
                              const std::string& header_name, const std::string& ns) {
  const Dims& d = s.dims;
  const Manifest& manifest = model.manifest;

  data root;
  root.set("spec_file", spec_path);
  root.set("name", s.name);
  if (!s.source.empty()) root.set("source", s.source);
  root.set("namespace", ns.empty() ? model_namespace(s.name) : ns);
  if (s.vision.enabled) {
    root.set("tower", true);
    // The host's side of the splice (plan::VisionLink).
    const Vision& v = s.vision;
    const int64_t lead = v.class_token ? 1 : 0, skip = v.class_token && v.drop_class_token ? 1 : 0;
    const std::vector<int64_t> link = {v.channels, v.patch, std::max(v.image_size, v.longest_edge), lead, skip,
                                       v.image_features(), v.tokens.marker, v.tokens.image};
    const auto ids = [](const std::vector<int64_t>& values) {
      std::string out;
      for (int64_t x : values) out += (out.empty() ? "" : ", ") + std::to_string(x);
      return out;
    };
    root.set("vision_link", ids(link));
    root.set("vision_prefix", ids(v.tokens.prefix));
    root.set("vision_prefix_count", std::to_string(v.tokens.prefix.size()));
    root.set("vision_suffix", ids(v.tokens.suffix));
    root.set("vision_suffix_count", std::to_string(v.tokens.suffix.size()));
    root.set("vision_two_way", v.image_bidirectional ? "true" : "false");
    // Variable sizes, merge, 2D RoPE, row_end, end.
    const auto truth = [](bool b) { return std::string(b ? "true" : "false"); };
    root.set("vision_sizes",
             truth(v.longest_edge > 0) + ", " + ids({v.projector.kind == ProjectorKind::MergeMlp ? v.projector.merge : 1}) +
                 ", " + truth(v.positions == VisionPositions::Rope2D) + ", " + ids({v.tokens.row_end, v.tokens.end}) +
                 // Tiles (their rows, padding rows and aspect ratios), and cross-attention.
                 ", " + ids({v.tiles, v.tiles > 0 ? v.positions_count() : 0,
                             v.tiles > 0 ? spec::tile_padding(v.positions_count()) : 0, v.aspect_ratios()}) +
                 ", " + truth(v.connection == VisionConnection::CrossAttention));
    root.set("vision_line", std::to_string(std::max<uint32_t>(1, s.where("vision").line)));
  }

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
  if (s.position.local_theta)
    constant("rope_local_theta", "double", number_literal(*s.position.local_theta), "position.local_theta",
             "windowed layers, unscaled");
  constant("position_offset", "int64_t", i(s.position.offset), "position.offset", "learned positions");
  constant("attention_scale", "double", number_literal(s.cache_layers() == 0 ? 0.0 : s.attention.effective_scale(d.head_dim)),
           "attention.scale", "0: no attention (a Mamba model)");
  constant("sliding_window", "int64_t", i(s.attention.sliding_window), "attention.sliding_window", "0: none");
  constant("embedding_scale", "double", number_literal(s.embedding.scale), "embedding.scale", "");
  constant("logit_softcap", "double", number_literal(s.output.softcap), "output.softcap", "0: none");
  constant("tied_embeddings", "bool", s.embedding.tied ? "true" : "false", "embedding.tied", "");
  constant("bidirectional", "bool", s.encoder() ? "true" : "false", "model.stack",
           s.encoder() ? "an encoder: every row attends to every key of its input" : "causal");
  // An encoder's output rows: its Output op's width (its final hidden
  // states; a vision tower's, its projector's rows of the decoder's width).
  int64_t output_width = d.vocab;
  for (const typed::Op& op : model.graph.schedule.ops)
    if (op.kind == typed::OpKind::Output) output_width = op.dims[0];
  constant("output_width", "int64_t", i(output_width), s.encoder() ? "model.stack" : "dims.vocab",
           s.encoder() ? "every row's final hidden states (a vision tower's: projected)" : "logits");
  constant("pooling", "Pooling", "Pooling::" + std::string(spelling(s.pooling.kind).enumerator), "pooling.kind",
           "an encoder's sentence embedding");
  constant("pool_normalize", "bool", s.pooling.normalize ? "true" : "false", "pooling.normalize", "L2-normalized");
  constant("encoder_decoder", "bool", s.encoder_decoder() ? "true" : "false", "model.stack", "");
  constant("encoder_layers", "int64_t", i(s.encoder_layers()), "dims.encoder_layers",
           "an encoder-decoder's: the layers numbered first");
  constant("cache_layers", "int64_t", i(s.cache_layers()), "dims.layers",
           "KV caches: one per layer, and an encoder-decoder's cross-attention caches after them");
  constant("decoder_start", "int32_t", i(s.decoder_start), "model.decoder_start", "an encoder-decoder's first decoder token");
  constant("logit_scale", "double", number_literal(s.output.scale), "output.scale", "");
  constant("ssm_d_inner", "int64_t", i(s.ssm.d_inner), "ssm.d_inner", "a Mamba layer's channels (0: none)");
  constant("ssm_d_conv", "int64_t", i(s.ssm.d_conv), "ssm.d_conv", "taps of its causal depthwise conv");
  constant("ssm_d_state", "int64_t", i(s.ssm.d_state), "ssm.d_state", "states per channel of its scan");
  constant("ssm_dt_rank", "int64_t", i(s.ssm.dt_rank), "ssm.dt_rank", "the rank of its dt_proj (Mamba)");
  constant("ssm_conv_channels", "int64_t", i(s.ssm.conv_channels()), "ssm.d_inner",
           "its conv's channels: x (Mamba), or x, B and C (Mamba-2)");
  constant("ssm_conv_offset", "int64_t", i(s.ssm.conv_offset()), "ssm.kind", "where they start in in_proj's output");
  constant("ssm_heads", "int64_t", i(s.ssm.heads), "ssm.heads", "a Mamba-2 layer's heads");
  constant("ssm_a_log", "bool", s.ssm.a_log ? "true" : "false", "ssm.a_log", "the checkpoint holds A_log (else A)");
  constant("ssm_groups", "int64_t", i(s.ssm.groups), "ssm.groups", "its groups of B and C");
  constant("ssm_dt_min", "double", number_literal(s.ssm.dt_min), "ssm.dt_min", "Mamba-2: dt's lower limit");
  constant("ssm_dt_max", "double", number_literal(s.ssm.dt_upper()), "ssm.dt_max",
           "Mamba-2: dt's upper limit (0: none)");
  constant("mla_q_lora_rank", "int64_t", i(s.mla.q_lora_rank), "mla.q_lora_rank", "latent attention's query latent (0: none)");
  constant("mla_kv_lora_rank", "int64_t", i(s.mla.kv_lora_rank), "mla.kv_lora_rank", "its key/value latent (0: no latent attention)");
  constant("mla_qk_nope_head_dim", "int64_t", i(s.mla.qk_nope_head_dim), "mla.qk_nope_head_dim", "");
  constant("mla_qk_rope_head_dim", "int64_t", i(s.mla.qk_rope_head_dim), "mla.qk_rope_head_dim", "");
  constant("mla_v_head_dim", "int64_t", i(s.mla.v_head_dim), "mla.v_head_dim", "");
  constant("moe_experts", "int64_t", i(s.moe.experts), "moe.experts", "routed experts per sparse layer (0: dense)");
  constant("moe_top_k", "int64_t", i(s.moe.top_k), "moe.top_k", "experts per token");
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
  if (s.ssm.enabled()) {  // a Mamba model's state-space layers
    contract("ssm_d_inner > 0 && ssm_d_conv > 0 && ssm_d_state > 0", "a Mamba layer has no channels, taps or states",
             "ssm.d_inner");
    if (s.ssm.mamba2())
      contract("ssm_heads > 0 && ssm_heads % ssm_groups == 0 && ssm_d_inner % ssm_heads == 0",
               "a Mamba-2 layer's heads split d_inner and come in whole groups", "ssm.heads");
    else
      contract("ssm_dt_rank > 0 && ssm_dt_rank <= ssm_d_inner", "dt_rank must be in [1, d_inner]", "ssm.dt_rank");
  }
  if (!s.ssm.enabled() || s.ssm.hybrid()) {  // attention layers (a hybrid's some)
    contract("head_dim_explicit || hidden == heads * head_dim", "hidden is not heads * head_dim (d = H_q * d_h)",
             "dims.heads");
    contract("heads % kv_heads == 0", "heads is not a multiple of kv_heads", "dims.kv_heads");
    contract("rotary_dim % 2 == 0 && rotary_dim <= head_dim", "rotary_dim must be even and at most head_dim",
             "position.rotary_dim");
    contract("sliding_window <= max_context", "sliding_window is larger than max_context", "attention.sliding_window");
  }
  if (s.mla.enabled)
    contract("kv_heads == 1 && head_dim == mla_kv_lora_rank + mla_qk_rope_head_dim && rotary_dim == mla_qk_rope_head_dim",
             "latent attention caches one head of kv_lora_rank + qk_rope_head_dim values, rotated in its last qk_rope_head_dim",
             "mla.kv_lora_rank");
  root.set("asserts", asserts);

  kainjow::mustache::list entries;
  std::map<std::string, bool> has;
  std::map<std::string, std::string> member_types;
  std::map<std::string, int> member_dims;  // 0: global, 1: per layer, 2: per layer and expert
  std::map<std::string, bool> member_transposed;  // stored [in, out]
  std::vector<std::string> member_order;
  kainjow::mustache::list assignments;
  // {role, bias, layer, expert, name, rank, stored shape, dtype[, slice]}
  const auto entry = [&](const TensorSpec& ts) {
    data e;
    e.set("role", std::string(spelling(ts.role).enumerator));
    e.set("bias", ts.bias ? "true" : "false");
    e.set("layer", i(ts.layer));
    e.set("expert", i(ts.expert));
    e.set("name", ts.name);
    e.set("rank", i(static_cast<int64_t>(ts.shape.size())));
    // A rank-3 depthwise conv1d weight [rows, 1, cols] as [rows, cols], a
    // rank-4 patch embedding [rows, channels, k, k] as [rows, channels·k²]
    // (ManifestEntry).
    const bool conv = ts.shape.size() == 4;
    e.set("shape", "{" + i(ts.shape[0]) + ", " +
                       i(conv ? ts.shape[1] * ts.shape[2] * ts.shape[3] : ts.shape.size() > 1 ? ts.shape.back() : 1) + "}");
    e.set("dtype", std::string(spelling(ts.dtype).enumerator));
    e.set("slice", i(ts.slice));
    e.set("kernel", conv ? i(ts.shape[3]) : "0");
    e.set("in_out", ts.in_out ? "true" : "false");
    return e;
  };
  for (size_t t = 0; t < manifest.tensors.size(); ++t) {
    const TensorSpec& ts = manifest.tensors[t];
    entries.push_back(entry(ts));

    const std::string member = lower::member_name(ts);
    if (!has.count(member)) {
      has[member] = true;
      member_order.push_back(member);
      member_types[member] = handle_type(ts);
      member_dims[member] = ts.expert >= 0 ? 2 : ts.layer >= 0 ? 1 : 0;
      member_transposed[member] = ts.in_out;
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
    if (member_dims[m] >= 1) type = "std::array<" + type + ", " + i(s.blocks()) + ">";
    data item;
    item.set("ident", m);
    item.set("type", type);
    item.set("transposed", member_transposed[m] ? "true" : "false");
    if (m == "lm_head" && s.embedding.tied) item.set("comment", "tied: the embedding matrix");
    members.push_back(item);
  }
  root.set("manifest", entries);
  kainjow::mustache::list unread;
  for (const TensorSpec& ts : model.unread.tensors) unread.push_back(entry(ts));
  root.set("unread", unread);
  root.set("unread_count", std::to_string(model.unread.tensors.size()));
  root.set("layout", s.weights.layout == Layout::OutIn ? "OutIn" : "InOut");
  root.set("qkv_layout", std::string(spelling(s.weights.qkv_layout).enumerator));
  kainjow::mustache::list ignore;
  std::vector<std::string> ignored = ignored_patterns(s);
  for (const std::string& name : model.others)  // the other build's tensors, in a [vision] spec's one checkpoint
    if (std::find(ignored.begin(), ignored.end(), name) == ignored.end()) ignored.push_back(name);
  for (const std::string& pattern : ignored) {
    data p;
    p.set("pattern", pattern);
    ignore.push_back(p);
  }
  root.set("ignore", ignore);
  root.set("ignore_count", std::to_string(ignored.size()));
  root.set("total_params", i(manifest.total_elements()));
  root.set("members", members);
  root.set("assignments", assignments);

  root.set("schedule", forward_statements(s, model.graph));

  // The plan: kernels, slots, packs, dispatches.
  const lower::Plan& p = model.plan;
  const lower::View view(p);
  kainjow::mustache::list kernel_items;
  for (const plan::Kernel& k : view->kernels) {
    data item;
    item.set("name", std::string(k.name));
    item.set("family", std::string(kernels::family(k.family).key));
    item.set("family_enum", std::string(kernels::family(k.family).enumerator));
    item.set("width", i(k.width));
    kernel_items.push_back(item);
  }
  root.set("plan_kernels", kernel_items);
  root.set("kernel_count", i(static_cast<int64_t>(p.kernels.size())));
  std::string slots;
  for (int64_t w : p.slot_widths) slots += (slots.empty() ? "" : ", ") + i(w);
  root.set("slot_widths", slots);
  root.set("slot_count", i(static_cast<int64_t>(p.slot_widths.size())));
  std::string windows;
  for (int64_t w : p.windows) windows += (windows.empty() ? "" : ", ") + i(w);
  root.set("windows", windows);
  root.set("window_count", i(static_cast<int64_t>(p.windows.size())));
  std::string carried;
  for (uint64_t c : p.carried) carried += (carried.empty() ? "" : ", ") + std::to_string(c) + "u";
  root.set("carried", carried);
  root.set("carried_count", i(static_cast<int64_t>(p.carried.size())));
  const plan::Plan& sizes = p.scalars;
  root.set("encode_dispatches", i(static_cast<int64_t>(sizes.encode_dispatches)));
  root.set("state_layers", i(sizes.state_layers));
  root.set("conv_state_floats", i(sizes.conv_state_floats));
  root.set("scan_state_floats", i(sizes.scan_state_floats));
  root.set("expanded_row_floats", i(sizes.expanded_row_floats));
  root.set("expanded_rows", i(sizes.expanded_rows));
  root.set("expanded_min_rows", i(sizes.expanded_min_rows));
  root.set("input_row_floats", i(sizes.input_row_floats));
  kainjow::mustache::list class_items;
  for (const plan::DeviceClass& c : p.classes) {
    const auto b = [](bool v) { return std::string(v ? "true" : "false"); };
    const auto tile = [&](const plan::Tile& t) {
      static constexpr const char* kVariants[] = {"Plain", "Dot", "Coop", "CoopKhr"};
      return "{" + i(t.rows) + ", " + i(t.tokens) + ", " + i(t.texels) + ", " + i(t.groups) + ", plan::Variant::" +
             kVariants[static_cast<size_t>(t.variant)] + "}";
    };
    data item;
    item.set("init", "{.name = \"" + std::string(c.name) + "\", .cpu_only = " + b(c.cpu_only) +
                         ", .min_subgroup = " + i(c.min_subgroup) + ", .min_shared = " + i(c.min_shared) +
                         ", .decode = " + tile(c.decode) + ", .prefill = " + tile(c.prefill) + ", .batch = " + tile(c.batch) +
                         ", .splits = " + i(c.splits) + ", .decode_splits = " + i(c.decode_splits) + ", .attention_rows = " + i(c.attention_rows) +
                         ", .chunked_scan = " + b(c.chunked_scan) + ", .expanded_mla = " + b(c.expanded_mla) +
                         ", .forced_only = " + b(c.forced_only) +
                         ", .verified = \"" + std::string(c.verified) + "\"" + ", .flash = {" + i(c.flash.rows) + ", " +
                         i(c.flash.keys) + "}}");
    class_items.push_back(item);
  }
  root.set("device_classes", class_items);
  root.set("class_count", i(static_cast<int64_t>(p.classes.size())));
  kainjow::mustache::list pack_items;
  for (const plan::Pack& pk : p.packs) {
    auto list = [&](std::span<const int32_t> v) {
      std::string out;
      for (int32_t x : v) out += (out.empty() ? "" : ", ") + i(x);
      return "{" + out + "}, " + i(static_cast<int64_t>(v.size()));
    };
    data item;
    if (pk.stride > 0)  // an expert pack: its first matrix and the manifest stride between experts
      item.set("init", "{{" + i(pk.weights[0]) + "}, 1, {}, 0, " + i(pk.stride) + ", " + i(pk.experts) + "}");
    else
      item.set("init", "{" + list(std::span(pk.weights).first(pk.count)) + ", " +
                           list(std::span(pk.biases).first(pk.bias_count)) + "}");
    std::string names;
    for (int32_t w : plan::weight_members(pk)) names += (names.empty() ? "" : ", ") + manifest.tensors[static_cast<size_t>(w)].name;
    item.set("names", names);
    pack_items.push_back(item);
  }
  root.set("packs", pack_items);
  root.set("pack_count", i(static_cast<int64_t>(p.packs.size())));
  kainjow::mustache::list part_items;
  for (const plan::Part& pt : p.parts) {
    data item;
    item.set("init", "{" + i(pt.tensor) + ", " + i(pt.row0) + ", " + i(pt.rows) + "}");
    item.set("name", manifest.tensors[static_cast<size_t>(pt.tensor)].name);
    part_items.push_back(item);
  }
  root.set("parts", part_items);
  root.set("part_count", i(static_cast<int64_t>(p.parts.size())));
  root.set("max_part_bytes", i(sizes.max_part_bytes));
  kainjow::mustache::list dispatch_items;
  for (size_t n = 0; n < p.dispatches.size(); ++n) {
    const lower::Dispatch& dispatch = p.dispatches[n];
    data item;
    item.set("index", i(static_cast<int64_t>(n)));
    item.set("kernel", p.kernel_name(dispatch));
    item.set("init", dispatch_initializer(dispatch, kernels::family(dispatch.family)));
    dispatch_items.push_back(item);
  }
  root.set("dispatches", dispatch_items);
  root.set("dispatch_count", i(static_cast<int64_t>(p.dispatches.size())));
  root.set("cache_row_bytes", i(sizes.cache_row_bytes));
  root.set("v_cache_row_bytes", i(sizes.v_cache_row_bytes));
  root.set("partials_row_floats", i(sizes.partials_row_floats));
  root.set("widest_row_floats", i(sizes.widest_row_floats));

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

std::string emit_model_header(const Spec& s, const std::string& spec_path, const std::string& header_name) {
  Diagnostics diagnostics(spec_path);
  const auto model = lower::plan_model(s, diagnostics);
  if (!model) throw std::runtime_error(diagnostics.format());
  return emit_model_header(s, *model, spec_path, header_name);
}

std::string emit_model_source(const Spec& s, const std::string& spec_path, const std::string& draft_ns) {
  data root;
  root.set("spec_file", spec_path);
  root.set("namespace", model_namespace(s.name));
  if (s.vision.enabled) {
    data tower;
    tower.set("tower_namespace", model_namespace(vision_tower(s).name));
    root.set("tower", tower);
  }
  if (!draft_ns.empty()) {
    data draft;
    draft.set("draft_namespace", draft_ns);
    root.set("draft", draft);
  }
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
