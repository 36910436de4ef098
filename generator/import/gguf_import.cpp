#include "generator/import/gguf_import.hpp"

#include "generator/import/gguf_families.hpp"
#include "generator/import/gguf_mmproj.hpp"
#include "generator/import/gguf_reader.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <set>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::importer {

namespace {

using spec::Spec;
using weights::GgufValue;
using Metadata = std::map<std::string, GgufValue, std::less<>>;
using namespace gguf_families;

const char* dtype_key(DType d) { return dtype_name(d).data(); }


// The factor of the pair of inverse frequency `inv_freq` under llama3
// scaling, as Hugging Face's _compute_llama3_parameters and llama.cpp's
// converter classify it: wavelengths below original / high kept (1), above
// original / low slowed (factor), the band between blended.
double llama3_factor(double inv_freq, const spec::RopeScalingParams& sc) {
  const double original = static_cast<double>(sc.original_max_context);
  const double wavelength = 2.0 * std::numbers::pi / inv_freq;
  if (wavelength < original / sc.high_freq_factor) return 1.0;
  if (wavelength > original / sc.low_freq_factor) return sc.factor;
  const double smooth = (original / wavelength - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
  return 1.0 / ((1.0 - smooth) / sc.factor + smooth);
}

std::string describe(const spec::RopeScalingParams& sc) {
  char text[128];
  std::snprintf(text, sizeof text, "low_freq_factor %g, high_freq_factor %g, original_max_context %lld",
                sc.low_freq_factor, sc.high_freq_factor, static_cast<long long>(sc.original_max_context));
  return text;
}


// The attention's biases, told by the first layer's tensors (`blk`: its
// name's start, "blk.0.").
void attention_biases(const Reader& r, TomlTable& attention, const std::string& blk) {
  if (r.has(blk + "attn_qkv.weight")) {
    if (r.has(blk + "attn_qkv.bias")) attention.set("q_bias", true, "attn_qkv.bias").set("k_bias", true).set("v_bias", true);
  } else {
    if (r.has(blk + "attn_q.bias")) attention.set("q_bias", true, "attn_q.bias");
    if (r.has(blk + "attn_k.bias")) attention.set("k_bias", true, "attn_k.bias");
    if (r.has(blk + "attn_v.bias")) attention.set("v_bias", true, "attn_v.bias");
  }
  if (r.has(blk + "attn_output.bias")) attention.set("o_bias", true, "attn_output.bias");
}

// A learned position table (GPT-2, BERT): position_embd, of context_length
// rows unless the tensor says otherwise.
void learned_positions(Reader& r, TomlTable& position, int64_t context) {
  position.set("kind", "learned", "position_embd");
  if (r.has(kRopeFreqs)) r.problem(kRopeFreqs + ": RoPE factors in a file of learned positions");
  if (const weights::TensorInfo* pe = r.tensor("position_embd.weight"); pe && pe->shape[0] != context)
    position.set("table_size", pe->shape[0], "position_embd rows");
}

// The token table, token_embd: a matrix, or the import ends here.
const weights::TensorInfo* embedding_table(Reader& r) {
  const weights::TensorInfo* embed = r.tensor("token_embd.weight");
  if (embed == nullptr || embed->shape.size() != 2) {
    r.problem("token_embd.weight: missing, or not a matrix");
    throw ImportError(r.problems());
  }
  return embed;
}

// The keys every architecture has (`a`: "<architecture>."), and the token table.
struct Basics {
  int64_t hidden, layers, context;
  const weights::TensorInfo* embed;
};
Basics basics(Reader& r, const std::string& a) {
  const int64_t hidden = r.required(a + "embedding_length");
  const int64_t layers = r.required(a + "block_count");
  const int64_t context = r.required(a + "context_length");
  return {hidden, layers, context, embedding_table(r)};
}

// [norm]: RMS norms of the file's epsilon (`a`: "<architecture>.").
TomlTable& rms_norm_section(Reader& r, TomlDoc& doc, const std::string& a) {
  TomlTable& norm = doc.table("norm");
  norm.set("kind", "rmsnorm");
  const std::string eps_key = a + "attention.layer_norm_rms_epsilon";
  if (auto eps = r.number(eps_key)) norm.set("eps", *eps, eps_key);
  else r.problem(eps_key + ": missing");
  return norm;
}

// [embedding] tied = whether the file has no output.weight (the head).
void tied_embedding(const Reader& r, TomlDoc& doc) {
  doc.table("embedding").set("tied", !r.has("output.weight"), r.has("output.weight") ? "output.weight" : "no output.weight");
}

// RoPE that llama.cpp does not scale (nomic-bert, granitehybrid): the
// pairing, the rotary dims (rope.dimension_count) and the base; a scaling
// type is an error.
void unscaled_rope(Reader& r, TomlTable& position, const std::string& a, int64_t key_length, const char* pairing,
                   const std::string& why) {
  position.set("kind", "rope");
  position.set("pairing", pairing, why);
  const int64_t rotary_dim = r.integer(a + "rope.dimension_count").value_or(key_length);
  if (rotary_dim != key_length) position.set("rotary_dim", rotary_dim, a + "rope.dimension_count");
  position.set("theta", r.number(a + "rope.freq_base").value_or(10000.0), a + "rope.freq_base");
  if (const auto type = r.string(a + "rope.scaling.type"); type && *type != "none")
    r.problem(a + "rope.scaling.type \"" + *type + "\": " + a.substr(0, a.size() - 1) + "'s RoPE is not scaled");
}

// [ssm] of llama.cpp's mamba, mamba2 and granitehybrid (its Mamba-2 layers):
// the ssm.* keys, and the biases of the first state-space layer (`blk`, its
// names' start).
TomlTable& ssm_table(Reader& r, TomlDoc& doc, std::string_view an, int64_t hidden, const std::string& blk) {
  const std::string a = std::string(an) + ".";
  const bool two = an != "mamba";
  TomlTable& m = doc.table("ssm");
  m.set("kind", two ? "mamba2" : "mamba", "llama.cpp's " + std::string(an));
  m.set("d_state", r.required(a + "ssm.state_size"), a + "ssm.state_size");
  m.set("d_conv", r.required(a + "ssm.conv_kernel"), a + "ssm.conv_kernel");
  const int64_t inner = r.required(a + "ssm.inner_size");
  if (hidden > 0 && inner % hidden == 0) m.set("expand", inner / hidden, a + "ssm.inner_size / embedding_length");
  else m.set("d_inner", inner, a + "ssm.inner_size");
  const int64_t rank = r.required(a + "ssm.time_step_rank");
  if (two) {
    m.set("heads", rank, a + "ssm.time_step_rank: Mamba-2's heads");
    if (rank > 0 && inner % rank == 0) m.set("head_dim", inner / rank, "ssm.inner_size / heads");
    else r.problem(a + "ssm.time_step_rank: " + std::to_string(rank) + " heads do not split ssm.inner_size " +
                   std::to_string(inner));
    m.set("groups", r.integer(a + "ssm.group_count").value_or(1), a + "ssm.group_count");
  } else {
    m.set("dt_rank", rank, a + "ssm.time_step_rank");
    if (const GgufValue* v = r.value(a + "ssm.dt_b_c_rms"); v && std::get_if<bool>(&v->value) && *std::get_if<bool>(&v->value))
      r.problem(a + "ssm.dt_b_c_rms: Falcon-Mamba's norms of dt, B and C are not supported");
  }
  m.set("conv_bias", r.has(blk + "ssm_conv1d.bias"), blk + "ssm_conv1d.bias");
  m.set("bias", r.has(blk + "ssm_in.bias"), blk + "ssm_in.bias");
  m.set("a_log", false, "ssm_a holds A = -exp(A_log), as llama.cpp's converter writes it");
  return m;
}

// llama.cpp's mamba and mamba2 (every layer a Mamba or Mamba-2 block, no
// attention): [dims], [norm], [ssm] and [embedding]. Its files hold A
// itself (the converter writes −exp(A_log)), the conv taps squeezed, and
// (mamba2) A and D as [heads, 1] and the grouped norm as [groups, d_inner /
// groups]; ssm.time_step_rank is Mamba-2's head count.
void ssm_sections(Reader& r, TomlDoc& doc, std::string_view an) {
  const std::string a = std::string(an) + ".";
  const auto [hidden, layers, context, embed] = basics(r, a);
  TomlTable& dims = doc.table("dims");
  dims.set("hidden", hidden, a + "embedding_length");
  dims.set("layers", layers, a + "block_count");
  dims.set("vocab", embed->shape[0], "token_embd rows");
  dims.set("max_context", context, a + "context_length (no position table: the longest sequence accepted)");

  rms_norm_section(r, doc, a);
  ssm_table(r, doc, an, hidden, "blk.0.");
  tied_embedding(r, doc);
}

// llama.cpp's granitehybrid (Bamba; src/models/granite-hybrid.cpp): pre-norm
// blocks whose mixer is a Mamba-2 mixer or, in the layers whose
// attention.head_count_kv is not 0, attention; each then a SwiGLU MLP. The
// Mamba-2 parts are stored as mamba2's. Its converter permutes the q/k rows
// of whole heads as Llama's, and its RoPE turns adjacent pairs of the first
// rope.dimension_count dims: what this spec says. (Of a transformers Bamba,
// which rotates halves of the first half of each head, that is another
// model: the permutation pairs a rotated dim with an unrotated one.)
void granitehybrid_sections(Reader& r, TomlDoc& doc) {
  const std::string a = "granitehybrid.";
  const auto [hidden, layers, context, embed] = basics(r, a);
  const int64_t heads = r.required(a + "attention.head_count");
  const int64_t ff = r.required(a + "feed_forward_length");

  // head_count_kv: one count per layer, 0 for a Mamba-2 layer; the spec has
  // one kv_heads for the attention layers.
  const std::string kv_key = a + "attention.head_count_kv";
  std::vector<int64_t> attention;
  int64_t kv_heads = 0;
  const GgufValue* kv = r.value(kv_key);
  const auto* per_layer = kv ? std::get_if<weights::GgufArray>(&kv->value) : nullptr;
  if (per_layer == nullptr) {
    r.problem(kv_key + (kv ? ": one count per layer expected (0 for a Mamba-2 layer), a " +
                                 std::string(weights::gguf_type_name(kv->type())) + " found"
                           : ": missing"));
  } else if (static_cast<int64_t>(per_layer->items.size()) != layers) {
    r.problem(kv_key + ": " + std::to_string(per_layer->items.size()) + " counts, but block_count is " +
              std::to_string(layers));
  } else {
    for (size_t l = 0; l < per_layer->items.size(); ++l) {
      const auto count = std::visit(
          [](const auto& x) -> std::optional<int64_t> {
            if constexpr (std::is_integral_v<std::decay_t<decltype(x)>> && !std::is_same_v<std::decay_t<decltype(x)>, bool>)
              return x >= 0 ? std::optional<int64_t>(static_cast<int64_t>(x)) : std::nullopt;
            else return std::nullopt;
          },
          per_layer->items[l].value);
      if (!count) {
        r.problem(kv_key + "[" + std::to_string(l) + "]: not a count");
      } else if (*count > 0) {
        if (kv_heads > 0 && *count != kv_heads)
          r.problem(kv_key + "[" + std::to_string(l) + "]: " + std::to_string(*count) + " KV heads, but layer " +
                    std::to_string(attention.front()) + " has " + std::to_string(kv_heads) +
                    " (the spec has one kv_heads)");
        kv_heads = *count;
        attention.push_back(static_cast<int64_t>(l));
      }
    }
    if (attention.empty())
      r.problem(kv_key + ": every count 0: no attention layer (a Mamba-2 model is llama.cpp's mamba2)");
    else if (static_cast<int64_t>(attention.size()) == layers)
      r.problem(kv_key + ": no count 0: no Mamba-2 layer (llama.cpp's converter writes such a model as granite)");
  }
  // What Granite 4.0's hybrids add and a spec does not say (Bamba has none of it).
  for (const char* key : {"embedding_scale", "residual_scale", "logit_scale", "attention.scale"})
    if (r.value(a + key) != nullptr) r.problem(a + key + ": Granite's multipliers are not read (Bamba has none)");
  if (r.integer(a + "expert_count").value_or(0) > 0)
    r.problem(a + "expert_count: Granite 4.0's experts are not read (Bamba has none)");
  if (const GgufValue* v = r.value(a + "rope.scaling.finetuned")) {
    const bool* rope = std::get_if<bool>(&v->value);
    if (rope == nullptr) r.problem(a + "rope.scaling.finetuned: a bool expected");
    else if (!*rope) r.problem(a + "rope.scaling.finetuned = false: attention without RoPE (Granite 4.0) is not read");
  }

  const int64_t key_length = r.integer(a + "attention.key_length").value_or(heads > 0 ? hidden / heads : 0);
  TomlTable& dims = doc.table("dims");
  dims.set("hidden", hidden, a + "embedding_length");
  dims.set("layers", layers, a + "block_count");
  dims.set("heads", heads, a + "attention.head_count");
  if (kv_heads > 0 && kv_heads != heads) dims.set("kv_heads", kv_heads, kv_key + " of the attention layers");
  if (heads > 0 && key_length != hidden / heads) dims.set("head_dim", key_length, a + "attention.key_length");
  dims.set("intermediate", ff, a + "feed_forward_length");
  dims.set("vocab", embed->shape[0], "token_embd rows");
  dims.set("max_context", context, a + "context_length");

  std::string first_ssm = "blk.0.";
  for (int64_t l = 0; l < layers; ++l)
    if (std::find(attention.begin(), attention.end(), l) == attention.end()) {
      first_ssm = "blk." + std::to_string(l) + ".";
      break;
    }
  TomlTable& m = ssm_table(r, doc, "granitehybrid", hidden, first_ssm);
  if (!attention.empty()) m.set("attention_layers", attention, kv_key + " not 0");

  rms_norm_section(r, doc, a);
  if (!attention.empty()) attention_biases(r, doc.table("attention"), "blk." + std::to_string(attention.front()) + ".");
  unscaled_rope(r, doc.table("position"), a, key_length, "interleaved",
                "llama.cpp permutes the q/k rows of whole heads for it");
  doc.table("mlp").set("activation", "silu").set("gated", true);
  tied_embedding(r, doc);
}

// llama.cpp's deepseek2 (DeepSeek-V2/V3): [dims], [mla], [moe], [norm],
// [position], [mlp] and [embedding]. The cache is the latent (head_count_kv
// 1, key_length kv_lora_rank + rope); key_length_mla and value_length_mla
// are the heads' widths (older files: key_length and value_length). Its
// converter splits kv_b_proj into attn_k_b and attn_v_b (older files hold
// attn_kv_b whole); its RoPE turns adjacent pairs as the release does;
// yarn_log_multiplier is 0.1·mscale_all_dim, and cos and sin are left
// unscaled (the release's mscale / mscale_all_dim = 1); a group of experts
// scores as the sum of its best two (V3's rule, whatever the model).
void deepseek2_sections(Reader& r, TomlDoc& doc) {
  const std::string a = "deepseek2.";
  const auto [hidden, layers, context, embed] = basics(r, a);
  const int64_t vocab = r.integer(a + "vocab_size").value_or(embed->shape[0]);
  const auto flag = [&](const std::string& key) {
    const GgufValue* v = r.value(key);
    const bool* b = v ? std::get_if<bool>(&v->value) : nullptr;
    if (v != nullptr && b == nullptr) r.problem(key + ": a bool expected");
    return b != nullptr && *b;
  };
  TomlTable& dims = doc.table("dims");
  dims.set("hidden", hidden, a + "embedding_length");
  dims.set("layers", layers, a + "block_count");
  dims.set("heads", r.required(a + "attention.head_count"), a + "attention.head_count");
  dims.set("intermediate", r.required(a + "feed_forward_length"), a + "feed_forward_length: the dense layers' MLP");
  dims.set("vocab", vocab, "token_embd rows");
  dims.set("max_context", context, a + "context_length");
  TomlTable& mla = doc.table("mla");
  const int64_t rank = r.required(a + "attention.kv_lora_rank");
  const int64_t rope = r.required(a + "rope.dimension_count");
  const bool mla_keys = r.value(a + "attention.key_length_mla") != nullptr;
  // The latent is one cached head; older files (no *_mla keys) count the heads.
  if (const auto kv = r.integer(a + "attention.head_count_kv"); kv && mla_keys && *kv != 1)
    r.problem(a + "attention.head_count_kv " + std::to_string(*kv) + ": latent attention caches one head (1)");
  const std::string qk_key = a + (mla_keys ? "attention.key_length_mla" : "attention.key_length");
  const std::string v_key = a + (mla_keys ? "attention.value_length_mla" : "attention.value_length");
  const int64_t qk = r.required(qk_key), vd = r.required(v_key);
  if (const auto q = r.integer(a + "attention.q_lora_rank"); q && *q > 0) mla.set("q_lora_rank", *q, a + "attention.q_lora_rank");
  mla.set("kv_lora_rank", rank, a + "attention.kv_lora_rank");
  mla.set("qk_nope_head_dim", qk - rope, qk_key + " − rope.dimension_count");
  mla.set("qk_rope_head_dim", rope, a + "rope.dimension_count");
  mla.set("v_head_dim", vd, v_key);
  if (r.has("blk.0.attn_k_b.weight")) mla.set("split_kv_b", true, "attn_k_b, attn_v_b: kv_b_proj split as the converter writes it");
  else if (!r.has("blk.0.attn_kv_b.weight")) r.problem("blk.0.attn_k_b.weight: missing (and no attn_kv_b)");

  if (const int64_t experts = r.integer(a + "expert_count").value_or(0); experts > 0) {
    TomlTable& moe = doc.table("moe");
    moe.set("experts", experts, a + "expert_count");
    moe.set("top_k", r.required(a + "expert_used_count"), a + "expert_used_count");
    moe.set("norm_topk_prob", flag(a + "expert_weights_norm"), a + "expert_weights_norm");
    const int64_t width = r.required(a + "expert_feed_forward_length");
    moe.set("expert_intermediate", width, a + "expert_feed_forward_length");
    if (const int64_t shared = r.integer(a + "expert_shared_count").value_or(0); shared > 0) {
      moe.set("shared_experts", shared, a + "expert_shared_count");
      moe.set("shared_intermediate", width, "llama.cpp's deepseek2: each shared expert as wide as a routed one");
    }
    // include/llama.h's llama_expert_gating_func_type: 1 softmax, 2 sigmoid.
    const int64_t gating = r.integer(a + "expert_gating_func").value_or(1);
    if (gating == 2) moe.set("scoring", "sigmoid", a + "expert_gating_func 2");
    else if (gating != 1) r.problem(a + "expert_gating_func " + std::to_string(gating) + ": only softmax (1) and sigmoid (2) are supported");
    const int64_t dense = r.integer(a + "leading_dense_block_count").value_or(0);
    if (dense >= layers && layers > 0)
      r.problem(a + "leading_dense_block_count " + std::to_string(dense) + ": every one of the " + std::to_string(layers) +
                " layers dense, beside " + std::to_string(experts) + " experts");
    else if (dense > 1024)
      r.problem(a + "leading_dense_block_count " + std::to_string(dense) + ": more layers than a spec holds (1024)");
    else if (dense > 0) {
      std::vector<int64_t> list;
      for (int64_t l = 0; l < dense && l < layers; ++l) list.push_back(l);
      moe.set("dense_layers", list, a + "leading_dense_block_count " + std::to_string(dense));
    }
    if (r.has("blk." + std::to_string(dense) + ".exp_probs_b.bias")) moe.set("correction_bias", true, "exp_probs_b.bias");
    if (const int64_t groups = r.integer(a + "expert_group_count").value_or(1); groups > 1) {
      moe.set("groups", groups, a + "expert_group_count");
      moe.set("topk_groups", r.integer(a + "expert_group_used_count").value_or(groups), a + "expert_group_used_count");
      moe.set("group_score", "top2_sum", "llama.cpp scores a group by the sum of its best two experts");
    }
    if (const auto scale = r.number(a + "expert_weights_scale"); scale && *scale != 1.0)
      moe.set("routed_scaling_factor", *scale, a + "expert_weights_scale");
  }

  rms_norm_section(r, doc, a);

  TomlTable& position = doc.table("position");
  position.set("kind", "rope");
  position.set("pairing", "interleaved", "llama.cpp's deepseek2 turns adjacent pairs, as the release");
  position.set("theta", r.number(a + "rope.freq_base").value_or(10000.0), a + "rope.freq_base");
  if (const auto type = r.string(a + "rope.scaling.type"); type && *type == "yarn") {
    TomlTable& scaling = doc.table("position.scaling");
    scaling.set("kind", "yarn", a + "rope.scaling.type");
    if (auto f = r.number(a + "rope.scaling.factor")) scaling.set("factor", *f, a + "rope.scaling.factor");
    scaling.set("original_max_context", r.required(a + "rope.scaling.original_context_length"),
                a + "rope.scaling.original_context_length");
    if (auto b = r.number(a + "rope.scaling.yarn_beta_fast")) scaling.set("beta_fast", *b, a + "rope.scaling.yarn_beta_fast");
    if (auto b = r.number(a + "rope.scaling.yarn_beta_slow")) scaling.set("beta_slow", *b, a + "rope.scaling.yarn_beta_slow");
    if (auto mul = r.number(a + "rope.scaling.yarn_log_multiplier")) {
      const double all = from_f32(*mul / 0.1);
      scaling.set("mscale", all, "llama.cpp leaves cos and sin unscaled: mscale = mscale_all_dim");
      scaling.set("mscale_all_dim", all, a + "rope.scaling.yarn_log_multiplier / 0.1");
    }
  } else if (type && *type != "none") {
    r.problem(a + "rope.scaling.type \"" + *type + "\": llama.cpp's deepseek2 runs yarn or none");
  }
  doc.table("mlp").set("activation", "silu").set("gated", true);
  tied_embedding(r, doc);
}

// The decoders' sections ([moe] to [output]) of llama.cpp's architecture `arch`.
void decoder_sections(Reader& r, TomlDoc& doc, const Arch* arch, int64_t hidden, int64_t heads, int64_t layers,
                      int64_t ff, int64_t key_length, int64_t context, std::span<const float> rope_freqs,
                      std::optional<std::string>& mlp_norm_name) {
  const std::string arch_name(arch->name);
  const std::string a = arch_name + ".";
  const std::string_view an = arch->name;
  const bool gpt2 = an == "gpt2";

  // Mixtures of experts (Mixtral as llama, Qwen3-MoE): each layer's experts
  // stacked in one tensor per role (ffn_*_exps), the preset's names.
  if (const int64_t experts = r.integer(a + "expert_count").value_or(0); experts > 0) {
    TomlTable& moe = doc.table("moe");
    moe.set("experts", experts, a + "expert_count");
    moe.set("top_k", r.required(a + "expert_used_count"), a + "expert_used_count");
    const bool renormalize = an != "qwen2moe";
    moe.set("norm_topk_prob", renormalize,
            "llama.cpp's " + arch_name + (renormalize ? ": the top-k weights renormalized" : ": the top-k weights as they are"));
    if (const auto width = r.integer(a + "expert_feed_forward_length"))
      moe.set("expert_intermediate", *width, a + "expert_feed_forward_length");
    // Qwen2-MoE's shared expert, and its sigmoid gate (a vector in the file).
    if (const weights::TensorInfo* shared = r.tensor("blk.0.ffn_up_shexp.weight")) {
      moe.set("shared_experts", 1, "ffn_up_shexp: one shared expert");
      moe.set("shared_intermediate", r.integer(a + "expert_shared_feed_forward_length").value_or(shared->shape[0]),
              a + "expert_shared_feed_forward_length");
      if (r.has("blk.0.ffn_gate_inp_shexp.weight")) moe.set("shared_expert_gate", true, "ffn_gate_inp_shexp");
    }
    if (!r.has("blk.0.ffn_gate_exps.weight"))
      r.problem(a + "expert_count: " + std::to_string(experts) +
                " experts but no blk.0.ffn_gate_exps.weight (experts stored one tensor each do not import)");
  } else if (r.has("blk.0.ffn_gate_exps.weight")) {
    r.problem("blk.0.ffn_gate_exps.weight: experts without " + a + "expert_count");
  }

  // What the metadata cannot say, llama.cpp's loader would refuse too.
  if (const auto type = r.string(a + "rope.scaling.type"); type && *type != "none" && *type != "linear" && *type != "yarn")
    r.problem(a + "rope.scaling.type \"" + *type + "\" is not representable");

  TomlTable& norm = doc.table("norm");
  const bool layernorm = arch->layernorm;
  norm.set("kind", layernorm ? "layernorm" : "rmsnorm");
  const std::string eps_key = a + (layernorm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon");
  if (auto eps = r.number(eps_key)) norm.set("eps", *eps, eps_key);
  else r.problem(eps_key + ": missing");
  const bool sandwich = an == "gemma2" || an == "gemma3";
  if (sandwich) norm.set("placement", "sandwich", "attn_norm, post_attention_norm, ffn_norm, post_ffw_norm");
  else if (an == "olmo2") norm.set("placement", "branch_output", "post_attention_norm, post_ffw_norm");
  else if (an == "gptneox") {
    const GgufValue* par = r.value(a + "use_parallel_residual");
    const bool* parallel = par ? std::get_if<bool>(&par->value) : nullptr;
    if (par != nullptr && parallel == nullptr) r.problem(a + "use_parallel_residual: a bool expected");
    if (parallel == nullptr || *parallel)
      norm.set("placement", "parallel", a + "use_parallel_residual").set("parallel_shared", false, "attn_norm, ffn_norm");
    else
      norm.set("placement", "pre", a + "use_parallel_residual = false");
  } else if (an == "phi2") {
    norm.set("placement", "parallel", "llama.cpp's phi2: attention and MLP read attn_norm").set("parallel_shared", true);
  } else if (an == "falcon") {
    norm.set("placement", "parallel", "llama.cpp's falcon: attention and MLP in parallel");
    if (r.has("blk.0.attn_norm_2.weight")) {
      norm.set("parallel_shared", false, "attn_norm_2: the MLP's own norm");
      mlp_norm_name = "blk.{layer}.attn_norm_2";
    } else {
      norm.set("parallel_shared", true, "no attn_norm_2");
    }
  } else norm.set("placement", "pre");
  if (layernorm && !r.has("blk.0.attn_norm.bias")) norm.set("bias", false, "no attn_norm.bias");
  if (arch->gemma) norm.set("unit_offset", false, "llama.cpp stores the norm weights as 1 + w");

  TomlTable& attention = doc.table("attention");
  attention_biases(r, attention, "blk.0.");
  if (const weights::TensorInfo* qn = r.tensor("blk.0.attn_q_norm.weight")) {
    const bool per_head = qn->shape.size() == 1 && qn->shape[0] == key_length;
    attention.set("qk_norm", per_head ? "per_head" : "whole", "attn_q_norm: " + std::to_string(qn->shape[0]) + " values");
  }
  if (scale_by_hidden(an, layers))
    attention.set("query_pre_attn_scalar", hidden / heads, "llama.cpp: the 27B size scales by hidden / heads");
  if (auto cap = r.number(a + "attn_logit_softcapping"); cap && *cap > 0)
    attention.set("softcap", *cap, a + "attn_logit_softcapping");
  if (auto window = r.integer(a + "attention.sliding_window"); window && *window > 0) {
    attention.set("sliding_window", *window, a + "attention.sliding_window");
    if (an == "gemma2") attention.set("window_pattern", std::vector<bool>{true, false}, "llama.cpp: even layers are windowed");
    if (an == "gemma3")
      attention.set("window_pattern", std::vector<bool>{true, true, true, true, true, false},
                    "llama.cpp: every sixth layer is global");
  }

  TomlTable& position = doc.table("position");
  if (arch->alibi) {
    position.set("kind", "alibi", an == "bloom" ? "llama.cpp's bloom: ALiBi, max bias 8" : "mpt.attention.max_alibi_bias");
    if (auto bias = r.number(a + "attention.max_alibi_bias"); bias && *bias != 8)
      r.problem(a + "attention.max_alibi_bias: " + std::to_string(*bias) +
                " (the spec's ALiBi slopes are the standard ones of max bias 8)");
    if (r.value(a + "attention.clamp_kqv") != nullptr)
      r.problem(a + "attention.clamp_kqv: the spec does not clamp q, k and v");
    if (r.has("position_embd.weight")) r.problem("position_embd.weight: a position table beside ALiBi is not representable");
    if (r.has("blk.0.attn_q_norm.weight")) r.problem("blk.0.attn_q_norm.weight: MPT's q/k LayerNorms are not representable");
    if (r.has("blk.0.ffn_act.scales")) r.problem("blk.0.ffn_act.scales: activation scales are not representable");
    if (r.has(kRopeFreqs)) r.problem(kRopeFreqs + ": RoPE factors in a file of ALiBi positions");
  } else if (gpt2) {
    learned_positions(r, position, context);
  } else {
    position.set("kind", "rope");
    position.set("pairing", arch->interleaved ? "interleaved" : "neox",
                 arch->interleaved ? "llama.cpp permutes Llama's q/k rows for it" : "llama.cpp keeps rotate-half");
    const int64_t rotary_dim = r.integer(a + "rope.dimension_count").value_or(key_length);
    if (rotary_dim != key_length) position.set("rotary_dim", rotary_dim, a + "rope.dimension_count");
    const double theta = r.number(a + "rope.freq_base").value_or(10000.0);
    position.set("theta", theta, a + "rope.freq_base");
    if (an == "gemma3") position.set("local_theta", 10000.0, "llama.cpp's base of the windowed layers");
    const auto type = r.string(a + "rope.scaling.type");
    if (r.has(kRopeFreqs)) {
      // llama3 scaling: llama.cpp's converter keeps only its factors.
      if (type && *type != "none")
        r.problem(kRopeFreqs + ": llama3 factors beside " + a + "rope.scaling.type \"" + *type +
                  "\" (the spec has one RoPE scaling)");
      else if (rope_freqs.empty())
        r.problem(kRopeFreqs + ": its values, which the llama3 parameters are recovered from, were not read");
      else {
        try {
          const spec::RopeScalingParams sc = llama3_scaling_from_rope_freqs(rope_freqs, theta, rotary_dim);
          TomlTable& scaling = doc.table("position.scaling");
          scaling.note("llama.cpp keeps llama3 scaling only as the factors of rope_freqs.weight: these are the");
          scaling.note("parameters that give every one of them (original, low and high scale together)");
          scaling.set("kind", "llama3", kRopeFreqs);
          scaling.set("factor", sc.factor, "the largest of rope_freqs.weight");
          scaling.set("low_freq_factor", sc.low_freq_factor, "recovered from rope_freqs.weight");
          scaling.set("high_freq_factor", sc.high_freq_factor, "recovered from rope_freqs.weight");
          scaling.set("original_max_context", sc.original_max_context, "recovered from rope_freqs.weight");
        } catch (const ImportError& e) {
          for (const std::string& p : e.problems()) r.problem(p);
        }
      }
    }
    if (type && (*type == "linear" || *type == "yarn")) {
      TomlTable& scaling = doc.table("position.scaling");
      scaling.set("kind", *type, a + "rope.scaling.type");
      if (auto f = r.number(a + "rope.scaling.factor")) scaling.set("factor", *f, a + "rope.scaling.factor");
      if (auto o = r.integer(a + "rope.scaling.original_context_length"); o && *type == "yarn")
        scaling.set("original_max_context", *o, a + "rope.scaling.original_context_length");
    }
  }

  TomlTable& mlp = doc.table("mlp");
  const bool ungated = arch->layernorm;  // GPT-2 and the LayerNorm families after it
  if (ungated && !gpt2) mlp.set("activation", gelu_of(an), "the model's GELU (not in GGUF metadata)");
  else mlp.set("activation", arch->gemma || gpt2 ? "gelu_tanh" : "silu");
  mlp.set("gated", !ungated);
  if (r.has("blk.0.ffn_up.bias")) mlp.set("bias", true, "ffn_up.bias");
  const weights::TensorInfo* up = r.tensor("blk.0.ffn_up.weight");
  if (!ungated && !r.has("blk.0.ffn_gate.weight") && up != nullptr && up->shape[0] == 2 * ff)
    mlp.set("fused_gate_up", "gate_up", "ffn_up: gate, then up");

  TomlTable& embedding = doc.table("embedding");
  embedding.set("tied", !r.has("output.weight"), r.has("output.weight") ? "output.weight present" : "no output.weight");
  if (r.has("token_embd_norm.weight")) embedding.set("norm", true, "token_embd_norm");
  // Hugging Face (the contract) scales by sqrt(hidden) in the checkpoint's
  // dtype, bf16 for every Gemma; llama.cpp by the exact root.
  if (arch->gemma)
    embedding.set("scale", gemma_embedding_scale(hidden), "sqrt(hidden) in bf16, as Hugging Face's Gemma computes it");

  if (auto cap = r.number(a + "final_logit_softcapping"); cap && *cap > 0)
    doc.table("output").set("softcap", *cap, a + "final_logit_softcapping");
  if (r.has("output.bias")) doc.table("output").set("bias", true, "output.bias");
}

// What llama.cpp's t5encoder and t5 compute alike (src/models/t5encoder.cpp,
// t5.cpp): pre-norm RMS blocks and a final norm per stack, unscaled scores,
// T5's bucketed relative bias from each stack's first layer (distances up to
// 128, which llama.cpp fixes), and a ReLU MLP or, with ffn_gate, Flan-T5's
// gated tanh GELU. `stacks`: the name prefixes of the stacks' layers ("enc",
// and "dec" for a whole T5), each of which must agree.
void t5_blocks(Reader& r, TomlDoc& doc, const std::string& a, const std::vector<std::string>& stacks) {
  const std::string arch = a.substr(0, a.size() - 1);
  TomlTable& norm = rms_norm_section(r, doc, a);
  norm.set("placement", "pre", stacks.size() == 1 ? "enc.blk.*.attn_norm and ffn_norm, then enc.output_norm"
                                                  : "*.blk.*.attn_norm and ffn_norm, then enc. and dec.output_norm");

  doc.table("attention").set("scale", 1.0, "llama.cpp's " + arch + " does not scale the scores");

  TomlTable& position = doc.table("position");
  position.set("kind", "relative", stacks.front() + ".blk.0.attn_rel_b: T5's bucketed relative bias");
  position.set("buckets", r.required(a + "attention.relative_buckets_count"), a + "attention.relative_buckets_count");
  position.set("max_distance", 128, "llama.cpp's " + arch + " fixes it");
  for (const std::string& stack : stacks)
    if (r.has(stack + ".blk.1.attn_rel_b.weight"))
      r.problem(stack + ".blk.1.attn_rel_b.weight: a relative bias table per layer (the spec shares the first layer's)");

  const bool gated = r.has(stacks.front() + ".blk.0.ffn_gate.weight");
  for (const std::string& stack : stacks)
    if (r.has(stack + ".blk.0.ffn_gate.weight") != gated)
      r.problem(stack + ".blk.0.ffn_gate.weight: " + (gated ? "missing, but " : "present, but ") + stacks.front() +
                ".blk.0.ffn_gate.weight " + (gated ? "is there" : "is not") +
                " (the spec gates both stacks' MLPs or neither)");
  TomlTable& mlp = doc.table("mlp");
  mlp.set("activation", gated ? "gelu_tanh" : "relu",
          gated ? "ffn_gate: Flan-T5's gated GELU (tanh)" : "no ffn_gate: T5 v1.0's ReLU");
  mlp.set("gated", gated);
}

// llama.cpp's t5, a whole T5 (src/models/t5.cpp): the encoder's layers
// (block_count) as t5encoder's, then decoder_block_count decoder layers,
// each self-attention with the decoder's causal relative bias,
// cross-attention to the encoder's output (no bias) and the MLP; the
// decoder starts from decoder_start_token_id. Without output.weight the head
// is the embedding table, which T5 scales by hidden^-0.5 (transformers'
// T5ForConditionalGeneration; llama.cpp's graph leaves the scale out, which
// changes no greedy token).
void t5_sections(Reader& r, TomlDoc& doc, const std::string& a, int64_t hidden) {
  TomlTable& model = doc.table("model");
  model.set("stack", "encoder-decoder", "llama.cpp's t5: an encoder, then a decoder that attends to it");
  const std::string start_key = a + "decoder_start_token_id";
  if (const auto start = r.integer(start_key)) {
    model.set("decoder_start", *start, start_key);
  } else if (r.value(start_key) == nullptr) {
    if (const auto bos = r.integer("tokenizer.ggml.bos_token_id"))
      model.set("decoder_start", *bos, "no " + start_key + ": llama.cpp starts from tokenizer.ggml.bos_token_id");
    else
      r.problem(start_key + ": missing, and no tokenizer.ggml.bos_token_id (the token the decoder starts from)");
  }
  t5_blocks(r, doc, a, {"enc", "dec"});
  const bool tied = !r.has("output.weight");
  doc.table("embedding").set("tied", tied, tied ? "no output.weight" : "output.weight present");
  if (tied)
    doc.table("output").set("scale", std::pow(static_cast<double>(hidden), -0.5),
                            "T5's tied head: hidden^-0.5 (transformers; llama.cpp leaves it out)");
}

// llama.cpp's encoders as their graphs compute them (src/models/bert.cpp,
// nomic-bert.cpp, t5encoder.cpp). bert and nomic-bert: a LayerNorm of the
// embeddings (token types' row 0 added: one segment), then post-norm
// LayerNorm blocks; bert with learned positions and a GELU MLP, nomic-bert
// with rotate-half RoPE, q | k | v fused and a SwiGLU MLP without biases.
// t5encoder: pre-norm RMS blocks, T5's relative bias (the first layer's
// table, buckets up to distance 128), unscaled scores, a final norm.
// pooling_type names the pooling; llama.cpp L2-normalizes pooled
// embeddings unless asked otherwise (embd_normalize 2), so a pooled spec
// normalizes.
void encoder_sections(Reader& r, TomlDoc& doc, std::string_view an, const std::string& a, int64_t key_length,
                      int64_t context) {
  const std::string arch(an);
  doc.table("model").set("stack", "encoder", "llama.cpp's " + arch + ": bidirectional, ending at its hidden states");
  if (const GgufValue* causal = r.value(a + "attention.causal")) {
    const bool* is_causal = std::get_if<bool>(&causal->value);
    if (is_causal == nullptr) r.problem(a + "attention.causal: a bool expected");
    else if (*is_causal) r.problem(a + "attention.causal = true: a causal " + arch + " is no encoder");
  }
  const bool t5 = an == "t5encoder", nomic = an == "nomic-bert";
  const std::string blk = t5 ? "enc.blk.0." : "blk.0.";

  if (t5) {
    t5_blocks(r, doc, a, {"enc"});
  } else {
    TomlTable& norm = doc.table("norm");
    norm.set("kind", "layernorm");
    const std::string eps_key = a + "attention.layer_norm_epsilon";
    if (auto eps = r.number(eps_key)) norm.set("eps", *eps, eps_key);
    else r.problem(eps_key + ": missing");
    norm.set("placement", "post", "attn_output_norm after the attention's residual add, layer_output_norm after the MLP's");
    norm.set("final", false, "no output_norm: the hidden states are the last layer_output_norm's");
    if (!r.has("blk.0.attn_output_norm.bias")) norm.set("bias", false, "no attn_output_norm.bias");
  }

  TomlTable& attention = doc.table("attention");
  attention_biases(r, attention, blk);

  // t5encoder's positions and MLP: t5_blocks.
  TomlTable& position = doc.table("position");
  if (nomic) {
    unscaled_rope(r, position, a, key_length, "neox", "llama.cpp's nomic-bert keeps rotate-half");
  } else if (!t5) {
    learned_positions(r, position, context);
  }

  TomlTable& mlp = doc.table("mlp");
  if (nomic) {
    mlp.set("activation", "silu", "llama.cpp's nomic-bert: SwiGLU").set("gated", true);
  } else if (!t5) {
    mlp.set("activation", "gelu_erf", "BERT's exact GELU (not in GGUF metadata)").set("gated", false);
  }
  const bool up_bias = r.has(blk + "ffn_up.bias"), down_bias = r.has(blk + "ffn_down.bias");
  if ((t5 || nomic) && (up_bias || down_bias))
    r.problem(blk + (up_bias ? "ffn_up.bias" : "ffn_down.bias") + ": llama.cpp's " + arch + " adds no MLP biases");
  else if (up_bias != down_bias)
    r.problem(blk + (up_bias ? "ffn_up.bias" : "ffn_down.bias") + " without its twin: the spec biases both or neither");
  else if (up_bias)
    mlp.set("bias", true, "ffn_up.bias, ffn_down.bias");

  if (!t5) {
    TomlTable& embedding = doc.table("embedding");
    if (r.has("token_embd_norm.weight")) embedding.set("norm", true, "token_embd_norm");
    if (const weights::TensorInfo* types = r.tensor("token_types.weight")) {
      const int64_t rows = types->shape.empty() ? 0 : types->shape[0];
      if (nomic)
        r.problem("token_types.weight: token types beside RoPE positions (a spec adds token types with learned "
                  "positions only: embedding.token_types needs position.kind = \"learned\")");
      else
        embedding.set("token_types", rows, "token_types rows (llama.cpp adds row 0: one segment)");
      if (const auto count = r.integer("tokenizer.ggml.token_type_count"); count && *count != rows)
        r.problem("tokenizer.ggml.token_type_count " + std::to_string(*count) + " differs from token_types.weight's " +
                  std::to_string(rows) + " rows");
    }
  }

  // include/llama.h's llama_pooling_type.
  const int64_t pooling = r.integer(a + "pooling_type").value_or(0);
  constexpr const char* kPoolings[] = {"none", "mean", "cls", "last"};
  if (pooling >= 1 && pooling <= 3)
    doc.table("pooling")
        .set("kind", kPoolings[pooling], a + "pooling_type")
        .set("normalize", true, "llama.cpp L2-normalizes pooled embeddings (embd_normalize 2)");
  else if (pooling == 4)
    r.problem(a + "pooling_type 4 (rank): a reranker's classification head, which a spec does not express");
  else if (pooling > 4)
    r.problem(a + "pooling_type " + std::to_string(pooling) + ": not a pooling llama.cpp names");
}

}  // namespace

std::vector<float> llama3_rope_freqs(const spec::RopeScalingParams& sc, double theta, int64_t rotary_dim) {
  // conversion/llama.py: freqs = 1 / base ** (arange(0, dim, 2, float32) / dim),
  // then per freq on torch f32 scalars; the band edges are Python floats.
  const float factor = static_cast<float>(sc.factor), low = static_cast<float>(sc.low_freq_factor),
              high = static_cast<float>(sc.high_freq_factor), old = static_cast<float>(sc.original_max_context);
  const double low_wavelen = static_cast<double>(sc.original_max_context) / sc.low_freq_factor;
  const double high_wavelen = static_cast<double>(sc.original_max_context) / sc.high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < rotary_dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(i) / static_cast<float>(rotary_dim));
    const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (old / wavelen - low) / (high - low);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

spec::RopeScalingParams llama3_scaling_from_rope_freqs(std::span<const float> factors, double theta,
                                                       int64_t rotary_dim) {
  auto refuse = [](const std::string& why) { throw ImportError({kRopeFreqs + ": " + why}); };
  if (rotary_dim < 2 || factors.size() != static_cast<size_t>(rotary_dim / 2))
    refuse(std::to_string(factors.size()) + " factors, but the rotary dim " + std::to_string(rotary_dim) + " has " +
           std::to_string(std::max<int64_t>(rotary_dim / 2, 0)) + " pairs");
  for (size_t i = 0; i < factors.size(); ++i)
    if (!std::isfinite(factors[i]) || factors[i] <= 0)
      refuse("factor " + std::to_string(i) + " is " + std::to_string(factors[i]) + ", not a positive number");
  // The slowest pairs are slowed by the whole factor.
  const double factor = from_f32(*std::max_element(factors.begin(), factors.end()));

  // The metadata has none of the other three parameters: try the values
  // released configs use and their neighbours. Only the band's edges,
  // original / low and original / high, enter the factors, so parameter sets
  // that scale all three together are one model (kept once, with Meta's
  // low_freq_factor = 1 where the grid has it).
  std::vector<spec::RopeScalingParams> models;
  for (const double low : {0.5, 1.0, 2.0, 4.0}) {
    for (const double high : {1.0, 2.0, 4.0, 8.0, 16.0}) {
      if (high <= low) continue;
      for (int k = 4; k <= 17; ++k) {
        spec::RopeScalingParams sc;
        sc.kind = spec::RopeScaling::Llama3;
        sc.factor = factor;
        sc.low_freq_factor = low;
        sc.high_freq_factor = high;
        sc.original_max_context = int64_t{1} << k;
        bool fits = true;
        for (size_t i = 0; i < factors.size() && fits; ++i) {
          const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
          const double predicted = llama3_factor(inv_freq, sc);
          fits = std::abs(predicted - static_cast<double>(factors[i])) <= 1e-5 * std::abs(predicted);
        }
        if (!fits) continue;
        const double original = static_cast<double>(sc.original_max_context);
        auto same = std::find_if(models.begin(), models.end(), [&](const spec::RopeScalingParams& m) {
          const double o = static_cast<double>(m.original_max_context);
          return o / m.low_freq_factor == original / low && o / m.high_freq_factor == original / high;
        });
        if (same == models.end()) models.push_back(sc);
        else if (low == 1.0) *same = sc;
      }
    }
  }
  if (models.empty())
    refuse("no llama3 parameters give these " + std::to_string(factors.size()) + " factors (factor " +
           toml_float(factor) + ", the largest; low_freq_factor 0.5 to 4, high_freq_factor 1 to 16, "
           "original_max_context 2^4 to 2^17): not llama.cpp's llama3 scaling");
  if (models.size() > 1) {
    std::string list;
    for (const spec::RopeScalingParams& m : models) list += (list.empty() ? "" : "; ") + describe(m);
    refuse("the factors fit " + std::to_string(models.size()) + " different llama3 bands (" + list +
           "), which differ on frequencies this model does not have: the parameters are not determined");
  }
  return models.front();
}

std::vector<std::string> supported_gguf_architectures() {
  std::vector<std::string> out;
  for (const Arch& a : kArchs) out.emplace_back(a.name);
  return out;
}

TomlDoc import_gguf_metadata(const Metadata& metadata, const std::vector<weights::TensorInfo>& tensors,
                             const ImportOptions& options, std::span<const float> rope_freqs) {
  Reader r(metadata, tensors, options.file);
  const std::string arch_name = r.string("general.architecture").value_or("");
  const Arch* arch = find_arch(arch_name);
  if (arch == nullptr) {
    std::string list;
    for (const Arch& a : kArchs) list += (list.empty() ? "" : ", ") + std::string(a.name);
    r.problem(arch_name.empty() ? "general.architecture: missing"
                                : "general.architecture \"" + arch_name + "\" is not supported (supported: " + list + ")");
    throw ImportError(r.problems());
  }
  const std::string a = arch_name + ".";
  const std::string_view an = arch->name;

  TomlDoc doc;
  const std::string raw_name = options.name.empty() ? r.string("general.name").value_or("model") : options.name;
  doc.header(raw_name + ", from the metadata of a GGUF file (llama.cpp's conventions).");
  TomlTable& model = doc.table("model");
  model.set("name", sanitize_model_name(raw_name));
  model.set("source", options.source.empty() ? std::filesystem::path(options.file).filename().string() + " (GGUF metadata)"
                                             : options.source);

  std::optional<std::string> mlp_norm_name;  // Falcon-40B's second norm
  if (arch->ssm) {
    ssm_sections(r, doc, an);
  } else if (arch->hybrid) {
    granitehybrid_sections(r, doc);
  } else if (an == "deepseek2") {
    deepseek2_sections(r, doc);
  } else {
    // Dims: the metadata, checked against the tensors where they show them.
    const int64_t hidden = r.required(a + "embedding_length");
    const int64_t layers = r.required(a + "block_count");
    const int64_t heads = r.required(a + "attention.head_count");
    const int64_t kv_heads = r.integer(a + "attention.head_count_kv").value_or(heads);
    const int64_t ff = r.required(a + "feed_forward_length");
    const int64_t context = r.required(a + "context_length");
    const weights::TensorInfo* embed = embedding_table(r);
    const int64_t vocab = r.integer(a + "vocab_size").value_or(embed->shape[0]);
    if (embed->shape[1] != hidden)
      r.problem("token_embd.weight: rows of " + std::to_string(embed->shape[1]) + " values, but " + a +
                "embedding_length is " + std::to_string(hidden));
    if (embed->shape[0] != vocab)
      r.problem("token_embd.weight: " + std::to_string(embed->shape[0]) + " rows, but " + a + "vocab_size is " +
                std::to_string(vocab));
    const int64_t key_length = r.integer(a + "attention.key_length").value_or(heads > 0 ? hidden / heads : 0);
    if (const auto value_length = r.integer(a + "attention.value_length"); value_length && *value_length != key_length)
      r.problem(a + "attention.value_length " + std::to_string(*value_length) + " differs from key_length " +
                std::to_string(key_length) + " (the spec has one head_dim)");

    TomlTable& dims = doc.table("dims");
    dims.set("hidden", hidden, a + "embedding_length");
    if (arch->encdec) {  // block_count counts the encoder's layers, decoder_block_count the decoder's
      const std::string key = a + "decoder_block_count";
      dims.set("layers", r.integer(key).value_or(layers), r.value(key) ? key : "no " + key + ": " + a + "block_count");
      dims.set("encoder_layers", layers, a + "block_count");
    } else {
      dims.set("layers", layers, a + "block_count");
    }
    dims.set("heads", heads, a + "attention.head_count");
    if (kv_heads != heads) dims.set("kv_heads", kv_heads, a + "attention.head_count_kv");
    if (heads > 0 && key_length != hidden / heads) dims.set("head_dim", key_length, a + "attention.key_length");
    dims.set("intermediate", ff, a + "feed_forward_length");
    dims.set("vocab", vocab, "token_embd rows");
    dims.set("max_context", context, a + "context_length");

    if (arch->encoder) encoder_sections(r, doc, an, a, key_length, context);
    else if (arch->encdec) t5_sections(r, doc, a, hidden);
    else decoder_sections(r, doc, arch, hidden, heads, layers, ff, key_length, context, rope_freqs, mlp_norm_name);
  }


  // Dtypes: every vector one dtype; the matrices' most common dtype.
  std::map<DType, std::vector<std::string>> matrix_dtypes, vector_dtypes;
  // (A state-space layer's conv taps, A, D and grouped norm are f32 arrays
  // whatever their rank: vectors.)
  const auto ssm_param = [](const std::string& name) {
    return name.ends_with(".ssm_conv1d.weight") || name.ends_with(".ssm_a") || name.ends_with(".ssm_d") ||
           name.ends_with(".ssm_norm.weight");
  };
  for (const auto& [name, t] : r.tensors())
    (t->shape.size() >= 2 && !ssm_param(name) ? matrix_dtypes : vector_dtypes)[t->dtype].push_back(name);
  auto one_dtype = [&](const std::map<DType, std::vector<std::string>>& found, const char* what) -> std::optional<DType> {
    if (found.empty()) return std::nullopt;
    if (found.size() > 1) {
      std::string list;
      for (const auto& [d, names] : found)
        list += (list.empty() ? "" : ", ") + std::string(dtype_key(d)) + " (" + std::to_string(names.size()) +
                (names.size() == 1 ? " tensor, " : " tensors, e.g. ") + names.front() + ")";
      r.problem(std::string("the ") + what + " hold several dtypes: " + list + "; a spec has one dtype for " + what);
    }
    return found.begin()->first;
  };
  // The matrices' dtype is the most common one; import_gguf writes the
  // others as [weights.dtypes] exceptions by role (a llama.cpp _M mixture).
  std::optional<DType> matrices;
  for (const auto& [d, names] : matrix_dtypes)
    if (!matrices || names.size() > matrix_dtypes[*matrices].size()) matrices = d;
  const std::optional<DType> vectors = one_dtype(vector_dtypes, "vectors");
  TomlTable& w = doc.table("weights");
  w.set("dtype", dtype_key(matrices.value_or(DType::F32)), "the file's matrices");
  if (vectors && *vectors != DType::F32) w.set("vector_dtype", dtype_key(*vectors), "the file's vectors");
  w.set("preset", "gguf");
  if (r.has("blk.0.attn_qkv.weight"))
    w.set("fused_qkv", true, "attn_qkv: q, k, v (the converter reorders per-head and grouped rows so)");
  if (mlp_norm_name) doc.table("weights.names").set("mlp_norm", *mlp_norm_name);
  if (an == "t5encoder") {
    TomlTable& names = doc.table("weights.names");
    names.note("llama.cpp's t5encoder: its encoder-decoder T5's encoder names (enc.), which no preset holds");
    for (const auto& [role, path] : t5encoder_names()) names.set(spec::name(role), path);
  }
  if (an == "t5") {
    TomlTable& names = doc.table("weights.names");
    names.note("llama.cpp's t5: the decoder's layers (dec.) and both stacks' tensors, which no preset holds");
    for (const auto& [role, path] : t5_names()) names.set(spec::name(role), path);
    TomlTable& encoder_names = doc.table("weights.encoder_names");
    for (const auto& [role, path] : t5_layer_names("enc")) encoder_names.set(spec::name(role), path);
  }
  // The spec computes the llama3 frequencies itself; the file's copy of
  // them is left out of the manifest check, here and when loading.
  if (r.has(kRopeFreqs))
    w.set("ignore", std::vector<std::string>{kRopeFreqs}, "llama.cpp's llama3 factors, computed from [position.scaling]");
  // A T5 file may hold cross-attention relative biases (dec.blk.N.cross_attn_rel_b),
  // which llama.cpp loads and never applies, nor does transformers.
  std::vector<std::string> unused;
  for (const auto& [name, t] : r.tensors())
    if (an == "t5" && name.starts_with("dec.blk.") && name.ends_with(".cross_attn_rel_b.weight")) unused.push_back(name);
  if (!unused.empty()) w.set("ignore", unused, "cross-attention relative biases llama.cpp never applies");

  if (!r.problems().empty()) throw ImportError(r.problems());
  return doc;
}

namespace {

// The file's matrices whose dtype is not `dtype`, as exceptions by role in
// `table` ([weights.dtypes], [vision.weights.dtypes]): per role one dtype,
// or one per layer where the layers differ (llama.cpp's Q4_K_M keeps attn_v
// and ffn_down of some layers in Q6_K; an mmproj's patch embedding may be
// f16 among f32 matrices). False when there are none.
bool write_role_dtypes(TomlDoc& doc, const std::string& table_name, const spec::Manifest& manifest, DType dtype,
                       const weights::GgufFile& file) {
  std::map<Role, std::vector<DType>> found;  // per role, per layer (one entry when not per layer)
  for (const spec::TensorSpec& t : manifest.tensors) {
    const weights::TensorInfo* info = file.find(t.name);
    if (info == nullptr || t.shape.size() < 2 || t.bias) continue;
    std::vector<DType>& per = found[t.role];
    const size_t at = t.layer < 0 ? 0 : static_cast<size_t>(t.layer);
    if (per.size() <= at) per.resize(at + 1, info->dtype);
    per[at] = info->dtype;
  }
  TomlTable* table = nullptr;
  for (const auto& [role, per] : found) {
    const DType first = per.front();  // a structured binding, which Clang 14 (the fuzz build's) cannot capture
    const bool uniform = std::all_of(per.begin(), per.end(), [&](DType d) { return d == first; });
    if (uniform && per.front() == dtype) continue;
    if (table == nullptr) table = &doc.table(table_name);
    if (uniform) {
      table->set(spec::name(role), std::string(dtype_key(per.front())));
    } else {
      std::vector<std::string> keys;
      for (DType d : per) keys.emplace_back(dtype_key(d));
      table->set(spec::name(role), keys, "one per layer");
    }
  }
  if (table != nullptr) table->note("the file's other matrices are " + std::string(dtype_key(dtype)));
  return table != nullptr;
}

// The spec written from a file's metadata breaks a contract: each error said
// of the GGUF key and value it came from (the comment of its line names the
// key), not of the spec text, which is nowhere on disk.
[[noreturn]] void metadata_error(const std::string& path, const std::string& text, const spec::Diagnostics& diag) {
  std::vector<std::string> lines;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string message = path + ": the GGUF metadata describes no model lathe can build:";
  for (const spec::Diagnostic& d : diag.items()) {
    std::string source;
    if (d.loc.line >= 1 && static_cast<size_t>(d.loc.line) <= lines.size()) {
      const std::string& line = lines[static_cast<size_t>(d.loc.line) - 1];
      const size_t eq = line.find('='), hash = line.find('#');
      std::string value = line.substr(eq == std::string::npos ? 0 : eq + 1,
                                      hash == std::string::npos ? std::string::npos : hash - eq - 1);
      value.erase(0, value.find_first_not_of(' '));
      value.erase(value.find_last_not_of(' ') + 1);
      if (hash != std::string::npos) source = line.substr(hash + 2) + " = " + value + ": ";
    }
    message += "\n  " + source + d.message;
  }
  throw Error(ErrorKind::BadFile, message);
}

// The problems of `file` against `manifest`: a tensor one has and the
// other does not, a shape that differs; the parameters of each counted
// into `check` (the tensors `ignored` names left out).
void check_tensors(const std::string& path, const weights::GgufFile& file, const spec::Manifest& manifest,
                   const std::vector<std::string>& ignored, int64_t experts, CheckpointCheck& check,
                   std::vector<std::string>& problems) {
  std::set<std::string> expected;
  int64_t spec_params = 0, file_elements = 0;
  for (const spec::TensorSpec& t : manifest.tensors) {
    expected.insert(t.name);
    spec_params += t.elements();
    const weights::TensorInfo* found = file.find(t.name);
    std::vector<int64_t> shape = t.shape;
    if (t.slice >= 0) shape.insert(shape.begin(), experts);  // the layer's experts stacked
    if (found == nullptr) problems.push_back(path + ": " + t.name + ": the imported spec has it, the file does not");
    else if (!same_values(shape, found->shape))
      problems.push_back(path + ": " + t.name + ": the imported spec's shape " + weights::shape_string(shape) +
                         " differs from the file's " + weights::shape_string(found->shape));
  }
  for (const weights::TensorInfo& t : file.tensors()) {
    if (std::find(ignored.begin(), ignored.end(), t.name) != ignored.end()) {
      ++check.ignored_tensors;
      continue;
    }
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    file_elements += n;
    if (!expected.count(t.name)) problems.push_back(path + ": " + t.name + ": the file has it, the imported spec does not");
  }
  if (spec_params != file_elements)
    problems.push_back(path + ": the imported spec has " + std::to_string(spec_params) + " parameters, the file " +
                       std::to_string(file_elements));
  check.spec_params += spec_params;
  check.checkpoint_elements += file_elements;
}

}  // namespace

ImportResult import_gguf(const std::string& path, ImportOptions options) {
  const weights::GgufFile file(path);
  if (options.file == "config.json") options.file = path;
  ImportResult result;
  std::vector<float> rope_freqs;
  if (const weights::TensorInfo* freqs = file.find(kRopeFreqs)) {
    int64_t n = 1;
    for (int64_t d : freqs->shape) n *= d;
    rope_freqs.resize(static_cast<size_t>(n));
    weights::convert(freqs->dtype, file.data(*freqs), DType::F32, std::as_writable_bytes(std::span(rope_freqs)));
  }
  result.doc = import_gguf_metadata(file.metadata(), file.tensors(), options, rope_freqs);
  result.text = result.doc.render();
  spec::Diagnostics diag(path + " (imported)");
  auto parsed = spec::parse_spec_string(result.text, path + " (imported)", diag);
  if (!parsed) metadata_error(path, result.text, diag);
  result.spec = std::move(*parsed);
  const auto reparse = [&](const std::string& at) {
    result.text = result.doc.render();
    auto again = spec::parse_spec_string(result.text, path + " (imported)", diag);
    if (!again) metadata_error(at, result.text, diag);
    result.spec = std::move(*again);
  };
  // A mixture: parsed again with its exceptions.
  if (write_role_dtypes(result.doc, "weights.dtypes", spec::build_manifest(result.spec), result.spec.weights.dtype, file))
    reparse(path);
  // The pair's [vision]: the mmproj's tower, the text file's image tokens.
  std::optional<weights::GgufFile> mmproj;
  if (!options.mmproj.empty()) {
    mmproj.emplace(options.mmproj);
    import_mmproj_metadata(result.doc, mmproj->metadata(), mmproj->tensors(), result.spec,
                           file.string_array("tokenizer.ggml.tokens").value_or(std::vector<std::string>{}), path,
                           options.mmproj);
    reparse(options.mmproj);
    if (write_role_dtypes(result.doc, "vision.weights.dtypes", spec::build_vision_manifest(result.spec),
                          result.spec.vision.weights.dtype, *mmproj))
      reparse(options.mmproj);
  }
  if (!options.check_weights) return result;

  // Each manifest must be its file's tensors, shape for shape, less those
  // weights.ignore names (exact names: the importer writes no patterns).
  std::vector<std::string> problems;
  CheckpointCheck check{path, 0, 0, 0};
  check_tensors(path, file, spec::build_manifest(result.spec), result.spec.weights.ignore, result.spec.moe.experts,
                check, problems);
  if (mmproj)
    check_tensors(options.mmproj, *mmproj, spec::build_vision_manifest(result.spec), result.spec.vision.weights.ignore,
                  0, check, problems);
  if (!problems.empty()) throw ImportError(problems);
  if (mmproj) check.path += " and " + options.mmproj;
  result.checkpoint = check;
  return result;
}

}  // namespace lathe::importer
