// The typed schedule API that generated code is written against.
//
// A schedule is the exact list of operations of one forward pass. Generated
// code builds it through Recorder with tensors whose widths are template
// arguments, so a schedule that wires mismatched shapes — a hand-edited
// generated file, or user code passing a [2048]-vector to a [4096 × 1024]
// matmul — fails to compile with a static_assert naming the rule. The
// recorded Op list is the graph the generator lowers to kernel dispatches
// (generator/lower); compiling the generated forward() checks its shapes.
// The token count is symbolic (a run-time value): prefill records T tokens,
// decode one, with the same wiring.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/contract.hpp"

namespace lathe::typed {

// Activations: [tokens][N] values, one row per token of the chunk.
template <int64_t N>
struct Act {
  static constexpr int64_t width = N;
  uint32_t id;
};

// A weight of the manifest in math orientation y = W·x: Rows outputs, Cols inputs
// (whatever its stored layout). `tensor` indexes the manifest.
template <int64_t Rows, int64_t Cols>
struct Weight {
  static constexpr int64_t rows = Rows;
  static constexpr int64_t cols = Cols;
  int32_t tensor = -1;  // -1: none (a layer without this tensor: a dense layer's experts)
};

// A vector of the manifest: a norm scale, a norm shift or a bias.
template <int64_t N>
struct Vector {
  static constexpr int64_t width = N;
  int32_t tensor = -1;
};

enum class OpKind : uint8_t {
  Embed,        // out[t] = scale · table[token[t]]; variant kSplice: a row whose token carries
                //   plan::kSplicedToken takes the host's row t instead (a decoder's image features)
  PosEmbed,     // out[t] = in[t] + table[position[t] + offset] (+ types[0]: tensor[1], BERT's token-type row)
                //   (+ extra[0], a vision tower's class embedding, on the row of position 0); after an
                //   Embed of in, it is the embedding's; after anything else, an op of its own
  Input,        // out[t] = the host's row t, dims[0] wide (a vision tower's unfolded patches)
  RMSNorm,      // out = in / sqrt(mean(in²) + eps) · g; dims[1] > 0: each group of dims[1] features
                //   normed on its own (Mamba-2's gated norm; variant kHeadScale: g one group wide, each
                //   group's: a per-head q_norm); variant kImageRows: a row that sees no image zeros
  LayerNorm,    // out = (in − μ) / sqrt(σ² + eps) · g + b; dims[2] > 0: rows ≥ dims[2] zeros (a tiled
                //   tower's padding rows after its pre-norm)
  MatMul,       // out = W · in (+ bias)
  Split,        // out = in[:, offset : offset + width]
  QKNorm,       // RMSNorm q and k in place: each head over head_dim, or each projection whole
  Rope,         // rotate q and k in place by their positions
  Attention,    // attention over the KV cache, appending this chunk's k and v (dims[3]: its window); causal,
                //   or (variant 1) bidirectional: every row sees every key of its input (an encoder)
  Act,          // out = φ(in)
  GatedAct,     // out = φ(gate) ⊙ up
  Add,          // out = a + b; tensor[0] ≥ 0: a + tanh(g) · b, g that one-value tensor (a gated
                //   residual: Llama 3.2 Vision's global layers)
  Logits,       // out = W · in for the last token (or every token); param c > 0: c · tanh(out / c)
  Route,        // out = the routing of router logits in: top dims[1] of dims[0] experts (variant 1: renormalized)
  Experts,      // out[t][j] = expert e(t, j)'s projection of in[0] (its token, or its slot [j]), in[1] the routing
  MoeCombine,   // out = in[0] + Σ_j weight(t, j) · in[1][t][j] (in[2] the routing); dims[3] 1: + in[3],
                //   the shared expert's output; 2: + sigmoid(in[4]) · in[3], gated (Qwen2-MoE)
  Output,       // an encoder's final hidden states: out = in, every row, in the output buffer
  CrossKv,      // an encoder–decoder's encode pass: k (in[0]) and v (in[1]) of the encoder's output into
                //   the cross-attention cache `layer` (no out); tensor[0] ≥ 0: k's heads RMS-normed by
                //   it first (an image's keys, Llama 3.2 Vision's k_norm)
  SsmConv,      // a Mamba layer's causal depthwise conv and SiLU of CH channels of in[0] from column OFF
                //   (Mamba: x of in_proj's [x | z]; Mamba-2: x, B and C of [z | x | B | C | dt]), with its
                //   sequence's window of layer `layer` (dims: CH, DC, OFF; tensor: taps [CH][DC], bias)
  SsmScan,      // its selective scan: u = in[0], x_proj's dt | B | C = in[1], z the last DI columns of
                //   in[2], gated by SiLU(z), with its sequence's h of layer `layer` (dims: DI, N, R;
                //   tensor: dt_proj's weight, A_log; extra: dt_proj's bias, D)
  Mamba2Scan,   // a Mamba-2 layer's scan: x, B and C = in[0] (ssm_conv's output), z and dt of in[1]
                //   (in_proj's output), gated by SiLU(z), with its sequence's h of layer `layer` (dims:
                //   DI, N, H, G; tensor: A_log [H], D [H]; extra[0]: dt_bias [H]); param: dt's upper
                //   limit (0: none), scale: its lower limit
  MlaQuery,     // latent attention's absorbed query: per head h, [W_UK[h]ᵀ · q_nope[h] | q_pe[h]] of in[0]
                //   = q ([H][NOPE + ROPE]); tensor[0] kv_b (dims: H, NOPE, ROPE, RANK, VD)
  MlaValues,    // its heads' values out of the latent: per head h, W_UV[h] · in[0][h][0 … RANK) of the
                //   attention's output ([H][RANK + ROPE]); tensor[0] kv_b (dims: H, NOPE, ROPE, RANK, VD)
                //   (variant kSplitKvB: tensor[0] is k_b for the query, v_b for the values)
  PoolNorm,     // a pooled projector's (Gemma 3's): the rows a dims[1] × dims[1] grid of patches, row-major,
                //   out row r < (dims[1] / dims[2])² the norm of the mean of block r of dims[2] × dims[2]
                //   patches (blocks row-major too); the rows after it zeros. The norm: RMSNorm, or
                //   LayerNorm (variant bit kPoolLayerNorm) with the shift tensor[1]; scale tensor[0], or
                //   1 + it (bit kPoolUnitOffset); param its eps
  MergeNorm,    // Mistral 3's patch merger with its RMS norm: each dims[1] consecutive rows (an image's
                //   patches, which the host orders block by block) RMS-normed (scale tensor[0], eps
                //   param) and set side by side channel-major (out[c · dims[1] + k] = row k's c,
                //   unfold's order): out row r of width dims[0] · dims[1] from rows r · dims[1] …; the
                //   rows past the pass's whole blocks zeros
  TileEmbed,    // a tiled tower's (Llama 3.2 Vision's) embeddings of its rows, the pass laid out as
                //   dims[1] tiles of dims[2] rows (row 0 the class token's), then dims[1] × dims[3]
                //   padding rows (dims[4]: the tables' rows, one per aspect ratio id); each row's
                //   token its image's aspect ratio id a:
                //   variant kTilePre: out = in + (row 0 of its tile: the class embedding extra[0];
                //   else tanh(g₁) · tensor[0][a][tile]) + (1 − tanh(g₂)) · extra[2][i] + tanh(g₂) ·
                //   tensor[1][a][tile][i] (g₁ = extra[1], g₂ = extra[3]); padding rows zeros.
                //   variant kTilePost: out = in + tanh(g) · tensor[0][a][tile] (g = tensor[1]),
                //   every row, a padding row's tile the one it pads
  FeatureStack, // hidden states stacked for a projector: out[0 … h) = the last (slot 0), out[h + e · K + k] =
                //   state k's e (slot k + 1: torch.stack(states, -1) flattened), h = dims[0], K = dims[1];
                //   this op writes in[1] into slot dims[2], as it is taken (the stream it copies moves
                //   on); variant kStackFirst: a new stack, else in[0]'s, in place
};

// RMSNorm's variants (Op::variant).
inline constexpr uint8_t kRowNorm = 0;
inline constexpr uint8_t kHeadScale = 1;  // grouped, one scale for every group (a per-head q_norm)
inline constexpr uint8_t kImageRows = 2;  // a row that sees no image is zeros (Llama 3.2 Vision's MLP input)

// TileEmbed's variants (Op::variant).
inline constexpr uint8_t kTilePre = 0;   // before the layers: the tile, class and position embeddings
inline constexpr uint8_t kTilePost = 1;  // after the local layers: the tile embedding alone

// FeatureStack's variants (Op::variant).
inline constexpr uint8_t kStackInto = 0;   // into the stack in[0]
inline constexpr uint8_t kStackFirst = 1;  // a new stack

// PoolNorm's variant bits (Op::variant).
inline constexpr uint8_t kPoolLayerNorm = 1;
inline constexpr uint8_t kPoolUnitOffset = 2;

// QKNorm's variants (Op::variant).
inline constexpr uint8_t kQKNorm = 0;      // q and k, each head or each projection whole (dims[3] the group)
inline constexpr uint8_t kLatentNorm = 1;  // k's first dims[3] values alone (latent attention's kv_a_layernorm)

// MlaQuery's and MlaValues's variants (Op::variant): the tensor they read.
inline constexpr uint8_t kJointKvB = 0;  // kv_b_proj whole, [H·(NOPE + VD)][RANK]
inline constexpr uint8_t kSplitKvB = 1;  // k_b [H·RANK][NOPE] (W_UK transposed), v_b [H·VD][RANK]

// Embed's variants (Op::variant).
inline constexpr uint8_t kTable = 0;
inline constexpr uint8_t kSplice = 1;  // rows flagged spliced take the host's rows (a decoder's image features)

// Attention's variants (Op::variant).
inline constexpr uint8_t kCausal = 0;
inline constexpr uint8_t kBidirectional = 1;  // every row sees every key of its input (an encoder)
inline constexpr uint8_t kCross = 2;          // q (in[0]) alone: the keys are the encoder's output, in the cache
                                              //   `layer` a CrossKv op filled
inline constexpr uint8_t kImageSpans = 3;     // causal, but an image's spliced rows see each other both ways
                                              //   (Gemma 3): a spliced row sees the keys up to its image's last row
inline constexpr uint8_t kImageCross = 4;     // q (in[0]) alone over an image's keys in the cache `layer` (Llama 3.2
                                              //   Vision): the row's extent says which (common.glsl)

using lathe::Activation;
using lathe::RopePairing;

struct Op {
  OpKind kind;
  uint32_t out = 0;
  uint32_t in[5] = {0, 0, 0, 0, 0};
  int32_t tensor[2] = {-1, -1};  // manifest indices: weight/scale, bias/shift
  int64_t dims[6] = {0, 0, 0, 0, 0, 0};  // rope: dims[4] the first rotated dim of each head
  double param = 0;     // eps, scale, offset, theta, softcap
  int32_t layer = -1;   // attention: which layer's cache
  uint8_t variant = 0;  // activation, pairing
  bool local = false;   // rope: the windowed layers' own base, unscaled (Gemma 3)
  double scale = 1;     // logits: out = scale · W · in (T5's tied head); mamba2_scan: dt's lower limit
  int32_t extra[4] = {-1, -1, -1, -1};  // more manifest indices (ssm_scan: dt_proj's bias, D)
  // The model's block (its layer of the stack: a hybrid counts attention
  // and state-space layers together) the op belongs to; -1 outside the
  // blocks. `layer` names a cache or state, which differ from it in hybrids.
  int32_t block = -1;
};

struct Schedule {
  std::vector<Op> ops;
  // An encoder–decoder's: its first encode_ops ops are the encode pass (the
  // source's rows: the encoder, then the cross-attention caches), the rest
  // the decoder's pass. 0: one pass.
  uint32_t encode_ops = 0;
  uint32_t values = 0;          // activation ids used
  std::vector<int64_t> widths;  // width of each activation id
};

class Recorder {
 public:
  Schedule& schedule() { return s_; }

  template <int64_t V, int64_t D>
  Act<D> embed(Weight<V, D> table, double scale) {
    return emit<D>(Op{OpKind::Embed, 0, {}, {table.tensor, -1}, {V, D}, scale});
  }

  // … a decoder's whose spliced rows take the host's (image features).
  template <int64_t V, int64_t D>
  Act<D> embed_spliced(Weight<V, D> table, double scale) {
    return emit<D>(Op{OpKind::Embed, 0, {}, {table.tensor, -1}, {V, D}, scale, -1, kSplice});
  }
  // The host's rows of N values (a vision tower's unfolded patches).
  template <int64_t N>
  Act<N> input() {
    static_assert(N > 0, "input: rows of no values");
    return emit<N>(Op{OpKind::Input, 0, {}, {-1, -1}, {N}});
  }

  template <int64_t P, int64_t D, int64_t N>
  Act<N> add_positions(Act<N> x, Weight<P, D> table, int64_t offset) {
    static_assert(D == N, "add_positions: the position table's width does not match the activation width");
    return emit<N>(Op{OpKind::PosEmbed, 0, {x.id}, {table.tensor, -1}, {P, D}, static_cast<double>(offset)});
  }
  // … and row 0 of a token-type table (BERT's segment embeddings: one segment).
  template <int64_t P, int64_t D, int64_t N, int64_t Y, int64_t YD>
  Act<N> add_positions(Act<N> x, Weight<P, D> table, int64_t offset, Weight<Y, YD> types) {
    static_assert(D == N, "add_positions: the position table's width does not match the activation width");
    static_assert(YD == N, "add_positions: the token-type table's width does not match the activation width");
    return emit<N>(Op{OpKind::PosEmbed, 0, {x.id}, {table.tensor, types.tensor}, {P, D}, static_cast<double>(offset)});
  }
  // … and a vision tower's class embedding on the row of position 0 (CLIP).
  template <int64_t P, int64_t D, int64_t N, int64_t C>
  Act<N> add_positions_class(Act<N> x, Weight<P, D> table, Vector<C> class_embedding) {
    static_assert(D == N, "add_positions_class: the position table's width does not match the activation width");
    static_assert(C == N, "add_positions_class: the class embedding's width does not match the activation width");
    Op op{OpKind::PosEmbed, 0, {x.id}, {table.tensor, -1}, {P, D}};
    op.extra[0] = class_embedding.tensor;
    return emit<N>(op);
  }

  template <int64_t N, int64_t G>
  Act<N> rmsnorm(Act<N> x, Vector<G> g, double eps) {
    static_assert(G == N, "rmsnorm: the scale vector's width does not match the activation width");
    return emit<N>(Op{OpKind::RMSNorm, 0, {x.id}, {g.tensor, -1}, {N}, eps});
  }

  // RMSNorm of each group of GS consecutive features on its own (Mamba-2's
  // gated norm, per group of d_inner / n_groups).
  template <int64_t GS, int64_t N, int64_t G>
  Act<N> rmsnorm_grouped(Act<N> x, Vector<G> g, double eps) {
    static_assert(G == N, "rmsnorm_grouped: the scale vector's width does not match the activation width");
    static_assert(GS > 0 && N % GS == 0, "rmsnorm_grouped: the groups do not split the activation");
    return emit<N>(Op{OpKind::RMSNorm, 0, {x.id}, {g.tensor, -1}, {N, GS}, eps});
  }

  // RMSNorm of each Dh-wide head of x by one scale (a cross-attention
  // query's q_norm, Llama 3.2 Vision).
  template <int64_t Dh, int64_t N, int64_t G>
  Act<N> rmsnorm_heads(Act<N> x, Vector<G> g, double eps) {
    static_assert(G == Dh, "rmsnorm_heads: the scale vector is not one head wide");
    static_assert(Dh > 0 && N % Dh == 0, "rmsnorm_heads: the heads do not split the activation");
    return emit<N>(Op{OpKind::RMSNorm, 0, {x.id}, {g.tensor, -1}, {N, Dh}, eps, -1, kHeadScale});
  }
  // RMSNorm whose rows that see no image are zeros (Llama 3.2 Vision's
  // cross-attention layers' MLP input: MllamaCrossAttentionDecoderLayer's
  // full_text_row_masked_out_mask, applied before a bias-free MLP).
  template <int64_t N, int64_t G>
  Act<N> rmsnorm_image_rows(Act<N> x, Vector<G> g, double eps) {
    Act<N> out = rmsnorm(x, g, eps);
    s_.ops.back().variant = kImageRows;
    return out;
  }

  template <int64_t N, int64_t G>
  Act<N> layernorm(Act<N> x, Vector<G> g, double eps) {
    static_assert(G == N, "layernorm: the scale vector's width does not match the activation width");
    return emit<N>(Op{OpKind::LayerNorm, 0, {x.id}, {g.tensor, -1}, {N}, eps});
  }

  template <int64_t N, int64_t G, int64_t B>
  Act<N> layernorm(Act<N> x, Vector<G> g, Vector<B> b, double eps) {
    static_assert(G == N, "layernorm: the scale vector's width does not match the activation width");
    static_assert(B == N, "layernorm: the shift vector's width does not match the activation width");
    return emit<N>(Op{OpKind::LayerNorm, 0, {x.id}, {g.tensor, b.tensor}, {N}, eps});
  }
  // … whose rows from Rows on are written zeros (a tiled tower's padding
  // rows, after the pre-norm: MllamaVisionModel pads the normed rows).
  template <int64_t Rows, int64_t N, int64_t G, int64_t B>
  Act<N> layernorm_head(Act<N> x, Vector<G> g, Vector<B> b, double eps) {
    static_assert(Rows > 0, "layernorm_head: no rows kept");
    Act<N> out = layernorm(x, g, b, eps);
    s_.ops.back().dims[2] = Rows;
    return out;
  }

  // A tiled tower's embeddings (Llama 3.2 Vision), its pass Tiles tiles of
  // Rows rows, then Tiles × Pad padding rows: the class embedding on each
  // tile's row 0, the aspect ratio's gated tile embedding on its patches,
  // the gated mix of the shared and the tile's own position tables.
  template <int64_t Tiles, int64_t Rows, int64_t Pad, int64_t N, int64_t A, int64_t AT, int64_t P, int64_t PD,
            int64_t AP, int64_t C, int64_t G1, int64_t G2>
  Act<N> tile_embed(Act<N> x, Weight<A, AT> tile_table, Vector<G1> tile_gate, Vector<C> class_embedding,
                    Weight<P, PD> positions, Weight<A, AP> tile_positions, Vector<G2> position_gate) {
    static_assert(AT == Tiles * N, "tile_embed: the tile table is not Tiles rows of the width per aspect ratio");
    static_assert(C == N, "tile_embed: the class embedding's width does not match the activation width");
    static_assert(P == Rows && PD == N, "tile_embed: the position table is not a tile's rows of the width");
    static_assert(AP == Tiles * Rows * N, "tile_embed: the tiles' position table is not Tiles × Rows rows a ratio");
    static_assert(G1 == 1 && G2 == 1, "tile_embed: a gate is one value");
    Op op{OpKind::TileEmbed, 0, {x.id}, {tile_table.tensor, tile_positions.tensor}, {N, Tiles, Rows, Pad, A}, 0, -1,
          kTilePre};
    op.extra[0] = class_embedding.tensor;
    op.extra[1] = tile_gate.tensor;
    op.extra[2] = positions.tensor;
    op.extra[3] = position_gate.tensor;
    return emit<N>(op);
  }
  // … after the local layers: the aspect ratio's gated tile embedding on
  // every row of a tile, its padding rows too.
  template <int64_t Tiles, int64_t Rows, int64_t Pad, int64_t N, int64_t A, int64_t AT, int64_t G>
  Act<N> tile_embed_post(Act<N> x, Weight<A, AT> tile_table, Vector<G> gate) {
    static_assert(AT == Tiles * N, "tile_embed_post: the tile table is not Tiles rows of the width per aspect ratio");
    static_assert(G == 1, "tile_embed_post: a gate is one value");
    return emit<N>(Op{OpKind::TileEmbed, 0, {x.id}, {tile_table.tensor, gate.tensor}, {N, Tiles, Rows, Pad, A}, 0, -1,
                      kTilePost});
  }

  // Hidden states stacked for the projector (Llama 3.2 Vision's
  // intermediate layers): the last in slot 0, K earlier ones interleaved
  // channel by channel after it, [x | s₀[0] … s_K-1[0] | s₀[1] …]; each
  // written into its slot as it is taken: the first makes the stack, …
  template <int64_t K, int64_t Slot, int64_t N>
  Act<N * (1 + K)> stack_first(Act<N> value) {
    static_assert(K >= 1 && Slot >= 0 && Slot <= K, "stack_first: the slot lies outside the stack");
    return emit<N * (1 + K)>(Op{OpKind::FeatureStack, 0, {0, value.id}, {-1, -1}, {N, K, Slot}, 0, -1, kStackFirst});
  }
  // … the others write theirs into it.
  template <int64_t Slot, int64_t W, int64_t N>
  Act<W> stack_into(Act<W> stack, Act<N> value) {
    static_assert(W % N == 0 && W / N >= 2, "stack_into: the stack is not whole slots of the value's width");
    static_assert(Slot >= 0 && Slot < W / N, "stack_into: the slot lies outside the stack");
    return emit<W>(Op{OpKind::FeatureStack, 0, {stack.id, value.id}, {-1, -1}, {N, W / N - 1, Slot}, 0, -1, kStackInto});
  }

  // A pooled projector's mean of Pool × Pool blocks of a Grid × Grid grid of
  // rows (an image's patches), each normed: RMSNorm, scaled by 1 + g where
  // `unit_offset` (Gemma 3's mm_soft_emb_norm).
  template <int64_t Grid, int64_t Pool, int64_t N, int64_t G>
  Act<N> pool_rmsnorm(Act<N> x, Vector<G> g, double eps, bool unit_offset) {
    static_assert(G == N, "pool_rmsnorm: the scale vector's width does not match the activation width");
    static_assert(Grid > 0 && Pool > 0 && Grid % Pool == 0, "pool_rmsnorm: the blocks do not tile the grid");
    return emit<N>(Op{OpKind::PoolNorm, 0, {x.id}, {g.tensor, -1}, {N, Grid, Pool}, eps, -1,
                      unit_offset ? kPoolUnitOffset : uint8_t{0}});
  }
  // … LayerNorm, with its shift.
  template <int64_t Grid, int64_t Pool, int64_t N, int64_t G, int64_t B>
  Act<N> pool_layernorm(Act<N> x, Vector<G> g, Vector<B> b, double eps) {
    static_assert(G == N, "pool_layernorm: the scale vector's width does not match the activation width");
    static_assert(B == N, "pool_layernorm: the shift vector's width does not match the activation width");
    static_assert(Grid > 0 && Pool > 0 && Grid % Pool == 0, "pool_layernorm: the blocks do not tile the grid");
    return emit<N>(Op{OpKind::PoolNorm, 0, {x.id}, {g.tensor, b.tensor}, {N, Grid, Pool}, eps, -1, kPoolLayerNorm});
  }

  // Mistral 3's patch merger: Merge consecutive rows (a block of an image's
  // patches), each RMS-normed, side by side channel-major.
  template <int64_t Merge, int64_t N, int64_t G>
  Act<N * Merge> merge_rmsnorm(Act<N> x, Vector<G> g, double eps) {
    static_assert(G == N, "merge_rmsnorm: the scale vector's width does not match the activation width");
    static_assert(Merge > 1, "merge_rmsnorm: a block merges two rows at least");
    return emit<N * Merge>(Op{OpKind::MergeNorm, 0, {x.id}, {g.tensor, -1}, {N, Merge}, eps});
  }

  template <int64_t Rows, int64_t Cols, int64_t N>
  Act<Rows> matmul(Weight<Rows, Cols> w, Act<N> x) {
    static_assert(Cols == N, "matmul: the weight's input width does not match the activation width");
    return emit<Rows>(Op{OpKind::MatMul, 0, {x.id}, {w.tensor, -1}, {Rows, Cols}});
  }

  template <int64_t Rows, int64_t Cols, int64_t N, int64_t B>
  Act<Rows> matmul(Weight<Rows, Cols> w, Act<N> x, Vector<B> bias) {
    static_assert(Cols == N, "matmul: the weight's input width does not match the activation width");
    static_assert(B == Rows, "matmul: the bias width does not match the weight's output width");
    return emit<Rows>(Op{OpKind::MatMul, 0, {x.id}, {w.tensor, bias.tensor}, {Rows, Cols}});
  }

  // Columns [Offset, Offset + Width) of x: the q, k or v part of a fused projection.
  template <int64_t Offset, int64_t Width, int64_t N>
  Act<Width> split(Act<N> x) {
    static_assert(Offset >= 0 && Width > 0 && Offset + Width <= N, "split: the slice lies outside the activation");
    return emit<Width>(Op{OpKind::Split, 0, {x.id}, {-1, -1}, {Offset, Width, N}});
  }

  // RMSNorm of q (Hq heads) and k (Hkv heads) of head width Dh, in place,
  // before RoPE: each head over its Dh values (Qwen3, Gemma 3: scales of
  // width Dh) or each projection whole (OLMo 2: scales of widths Hq·Dh and
  // Hkv·Dh).
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t NQ, int64_t NK, int64_t GQ, int64_t GK>
  void qk_norm(Act<NQ> q, Act<NK> k, Vector<GQ> q_scale, Vector<GK> k_scale, double eps) {
    static_assert(NQ == Hq * Dh, "qk_norm: q is not heads × head_dim wide");
    static_assert(NK == Hkv * Dh, "qk_norm: k is not kv_heads × head_dim wide");
    static_assert((GQ == Dh && GK == Dh) || (GQ == NQ && GK == NK),
                  "qk_norm: the scales are neither one head wide nor as wide as q and k");
    s_.ops.push_back(Op{OpKind::QKNorm, 0, {q.id, k.id}, {q_scale.tensor, k_scale.tensor}, {Hq, Hkv, Dh, GQ}, eps});
  }

  // Rotates q (Hq heads) and k (Hkv heads) of head width Dh in their first R
  // dims. `local`: theta is the windowed layers' own base, used without the
  // spec's RoPE scaling (Gemma 3's rope_local_base_freq).
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t R, int64_t NQ, int64_t NK>
  void rope(Act<NQ> q, Act<NK> k, RopePairing pairing, double theta, bool local = false) {
    static_assert(NQ == Hq * Dh, "rope: q is not heads × head_dim wide");
    static_assert(NK == Hkv * Dh, "rope: k is not kv_heads × head_dim wide");
    static_assert(R % 2 == 0 && R <= Dh, "rope: the rotary width must be even and at most head_dim");
    s_.ops.push_back(Op{OpKind::Rope, 0, {q.id, k.id}, {-1, -1}, {Hq, Hkv, Dh, R}, theta, -1,
                        static_cast<uint8_t>(pairing), local});
  }

  // Causal attention of Hq query heads over Hkv cached heads; query head h
  // reads KV head h / (Hq / Hkv). `window` W > 0: the query at position i
  // sees the keys j with 0 ≤ i − j < W only (a sliding-window layer).
  // `bidirectional`: every row sees every key of its input (an encoder).
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t NQ, int64_t NK, int64_t NV>
  Act<Hq * Dh> attention(Act<NQ> q, Act<NK> k, Act<NV> v, int32_t layer, double scale, int64_t window = 0,
                         bool bidirectional = false) {
    static_assert(Hq % Hkv == 0, "attention: heads is not a multiple of kv_heads");
    static_assert(NQ == Hq * Dh, "attention: q is not heads × head_dim wide");
    static_assert(NK == Hkv * Dh, "attention: k is not kv_heads × head_dim wide (the cache holds kv heads)");
    static_assert(NV == Hkv * Dh, "attention: v is not kv_heads × head_dim wide (the cache holds kv heads)");
    return emit<Hq * Dh>(Op{OpKind::Attention, 0, {q.id, k.id, v.id}, {-1, -1}, {Hq, Hkv, Dh, window}, scale, layer,
                            static_cast<uint8_t>(bidirectional)});
  }
  // … a decoder's whose spliced rows, an image's, also see the image's
  // later rows (Gemma 3's image tokens attend both ways among themselves).
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t NQ, int64_t NK, int64_t NV>
  Act<Hq * Dh> attention_image_spans(Act<NQ> q, Act<NK> k, Act<NV> v, int32_t layer, double scale, int64_t window = 0) {
    Act<Hq * Dh> out = attention<Hq, Hkv, Dh>(q, k, v, layer, scale, window);
    s_.ops.back().variant = kImageSpans;
    return out;
  }
  // … with T5's relative position bias: a scalar per (bucket of j − i, query head) added to the scores.
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t NQ, int64_t NK, int64_t NV, int64_t B, int64_t H>
  Act<Hq * Dh> attention(Act<NQ> q, Act<NK> k, Act<NV> v, int32_t layer, double scale, int64_t window,
                         bool bidirectional, Weight<B, H> relative_bias) {
    static_assert(H == Hq, "attention: the relative position bias is not one column per query head");
    Act<Hq * Dh> out = attention<Hq, Hkv, Dh>(q, k, v, layer, scale, window, bidirectional);
    s_.ops.back().tensor[0] = relative_bias.tensor;
    return out;
  }

  template <int64_t N>
  Act<N> activation(Act<N> x, Activation phi) {
    return emit<N>(Op{OpKind::Act, 0, {x.id}, {-1, -1}, {N}, 0, -1, static_cast<uint8_t>(phi)});
  }

  template <int64_t N, int64_t M>
  Act<N> gated(Act<N> gate, Act<M> up, Activation phi) {
    static_assert(N == M, "gated: gate and up have different widths");
    return emit<N>(Op{OpKind::GatedAct, 0, {gate.id, up.id}, {-1, -1}, {N}, 0, -1, static_cast<uint8_t>(phi)});
  }

  template <int64_t N, int64_t M>
  Act<N> add(Act<N> a, Act<M> b) {
    static_assert(N == M, "add: the residual and the branch have different widths");
    return emit<N>(Op{OpKind::Add, 0, {a.id, b.id}, {-1, -1}, {N}});
  }
  // a + tanh(g) · b: a gated residual (a tiled tower's global layers).
  template <int64_t N, int64_t M, int64_t G>
  Act<N> add_gated(Act<N> a, Act<M> b, Vector<G> gate) {
    static_assert(N == M, "add_gated: the residual and the branch have different widths");
    static_assert(G == 1, "add_gated: the gate is one value");
    return emit<N>(Op{OpKind::Add, 0, {a.id, b.id}, {gate.tensor, -1}, {N}});
  }

  // Mixture of experts: the routing of E experts' router logits, top K per
  // token (renormalized to sum 1 when `renormalize`): K weights and, per
  // expert, the token slots t·K + j routed to it. Its width: K + 3E + 1 per row.
  template <int64_t E, int64_t K, int64_t N>
  Act<K + 3 * E + 1> route(Act<N> logits, bool renormalize) {
    static_assert(N == E, "route: the router's logits are not one per expert");
    static_assert(K >= 1 && K <= E, "route: top_k must be between 1 and the expert count");
    return emit<K + 3 * E + 1>(Op{OpKind::Route, 0, {logits.id}, {-1, -1}, {E, K}, 0, -1, static_cast<uint8_t>(renormalize)});
  }
  // … choosing by the scores plus a per-expert correction bias [E] (DeepSeek-V3).
  template <int64_t E, int64_t K, int64_t N, int64_t B>
  Act<K + 3 * E + 1> route(Act<N> logits, bool renormalize, Vector<B> bias) {
    static_assert(N == E, "route: the router's logits are not one per expert");
    static_assert(B == E, "route: the correction bias is not one per expert");
    static_assert(K >= 1 && K <= E, "route: top_k must be between 1 and the expert count");
    return emit<K + 3 * E + 1>(
        Op{OpKind::Route, 0, {logits.id}, {bias.tensor, -1}, {E, K}, 0, -1, static_cast<uint8_t>(renormalize)});
  }

  // The gated projections φ(gate_e · x) ⊙ (up_e · x) of the K experts each
  // token t is routed to, one row of Rows per slot j: [K · Rows] per token.
  template <int64_t E, int64_t K, int64_t Rows, int64_t Cols, int64_t N, int64_t RW>
  Act<K * Rows> experts_gated(Act<N> x, Act<RW> routing, const std::array<Weight<Rows, Cols>, E>& gate,
                              const std::array<Weight<Rows, Cols>, E>& up, Activation phi) {
    static_assert(Cols == N, "experts_gated: the experts' input width does not match the activation width");
    static_assert(RW == K + 3 * E + 1, "experts_gated: the routing is not of E experts, top K");
    return emit<K * Rows>(Op{OpKind::Experts, 0, {x.id, routing.id}, {gate[0].tensor, up[0].tensor}, {E, Rows, Cols, K},
                             static_cast<double>(stride(gate)), -1, static_cast<uint8_t>(phi)});
  }

  // Each slot's expert's down projection of its own row of h ([K · Cols] per token).
  template <int64_t E, int64_t K, int64_t Rows, int64_t Cols, int64_t N, int64_t RW>
  Act<K * Rows> experts_down(Act<N> h, Act<RW> routing, const std::array<Weight<Rows, Cols>, E>& down) {
    static_assert(N == K * Cols, "experts_down: h is not K slots of the experts' input width");
    static_assert(RW == K + 3 * E + 1, "experts_down: the routing is not of E experts, top K");
    return emit<K * Rows>(Op{OpKind::Experts, 0, {h.id, routing.id}, {down[0].tensor, -1}, {E, Rows, Cols, K},
                             static_cast<double>(stride(down)), -1, 0});
  }

  // x + the routing's weighted sum of the K slots of y.
  template <int64_t E, int64_t K, int64_t N, int64_t M, int64_t RW>
  Act<N> moe_combine(Act<N> x, Act<M> y, Act<RW> routing) {
    static_assert(M == K * N, "moe_combine: y is not K slots of the residual width");
    static_assert(RW == K + 3 * E + 1, "moe_combine: the routing is not of E experts, top K");
    return emit<N>(Op{OpKind::MoeCombine, 0, {x.id, y.id, routing.id}, {-1, -1}, {E, K, N}});
  }
  // … plus the shared expert's output, added to every token (ungated).
  template <int64_t E, int64_t K, int64_t N, int64_t M, int64_t RW>
  Act<N> moe_combine(Act<N> x, Act<M> y, Act<RW> routing, Act<N> shared) {
    static_assert(M == K * N, "moe_combine: y is not K slots of the residual width");
    static_assert(RW == K + 3 * E + 1, "moe_combine: the routing is not of E experts, top K");
    return emit<N>(Op{OpKind::MoeCombine, 0, {x.id, y.id, routing.id, shared.id}, {-1, -1}, {E, K, N, 1}});
  }
  // … plus sigmoid(gate) · the shared expert's output, gate one logit per token.
  template <int64_t E, int64_t K, int64_t N, int64_t M, int64_t RW, int64_t G>
  Act<N> moe_combine(Act<N> x, Act<M> y, Act<RW> routing, Act<N> shared, Act<G> gate) {
    static_assert(M == K * N, "moe_combine: y is not K slots of the residual width");
    static_assert(RW == K + 3 * E + 1, "moe_combine: the routing is not of E experts, top K");
    static_assert(G == 1, "moe_combine: the shared expert's gate is not one logit per token");
    return emit<N>(Op{OpKind::MoeCombine, 0, {x.id, y.id, routing.id, shared.id, gate.id}, {-1, -1}, {E, K, N, 2}});
  }

  // An encoder's output: its final hidden states, D wide (the model's hidden width).
  template <int64_t D, int64_t N>
  Act<N> output(Act<N> x) {
    static_assert(D == N, "output: the final hidden states are not the model's hidden width");
    return emit<N>(Op{OpKind::Output, 0, {x.id}, {-1, -1}, {N}});
  }

  // `softcap` c > 0: the logits are c · tanh(logit / c) (Gemma 2); `scale`
  // multiplies them first (T5's tied head).
  template <int64_t V, int64_t D, int64_t N>
  Act<V> logits(Weight<V, D> head, Act<N> x, double softcap = 0, double scale = 1) {
    static_assert(D == N, "logits: the LM head's input width does not match the activation width");
    Op op{OpKind::Logits, 0, {x.id}, {head.tensor, -1}, {V, D}, softcap};
    op.scale = scale;
    return emit<V>(op);
  }

  // With a bias on the LM head (Phi-2, BART's final_logits_bias).
  template <int64_t V, int64_t D, int64_t N, int64_t B>
  Act<V> logits(Weight<V, D> head, Act<N> x, Vector<B> bias, double softcap = 0, double scale = 1) {
    static_assert(D == N, "logits: the LM head's input width does not match the activation width");
    static_assert(B == V, "logits: the LM head's bias width does not match the vocabulary");
    Op op{OpKind::Logits, 0, {x.id}, {head.tensor, bias.tensor}, {V, D}, softcap};
    op.scale = scale;
    return emit<V>(op);
  }

  // An encoder–decoder: k and v of the encoder's output, written to the
  // cross-attention cache `cache` that decoder layer's queries read.
  template <int64_t Hkv, int64_t Dh, int64_t NK, int64_t NV>
  void cross_kv(Act<NK> k, Act<NV> v, int32_t cache) {
    static_assert(NK == Hkv * Dh, "cross_kv: k is not kv_heads × head_dim wide (the cache holds kv heads)");
    static_assert(NV == Hkv * Dh, "cross_kv: v is not kv_heads × head_dim wide (the cache holds kv heads)");
    s_.ops.push_back(Op{OpKind::CrossKv, 0, {k.id, v.id}, {-1, -1}, {Hkv, Dh}, 0, cache});
  }
  // … an image's keys (Llama 3.2 Vision's cross-attention states), k's heads
  // RMS-normed by k_norm first.
  template <int64_t Hkv, int64_t Dh, int64_t NK, int64_t NV, int64_t G>
  void cross_kv(Act<NK> k, Act<NV> v, Vector<G> k_norm, int32_t cache) {
    static_assert(G == Dh, "cross_kv: the k norm's scale is not one head wide");
    cross_kv<Hkv, Dh>(k, v, cache);
    s_.ops.back().tensor[0] = k_norm.tensor;
  }
  // Cross-attention of Hq query heads over an image's keys in the cache
  // `cache` (Llama 3.2 Vision): the keys of the images the row sees.
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t NQ>
  Act<Hq * Dh> cross_attention_images(Act<NQ> q, int32_t cache, double scale) {
    Act<Hq * Dh> out = cross_attention<Hq, Hkv, Dh>(q, cache, scale);
    s_.ops.back().variant = kImageCross;
    return out;
  }
  // Cross-attention of Hq query heads over the encoder's output in the cache
  // `cache`: every key of the row's source.
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t NQ>
  Act<Hq * Dh> cross_attention(Act<NQ> q, int32_t cache, double scale) {
    static_assert(Hq % Hkv == 0, "cross_attention: heads is not a multiple of kv_heads");
    static_assert(NQ == Hq * Dh, "cross_attention: q is not heads × head_dim wide");
    return emit<Hq * Dh>(Op{OpKind::Attention, 0, {q.id}, {-1, -1}, {Hq, Hkv, Dh, 0}, scale, cache, kCross});
  }
  // A Mamba layer's causal depthwise conv (DC taps) and SiLU over CH
  // channels of in_proj's output from column OFF (Mamba: x of [x | z];
  // Mamba-2: x, B and C of [z | x | B | C | dt]), with the window of layer
  // `layer` each sequence keeps.
  template <int64_t CH, int64_t DC, int64_t OFF, int64_t NXZ, int64_t WR, int64_t WC, int64_t B>
  Act<CH> ssm_conv(Act<NXZ> xz, Weight<WR, WC> taps, Vector<B> bias, int32_t layer) {
    static_assert(OFF >= 0 && OFF + CH <= NXZ, "ssm_conv: the conv's channels are not inside in_proj's output");
    static_assert(WR == CH && WC == DC, "ssm_conv: the taps are not [channels][d_conv]");
    static_assert(B == CH, "ssm_conv: the conv bias is not one a channel");
    return emit<CH>(Op{OpKind::SsmConv, 0, {xz.id}, {taps.tensor, bias.tensor}, {CH, DC, OFF}, 0, layer});
  }
  template <int64_t CH, int64_t DC, int64_t OFF, int64_t NXZ, int64_t WR, int64_t WC>
  Act<CH> ssm_conv(Act<NXZ> xz, Weight<WR, WC> taps, int32_t layer) {
    return ssm_conv<CH, DC, OFF>(xz, taps, Vector<CH>{}, layer);
  }
  // A Mamba-2 layer's scan (SSD as a recurrence): heads H of DI / H channels
  // x, in groups G sharing B and C (N states each), from u = ssm_conv's
  // output [x | B | C] and in_proj's output [z | x | B | C | dt]; gated by
  // SiLU(z), with the h of layer `layer` each sequence keeps. dt is clamped
  // to [dt_min, dt_max] (dt_max 0: no upper limit).
  template <int64_t DI, int64_t N, int64_t H, int64_t G, int64_t NU, int64_t NXZ, int64_t AH, int64_t DH, int64_t BH>
  Act<DI> mamba2_scan(Act<NU> u, Act<NXZ> xz, Vector<AH> a_log, Vector<DH> d, Vector<BH> dt_bias, double dt_min,
                      double dt_max, int32_t layer) {
    static_assert(H > 0 && DI % H == 0, "mamba2_scan: the heads do not split d_inner");
    static_assert(G > 0 && H % G == 0, "mamba2_scan: heads is not a multiple of groups");
    static_assert(NU == DI + 2 * G * N, "mamba2_scan: the conv's output is not d_inner + 2 · groups · d_state wide");
    static_assert(NXZ == 2 * DI + 2 * G * N + H, "mamba2_scan: in_proj's output is not [z | x | B | C | dt] wide");
    static_assert(AH == H && DH == H && BH == H, "mamba2_scan: A_log, D and dt_bias are not one a head");
    Op op{OpKind::Mamba2Scan, 0, {u.id, xz.id}, {a_log.tensor, d.tensor}, {DI, N, H, G}, dt_max, layer};
    op.extra[0] = dt_bias.tensor;
    op.scale = dt_min;
    return emit<DI>(op);
  }
  // Its selective scan of u (ssm_conv's output) with x_proj's output dbc =
  // [dt (R) | B (N) | C (N)], dt_proj (rank R) applied inside, gated by
  // SiLU(z), the last DI columns of xz, with the h of layer `layer` each
  // sequence keeps.
  template <int64_t DI, int64_t N, int64_t R, int64_t NU, int64_t NDBC, int64_t NXZ, int64_t DR, int64_t DC_,
            int64_t DB, int64_t AR, int64_t AC, int64_t DD>
  Act<DI> ssm_scan(Act<NU> u, Act<NDBC> dbc, Act<NXZ> xz, Weight<DR, DC_> dt_proj, Vector<DB> dt_bias,
                   Weight<AR, AC> a_log, Vector<DD> d, int32_t layer) {
    static_assert(NU == DI, "ssm_scan: u is not d_inner wide");
    static_assert(NDBC == R + 2 * N, "ssm_scan: x_proj's output is not dt_rank + 2 · d_state wide");
    static_assert(NXZ == 2 * DI, "ssm_scan: in_proj's output is not 2 · d_inner wide (x, then z)");
    static_assert(DR == DI && DC_ == R, "ssm_scan: dt_proj is not [d_inner][dt_rank]");
    static_assert(DB == DI, "ssm_scan: dt_proj's bias is not d_inner wide");
    static_assert(AR == DI && AC == N, "ssm_scan: A_log is not [d_inner][d_state]");
    static_assert(DD == DI, "ssm_scan: D is not d_inner wide");
    Op op{OpKind::SsmScan, 0, {u.id, dbc.id, xz.id}, {dt_proj.tensor, a_log.tensor}, {DI, N, R}, 0, layer};
    op.extra[0] = dt_bias.tensor;
    op.extra[1] = d.tensor;
    return emit<DI>(op);
  }

  // Multi-head latent attention (DeepSeek-V2/V3) as attention over a cache
  // of one head, the latent (Rank) and the rotary key (Rope): q of H heads
  // [q_nope (Nope) | q_pe (Rope)] is absorbed into the latent's space, per
  // head [W_UK[h]ᵀ · q_nope | q_pe]; kv_b holds each head's W_UK (Nope rows)
  // then W_UV (Vd rows) of Rank columns.
  template <int64_t H, int64_t Nope, int64_t Rope, int64_t Rank, int64_t Vd, int64_t NQ, int64_t R, int64_t C>
  Act<H * (Rank + Rope)> mla_query(Act<NQ> q, Weight<R, C> kv_b) {
    static_assert(NQ == H * (Nope + Rope), "mla_query: q is not heads × (qk_nope_head_dim + qk_rope_head_dim) wide");
    static_assert(R == H * (Nope + Vd) && C == Rank,
                  "mla_query: kv_b is not [heads × (qk_nope_head_dim + v_head_dim)][kv_lora_rank]");
    return emit<H * (Rank + Rope)>(Op{OpKind::MlaQuery, 0, {q.id}, {kv_b.tensor, -1}, {H, Nope, Rope, Rank, Vd}});
  }
  // The same from k_b, each head's W_UK transposed ([W_UK[h]ᵀ] rows, llama.cpp's attn_k_b).
  template <int64_t H, int64_t Nope, int64_t Rope, int64_t Rank, int64_t Vd, int64_t NQ, int64_t R, int64_t C>
  Act<H * (Rank + Rope)> mla_query_split(Act<NQ> q, Weight<R, C> k_b) {
    static_assert(NQ == H * (Nope + Rope), "mla_query: q is not heads × (qk_nope_head_dim + qk_rope_head_dim) wide");
    static_assert(R == H * Rank && C == Nope, "mla_query: k_b is not [heads × kv_lora_rank][qk_nope_head_dim]");
    return emit<H * (Rank + Rope)>(
        Op{OpKind::MlaQuery, 0, {q.id}, {k_b.tensor, -1}, {H, Nope, Rope, Rank, Vd}, 0, -1, kSplitKvB});
  }
  // The latent's RMSNorm, in place: kv's first Rank values (kv = [latent |
  // rotary key], kv_a_proj_with_mqa's output), q the query it is rotated with.
  template <int64_t H, int64_t Rank, int64_t Rope, int64_t NQ, int64_t NK, int64_t G>
  void latent_norm(Act<NQ> q, Act<NK> kv, Vector<G> scale, double eps) {
    static_assert(NQ == H * (Rank + Rope), "latent_norm: q is not heads × (kv_lora_rank + qk_rope_head_dim) wide");
    static_assert(NK == Rank + Rope, "latent_norm: kv is not kv_lora_rank + qk_rope_head_dim wide");
    static_assert(G == Rank, "latent_norm: the scale is not kv_lora_rank wide");
    s_.ops.push_back(
        Op{OpKind::QKNorm, 0, {q.id, kv.id}, {-1, scale.tensor}, {H, 1, Rank + Rope, Rank}, eps, -1, kLatentNorm});
  }
  // RoPE on the R dims from Offset of each head of q and k (latent
  // attention's rotary parts, after the latent).
  template <int64_t Hq, int64_t Hkv, int64_t Dh, int64_t R, int64_t Offset, int64_t NQ, int64_t NK>
  void rope_at(Act<NQ> q, Act<NK> k, RopePairing pairing, double theta) {
    static_assert(NQ == Hq * Dh, "rope: q is not heads × head_dim wide");
    static_assert(NK == Hkv * Dh, "rope: k is not kv_heads × head_dim wide");
    static_assert(R % 2 == 0 && Offset % 2 == 0 && Offset + R <= Dh, "rope: the rotary dims must be even and inside the head");
    s_.ops.push_back(Op{OpKind::Rope, 0, {q.id, k.id}, {-1, -1}, {Hq, Hkv, Dh, R, Offset}, theta, -1,
                        static_cast<uint8_t>(pairing)});
  }
  // Each head's values out of its attention output's latent part; q (the
  // query) and r (the absorbed query, rotated) for the expanded form a
  // prompt chunk may take instead.
  template <int64_t H, int64_t Nope, int64_t Rope, int64_t Rank, int64_t Vd, int64_t NA, int64_t NQ, int64_t NR, int64_t R,
            int64_t C>
  Act<H * Vd> mla_values(Act<NA> a, Act<NQ> q, Act<NR> r, Weight<R, C> kv_b) {
    static_assert(NA == H * (Rank + Rope), "mla_values: the attention output is not heads × (kv_lora_rank + qk_rope_head_dim) wide");
    static_assert(NQ == H * (Nope + Rope) && NR == H * (Rank + Rope), "mla_values: q or the absorbed query is of another width");
    static_assert(R == H * (Nope + Vd) && C == Rank,
                  "mla_values: kv_b is not [heads × (qk_nope_head_dim + v_head_dim)][kv_lora_rank]");
    return emit<H * Vd>(Op{OpKind::MlaValues, 0, {a.id, q.id, r.id}, {kv_b.tensor, -1}, {H, Nope, Rope, Rank, Vd}});
  }
  // The same from v_b, each head's W_UV (llama.cpp's attn_v_b).
  template <int64_t H, int64_t Nope, int64_t Rope, int64_t Rank, int64_t Vd, int64_t NA, int64_t NQ, int64_t NR, int64_t R,
            int64_t C>
  Act<H * Vd> mla_values_split(Act<NA> a, Act<NQ> q, Act<NR> r, Weight<R, C> v_b) {
    static_assert(NA == H * (Rank + Rope), "mla_values: the attention output is not heads × (kv_lora_rank + qk_rope_head_dim) wide");
    static_assert(NQ == H * (Nope + Rope) && NR == H * (Rank + Rope), "mla_values: q or the absorbed query is of another width");
    static_assert(R == H * Vd && C == Rank, "mla_values: v_b is not [heads × v_head_dim][kv_lora_rank]");
    return emit<H * Vd>(
        Op{OpKind::MlaValues, 0, {a.id, q.id, r.id}, {v_b.tensor, -1}, {H, Nope, Rope, Rank, Vd}, 0, -1, kSplitKvB});
  }

  // The encode pass ends here: the ops after it are the decoder's pass.
  void end_encode() { s_.encode_ops = static_cast<uint32_t>(s_.ops.size()); }

 private:
  // The manifest distance between consecutive experts' tensors of one role:
  // the lowering finds expert e's at the first one's + e · stride.
  template <class W, size_t E>
  static int32_t stride(const std::array<W, E>& experts) {
    for (size_t e = 1; e < E; ++e)
      if (experts[e].tensor - experts[e - 1].tensor != experts[1].tensor - experts[0].tensor)
        throw std::logic_error("experts: the manifest does not list the experts' tensors at one stride");
    return E > 1 ? experts[1].tensor - experts[0].tensor : 0;
  }

  template <int64_t N>
  Act<N> emit(Op op) {
    const uint32_t id = s_.values++;
    s_.widths.push_back(N);
    op.out = id;
    s_.ops.push_back(op);
    return Act<N>{id};
  }

  Schedule s_;
};

// The manifest entry a typed handle points at has the handle's shape: a
// generated Weights struct and its manifest cannot drift apart. `transposed`:
// the tensor is stored [in, out] (GPT-2's Conv1D).
template <size_t M, int64_t Rows, int64_t Cols>
constexpr bool matches(const ManifestEntry (&manifest)[M], Weight<Rows, Cols> w, bool transposed) {
  if (w.tensor < 0 || static_cast<size_t>(w.tensor) >= M) return false;
  const ManifestEntry& e = manifest[w.tensor];
  if (e.rank == 1) return Rows == 1 && e.shape[0] == Cols;  // a one-row linear stored as a vector
  // Rank 3: a depthwise conv1d's taps, [Rows, 1, Cols] stored, [Rows, Cols]
  // held; rank 4: a patch embedding, [Rows, channels, k, k] stored, [Rows,
  // channels · k²] held (ManifestEntry).
  return (e.rank >= 2 && e.rank <= 4) && e.shape[0] == (transposed ? Cols : Rows) &&
         e.shape[1] == (transposed ? Rows : Cols);
}

template <size_t M, int64_t N>
constexpr bool matches(const ManifestEntry (&manifest)[M], Vector<N> v, bool) {
  if (v.tensor < 0 || static_cast<size_t>(v.tensor) >= M) return false;
  const ManifestEntry& e = manifest[v.tensor];
  return e.rank == 1 && e.shape[0] == N;
}

// Per layer (and expert): the handles a layer has; layers without the
// tensor (the experts of a dense layer among sparse ones) hold none.
template <class T>
constexpr bool absent(const T& handle) {
  if constexpr (requires { handle.tensor; }) return handle.tensor < 0;
  else return false;
}

template <size_t M, class T, size_t L>
constexpr bool matches(const ManifestEntry (&manifest)[M], const std::array<T, L>& handles, bool transposed) {
  for (const T& h : handles)
    if (!absent(h) && !matches(manifest, h, transposed)) return false;
  return true;
}

template <size_t M>
constexpr int64_t total_elements(const ManifestEntry (&manifest)[M]) {
  int64_t n = 0;
  for (const ManifestEntry& e : manifest) n += e.elements();
  return n;
}

}  // namespace lathe::typed
