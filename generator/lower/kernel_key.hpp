// What identifies a kernel instance: its family and the constants that can
// differ between two instances of one model. The lowering picks a key for
// each dispatch; the plan's kernel list is the distinct keys it picked, and
// the generator compiles exactly those (generator/emit/emit_kernels.cpp).
// Constants that are single-valued per model (eps, theta, scale, head
// counts) come from the spec and are not in the key.
#pragma once

#include <cstdint>
#include <string>

#include "core/contract.hpp"
#include "core/kernels.hpp"

namespace lathe::lower {

// What matmul.comp does with W·x before it stores it.
struct Epilogue {
  bool bias = false;
  bool residual = false;  // y += …
  bool residual_gated = false;  // y += tanh(g) · … (with residual; g a one-value tensor)
  bool gated = false;     // φ(W·x + b) ⊙ (W2·x + b2)
  bool activation = false;
  Activation act = Activation::SiLU;  // φ, when gated or activation
  bool norm = false;      // the model's norm applied to x as it is read
  bool softcap = false;   // c · tanh(y / c), the spec's output.softcap (the LM head)
  bool scaled = false;    // y = output.scale · W·x (T5's tied LM head)
  // Expert matmuls (grid z: the experts): the token rows routed to each, read
  // through moe_route's lists: 1 x by token (gate/up), 2 x by slot (down).
  uint8_t experts = 0;
  // Experts whose matrices of a role are over max_part_bytes together: the
  // experts one binding (a part) holds, each dispatch the part from its
  // push constant expert0 (0: one binding holds them all).
  uint16_t part_experts = 0;
  bool operator==(const Epilogue&) const = default;
};

struct KernelKey {
  kernels::Family family = kernels::Family::Embed;
  int64_t width = 0;            // embed: D; norm: N; matmul, quantize: K; rope_kv: the rotary width (0: the KV append alone)
  bool residual = false;        // norm: y += N(x), the norm of a branch's output before its residual add
  DType dtype = DType::F32;     // embed: the table's; matmul: the weights' (as the device stores them)
  Epilogue epilogue;            // matmul (quantize: its norm alone)
  bool positions = false;       // embed: add the learned position table
  bool types = false;           // embed: add row 0 of the token-type table (BERT)
  bool rows = false;            // embed: x's rows instead of the table's (an input's, a vision tower's patches)
  bool splice = false;          // embed: a row whose token is flagged spliced takes x's row (image features)
  bool class_row = false;       // embed: add a vision tower's class embedding on the row of position 0
  RopePairing pairing = RopePairing::Neox;  // rope_kv
  bool qk_norm = false;         // rope_kv: RMSNorm q and k first (the spec's attention.qk_norm says how)
  bool local = false;           // rope_kv: position.local_theta's table, unscaled (windowed layers)
  int64_t window = 0;           // attention: W, the keys a query sees (0: every key)
  bool bidirectional = false;   // attention: every row sees every key of its input (an encoder)
  bool cross = false;           // attention: keys of an encoder's output, no position bias (bidirectional)
  bool image_spans = false;     // attention: causal, a spliced row seeing its image's later rows too (Gemma 3)
  // moe_route: the router logits' row stride (E, or E + 1 beside a shared
  // expert's gate); moe_combine: that gate logit's stride and offset.
  uint32_t stride = 0;
  uint32_t offset = 0;
  uint8_t shared = 0;           // moe_combine: 1 a shared expert added, 2 gated by sigmoid(gate)
  int64_t rot_offset = 0;       // rope_kv: the first rotated dim of each head (latent attention: past the latent)
  bool latent = false;          // rope_kv: latent attention's append: k's latent normed, no V (read from the K cache)
  bool query = false;           // mla: the absorbed query (else the heads' values out of the latent)
  bool split = false;           // mla, mla_prefill: from k_b or v_b (llama.cpp's split kv_b_proj), not kv_b
  // mla: the query's rotary part alone (latent attention's expanded form);
  // mla_prefill: the expansion of the cached latent (else the attention).
  bool expand = false;
  int64_t head_tile = 0;        // attention: query heads a workgroup (GT, a divisor of HQ / HKV)
  int64_t group = 0;            // norm: features normed together (Mamba-2's gated norm; 0: the whole row)
  // norm: a pooled projector's (Gemma 3's; its norm's kind, eps and scale
  // the spec's vision.projector says): each row the mean of a pool × pool
  // block of a pool_grid × pool_grid grid of rows (0: none).
  int64_t pool = 0;
  int64_t pool_grid = 0;
  // norm: Mistral 3's patch merger (the projector's RMS norm): each output
  // row `merge` consecutive rows normed, side by side channel-major (0: none).
  int64_t merge = 0;
  // norm: rows from zero_from on are written zeros (a tiled tower's padding
  // rows after its pre-norm; 0: none).
  int64_t zero_from = 0;
  // norm: every group of `group` takes the one scale of that width (a
  // cross-attention query's per-head q_norm, Llama 3.2 Vision).
  bool head_scale = false;
  // norm: a row that sees no image is written zeros (Llama 3.2 Vision's
  // cross-attention layers' MLP input, plan::kImageRowBit).
  bool row_mask = false;
  // rope_kv: the KV append with k's heads RMS-normed alone (an image's
  // cross-attention keys, Llama 3.2 Vision's k_norm).
  bool k_norm_only = false;
  // attention (with cross): the keys of an image in the cache, the row's
  // extent saying which (Llama 3.2 Vision).
  bool image_cross = false;
  // tiles: its form (0 the embeddings before the layers, 1 the tile
  // embedding after the local layers, 2 one slot of the stacked hidden
  // states), the pass's layout (tiles of tile_rows rows, then tile_pad
  // padding rows a tile) and the stack's states and slot.
  uint8_t tile_form = 0;
  int64_t tiles = 0;
  int64_t tile_rows = 0;
  int64_t tile_pad = 0;
  int64_t states = 0;
  int64_t slot = 0;

  bool operator==(const KernelKey&) const = default;

  // Unique per key within a model: "matmul_576_f16_gated_silu_norm".
  std::string name() const {
    const std::string family_key(kernels::family(family).key);
    const std::string dt(dtype_name(dtype));
    switch (family) {
      case kernels::Family::Embed:
        if (rows)  // (a position table's dtype, when it has one)
          return "embed_rows_" + std::to_string(width) + (positions ? "_pos_" + dt : "") + (class_row ? "_class" : "");
        return "embed_" + std::to_string(width) + "_" + dt + (positions ? "_pos" : "") + (types ? "_types" : "") +
               (splice ? "_splice" : "");
      case kernels::Family::Norm:
        return "norm_" + std::to_string(width) + (residual ? "_residual" : "") +
               (group ? "_group" + std::to_string(group) : "") + (pool ? "_pool" + std::to_string(pool) : "") +
               (merge ? "_merge" + std::to_string(merge) : "") + (zero_from ? "_zero" + std::to_string(zero_from) : "") +
               (head_scale ? "_heads" : "") + (row_mask ? "_image_rows" : "");
      case kernels::Family::Matmul: {
        std::string n = "matmul_" + std::to_string(width) + "_" + dt;
        const std::string act(spelling(epilogue.act).key);
        if (epilogue.gated) n += "_gated_" + act;
        else if (epilogue.activation) n += "_" + act;
        if (epilogue.bias) n += "_bias";
        if (epilogue.residual) n += epilogue.residual_gated ? "_residual_gated" : "_residual";
        if (epilogue.norm) n += "_norm";
        if (epilogue.softcap) n += "_softcap";
        if (epilogue.scaled) n += "_scaled";
        if (epilogue.experts) n += epilogue.experts == 1 ? "_experts" : "_experts_slot";
        if (epilogue.part_experts) n += "_part" + std::to_string(epilogue.part_experts);
        return n;
      }
      case kernels::Family::RopeKv:
        if (width == 0) return std::string("kv_append") + (k_norm_only ? "_k_norm" : qk_norm ? "_qk_norm" : "");
        return "rope_kv_" + std::to_string(width) + "_" + std::string(spelling(pairing).key) + (local ? "_local" : "") +
               (rot_offset > 0 ? "_at" + std::to_string(rot_offset) : "") + (latent ? "_latent" : qk_norm ? "_qk_norm" : "");
      case kernels::Family::Mla:
        return family_key + (query ? (expand ? "_query_rope" : "_query") : "_values") + (split ? "_split" : "");
      case kernels::Family::MlaPrefill: return family_key + (expand ? "_expand" : "_attend") + (split ? "_split" : "");
      case kernels::Family::Quantize:
        return family_key + "_" + std::to_string(width) + (epilogue.norm ? "_norm" : "") + (epilogue.experts == 2 ? "_slots" : "");
      case kernels::Family::Attention:
        return (cross ? family_key + (image_cross ? "_image_cross" : "_cross")
                : bidirectional ? family_key + "_bidirectional"
                                : family_key) +
               (image_spans ? "_images" : "") +
               (window > 0 ? "_w" + std::to_string(window) : "");  // (head_tile: one per model)
      case kernels::Family::MoeCombine:
        return family_key + (shared == 0 ? "" : shared == 1 ? "_shared" : "_shared_gated");
      case kernels::Family::Tiles:
        if (tile_form == 2)
          return family_key + "_" + std::to_string(width) + "_stack" + std::to_string(states) + "_" + std::to_string(slot);
        return family_key + "_" + std::to_string(width) + "_" + dt + (tile_form == 0 ? "_embed" : "_post");
      default: return family_key;
    }
  }
};

}  // namespace lathe::lower
