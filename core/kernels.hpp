// The kernel families and their interfaces: for each family its shaders/
// file, its push-constant layout and its bindings, each described once (an
// X-macro list of named fields). From these lists
//   - this header defines the C++ push structs and the named binding structs
//     that generated plans, the runtime and the kernel tests fill by name;
//   - the generator emits each kernel instance's GLSL push block and its
//     `#define BINDING_<name> <index>` lines (generator/emit/push_layout.cpp),
//     so a shader declares `layout(binding = BINDING_w)` and never a number.
// A test reads the push offsets back from the compiled SPIR-V.
//
// Values that change between decode steps of one recorded command buffer (the
// cache position, the token) are not push constants: kernels read them from
// the session's host-visible IO buffer, so a recorded step can be submitted
// again.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>

namespace lathe::push {

// Kernels over a chunk of token rows (norm, argmax, attention_combine).
// Every layout starts with `rows`: the runtime sets it when it records.
#define LATHE_PUSH_ROWS(X) X(rows, "token rows in this chunk")

// embed.comp: the rows whose token is in [token0, token0 + tokens) read the
// table bound (a table over the binding limit is split into such ranges,
// one dispatch each: plan::Part).
#define LATHE_PUSH_EMBED(X)                                   \
  X(rows, "token rows in this chunk")                         \
  X(token0, "first token of the table bound")                 \
  X(tokens, "tokens of the table bound")

// matmul_*.comp: y[t][col0 + r] = epilogue(W[r + *_row0] · x[t + x_row0]),
// the biases read at col0 + *_row0 + r. A matrix over the binding limit is
// split into row ranges (plan::Part), one dispatch each: its W rows are the
// part's, col0 its first row in the whole matrix.
#define LATHE_PUSH_MATMUL(X)                                                \
  X(rows, "token rows in this chunk")                                       \
  X(n, "output width: the weight rows used")                                \
  X(x_row0, "first input row (the LM head of the last token reads T - 1)") \
  X(gate_row0, "first weight row of W (a fused gate_up tensor's half)")     \
  X(up_row0, "first weight row of W2 (gated MLPs)")                         \
  X(col0, "first output column (a row range of a split matrix)")           \
  X(y_stride, "y's row width")                                              \
  X(expert0, "experts: the first expert of the part this dispatch binds")

// rope_kv.comp and attention.comp: q, k, v live in one buffer each or in one
// fused qkv buffer; element (t, i) of q is at q_offset + t * q_stride + i.
#define LATHE_PUSH_ATTENTION(X)                \
  X(rows, "token rows in this chunk")          \
  X(q_offset, "q column offset in its buffer") \
  X(q_stride, "q row stride")                  \
  X(k_offset, "k column offset")               \
  X(k_stride, "k row stride")                  \
  X(v_offset, "v column offset")               \
  X(v_stride, "v row stride")

// mla.comp: x's head h of row t starts at x_offset + t * x_stride + h * its head width.
#define LATHE_PUSH_MLA(X)                     \
  X(rows, "token rows in this chunk")         \
  X(x_offset, "x column offset in its buffer") \
  X(x_stride, "x row stride")

// mla_prefill.comp: head h of row t of q (the raw query, [q_nope | q_pe]) at
// q_offset + t * q_stride + h * (NOPE + ROPE), of r (the absorbed query's
// rows, its rotary part rotated) at r_offset + t * r_stride + h * (RANK + ROPE).
#define LATHE_PUSH_MLA_PREFILL(X)             \
  X(rows, "token rows in this chunk")         \
  X(q_offset, "q column offset in its buffer") \
  X(q_stride, "q row stride")                 \
  X(r_offset, "r column offset in its buffer") \
  X(r_stride, "r row stride")
struct FieldInfo {
  std::string_view name;
  std::string_view comment;
};

#define LATHE_PUSH_MEMBER(name, comment) uint32_t name;
#define LATHE_PUSH_INFO(name, comment) FieldInfo{#name, comment},

struct RowsPush {
  LATHE_PUSH_ROWS(LATHE_PUSH_MEMBER)
};
struct EmbedPush {
  LATHE_PUSH_EMBED(LATHE_PUSH_MEMBER)
};
struct MatmulPush {
  LATHE_PUSH_MATMUL(LATHE_PUSH_MEMBER)
};
struct AttentionPush {
  LATHE_PUSH_ATTENTION(LATHE_PUSH_MEMBER)
};
struct MlaPush {
  LATHE_PUSH_MLA(LATHE_PUSH_MEMBER)
};
struct MlaPrefillPush {
  LATHE_PUSH_MLA_PREFILL(LATHE_PUSH_MEMBER)
};

inline constexpr FieldInfo kRowsPush[] = {LATHE_PUSH_ROWS(LATHE_PUSH_INFO)};
inline constexpr FieldInfo kEmbedPush[] = {LATHE_PUSH_EMBED(LATHE_PUSH_INFO)};
inline constexpr FieldInfo kMatmulPush[] = {LATHE_PUSH_MATMUL(LATHE_PUSH_INFO)};
inline constexpr FieldInfo kAttentionPush[] = {LATHE_PUSH_ATTENTION(LATHE_PUSH_INFO)};
inline constexpr FieldInfo kMlaPush[] = {LATHE_PUSH_MLA(LATHE_PUSH_INFO)};
inline constexpr FieldInfo kMlaPrefillPush[] = {LATHE_PUSH_MLA_PREFILL(LATHE_PUSH_INFO)};

#undef LATHE_PUSH_MEMBER
#undef LATHE_PUSH_INFO

static_assert(sizeof(RowsPush) == 4 * std::size(kRowsPush));
static_assert(sizeof(EmbedPush) == 4 * std::size(kEmbedPush));
static_assert(sizeof(MatmulPush) == 4 * std::size(kMatmulPush));
static_assert(sizeof(AttentionPush) == 4 * std::size(kAttentionPush));
static_assert(sizeof(MlaPush) == 4 * std::size(kMlaPush));
static_assert(sizeof(MlaPrefillPush) == 4 * std::size(kMlaPrefillPush));
static_assert(offsetof(EmbedPush, rows) == 0 && offsetof(MatmulPush, rows) == 0 && offsetof(AttentionPush, rows) == 0 &&
              offsetof(MlaPush, rows) == 0 && offsetof(MlaPrefillPush, rows) == 0);

// The most words of any layout: plans store push constants in arrays this long.
inline constexpr size_t kMaxWords = 8;

// A push struct as the words the kernel receives.
template <class P>
constexpr std::array<uint32_t, kMaxWords> words(const P& p) {
  static_assert(sizeof(P) % 4 == 0 && sizeof(P) <= 4 * kMaxWords);
  const auto packed = std::bit_cast<std::array<uint32_t, sizeof(P) / 4>>(p);
  std::array<uint32_t, kMaxWords> out{};
  for (size_t i = 0; i < packed.size(); ++i) out[i] = packed[i];
  return out;
}

// The word of field `offset` (offsetof(P, field)).
constexpr size_t word(size_t offset) { return offset / 4; }

}  // namespace lathe::push

namespace lathe::kernels {

// What a binding is on the Vulkan side.
enum class BindingKind : uint8_t {
  Storage,  // a storage buffer
  Texel,    // a uniform texel buffer, RGBA32UI (16-byte texels)
};

struct BindingInfo {
  std::string_view name;
  BindingKind kind;
  std::string_view comment;
};

// Bindings of each family, in binding-number order.
#define LATHE_BIND_EMBED(X)                                                                   \
  X(io, Storage, "position, tokens[rows]")                                                    \
  X(table, Texel, "the embedding table [vocab][D]")                                           \
  X(positions, Texel, "the learned position table [table][D]")                                \
  X(types, Texel, "the token-type table [types][D]: row 0 added")                             \
  X(y, Storage, "[rows][D] f32")                                                              \
  X(x, Storage, "[rows][D] f32: the rows taken instead of the table's (ROWS), or spliced rows'") \
  X(cls, Storage, "[D] f32: a vision tower's class embedding, on the row of position 0 (CLASS)")

// tiles.comp: a tiled tower's (Llama 3.2 Vision's) embeddings of its rows
// by their tile and place, and its hidden states stacked for the projector.
#define LATHE_BIND_TILES(X)                                                              \
  X(io, Storage, "each row's token: its image's aspect ratio id")                        \
  X(x, Storage, "[rows][D] f32")                                                         \
  X(y, Storage, "[rows][D] f32, or [rows][D · (1 + STATES)] (STACK)")                    \
  X(table, Texel, "[ratios][TILES · D]: the tile embedding of each aspect ratio")        \
  X(gate, Storage, "[1] f32: its gate")                                                  \
  X(cls, Storage, "[D] f32: the class embedding")                                        \
  X(positions, Texel, "[TILE_ROWS][D]: the shared position table")                       \
  X(tile_positions, Texel, "[ratios][TILES · TILE_ROWS · D]: each tile's own")            \
  X(position_gate, Storage, "[1] f32: their mix's gate")

#define LATHE_BIND_NORM(X)                                              \
  X(x, Storage, "[rows][N] f32")                                        \
  X(scale, Storage, "[N] f32")                                          \
  X(shift, Storage, "[N] f32 (LayerNorm)")                              \
  X(y, Storage, "[rows][N] f32")                                        \
  X(io, Storage, "each row's extent: whether it sees an image (ROW_MASK)")

#define LATHE_BIND_MATMUL(X)                                                 \
  X(w, Texel, "W [n][K] in its dtype")                                       \
  X(w2, Texel, "W2 [n][K]: the up projection of a gated MLP")                \
  X(x, Storage, "[rows][K] f32")                                             \
  X(bias, Storage, "[n] f32")                                                \
  X(bias2, Storage, "[n] f32, W2's")                                         \
  X(y, Storage, "[rows][n] f32 (added to under a residual epilogue)")        \
  X(norm_scale, Storage, "[K] f32: the norm folded into the read of x")      \
  X(norm_shift, Storage, "[K] f32")                                          \
  X(route, Storage, "moe_route's routing: the expert matmuls' token lists")  \
  X(xq, Storage, "[rows] x as quantize wrote it (the dot layout reads it)")   \
  X(gate, Storage, "[1] f32: a gated residual's g, y += tanh(g) · …")

// quantize.comp: x (normalized first, under a folded norm) in 8-bit blocks
// of 32 consecutive values, a row at a time, for the dot layout's integer
// dot products. Row r of xq (kernels::xq_row_words(K) 32-bit words from
// r · xq_row_words): K / 4 words of signed bytes (value k is byte k % 4 of
// word k / 4), then K / 32 pairs of f32 (d, s) (block b: its values are
// d · q, s = d · Σ q over the block), then padding to a multiple of 4 words.
#define LATHE_BIND_QUANTIZE(X)                                        \
  X(x, Storage, "[rows][K] f32")                                      \
  X(xq, Storage, "[rows][xq_row_words(K)] 32-bit words")              \
  X(norm_scale, Storage, "[K] f32: the norm folded into the read of x") \
  X(norm_shift, Storage, "[K] f32")

#define LATHE_BIND_ROPE_KV(X)                                \
  X(io, Storage, "position")                                 \
  X(q, Storage, "q, rotated in place")                       \
  X(k, Storage, "k of this chunk")                           \
  X(v, Storage, "v of this chunk")                           \
  X(k_cache, Storage, "[ring][HKV][DH] in the cache dtype")   \
  X(v_cache, Storage, "[ring][HKV][DH]")                      \
  X(q_norm, Storage, "q's RMSNorm scale [DH] or [HQ·DH] f32")  \
  X(k_norm, Storage, "k's RMSNorm scale [DH] or [HKV·DH] f32")

#define LATHE_BIND_ATTENTION(X)                                         \
  X(io, Storage, "position")                                            \
  X(q, Storage, "q of this chunk")                                      \
  X(k_cache, Texel, "the K cache as texels")                            \
  X(v_cache, Texel, "the V cache as texels")                            \
  X(out, Storage, "[rows][HQ·DH] f32")                                  \
  X(partials, Storage, "[rows][HQ][SPLITS][DH + 2] f32 of split key ranges") \
  X(rel_bias, Storage, "[buckets][HQ] f32: T5's relative position bias")

#define LATHE_BIND_ATTENTION_COMBINE(X)                              \
  X(partials, Storage, "[rows][HQ][SPLITS][DH + 2] f32")             \
  X(out, Storage, "[rows][HQ·DH] f32")

#define LATHE_BIND_ARGMAX(X)                     \
  X(io, Storage, "tokens[0] receives the pick") \
  X(logits, Storage, "[rows][V] f32")

#define LATHE_BIND_MOE_ROUTE(X)                                                     \
  X(logits, Storage, "[rows][LOGITS_STRIDE] f32: the router's E first")             \
  X(route, Storage, "counts[E], weights[rows·TOPK], per expert its slots t·TOPK + j") \
  X(bias, Storage, "[E] f32: the correction bias, added to the scores to choose")

#define LATHE_BIND_MOE_COMBINE(X)                         \
  X(route, Storage, "moe_route's routing")                \
  X(y, Storage, "[rows][TOPK·D] f32: the experts' outputs") \
  X(x, Storage, "[rows][D] f32, added to")                \
  X(shared, Storage, "[rows][D] f32: the shared expert's output") \
  X(gate, Storage, "[rows][GATE_STRIDE] f32: its gate logit at GATE_OFFSET")

// A Mamba layer's two kernels over a pass's rows in order, each carrying
// every row's sequence's state (read, then written for the next pass; a row
// at position 0 starts its sequence from zeros): ssm_conv the causal
// depthwise convolution and its window, ssm_scan the selective scan and its
// h. x_proj runs as a matmul between them; dt_proj (rank R, a few flops a
// channel) runs inside ssm_scan, which reads x_proj's first R columns.
#define LATHE_BIND_SSM_CONV(X)                                                        \
  X(io, Storage, "sequence and position of each row")                                 \
  X(xz, Storage, "[rows][XSTRIDE] f32: in_proj's output, the conv's CH channels at XOFF") \
  X(w, Storage, "[CH][DC] f32: the taps, DC - 1 on the row itself")                   \
  X(bias, Storage, "[CH] f32")                                                        \
  X(state, Storage, "[sequences][CH][DC - 1] f32: each one's last inputs, oldest first") \
  X(u, Storage, "[rows][CH] f32: SiLU of the convolution")
#define LATHE_BIND_SSM_SCAN(X)                                                        \
  X(io, Storage, "sequence and position of each row")                                 \
  X(u, Storage, "[rows][DI] f32: ssm_conv's output")                                  \
  X(dbc, Storage, "[rows][R + 2·N] f32: x_proj's output (dt's low rank, B, C)")       \
  X(dt_w, Storage, "[DI][R] f32: dt_proj's weight")                                   \
  X(dt_bias, Storage, "[DI] f32: dt_proj's bias")                                     \
  X(xz, Storage, "[rows][2·DI] f32: in_proj's output, the gate z at DI")              \
  X(a_log, Storage, "[DI][N] f32: A = -exp(A_log)")                                   \
  X(d, Storage, "[DI] f32: the skip")                                                 \
  X(state, Storage, "[sequences][DI][N] f32: each one's h")                           \
  X(y, Storage, "[rows][DI] f32: (C·h + D·u) · SiLU(z)")

// A Mamba-2 layer's scan (ssm_conv first, over x, B and C): per head, one
// scalar decay and step, the B and C of its group.
#define LATHE_BIND_MAMBA2_SCAN(X)                                                     \
  X(io, Storage, "sequence and position of each row")                                 \
  X(u, Storage, "[rows][DI + 2·G·N] f32: ssm_conv's output, x | B | C")              \
  X(xz, Storage, "[rows][2·DI + 2·G·N + H] f32: in_proj's output, z at 0, dt at the end") \
  X(dt_bias, Storage, "[H] f32")                                                      \
  X(a_log, Storage, "[H] f32: A = -exp(A_log)")                                       \
  X(d, Storage, "[H] f32: the skip")                                                  \
  X(state, Storage, "[sequences][DI][N] f32: each one's h")                           \
  X(y, Storage, "[rows][DI] f32: (C·h + D·x) · SiLU(z)")

// Multi-head latent attention's per-head maps through kv_b_proj (f32, [H ·
// (NOPE + VD)][RANK]: each head's W_UK rows, then its W_UV rows): the
// absorbed query [W_UKᵀ · q_nope | q_pe] of each head, or a head's values
// W_UV · (its attention output's latent part).
#define LATHE_BIND_MLA(X)                                                                   \
  X(x, Storage, "[rows][H·(NOPE + ROPE)] f32 q, or [rows][H·(RANK + ROPE)] the attention's output") \
  X(w, Storage, "kv_b [H·(NOPE + VD)][RANK] f32")                                             \
  X(y, Storage, "[rows][H·(RANK + ROPE)] f32 the absorbed query, or [rows][H·VD] the values")

// Latent attention's expanded form, for a prompt chunk of one sequence: the
// expansion (EXPAND 1) maps every cached latent of the sequence through
// kv_b to each head's [k_nope | v]; the attention (EXPAND 0) scores each
// head's [q_nope | q_pe] against [k_nope | k_pe] and sums the v.
#define LATHE_BIND_MLA_PREFILL(X)                                                        \
  X(io, Storage, "sequence and position of each row")                                   \
  X(q, Storage, "[rows][H·(NOPE + ROPE)] f32: the query, q_nope read")                  \
  X(r, Storage, "[rows][H·(RANK + ROPE)] f32: the absorbed query rows, q_pe rotated")   \
  X(k_cache, Storage, "[ring][RANK + ROPE] in the cache dtype: latent | rotated k_pe")  \
  X(w, Storage, "kv_b [H·(NOPE + VD)][RANK] f32, or k_b [H][RANK][NOPE] (SPLIT)")        \
  X(w2, Storage, "v_b [H][VD][RANK] f32 (SPLIT)")                                        \
  X(e, Storage, "[keys][H][NOPE + VD] f32: the expanded keys and values")               \
  X(out, Storage, "[rows][H·VD] f32: the heads' values")
#define LATHE_BIND_INFO(name, kind, comment) BindingInfo{#name, BindingKind::kind, comment},
#define LATHE_BIND_MEMBER(name, kind, comment) B name{};
#define LATHE_BIND_ELEMENT(name, kind, comment) name,

// A family's bindings by name, over any binding type B (plan::Binding in a
// generated plan, vk::Binding in the kernel tests); array() lists them in
// binding order.
#define LATHE_BIND_STRUCT(Struct, LIST)                              \
  template <class B>                                                 \
  struct Struct {                                                    \
    LIST(LATHE_BIND_MEMBER)                                          \
    constexpr auto array() const { return std::array{LIST(LATHE_BIND_ELEMENT)}; } \
  };

LATHE_BIND_STRUCT(EmbedBindings, LATHE_BIND_EMBED)
LATHE_BIND_STRUCT(NormBindings, LATHE_BIND_NORM)
LATHE_BIND_STRUCT(MatmulBindings, LATHE_BIND_MATMUL)
LATHE_BIND_STRUCT(RopeKvBindings, LATHE_BIND_ROPE_KV)
LATHE_BIND_STRUCT(AttentionBindings, LATHE_BIND_ATTENTION)
LATHE_BIND_STRUCT(AttentionCombineBindings, LATHE_BIND_ATTENTION_COMBINE)
LATHE_BIND_STRUCT(ArgmaxBindings, LATHE_BIND_ARGMAX)
LATHE_BIND_STRUCT(MoeRouteBindings, LATHE_BIND_MOE_ROUTE)
LATHE_BIND_STRUCT(MoeCombineBindings, LATHE_BIND_MOE_COMBINE)
LATHE_BIND_STRUCT(SsmConvBindings, LATHE_BIND_SSM_CONV)
LATHE_BIND_STRUCT(SsmScanBindings, LATHE_BIND_SSM_SCAN)
LATHE_BIND_STRUCT(Mamba2ScanBindings, LATHE_BIND_MAMBA2_SCAN)
LATHE_BIND_STRUCT(MlaBindings, LATHE_BIND_MLA)
LATHE_BIND_STRUCT(MlaPrefillBindings, LATHE_BIND_MLA_PREFILL)
LATHE_BIND_STRUCT(QuantizeBindings, LATHE_BIND_QUANTIZE)
LATHE_BIND_STRUCT(TilesBindings, LATHE_BIND_TILES)

inline constexpr BindingInfo kEmbedBindings[] = {LATHE_BIND_EMBED(LATHE_BIND_INFO)};
inline constexpr BindingInfo kNormBindings[] = {LATHE_BIND_NORM(LATHE_BIND_INFO)};
inline constexpr BindingInfo kMatmulBindings[] = {LATHE_BIND_MATMUL(LATHE_BIND_INFO)};
inline constexpr BindingInfo kRopeKvBindings[] = {LATHE_BIND_ROPE_KV(LATHE_BIND_INFO)};
inline constexpr BindingInfo kAttentionBindings[] = {LATHE_BIND_ATTENTION(LATHE_BIND_INFO)};
inline constexpr BindingInfo kAttentionCombineBindings[] = {LATHE_BIND_ATTENTION_COMBINE(LATHE_BIND_INFO)};
inline constexpr BindingInfo kArgmaxBindings[] = {LATHE_BIND_ARGMAX(LATHE_BIND_INFO)};
inline constexpr BindingInfo kMoeRouteBindings[] = {LATHE_BIND_MOE_ROUTE(LATHE_BIND_INFO)};
inline constexpr BindingInfo kMoeCombineBindings[] = {LATHE_BIND_MOE_COMBINE(LATHE_BIND_INFO)};
inline constexpr BindingInfo kSsmConvBindings[] = {LATHE_BIND_SSM_CONV(LATHE_BIND_INFO)};
inline constexpr BindingInfo kSsmScanBindings[] = {LATHE_BIND_SSM_SCAN(LATHE_BIND_INFO)};
inline constexpr BindingInfo kMamba2ScanBindings[] = {LATHE_BIND_MAMBA2_SCAN(LATHE_BIND_INFO)};
inline constexpr BindingInfo kMlaBindings[] = {LATHE_BIND_MLA(LATHE_BIND_INFO)};
inline constexpr BindingInfo kMlaPrefillBindings[] = {LATHE_BIND_MLA_PREFILL(LATHE_BIND_INFO)};
inline constexpr BindingInfo kQuantizeBindings[] = {LATHE_BIND_QUANTIZE(LATHE_BIND_INFO)};
inline constexpr BindingInfo kTilesBindings[] = {LATHE_BIND_TILES(LATHE_BIND_INFO)};

#undef LATHE_BIND_INFO
#undef LATHE_BIND_MEMBER
#undef LATHE_BIND_ELEMENT
#undef LATHE_BIND_STRUCT

// Channels a workgroup of ssm_conv, ssm_scan and mamba2_scan takes (its
// lanes one at a time each): the plan's Channels grid is ceil(channels / this).
inline constexpr int64_t kSsmChannelsPerGroup = 32;
// Keys a workgroup of mla_prefill's expansion takes (each weight read once
// for them; their latents in shared memory, KB · kv_lora_rank f32): the
// plan's Keys grid is ceil(keys / this).
inline constexpr int64_t kMlaExpandKeys = 4;
// Rows of a chunk of mamba2_chunk (Q of the SSD algorithm: each row of a
// chunk sees the others before it through a Q × Q matrix in shared memory).
inline constexpr int64_t kMamba2ChunkRows = 32;
// State values of one head a workgroup of mamba2_chunk keeps in shared
// memory at most (its channels × d_state): 8 KiB.
inline constexpr int64_t kMamba2ChunkStateFloats = 2048;
// Its workgroup size, fixed in the shader (local_size_x).
inline constexpr int64_t kMamba2ChunkThreads = 128;
// Channels of one head a workgroup of mamba2_chunk takes: the largest
// divisor of the head's channels whose states fit kMamba2ChunkStateFloats
// (1 at least).
constexpr int64_t mamba2_chunk_channels(int64_t head_channels, int64_t d_state) {
  for (int64_t c = head_channels; c > 1; --c)
    if (head_channels % c == 0 && c * d_state <= kMamba2ChunkStateFloats) return c;
  return 1;
}

// The most bindings of any family: plans store bindings in arrays this long.
inline constexpr size_t kMaxBindings = 11;

enum class Family : uint8_t {
  Embed, Norm, Matmul, RopeKv, Attention, AttentionCombine, Argmax, MoeRoute, MoeCombine, SsmConv, SsmScan, Mamba2Scan,
  Mla, Mamba2Chunk, MlaPrefill, Quantize, Tiles
};

// The values of one of quantize's 8-bit blocks of x, and the 32-bit words a
// row of xq takes (core/kernels.hpp's LATHE_BIND_QUANTIZE says how they lie):
// K / 4 of quants, K / 16 of (d, s) pairs, padded to 16 bytes so that every
// row starts where matmul_dot.comp's 16-byte loads may read it.
inline constexpr int64_t kXqBlock = 32;
constexpr int64_t xq_row_words(int64_t k) { return (k / 4 + 2 * (k / kXqBlock) + 3) / 4 * 4; }
// The blocks of a row one quantize workgroup takes (grid x: ceil(K / 32 /
// this) workgroups a row): one a lane of a 32-lane subgroup.
inline constexpr int64_t kQuantizeGroupBlocks = 32;
constexpr int64_t quantize_groups(int64_t k) { return (k / kXqBlock + kQuantizeGroupBlocks - 1) / kQuantizeGroupBlocks; }

// Specialization constants a family takes after constant 0, the workgroup
// size (the device's subgroup size).
enum class SpecConstants : uint8_t {
  None,
  Tile,    // matmul: 1 ROWS, 2 TOKENS, 3 TEXELS, 4 GROUPS (the device's tile)
  Splits,  // attention_combine: 1 SPLITS, key ranges per (head, row)
  Ring,    // rope_kv: 1 RING, the positions the layer's cache holds (position p at slot p mod RING)
  SplitsRing,  // attention: 1 SPLITS, 2 RING, 3 QROWS (rows a workgroup: the class's in a prompt chunk, else 1),
               // 4 KEYS (flash tiles' keys, plan::Flash)
};

struct FamilyInfo {
  Family family;
  std::string_view key;         // "matmul": kernel names start with it
  std::string_view enumerator;  // "Matmul", as generated code spells it
  std::string_view file;  // its shaders/ source
  std::string_view push_struct;      // its push layout: push::<push_struct>
  std::span<const push::FieldInfo> push;
  std::string_view bindings_struct;  // its named bindings: kernels::<bindings_struct><B>
  std::span<const BindingInfo> bindings;
  SpecConstants spec_constants;
};

inline constexpr FamilyInfo kFamilies[] = {
    {Family::Embed, "embed", "Embed", "embed.comp", "EmbedPush", push::kEmbedPush, "EmbedBindings", kEmbedBindings, SpecConstants::None},
    {Family::Norm, "norm", "Norm", "norm.comp", "RowsPush", push::kRowsPush, "NormBindings", kNormBindings, SpecConstants::None},
    {Family::Matmul, "matmul", "Matmul", "matmul_rows.comp", "MatmulPush", push::kMatmulPush, "MatmulBindings", kMatmulBindings, SpecConstants::Tile},
    {Family::RopeKv, "rope_kv", "RopeKv", "rope_kv.comp", "AttentionPush", push::kAttentionPush, "RopeKvBindings", kRopeKvBindings,
     SpecConstants::Ring},
    {Family::Attention, "attention", "Attention", "attention.comp", "AttentionPush", push::kAttentionPush, "AttentionBindings", kAttentionBindings,
     SpecConstants::SplitsRing},
    {Family::AttentionCombine, "attention_combine", "AttentionCombine", "attention_combine.comp", "RowsPush", push::kRowsPush,
     "AttentionCombineBindings", kAttentionCombineBindings, SpecConstants::Splits},
    {Family::Argmax, "argmax", "Argmax", "argmax.comp", "RowsPush", push::kRowsPush, "ArgmaxBindings", kArgmaxBindings, SpecConstants::None},
    {Family::MoeRoute, "moe_route", "MoeRoute", "moe_route.comp", "RowsPush", push::kRowsPush, "MoeRouteBindings",
     kMoeRouteBindings, SpecConstants::None},
    {Family::MoeCombine, "moe_combine", "MoeCombine", "moe_combine.comp", "RowsPush", push::kRowsPush, "MoeCombineBindings",
     kMoeCombineBindings, SpecConstants::None},
    {Family::SsmConv, "ssm_conv", "SsmConv", "ssm_conv.comp", "RowsPush", push::kRowsPush, "SsmConvBindings",
     kSsmConvBindings, SpecConstants::None},
    {Family::SsmScan, "ssm_scan", "SsmScan", "ssm_scan.comp", "RowsPush", push::kRowsPush, "SsmScanBindings",
     kSsmScanBindings, SpecConstants::None},
    {Family::Mamba2Scan, "mamba2_scan", "Mamba2Scan", "mamba2_scan.comp", "RowsPush", push::kRowsPush,
     "Mamba2ScanBindings", kMamba2ScanBindings, SpecConstants::None},
    {Family::Mla, "mla", "Mla", "mla.comp", "MlaPush", push::kMlaPush, "MlaBindings", kMlaBindings, SpecConstants::None},
    // mamba2_scan's bindings: the other form of the same scan.
    {Family::Mamba2Chunk, "mamba2_chunk", "Mamba2Chunk", "mamba2_chunk.comp", "RowsPush", push::kRowsPush,
     "Mamba2ScanBindings", kMamba2ScanBindings, SpecConstants::None},
    {Family::MlaPrefill, "mla_prefill", "MlaPrefill", "mla_prefill.comp", "MlaPrefillPush", push::kMlaPrefillPush,
     "MlaPrefillBindings", kMlaPrefillBindings, SpecConstants::Ring},
    {Family::Quantize, "quantize", "Quantize", "quantize.comp", "RowsPush", push::kRowsPush, "QuantizeBindings",
     kQuantizeBindings, SpecConstants::None},
    {Family::Tiles, "tiles", "Tiles", "tiles.comp", "RowsPush", push::kRowsPush, "TilesBindings", kTilesBindings,
     SpecConstants::None},
};

// matmul's layouts, a kernel file each (shaders/matmul.glsl has what they
// share): a matmul instance is compiled once per layout its plan's device
// classes run (plan::Tile says which a pass runs).
enum class Layout : uint8_t {
  Rows,       // matmul_rows.comp: decode and batched decode (tokens < 8)
  Broadcast,  // matmul_broadcast.comp: a CPU device's prompt (8 tokens broadcast from 8 lanes)
  Tiled,      // matmul_tiled.comp: a GPU's prompt, tiles staged in shared memory
  Dot,        // matmul_dot.comp: decode of block weights with integer dot products
  Coop,       // matmul_coop.comp: a GPU's prompt on matrix units (VK_NV_cooperative_matrix)
  CoopKhr,    // the same module rewritten for VK_KHR_cooperative_matrix (generator/emit/coop_khr.cpp)
};
inline constexpr size_t kLayouts = 6;
inline constexpr std::string_view kLayoutFiles[kLayouts] = {"matmul_rows.comp", "matmul_broadcast.comp", "matmul_tiled.comp",
                                                            "matmul_dot.comp",  "matmul_coop.comp",      "matmul_coop.comp"};
inline constexpr std::string_view kLayoutNames[kLayouts] = {"rows", "broadcast", "tiled", "dot", "coop", "coop-khr"};
constexpr std::string_view layout_file(Layout l) { return kLayoutFiles[static_cast<size_t>(l)]; }
constexpr std::string_view layout_name(Layout l) { return kLayoutNames[static_cast<size_t>(l)]; }

// attention's module in a pass whose matmuls run layout `l`, on a class
// that runs a prompt's attention in flash tiles (plan::Flash): the tiled
// layout's attention_flash.comp, the matrix units' attention_flash_coop.comp
// (CoopKhr: its KHR rewrite, as matmul's). Every other pass runs
// attention.comp.
constexpr std::string_view flash_file(Layout l) {
  return l == Layout::Coop || l == Layout::CoopKhr ? "attention_flash_coop.comp" : "attention_flash.comp";
}

constexpr const FamilyInfo& family(Family f) {
  for (const FamilyInfo& i : kFamilies)
    if (i.family == f) return i;
  return kFamilies[0];  // unreachable: every family is in the table
}

constexpr bool fits() {
  for (const FamilyInfo& f : kFamilies)
    if (f.bindings.size() > kMaxBindings || f.push.size() > push::kMaxWords) return false;
  return true;
}
static_assert(fits(), "a family has more bindings or push words than plans store");

}  // namespace lathe::kernels
