// The vocabulary every layer shares: the spec parser, the emitters, the
// generated code, the kernel names, the CPU reference and the runtime all
// spell dtypes, roles, activations, norm kinds and RoPE pairings through the
// tables here (one table per vocabulary: its spec key and its C++
// enumerator). Header-only, no dependencies, usable in constant expressions.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace lathe {

// Q* are ggml's block formats (runtime/weights/quant.hpp): a row is stored as
// blocks of `block_elements` values in `block_bytes` bytes each.
enum class DType : uint8_t { F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K };
// out_in: torch.nn.Linear's [out, in]; in_out: GPT-2's Conv1D [in, out].
enum class Layout : uint8_t { OutIn, InOut };
enum class Activation : uint8_t { SiLU, GeluErf, GeluTanh, ReLU, GeluQuick };
enum class NormKind : uint8_t { RMSNorm, LayerNorm };
// How an encoder's rows become one vector per input (sentence-transformers'
// pooling): the first row (CLS), the mean of the rows, or the last row.
enum class Pooling : uint8_t { None, Cls, Mean, Last };
// neox: rotate-half pairs (i, i + r/2) (HF Llama); interleaved: pairs (2i, 2i+1) (GPT-J, GGUF).
enum class RopePairing : uint8_t { Neox, Interleaved };
// The rows of a fused q/k/v projection as stored: blocks q | k | v (GPT-2,
// Phi-3, Falcon-7B's multi-query); per_head [q k v] of head 0, then head 1, …
// (GPT-NeoX, BLOOM); grouped: per KV head its query heads, then k, then v
// (Falcon's new decoder architecture). The kernels read blocks: the upload
// reorders the others.
enum class QkvLayout : uint8_t { Blocks, PerHead, Grouped };

// Tensor roles: each names one tensor (or a bias beside a weight) per layer.
enum class Role : uint8_t {
  Embed, PosEmbed, TokenTypes, RelBias, EmbedNorm,
  AttnNorm, AttnPostNorm, MlpNorm, MlpPostNorm,
  Q, K, V, Qkv, O, QNorm, KNorm,
  Gate, Up, GateUp, Down,
  Router, ExpertGate, ExpertUp, ExpertDown,
  SharedGate, SharedUp, SharedDown, SharedExpertGate,
  FinalNorm, LmHead,
  // An encoder–decoder's: the encoder stack's own tables and norms (its
  // layers' tensors take the per-layer roles above), and each decoder
  // layer's cross-attention: its norm, a query projection of the decoder's
  // stream, key and value projections of the encoder's output, and the
  // output projection.
  EncoderPosEmbed, EncoderRelBias, EncoderEmbedNorm, EncoderFinalNorm,
  CrossNorm, CrossQ, CrossK, CrossV, CrossO,
  // A bias of the logits kept apart from the head (BART's final_logits_bias):
  // its tensor's name is its path itself, without ".bias".
  LogitsBias,
  // DeepSeek-V3's per-expert correction bias [E] (e_score_correction_bias):
  // added to the router's scores to choose the experts, not to weight them.
  // Its name is its path itself, without ".bias".
  RouterBias,
  // A Mamba layer (transformers' MambaMixer): its pre-norm, in_proj
  // [2·d_inner, d] (x, then the gate z), the depthwise conv1d [d_inner, 1,
  // d_conv] and its bias, x_proj [dt_rank + 2·d_state, d_inner] (dt, B, C),
  // dt_proj [d_inner, dt_rank] with its bias, A_log [d_inner, d_state] and D
  // [d_inner] (parameters, named by their path itself), out_proj [d, d_inner].
  // A Mamba-2 layer (Mamba2Mixer) has no x_proj or dt_proj: in_proj [2·d_inner
  // + 2·groups·d_state + heads, d], the conv over d_inner + 2·groups·d_state
  // channels, dt_bias, A_log and D [heads] (parameters), and the gated RMS
  // norm's scale [d_inner] (mixer.norm) before out_proj.
  SsmNorm, SsmIn, SsmConv, SsmX, SsmDt, SsmA, SsmD, SsmOut, SsmDtBias, SsmGateNorm,
  // Multi-head latent attention (DeepSeek-V2/V3): q_a_proj [q_lora_rank, d]
  // and its norm, q_b_proj [heads·(nope + rope), q_lora_rank] (or role Q of
  // that shape without a q latent); kv_a_proj_with_mqa [kv_lora_rank + rope,
  // d] (the latent, then the rotary key), the latent's norm, and kv_b_proj
  // [heads·(nope + v), kv_lora_rank], each head's W_UK rows then its W_UV
  // rows, which the attention reads as f32 arrays (absorbed, per head).
  // llama.cpp's files split kv_b_proj (spec mla.split_kv_b): k_b, each
  // head's W_UK transposed, [heads·kv_lora_rank, nope] (stored [heads,
  // kv_lora_rank, nope]), and v_b, each head's W_UV, [heads·v, kv_lora_rank].
  QA, QANorm, QB, KvA, KvANorm, KvB, KB, VB,
  // A vision tower ([vision]; its layers take the per-layer roles above, its
  // table of learned positions PosEmbed, its norms of the patch embeddings
  // and of the last layer's output EmbedNorm and FinalNorm): the patch
  // embedding, a convolution [hidden, channels, patch, patch] with stride
  // patch (a matrix [hidden, channels·patch²] of the unfolded patches), the
  // class token's embedding [hidden] (CLIP's class_embedding, named by its
  // path itself), and the projector into the decoder's width: its norm, its
  // first and second linear layers, and Mistral 3's patch merger [hidden,
  // hidden·merge²].
  PatchEmbed, ClassEmbed, ProjNorm, ProjIn, ProjOut, PatchMerge,
  // Llama 3.2 Vision (Mllama): the tanh gates of a layer's attention and MLP
  // branches (a decoder's cross-attention layers; the tower's global layers),
  // scalars named by their path itself; the tower's tile-aware positions:
  // the gated table of each tile's patch positions [tile kinds, tiles,
  // patches, hidden] and its gate, and the embeddings of each tile before and
  // after the local layers [tile kinds, tiles·hidden] with their gates; the
  // cross-attention's RMS norms of q and k per head.
  AttnGate, MlpGate, TilePosEmbed, PosGate, PreTileEmbed, PreTileGate, PostTileEmbed, PostTileGate,
  CrossQNorm, CrossKNorm,
};

// A tensor named by its module path itself, without ".weight" or ".bias":
// BART's final_logits_bias, DeepSeek-V3's e_score_correction_bias, Mamba's A_log
// and D, Mamba-2's dt_bias (nn.Parameters of the mixer), CLIP's class_embedding
// and Mllama's gates.
constexpr bool bare_name(Role r) {
  return r == Role::LogitsBias || r == Role::RouterBias || r == Role::SsmA || r == Role::SsmD || r == Role::SsmDtBias ||
         r == Role::ClassEmbed || r == Role::AttnGate || r == Role::MlpGate || r == Role::PosGate ||
         r == Role::PreTileGate || r == Role::PostTileGate;
}

// A state-space layer's parameters that stay f32 vectors-like on the device
// whatever their rank: the conv taps (rank 3 as stored) and A_log (rank 2).
constexpr bool is_ssm_param(Role r) {
  return r == Role::SsmConv || r == Role::SsmA || r == Role::SsmD || r == Role::SsmDtBias;
}

// The dtype a stored matrix has on the device, as the kernels read it: every
// dtype is kept, block formats as blocks (device_row below). (Vectors, norm
// scales and biases, are f32 on the device whatever stored.)
constexpr DType device_dtype(DType stored) { return stored; }

// ggml's K-quants group 256 values into a super-block (QK_K), split into
// sub-blocks of 16 or 32 with their own 6- or 8-bit scales.
inline constexpr int64_t kSuperBlock = 256;

// How a dtype lays out its values in a GGUF file: `elements` values per block
// of `bytes` bytes (1 and the element size for f32/f16/bf16), and the ggml
// type id the file names it by (ggml.h's enum ggml_type).
struct DTypeLayout {
  int64_t elements;
  int64_t bytes;
  uint32_t ggml_type;
};
constexpr DTypeLayout dtype_layout(DType d) {
  switch (d) {
    case DType::F32: return {1, 4, 0};
    case DType::F16: return {1, 2, 1};
    case DType::BF16: return {1, 2, 30};
    case DType::Q8_0: return {32, 34, 8};    // f16 d, 32 × int8
    case DType::Q4_0: return {32, 18, 2};    // f16 d, 32 × 4 bits
    case DType::Q4_1: return {32, 20, 3};    // f16 d, f16 m, 32 × 4 bits
    case DType::Q5_0: return {32, 22, 6};    // f16 d, 32 high bits, 32 × 4 bits
    case DType::Q5_1: return {32, 24, 7};    // f16 d, f16 m, 32 high bits, 32 × 4 bits
    case DType::Q4_K: return {kSuperBlock, 144, 12};  // f16 d, dmin, 12 scale bytes, 256 × 4 bits
    case DType::Q5_K: return {kSuperBlock, 176, 13};  // as Q4_K, then 256 high bits
    case DType::Q6_K: return {kSuperBlock, 210, 14};  // 256 × 4 + 256 × 2 bits, 16 int8 scales, f16 d
  }
  return {1, 4, 0};
}
// Stored in blocks of several values (not one value per element).
constexpr bool is_block_dtype(DType d) { return dtype_layout(d).elements > 1; }

// How a block dtype's matrix rows lie on the device, one plan for the kernel
// constants (the generator) and the repacking (the upload). ggml's blocks
// (18 to 210 bytes) are mostly not whole 16-byte texels, the unit the kernels
// read, so each row is split in planes: the blocks' bodies (quants, and a
// K-quant's sub-block scales) end to end, whole texels each; then, per side
// field, that field of every block end to end, padded to a texel: Q5_0/Q5_1's
// 32 high bits, then the f16 scale d (with the f16 offset m: Q4_1, Q5_1).
// Q4_K and Q5_K blocks are whole texels already and have no side planes.
// Only 32-bit loads and bit arithmetic read them: no 8/16-bit storage or
// integer dot products needed, one path for every device.
struct BlockField {
  int32_t offset = 0, bytes = 0;  // in ggml's block; bytes 0: none
};
struct DeviceBlocks {
  BlockField body, qh, scale;
};
constexpr DeviceBlocks device_blocks(DType d) {
  switch (d) {
    case DType::Q8_0: return {{2, 32}, {}, {0, 2}};
    case DType::Q4_0: return {{2, 16}, {}, {0, 2}};
    case DType::Q4_1: return {{4, 16}, {}, {0, 4}};
    case DType::Q5_0: return {{6, 16}, {2, 4}, {0, 2}};
    case DType::Q5_1: return {{8, 16}, {4, 4}, {0, 4}};
    case DType::Q4_K: return {{0, 144}, {}, {}};
    case DType::Q5_K: return {{0, 176}, {}, {}};
    case DType::Q6_K: return {{0, 208}, {}, {208, 2}};  // ql, qh, scales; then d
    default: return {};
  }
}
// One matrix row of `cols` values on the device, in 16-byte texels: the
// whole row, and where its qh and scale planes start.
struct DeviceRow {
  int64_t texels, qh_at, scale_at;
};
constexpr DeviceRow device_row(DType d, int64_t cols) {
  const DTypeLayout l = dtype_layout(d);
  if (!is_block_dtype(d)) return {(cols * l.bytes + 15) / 16, 0, 0};
  const int64_t blocks = cols / l.elements;
  const DeviceBlocks b = device_blocks(d);
  const int64_t body = blocks * b.body.bytes / 16, qh = (blocks * b.qh.bytes + 15) / 16;
  return {body + qh + (blocks * b.scale.bytes + 15) / 16, body, body + qh};
}

// The values a device row of a matrix of `cols` columns holds: a block
// dtype's cols (whole blocks); any other's padded to whole 16-byte texels,
// the padding zeros (a patch embedding's 3 · 14² = 588 f16 columns: 592).
constexpr int64_t device_cols(DType d, int64_t cols) {
  if (is_block_dtype(d)) return cols;
  return device_row(d, cols).texels * 16 / dtype_layout(d).bytes;
}

// The bytes a checkpoint tensor of `rows` × `cols` (rank 2; rank 1: `rows`
// values) takes on the device: a matrix's rows as device_row lays them out
// (whole texels: block rows repacked, others padded to device_cols); a
// vector in f32.
constexpr int64_t device_tensor_bytes(DType d, size_t rank, int64_t rows, int64_t cols) {
  if (rank != 2) return rows * 4;
  return rows * device_row(d, cols).texels * 16;
}

// The most bytes one binding of a matrix holds unless a spec says otherwise
// ([weights] max_part_bytes): maxTexelBufferElements (2^27 on lavapipe, NVIDIA
// and Intel) 16-byte texels. A larger matrix is split into row ranges.
inline constexpr int64_t kDefaultMaxPartBytes = int64_t{1} << 31;

// A matrix multiplied with activations: the projections of attention, MLP
// and experts (an in_out layout stores these transposed). Norms, the
// embedding tables and the router's peers are not.
constexpr bool is_linear(Role r) {
  switch (r) {
    case Role::Q: case Role::K: case Role::V: case Role::Qkv: case Role::O:
    case Role::Gate: case Role::Up: case Role::GateUp: case Role::Down:
    case Role::Router: case Role::ExpertGate: case Role::ExpertUp: case Role::ExpertDown:
    case Role::SharedGate: case Role::SharedUp: case Role::SharedDown: case Role::SharedExpertGate:
    case Role::CrossQ: case Role::CrossK: case Role::CrossV: case Role::CrossO:
    case Role::SsmIn: case Role::SsmX: case Role::SsmDt: case Role::SsmOut:
    case Role::QA: case Role::QB: case Role::KvA: case Role::KvB: case Role::KB: case Role::VB:
    case Role::ProjIn: case Role::ProjOut: case Role::PatchMerge:
      return true;
    default:
      return false;
  }
}

// T5's relative position bias, [buckets, heads]: a table of f32 scalars the
// attention kernel indexes, not a matrix.
constexpr bool is_rel_bias(Role r) { return r == Role::RelBias || r == Role::EncoderRelBias; }

// Whether the kernels read a tensor as a matrix (a texel buffer, [rows][cols]):
// rank 2, or a one-row linear stored as a vector, [1, N] (llama.cpp's
// Qwen2-MoE shared-expert gate, ffn_gate_inp_shexp [hidden]).
// (T5's relative position bias is not: is_rel_bias; nor a Mamba layer's
// conv taps, A_log, D and dt_proj, f32 arrays ssm_conv and ssm_scan index.)
constexpr bool read_as_matrix(Role role, bool bias, size_t rank) {
  if (is_ssm_param(role) || role == Role::SsmDt || role == Role::KvB || role == Role::KB || role == Role::VB) return false;
  // (Rank 4: a patch embedding's convolution, [rows][channels · kernel²].)
  return (rank == 2 && !is_rel_bias(role)) || (rank == 1 && is_linear(role) && !bias) || (rank == 4 && !bias);
}

// Where row `row` of a fused q/k/v tensor stored in `layout` goes in the
// q | k | v order the kernels read (heads query heads and kv_heads KV heads
// of head_dim rows each).
constexpr int64_t qkv_blocks_row(QkvLayout layout, int64_t row, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  const int64_t i = row % head_dim, unit = row / head_dim;  // dim i of the unit-th head-sized block
  switch (layout) {
    case QkvLayout::Blocks: return row;
    case QkvLayout::PerHead: return ((unit % 3) * heads + unit / 3) * head_dim + i;  // [q k v] of each head
    case QkvLayout::Grouped: {  // per KV head g: its heads / kv_heads query heads, then k, then v
      const int64_t group = heads / kv_heads, g = unit / (group + 2), slot = unit % (group + 2);
      return (slot < group ? g * group + slot : slot == group ? heads + g : heads + kv_heads + g) * head_dim + i;
    }
  }
  return row;
}

// A norm's scale (or shift, with a bias): of a block, of q/k, or the final one.
constexpr bool is_norm(Role r) {
  switch (r) {
    case Role::EmbedNorm: case Role::AttnNorm: case Role::AttnPostNorm: case Role::MlpNorm: case Role::MlpPostNorm:
    case Role::QNorm: case Role::KNorm: case Role::FinalNorm:
    case Role::EncoderEmbedNorm: case Role::EncoderFinalNorm: case Role::CrossNorm: case Role::SsmNorm:
    case Role::SsmGateNorm: case Role::QANorm: case Role::KvANorm: case Role::ProjNorm: case Role::CrossQNorm:
    case Role::CrossKNorm:
      return true;
    default:
      return false;
  }
}

// One tensor of a checkpoint, as the generated manifest lists it.
struct ManifestEntry {
  Role role;
  bool bias;       // "<path>.bias" rather than "<path>.weight"
  int32_t layer;   // -1: not per layer
  int32_t expert;  // -1: not per expert
  std::string_view name;
  uint8_t rank;
  // As stored; shape[1] is 1 for rank 1. Rank 3 is a depthwise conv1d's
  // weight stored [rows, 1, cols] (Mamba's [d_inner, 1, d_conv]): shape holds
  // [rows, cols], as the device holds it (stored_shape() gives it back).
  std::array<int64_t, 2> shape;
  DType dtype;
  // ≥ 0: this entry is index `slice` of dim 0 of the stacked tensor `name`
  // ([experts][shape…]: llama.cpp's ffn_*_exps); -1: the tensor is `name`.
  int32_t slice = -1;
  // Rank 4: a convolution's weight stored [rows, channels, kernel, kernel]
  // (a vision tower's patch embedding), held as [rows, channels·kernel²].
  int32_t kernel = 0;
  // A matrix stored [in, out] (TensorSpec::in_out): the upload transposes it.
  bool in_out = false;

  constexpr int64_t elements() const { return shape[0] * shape[1]; }
  // The shape a checkpoint stores it in.
  std::vector<int64_t> stored_shape() const {
    if (rank == 4) return {shape[0], shape[1] / (int64_t{kernel} * kernel), kernel, kernel};
    if (rank == 3) return {shape[0], 1, shape[1]};
    if (rank == 2) return {shape[0], shape[1]};
    return {shape[0]};
  }
};

// A state-space layer's parameter as a trained checkpoint has it, for
// random weights that exercise what they feed (a uniform draw u in [0, 1)):
// A_log = log(A) with A in [1, 16) (A itself stored: −A), dt's bias the
// inverse softplus of a dt log-uniform in [0.001, 0.1) (mamba_ssm's
// initialization: the scan then keeps a long memory), D in [0.5, 1.5).
// nullopt for every other tensor.
inline std::optional<double> ssm_parameter(Role role, bool bias, bool a_log, double u) {
  if (role == Role::SsmA) return a_log ? std::log(1.0 + 15.0 * u) : -(1.0 + 15.0 * u);
  if (role == Role::SsmDtBias || (role == Role::SsmDt && bias)) {
    const double dt = std::exp(std::log(0.001) + u * (std::log(0.1) - std::log(0.001)));
    return dt + std::log(-std::expm1(-dt));
  }
  if (role == Role::SsmD) return 0.5 + u;
  return std::nullopt;
}

// Whether a checkpoint's tensor of shape `found` holds the values of a
// manifest tensor stored as `expected`, in their order: the same shape, or
// a reshape llama.cpp and others write — a vector as a row [1, n], a column
// [n, 1] (llama.cpp's Mamba-2 A and D) or groups [g, n / g] (its Mamba-2
// grouped norm), a depthwise conv's [r, 1, c] as [r, c], a matrix's rows
// grouped [g, r / g, c] (llama.cpp's attn_k_b and attn_v_b, a head each).
inline bool same_values(std::span<const int64_t> expected, std::span<const int64_t> found) {
  if (std::equal(expected.begin(), expected.end(), found.begin(), found.end())) return true;
  if (expected.size() == 2 && found.size() == 3)
    return found[0] > 0 && found[0] * found[1] == expected[0] && found[2] == expected[1];
  if (expected.size() == 1 && found.size() == 2) return found[0] * found[1] == expected[0] && found[0] > 0;
  if (expected.size() == 3 && expected[1] == 1 && found.size() == 2)
    return found[0] == expected[0] && found[1] == expected[2];
  return false;
}

// One entry of a vocabulary's table: the spec key ("attn_norm", as specs,
// reports and kernel names spell it) and the C++ enumerator ("AttnNorm", as
// generated code spells it).
template <class E>
struct Spelling {
  E value;
  std::string_view key;
  std::string_view enumerator;
};

inline constexpr Spelling<Role> kRoleSpellings[] = {
    {Role::Embed, "embed", "Embed"},
    {Role::PosEmbed, "pos_embed", "PosEmbed"},
    {Role::TokenTypes, "token_types", "TokenTypes"},
    {Role::RelBias, "rel_bias", "RelBias"},
    {Role::EmbedNorm, "embed_norm", "EmbedNorm"},
    {Role::AttnNorm, "attn_norm", "AttnNorm"},
    {Role::AttnPostNorm, "attn_post_norm", "AttnPostNorm"},
    {Role::MlpNorm, "mlp_norm", "MlpNorm"},
    {Role::MlpPostNorm, "mlp_post_norm", "MlpPostNorm"},
    {Role::Q, "q", "Q"},
    {Role::K, "k", "K"},
    {Role::V, "v", "V"},
    {Role::Qkv, "qkv", "Qkv"},
    {Role::O, "o", "O"},
    {Role::QNorm, "q_norm", "QNorm"},
    {Role::KNorm, "k_norm", "KNorm"},
    {Role::Gate, "gate", "Gate"},
    {Role::Up, "up", "Up"},
    {Role::GateUp, "gate_up", "GateUp"},
    {Role::Down, "down", "Down"},
    {Role::Router, "router", "Router"},
    {Role::ExpertGate, "expert_gate", "ExpertGate"},
    {Role::ExpertUp, "expert_up", "ExpertUp"},
    {Role::ExpertDown, "expert_down", "ExpertDown"},
    {Role::SharedGate, "shared_gate", "SharedGate"},
    {Role::SharedUp, "shared_up", "SharedUp"},
    {Role::SharedDown, "shared_down", "SharedDown"},
    {Role::SharedExpertGate, "shared_expert_gate", "SharedExpertGate"},
    {Role::FinalNorm, "final_norm", "FinalNorm"},
    {Role::LmHead, "lm_head", "LmHead"},
    {Role::EncoderPosEmbed, "encoder_pos_embed", "EncoderPosEmbed"},
    {Role::EncoderRelBias, "encoder_rel_bias", "EncoderRelBias"},
    {Role::EncoderEmbedNorm, "encoder_embed_norm", "EncoderEmbedNorm"},
    {Role::EncoderFinalNorm, "encoder_final_norm", "EncoderFinalNorm"},
    {Role::CrossNorm, "cross_norm", "CrossNorm"},
    {Role::CrossQ, "cross_q", "CrossQ"},
    {Role::CrossK, "cross_k", "CrossK"},
    {Role::CrossV, "cross_v", "CrossV"},
    {Role::CrossO, "cross_o", "CrossO"},
    {Role::LogitsBias, "logits_bias", "LogitsBias"},
    {Role::RouterBias, "router_bias", "RouterBias"},
    {Role::SsmNorm, "ssm_norm", "SsmNorm"},
    {Role::SsmIn, "ssm_in", "SsmIn"},
    {Role::SsmConv, "ssm_conv", "SsmConv"},
    {Role::SsmX, "ssm_x", "SsmX"},
    {Role::SsmDt, "ssm_dt", "SsmDt"},
    {Role::SsmA, "ssm_a", "SsmA"},
    {Role::SsmD, "ssm_d", "SsmD"},
    {Role::SsmOut, "ssm_out", "SsmOut"},
    {Role::SsmDtBias, "ssm_dt_bias", "SsmDtBias"},
    {Role::SsmGateNorm, "ssm_gate_norm", "SsmGateNorm"},
    {Role::QA, "q_a", "QA"},
    {Role::QANorm, "q_a_norm", "QANorm"},
    {Role::QB, "q_b", "QB"},
    {Role::KvA, "kv_a", "KvA"},
    {Role::KvANorm, "kv_a_norm", "KvANorm"},
    {Role::KvB, "kv_b", "KvB"},
    {Role::KB, "k_b", "KB"},
    {Role::VB, "v_b", "VB"},
    {Role::PatchEmbed, "patch_embed", "PatchEmbed"},
    {Role::ClassEmbed, "class_embed", "ClassEmbed"},
    {Role::ProjNorm, "proj_norm", "ProjNorm"},
    {Role::ProjIn, "proj_in", "ProjIn"},
    {Role::ProjOut, "proj_out", "ProjOut"},
    {Role::PatchMerge, "patch_merge", "PatchMerge"},
    {Role::AttnGate, "attn_gate", "AttnGate"},
    {Role::MlpGate, "mlp_gate", "MlpGate"},
    {Role::TilePosEmbed, "tile_pos_embed", "TilePosEmbed"},
    {Role::PosGate, "pos_gate", "PosGate"},
    {Role::PreTileEmbed, "pre_tile_embed", "PreTileEmbed"},
    {Role::PreTileGate, "pre_tile_gate", "PreTileGate"},
    {Role::PostTileEmbed, "post_tile_embed", "PostTileEmbed"},
    {Role::PostTileGate, "post_tile_gate", "PostTileGate"},
    {Role::CrossQNorm, "cross_q_norm", "CrossQNorm"},
    {Role::CrossKNorm, "cross_k_norm", "CrossKNorm"},
};
inline constexpr Spelling<DType> kDTypeSpellings[] = {
    {DType::F32, "f32", "F32"},    {DType::F16, "f16", "F16"},    {DType::BF16, "bf16", "BF16"},
    {DType::Q8_0, "q8_0", "Q8_0"}, {DType::Q4_0, "q4_0", "Q4_0"}, {DType::Q4_1, "q4_1", "Q4_1"},
    {DType::Q5_0, "q5_0", "Q5_0"}, {DType::Q5_1, "q5_1", "Q5_1"}, {DType::Q4_K, "q4_k", "Q4_K"},
    {DType::Q5_K, "q5_k", "Q5_K"}, {DType::Q6_K, "q6_k", "Q6_K"}};
inline constexpr Spelling<Layout> kLayoutSpellings[] = {{Layout::OutIn, "out_in", "OutIn"}, {Layout::InOut, "in_out", "InOut"}};
// The kernels' ACT constant is an activation's index here plus one (0: none);
// the generator writes the ACT_* names of common.glsl from this table.
inline constexpr Spelling<Activation> kActivationSpellings[] = {{Activation::SiLU, "silu", "SiLU"},
                                                                {Activation::GeluErf, "gelu_erf", "GeluErf"},
                                                                {Activation::GeluTanh, "gelu_tanh", "GeluTanh"},
                                                                {Activation::ReLU, "relu", "ReLU"},
                                                                {Activation::GeluQuick, "gelu_quick", "GeluQuick"}};
inline constexpr Spelling<NormKind> kNormKindSpellings[] = {{NormKind::RMSNorm, "rmsnorm", "RMSNorm"},
                                                            {NormKind::LayerNorm, "layernorm", "LayerNorm"}};
inline constexpr Spelling<RopePairing> kRopePairingSpellings[] = {{RopePairing::Neox, "neox", "Neox"},
                                                                  {RopePairing::Interleaved, "interleaved", "Interleaved"}};
inline constexpr Spelling<QkvLayout> kQkvLayoutSpellings[] = {{QkvLayout::Blocks, "blocks", "Blocks"},
                                                              {QkvLayout::PerHead, "per_head", "PerHead"},
                                                              {QkvLayout::Grouped, "grouped", "Grouped"}};
inline constexpr Spelling<Pooling> kPoolingSpellings[] = {
    {Pooling::None, "none", "None"}, {Pooling::Cls, "cls", "Cls"}, {Pooling::Mean, "mean", "Mean"}, {Pooling::Last, "last", "Last"}};

// The table of a vocabulary, found by its enum type (a tag argument).
constexpr std::span<const Spelling<Role>> spellings(Role) { return kRoleSpellings; }
constexpr std::span<const Spelling<DType>> spellings(DType) { return kDTypeSpellings; }
constexpr std::span<const Spelling<Layout>> spellings(Layout) { return kLayoutSpellings; }
constexpr std::span<const Spelling<Activation>> spellings(Activation) { return kActivationSpellings; }
constexpr std::span<const Spelling<NormKind>> spellings(NormKind) { return kNormKindSpellings; }
constexpr std::span<const Spelling<RopePairing>> spellings(RopePairing) { return kRopePairingSpellings; }
constexpr std::span<const Spelling<QkvLayout>> spellings(QkvLayout) { return kQkvLayoutSpellings; }
constexpr std::span<const Spelling<Pooling>> spellings(Pooling) { return kPoolingSpellings; }

template <class E>
constexpr const Spelling<E>& spelling(E v) {
  for (const Spelling<E>& s : spellings(E{}))
    if (s.value == v) return s;
  return spellings(E{})[0];  // unreachable: every enumerator is in its table
}

template <class E>
constexpr std::optional<E> from_key(std::string_view key) {
  for (const Spelling<E>& s : spellings(E{}))
    if (s.key == key) return s.value;
  return std::nullopt;
}

// Where the vocabulary's tables themselves are the source, their order is the
// number a kernel constant carries (activations: ACT = index + 1).
template <class E>
constexpr uint32_t index_of(E v) {
  uint32_t i = 0;
  for (const Spelling<E>& s : spellings(E{})) {
    if (s.value == v) return i;
    ++i;
  }
  return i;
}

constexpr std::string_view dtype_name(DType v) { return spelling(v).key; }

// The dtype of a ggml type id, nullopt for the types lathe does not read.
constexpr std::optional<DType> dtype_of_ggml_type(uint32_t id) {
  for (const Spelling<DType>& s : kDTypeSpellings)
    if (dtype_layout(s.value).ggml_type == id) return s.value;
  return std::nullopt;
}

}  // namespace lathe
