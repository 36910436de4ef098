// The validated architecture spec: the IR every later stage reads.
// Every value is known at generation time; each remembers where in the TOML
// file it was written (Spec::where), so later stages can report errors there.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/contract.hpp"
#include "core/loc.hpp"

namespace lathe::spec {

// pre: x + F(N(x)); post: N(x + F(x)); sandwich: x + N2(F(N1(x))) (Gemma 2/3);
// parallel: x + Attn(N(x)) + MLP(N'(x)) (GPT-J, NeoX, Phi-2);
// branch_output: x + N(F(x)) (OLMo 2).
enum class NormPlacement { Pre, Post, Sandwich, Parallel, BranchOutput };
// per_head: RMSNorm over head_dim of each head (Qwen3); whole: over the whole
// q and k projections before the split into heads (OLMo 2).
enum class QKNorm { None, PerHead, Whole };
// relative: T5's bucketed relative position bias, a learned scalar per
// (bucket of j − i, head) added to the scores.
enum class PositionKind { Rope, Alibi, Learned, Sinusoidal, None, Relative };
enum class RopeScaling { None, Linear, DynamicNtk, Yarn, Llama3 };
enum class FusedGateUp { None, GateUp, UpGate };  // the order of the halves of a fused tensor
// A router's scores: softmax over all experts (Mixtral, DeepSeek-V2) or the
// sigmoid of each logit (DeepSeek-V3).
enum class MoeScoring { Softmax, Sigmoid };
// A group's score under group-limited routing: its best expert's
// (DeepSeek-V2) or the sum of its best two (DeepSeek-V3).
enum class GroupScore { Max, Top2Sum };
// The stack's shape: a causal decoder with an LM head (GPT, Llama), a
// bidirectional encoder whose output is its final hidden states (BERT), or
// both, the decoder's layers attending to the encoder's output through
// cross-attention (T5, BART).
enum class Stack { Decoder, Encoder, EncoderDecoder };
// The kind of a model's state-space layers ([ssm] kind): none, Mamba (v1)
// or Mamba-2 blocks in every layer.
enum class SsmKind { None, Mamba, Mamba2 };
using lathe::Pooling;
using lathe::Activation;
using lathe::DType;
using lathe::Layout;
using lathe::NormKind;
using lathe::QkvLayout;
using lathe::Role;
using lathe::RopePairing;

// The spec-only vocabularies' tables (core/contract.hpp holds the shared ones).
inline constexpr Spelling<NormPlacement> kNormPlacementSpellings[] = {
    {NormPlacement::Pre, "pre", "Pre"},
    {NormPlacement::Post, "post", "Post"},
    {NormPlacement::Sandwich, "sandwich", "Sandwich"},
    {NormPlacement::Parallel, "parallel", "Parallel"},
    {NormPlacement::BranchOutput, "branch_output", "BranchOutput"}};
inline constexpr Spelling<QKNorm> kQKNormSpellings[] = {
    {QKNorm::None, "none", "None"}, {QKNorm::PerHead, "per_head", "PerHead"}, {QKNorm::Whole, "whole", "Whole"}};
inline constexpr Spelling<PositionKind> kPositionKindSpellings[] = {{PositionKind::Rope, "rope", "Rope"},
                                                                    {PositionKind::Alibi, "alibi", "Alibi"},
                                                                    {PositionKind::Learned, "learned", "Learned"},
                                                                    {PositionKind::Sinusoidal, "sinusoidal", "Sinusoidal"},
                                                                    {PositionKind::None, "none", "None"},
                                                                    {PositionKind::Relative, "relative", "Relative"}};
inline constexpr Spelling<RopeScaling> kRopeScalingSpellings[] = {{RopeScaling::None, "none", "None"},
                                                                  {RopeScaling::Linear, "linear", "Linear"},
                                                                  {RopeScaling::DynamicNtk, "dynamic_ntk", "DynamicNtk"},
                                                                  {RopeScaling::Yarn, "yarn", "Yarn"},
                                                                  {RopeScaling::Llama3, "llama3", "Llama3"}};
inline constexpr Spelling<FusedGateUp> kFusedGateUpSpellings[] = {
    {FusedGateUp::None, "none", "None"}, {FusedGateUp::GateUp, "gate_up", "GateUp"}, {FusedGateUp::UpGate, "up_gate", "UpGate"}};
inline constexpr Spelling<MoeScoring> kMoeScoringSpellings[] = {{MoeScoring::Softmax, "softmax", "Softmax"},
                                                                {MoeScoring::Sigmoid, "sigmoid", "Sigmoid"}};
inline constexpr Spelling<GroupScore> kGroupScoreSpellings[] = {{GroupScore::Max, "max", "Max"},
                                                                {GroupScore::Top2Sum, "top2_sum", "Top2Sum"}};
inline constexpr Spelling<Stack> kStackSpellings[] = {{Stack::Decoder, "decoder", "Decoder"},
                                                      {Stack::Encoder, "encoder", "Encoder"},
                                                      {Stack::EncoderDecoder, "encoder-decoder", "EncoderDecoder"}};
inline constexpr Spelling<SsmKind> kSsmKindSpellings[] = {
    {SsmKind::None, "none", "None"}, {SsmKind::Mamba, "mamba", "Mamba"}, {SsmKind::Mamba2, "mamba2", "Mamba2"}};
constexpr std::span<const Spelling<Stack>> spellings(Stack) { return kStackSpellings; }
constexpr std::span<const Spelling<SsmKind>> spellings(SsmKind) { return kSsmKindSpellings; }
constexpr std::span<const Spelling<NormPlacement>> spellings(NormPlacement) { return kNormPlacementSpellings; }
constexpr std::span<const Spelling<QKNorm>> spellings(QKNorm) { return kQKNormSpellings; }
constexpr std::span<const Spelling<PositionKind>> spellings(PositionKind) { return kPositionKindSpellings; }
constexpr std::span<const Spelling<RopeScaling>> spellings(RopeScaling) { return kRopeScalingSpellings; }
constexpr std::span<const Spelling<FusedGateUp>> spellings(FusedGateUp) { return kFusedGateUpSpellings; }
constexpr std::span<const Spelling<MoeScoring>> spellings(MoeScoring) { return kMoeScoringSpellings; }
constexpr std::span<const Spelling<GroupScore>> spellings(GroupScore) { return kGroupScoreSpellings; }

const char* name(NormKind);
const char* name(NormPlacement);
const char* name(Activation);
const char* name(QKNorm);
const char* name(PositionKind);
const char* name(RopePairing);
const char* name(RopeScaling);
const char* name(FusedGateUp);
const char* name(MoeScoring);
const char* name(GroupScore);
const char* name(Stack);
const char* name(SsmKind);
const char* name(Pooling);
const char* name(DType);
const char* name(Layout);
const char* name(QkvLayout);
double bytes_per_element(DType);  // block types: bytes per block / values per block (Q8_0: 34 / 32)

struct Dims {
  int64_t hidden = 0;        // d
  int64_t layers = 0;        // an encoder–decoder: the decoder's
  int64_t encoder_layers = 0;  // an encoder–decoder's encoder layers; defaults to layers
  int64_t heads = 0;         // H_q
  int64_t kv_heads = 0;      // H_kv; defaults to heads (MHA)
  int64_t head_dim = 0;      // d_h; defaults to hidden / heads
  bool head_dim_explicit = false;
  int64_t intermediate = 0;  // MLP width (per expert under MoE unless moe.expert_intermediate)
  int64_t vocab = 0;
  int64_t max_context = 0;
};

struct Norm {
  NormKind kind = NormKind::RMSNorm;
  double eps = 1e-5;
  NormPlacement placement = NormPlacement::Pre;
  bool unit_offset = false;     // scale = 1 + w, added in fp32 (Gemma)
  bool bias = false;            // LayerNorm with a bias (default true for layernorm)
  bool final_norm = true;       // a norm before the LM head
  // Pre-norm: the first layer's attention norm (ModernBERT has none there:
  // its attention reads the embedding norm's output as is).
  bool first_attn_norm = true;
  bool parallel_shared = true;  // parallel placement: one norm feeds both branches
};

struct Attention {
  bool q_bias = false, k_bias = false, v_bias = false, o_bias = false;
  std::optional<double> scale;  // default 1/sqrt(head_dim)
  double softcap = 0;           // 0: none; else tanh(s / c) * c on the scores
  QKNorm qk_norm = QKNorm::None;
  int64_t sliding_window = 0;   // 0: none
  std::vector<bool> window_pattern;  // layer i is windowed iff pattern[i % size]; empty: all layers

  bool windowed(int64_t layer) const {
    if (sliding_window == 0) return false;
    return window_pattern.empty() || window_pattern[static_cast<size_t>(layer) % window_pattern.size()];
  }
  double effective_scale(int64_t head_dim) const;
};

struct RopeScalingParams {
  RopeScaling kind = RopeScaling::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_context = 0;  // llama3, yarn
  double beta_fast = 32.0;  // yarn
  double beta_slow = 1.0;   // yarn
  std::optional<double> attention_factor;  // yarn; default 0.1·ln(factor) + 1
  // DeepSeek's YaRN (its rope_scaling's mscale and mscale_all_dim, 0: not
  // given): with both, the attention factor defaults to
  // m(factor, mscale) / m(factor, mscale_all_dim), m(f, k) = 0.1·k·ln f + 1,
  // and the score scale to 1/sqrt(head width) · m(factor, mscale_all_dim)²
  // (the release's softmax_scale).
  double mscale = 0;
  double mscale_all_dim = 0;
};

struct Position {
  PositionKind kind = PositionKind::Rope;
  RopePairing pairing = RopePairing::Neox;
  int64_t rotary_dim = 0;   // defaults to head_dim
  double theta = 10000.0;
  std::optional<double> local_theta;  // theta of windowed layers (Gemma 3)
  RopeScalingParams scaling;
  int64_t offset = 0;       // learned: row of position p is p + offset (OPT: 2)
  int64_t table_size = 0;   // learned: rows of the position table; defaults to max_context + offset
  int64_t buckets = 32;        // relative: T5's relative_attention_num_buckets
  int64_t max_distance = 128;  // relative: distances from here on share the last bucket
  // 2D RoPE over a grid of rope_grid patches a side (a Pixtral tower's, set
  // by vision_tower; 0: 1D): a row's IO token holds its patch's row · grid +
  // column; the first half of the pairs turn by the row at the even ones of
  // the rotary frequencies, the second half by the column at the odd ones.
  int64_t rope_grid = 0;
};

struct Mlp {
  Activation activation = Activation::SiLU;
  bool gated = true;
  bool bias = false;  // biases on the up/gate and down projections
  FusedGateUp fused_gate_up = FusedGateUp::None;
};

struct Moe {
  int64_t experts = 0;  // 0: a dense MLP
  int64_t top_k = 0;
  bool norm_topk_prob = false;  // renormalize the top-k weights (Mixtral, Qwen3-MoE)
  int64_t expert_intermediate = 0;  // defaults to dims.intermediate
  int64_t shared_experts = 0;       // experts every token passes through (DeepSeek, Qwen2-MoE)
  int64_t shared_intermediate = 0;  // width of each shared expert; defaults to expert_intermediate
  bool shared_expert_gate = false;  // a sigmoid gate [1, d] on the shared expert output (Qwen2-MoE)
  // DeepSeek's routing. A token's scores are the softmax or the sigmoid of its
  // logits; the experts are chosen by score + correction_bias[e] (V3's
  // e_score_correction_bias, router_bias [E] f32), among the experts of the
  // topk_groups best of `groups` equal groups (a group scored by group_score);
  // the weights are the chosen experts' scores (no bias), renormalized when
  // norm_topk_prob, times routed_scaling_factor.
  MoeScoring scoring = MoeScoring::Softmax;
  bool correction_bias = false;
  int64_t groups = 1;  // DeepSeek n_group
  int64_t topk_groups = 0;  // topk_group; defaults to groups
  GroupScore group_score = GroupScore::Max;
  double routed_scaling_factor = 1.0;
  // Which layers are sparse (Qwen2/3-MoE decoder_sparse_step and
  // mlp_only_layers): layer l is iff l is not in dense_layers and
  // (l + 1) % sparse_step == 0; the others have the dense MLP of dims.intermediate.
  int64_t sparse_step = 1;
  std::vector<int64_t> dense_layers;
  bool enabled() const { return experts > 0; }
  // Any of DeepSeek's routing rules beyond Mixtral's softmax top-k.
  bool deepseek_routing() const {
    return scoring != MoeScoring::Softmax || correction_bias || groups > 1 || routed_scaling_factor != 1.0;
  }
  bool sparse(int64_t layer) const {
    if (!enabled() || (layer + 1) % sparse_step != 0) return false;
    for (int64_t l : dense_layers)
      if (l == layer) return false;
    return true;
  }
};

struct Embedding {
  bool tied = false;    // the LM head is the embedding matrix
  bool norm = false;    // a norm of the embeddings (BLOOM's word_embeddings_layernorm)
  double scale = 1.0;   // Gemma: sqrt(hidden)
  bool scale_sqrt_hidden = false;
  // Rows of a token-type table (BERT's segment embeddings, type_vocab_size);
  // 0: none. Inputs are single segments: row 0 is added to every token.
  int64_t token_types = 0;
  // Rows of the token table when it holds more than dims.vocab: tokens the
  // model reads but never writes (Llama 3.2 Vision's 8, its image token
  // among them). 0: dims.vocab. The LM head keeps dims.vocab rows.
  int64_t rows = 0;
};

// An encoder's sentence embedding: pooling of the final hidden states, then
// (normalize) division by its L2 norm.
struct PoolingSpec {
  Pooling kind = Pooling::None;
  bool normalize = false;
};

struct Output {
  double softcap = 0;  // final logit soft-capping (Gemma 2: 30)
  double scale = 1.0;  // logits = scale · head(x) (T5's tied head: hidden^-0.5)
  bool bias = false;   // a bias on the LM head (Phi-2)
};

const char* name(Role);
std::optional<Role> role_from_name(const std::string&);
std::vector<std::string> role_names();

struct Weights {
  DType dtype = DType::F32;  // of the matrices (embeddings, projections, LM head)
  // Exceptions by role ([weights.dtypes], llama.cpp's mixed _M files): one
  // dtype for the role's matrices in every layer, or one per layer.
  std::map<Role, std::vector<DType>> role_dtypes;
  // The dtype of role's matrix in `layer` (-1: not per layer).
  DType matrix_dtype(Role role, int64_t layer) const {
    auto it = role_dtypes.find(role);
    if (it == role_dtypes.end() || it->second.empty()) return dtype;
    const auto i = static_cast<size_t>(layer);
    return layer >= 0 && i < it->second.size() ? it->second[i] : it->second.front();
  }
  // Of the vectors (norm scales, biases): dtype by default, f32 under the
  // gguf preset or a q8_0 dtype (llama.cpp keeps vectors in f32).
  DType vector_dtype = DType::F32;
  Layout layout = Layout::OutIn;
  bool fused_qkv = false;
  QkvLayout qkv_layout = QkvLayout::Blocks;  // the rows of the fused q/k/v tensor
  // Module path per role; "{layer}" and "{expert}" are replaced, and the
  // tensors are "<path>.weight" and "<path>.bias".
  std::map<Role, std::string> names;
  // An encoder–decoder's encoder layers' paths ("{layer}" counts from the
  // encoder's first); `names` holds the decoder's and the stack tensors'.
  std::map<Role, std::string> encoder_names;
  std::string preset;  // the naming preset the names started from
  // Tensor-name patterns a checkpoint may hold beyond the model's weights
  // (GPT-2's causal-mask buffers "h.{layer}.attn.bias").
  std::vector<std::string> ignore;
  // The most bytes one binding of a matrix may hold: a larger one is split
  // into row ranges (plan::Part) for devices whose limits are lower.
  int64_t max_part_bytes = kDefaultMaxPartBytes;
};

// State-space layers (Mamba, transformers' MambaConfig; Mamba-2, its
// Mamba2Config). Each layer keeps, per sequence, a fixed state instead of a
// KV cache: the last d_conv − 1 inputs of its convolution and the scan's h,
// [d_inner][d_state], in f32.
//
// Mamba-2 (the SSD layer of "Transformers are SSMs", mamba_ssm's Mamba2):
// in_proj gives [z | x | B | C | dt] (d_inner, d_inner, groups·d_state twice,
// heads); the convolution runs over x, B and C; each of the heads (head_dim
// channels of x) has one scalar decay A and step dt, and reads the B and C
// of its group (heads / groups heads a group); the output, gated by SiLU(z),
// is RMS-normed per group of d_inner / groups channels before out_proj.
struct Ssm {
  SsmKind kind = SsmKind::None;
  int64_t d_state = 16;  // state_size (Mamba-2's default: 128)
  int64_t d_conv = 4;    // conv_kernel: taps of the causal depthwise convolution
  int64_t expand = 2;
  int64_t d_inner = 0;   // intermediate_size; defaults to expand · hidden
  int64_t dt_rank = 0;   // Mamba: time_step_rank; defaults to ceil(hidden / 16)
  int64_t heads = 0;     // Mamba-2: num_heads; defaults to d_inner / head_dim
  int64_t head_dim = 64;  // Mamba-2: channels a head
  int64_t groups = 1;    // Mamba-2: n_groups, each one B and C for heads / groups heads
  double dt_min = 0;     // Mamba-2: time_step_limit, the range dt is clamped to
  double dt_max = std::numeric_limits<double>::infinity();
  bool conv_bias = true;  // use_conv_bias
  bool bias = false;      // use_bias: in_proj's and out_proj's
  // The checkpoint holds A_log (A = −exp(A_log), transformers' and
  // mamba_ssm's parameter), or A itself (llama.cpp's ssm_a).
  bool a_log = true;
  // A hybrid (Bamba, Jamba): the layers whose mixer is attention, in order;
  // every other layer's is the state-space mixer. Each layer of a hybrid is
  // a decoder block, its mixer then its MLP, each behind its pre-norm.
  std::vector<int64_t> attention_layers;
  bool enabled() const { return kind != SsmKind::None; }
  bool mamba2() const { return kind == SsmKind::Mamba2; }
  bool hybrid() const { return enabled() && !attention_layers.empty(); }
  bool attention_at(int64_t layer) const {
    return std::find(attention_layers.begin(), attention_layers.end(), layer) != attention_layers.end();
  }
  // Layer `layer` is a state-space block (or a hybrid's layer with a state-space mixer).
  bool layer(int64_t layer) const { return enabled() && !attention_at(layer); }
  // Its state's index among the state-space layers (the plan's ConvState and
  // ScanState resources): the layers before it that are.
  int64_t state_index(int64_t layer) const {
    return layer - std::count_if(attention_layers.begin(), attention_layers.end(), [&](int64_t a) { return a < layer; });
  }
  // The convolution's channels: x (Mamba), or x, B and C (Mamba-2).
  int64_t conv_channels() const { return mamba2() ? d_inner + 2 * groups * d_state : d_inner; }
  // in_proj's output: [x | z] (Mamba), or [z | x | B | C | dt] (Mamba-2), and
  // where the convolution's input starts in it.
  int64_t in_width() const { return mamba2() ? d_inner + conv_channels() + heads : 2 * d_inner; }
  int64_t conv_offset() const { return mamba2() ? d_inner : 0; }
  // Whether dt is clamped at all (time_step_limit other than (0, Infinity)),
  // and its upper limit as generated code and kernels take it (0: none).
  bool dt_limited() const { return dt_min > 0 || dt_max < std::numeric_limits<double>::infinity(); }
  double dt_upper() const { return dt_max < std::numeric_limits<double>::infinity() ? dt_max : 0.0; }
  // A sequence's state of one layer, in bytes (f32): the convolution's
  // window and the scan's h.
  int64_t conv_state_bytes() const { return conv_channels() * (d_conv - 1) * 4; }
  int64_t scan_state_bytes() const { return d_inner * d_state * 4; }
};

// Multi-head latent attention (DeepSeek-V2/V3): keys and values come from a
// latent of kv_lora_rank values a token (kv_a_proj_with_mqa, then its RMS
// norm) through kv_b_proj's per-head up-projections, plus a rotary key of
// qk_rope_head_dim values shared by every head. The cache keeps the latent
// and the rotary key only, one "head" of kv_lora_rank + qk_rope_head_dim
// values; a query is absorbed into the latent's space (W_UKᵀ·q_nope) and a
// head's output leaves it through W_UV, so the latent is never expanded.
// Under [mla] dims.kv_heads is 1 and dims.head_dim kv_lora_rank +
// qk_rope_head_dim (the cache's and the attention kernel's geometry).
struct Mla {
  bool enabled = false;
  int64_t q_lora_rank = 0;  // 0: q_proj [heads·(nope + rope), hidden]; else q_a_proj, its norm, q_b_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // kv_b_proj as llama.cpp's files hold it: k_b (each head's W_UK
  // transposed) and v_b (each head's W_UV), roles k_b and v_b.
  bool split_kv_b = false;
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t cache_width() const { return kv_lora_rank + qk_rope_head_dim; }  // per token per layer
};

struct Cache {
  DType dtype = DType::F16;
};

// Images in ([vision]): a vision transformer beside the decoder, its
// projector into the decoder's width, and how its features meet the decoder.
//
// splice: the features of an image replace the rows of its image tokens in
// the prompt's embeddings (LLaVA, Pixtral, Gemma 3). The prompt holds the
// marker token once where an image goes; it is expanded as the checkpoint's
// processor writes it: prefix, then one row of image tokens per row of
// projected patches (each row followed by row_end, the last one's replaced
// by end, where given), then suffix.
// cross_attention: the decoder layers listed attend to the features through
// their own cross-attention, tanh-gated, with a cache of the features' K and
// V (Llama 3.2 Vision); the marker token stays one token.
enum class VisionConnection { Splice, CrossAttention };
// The tower's positions: a learned table of its patch positions (CLIP,
// SigLIP; with the class token's first), or 2D RoPE (Pixtral: each head's
// rotary pairs split between the patch's row and its column).
enum class VisionPositions { Learned, Rope2D };
// mlp: linear – φ – linear (LLaVA, Pixtral in LLaVA); merge_mlp: an RMS norm
// of the features, Mistral 3's patch merger (each merge × merge block of
// patches, concatenated, through one linear), then the mlp; pooled: average
// pooling of the patch grid down to tokens per image, a norm and one linear
// without bias (Gemma 3); linear: one linear (Llama 3.2 Vision, of the
// features of several layers side by side).
enum class ProjectorKind { Mlp, MergeMlp, Pooled, Linear };

inline constexpr Spelling<VisionConnection> kVisionConnectionSpellings[] = {
    {VisionConnection::Splice, "splice", "Splice"}, {VisionConnection::CrossAttention, "cross_attention", "CrossAttention"}};
inline constexpr Spelling<VisionPositions> kVisionPositionsSpellings[] = {
    {VisionPositions::Learned, "learned", "Learned"}, {VisionPositions::Rope2D, "rope_2d", "Rope2D"}};
inline constexpr Spelling<ProjectorKind> kProjectorKindSpellings[] = {{ProjectorKind::Mlp, "mlp", "Mlp"},
                                                                      {ProjectorKind::MergeMlp, "merge_mlp", "MergeMlp"},
                                                                      {ProjectorKind::Pooled, "pooled", "Pooled"},
                                                                      {ProjectorKind::Linear, "linear", "Linear"}};
constexpr std::span<const Spelling<VisionConnection>> spellings(VisionConnection) { return kVisionConnectionSpellings; }
constexpr std::span<const Spelling<VisionPositions>> spellings(VisionPositions) { return kVisionPositionsSpellings; }
constexpr std::span<const Spelling<ProjectorKind>> spellings(ProjectorKind) { return kProjectorKindSpellings; }
const char* name(VisionConnection);
const char* name(VisionPositions);
const char* name(ProjectorKind);

struct Projector {
  ProjectorKind kind = ProjectorKind::Mlp;
  Activation activation = Activation::GeluErf;  // between the mlp's linears
  bool bias = true;           // on the mlp's linears
  int64_t intermediate = 0;   // linear_1's output; defaults to the decoder's hidden
  int64_t merge = 2;          // merge_mlp: patches merged a side (spatial_merge_size)
  int64_t tokens = 0;         // pooled: tokens an image (a square: 256 = 16 × 16)
  // pooled: the square's side, the smallest whose square holds `tokens`.
  int64_t pooled_side() const {
    int64_t side = 0;
    while (side * side < tokens) ++side;
    return side;
  }
  NormKind norm = NormKind::RMSNorm;  // merge_mlp, pooled: the norm before
  bool norm_unit_offset = false;      // pooled: Gemma's 1 + w
  double eps = 1e-6;
};

// The image tokens of a splice connection (ids of the decoder's vocabulary;
// -1: none).
struct ImageTokens {
  int64_t marker = -1;   // the token a prompt holds once where an image goes
  int64_t image = -1;    // a row of features replaces each
  int64_t row_end = -1;  // after each row of patches (Pixtral's [IMG_BREAK])
  int64_t end = -1;      // in place of the last row's row_end (Pixtral's [IMG_END])
  std::vector<int64_t> prefix, suffix;  // around the image (Gemma 3: "\n\n<start_of_image>", "<end_of_image>\n\n")
};

// Llama 3.2 Vision: the tile arrangements an image of at most `tiles` tiles
// can take, {a, b} with a · b ≤ tiles, a outer, b inner
// (get_all_supported_aspect_ratios). An aspect ratio id is an index here
// plus 1.
inline std::vector<std::array<int64_t, 2>> tile_arrangements(int64_t tiles) {
  std::vector<std::array<int64_t, 2>> out;
  for (int64_t a = 1; a <= tiles; ++a)
    for (int64_t b = 1; a * b <= tiles; ++b) out.push_back({a, b});
  return out;
}

// Llama 3.2 Vision: the padding rows after a tile's `rows` (its class
// token's and patches'): MllamaVisionModel pads each tile to a multiple of 8.
inline int64_t tile_padding(int64_t rows) { return (8 - rows % 8) % 8; }

struct Vision {
  bool enabled = false;
  VisionConnection connection = VisionConnection::Splice;
  int64_t channels = 3;
  int64_t patch = 0;
  // Fixed size: images are resized to image_size × image_size (CLIP 336,
  // SigLIP 896). Variable size (longest_edge > 0, Pixtral): an image keeps
  // its aspect, its longer side at most longest_edge, each side rounded up
  // to whole patches; image_size is then the largest side the positions
  // cover.
  int64_t image_size = 0;
  int64_t longest_edge = 0;
  // Llama 3.2 Vision: an image is cut into up to `tiles` tiles of
  // image_size² each (0: one image, no tiles).
  int64_t tiles = 0;
  // The tower's transformer: its widths (dims.layers: the layers the
  // checkpoint holds; vocab and max_context unused), norms, attention, MLP.
  Dims dims;
  Norm norm;
  Attention attention;
  Mlp mlp;
  VisionPositions positions = VisionPositions::Learned;
  double rope_theta = 10000.0;  // rope_2d
  // rope_2d: the dims each rotation pair turns, as the decoder's
  // position.pairing says them (Pixtral: neox; llama.cpp's mmproj files
  // permute q/k rows for adjacent pairs, interleaved).
  RopePairing rope_pairing = RopePairing::Neox;
  bool class_token = false;     // a learned first token (CLIP)
  bool patch_bias = false;      // a bias on the patch embedding (SigLIP)
  bool pre_norm = false;        // a norm of the embeddings (CLIP pre_layrnorm, Pixtral ln_pre)
  bool post_norm = false;       // a norm of the output (SigLIP post_layernorm)
  // Which hidden state feeds the projector, as transformers' hidden_states
  // tuple counts them: 0 the embeddings, l the output of layer l, negative
  // from the end (LLaVA-1.5: -2, the last layer is not run).
  int64_t feature_layer = -1;
  // Llama 3.2 Vision: further hidden states set beside the last one
  // (intermediate_layers_indices, counted as feature_layer counts, from 0),
  // and the global layers run after the local ones (num_global_layers).
  std::vector<int64_t> extra_feature_layers;
  int64_t global_layers = 0;
  bool drop_class_token = true;  // the class token's row is not a feature (vision_feature_select_strategy "default")
  // A splice: an image's tokens attend to each other both ways in the
  // decoder's prompt pass, not causally (Gemma 3's token_type_ids mask).
  bool image_bidirectional = false;
  Projector projector;
  ImageTokens tokens;
  std::vector<int64_t> cross_layers;  // cross_attention: the decoder layers that attend to the image
  Weights weights;  // the tower's and projector's dtype and tensor names

  // The layers run: up to the feature layer.
  int64_t layers_run() const {
    return feature_layer < 0 ? dims.layers + 1 + feature_layer : feature_layer;
  }
  // Patches a side of the largest image, and positions of the learned table.
  int64_t grid() const { return patch > 0 ? std::max(image_size, longest_edge) / patch : 0; }
  int64_t positions_count() const { return grid() * grid() + (class_token ? 1 : 0); }
  // Rows of features an image of rows × cols patches gives the decoder
  // (a tile's, under tiles), before a splice's row ends and prefix; and a
  // fixed-size image's (a variable one's at its largest).
  int64_t image_features(int64_t rows, int64_t cols) const {
    if (projector.kind == ProjectorKind::Pooled) return projector.tokens;
    if (projector.kind == ProjectorKind::MergeMlp) return (rows / projector.merge) * (cols / projector.merge);
    return rows * cols + (class_token && !drop_class_token ? 1 : 0);
  }
  int64_t image_features() const { return image_features(grid(), grid()); }
  // A tiled tower's: an image's tiles' rows (class and patches, no padding),
  // the decoder's cross-attention keys of it.
  int64_t tile_keys() const { return tiles * positions_count(); }
  // Llama 3.2 Vision: the tile arrangements an image can take (see
  // spec::tile_arrangements).
  std::vector<std::array<int64_t, 2>> tile_arrangements() const { return spec::tile_arrangements(tiles); }
  int64_t aspect_ratios() const { return static_cast<int64_t>(tile_arrangements().size()); }
  bool cross_layer(int64_t layer) const {
    return connection == VisionConnection::CrossAttention &&
           std::find(cross_layers.begin(), cross_layers.end(), layer) != cross_layers.end();
  }
};


struct Spec {
  std::string file;  // the spec's path, as given
  std::string name;
  std::string source;  // where the numbers come from (a config.json, a paper)
  Stack stack = Stack::Decoder;
  Dims dims;
  Norm norm;
  Attention attention;
  Position position;
  Mlp mlp;
  Moe moe;
  Embedding embedding;
  Output output;
  Weights weights;
  Cache cache;
  PoolingSpec pooling;
  Ssm ssm;
  Mla mla;
  Vision vision;

  // The token an encoder–decoder's decoder starts from (T5: pad, 0; BART: </s>, 2).
  int64_t decoder_start = -1;

  bool encoder() const { return stack == Stack::Encoder; }  // encoder-only
  bool encoder_decoder() const { return stack == Stack::EncoderDecoder; }
  // Every stack's layers, numbered encoder first (an encoder–decoder's
  // layer l < encoder_layers() is its encoder's l, the others its decoder's).
  int64_t encoder_layers() const { return encoder_decoder() ? dims.encoder_layers : 0; }
  int64_t blocks() const { return encoder_layers() + dims.layers; }
  // The token table's rows: the tokens a prompt may hold.
  int64_t embedding_rows() const { return embedding.rows > 0 ? embedding.rows : dims.vocab; }
  // The KV caches a sequence holds: one per block, and an encoder–decoder's
  // cross-attention K and V of the encoder's output, one per decoder layer,
  // after them.
  // A Mamba model's layers keep no KV cache (their state: Ssm's sizes); a
  // hybrid's attention layers do, one each, numbered in order (cache_index).
  int64_t cache_layers() const {
    if (ssm.enabled()) return static_cast<int64_t>(ssm.attention_layers.size());
    return blocks() + (encoder_decoder() ? dims.layers : 0);
  }
  int64_t cache_index(int64_t layer) const {
    return ssm.enabled() ? layer - ssm.state_index(layer) : layer;
  }
  int64_t cross_cache(int64_t decoder_layer) const { return blocks() + decoder_layer; }

  // Source position of every key that was written ("dims.hidden") and of
  // every table ("dims"); Loc{} for keys left to their defaults.
  std::map<std::string, Loc> locations;
  Loc where(const std::string& path) const;
};

// One position of one layer's K cache (or V cache): kv_heads × head_dim
// elements of the cache dtype. The report counts the cache by it and the
// plan tells the runtime to allocate by it.
int64_t cache_row_bytes(const Spec& spec);
// One position of one layer's V cache: as the K cache's, or 0 under MLA,
// whose values are the first kv_lora_rank values of each key (read from the
// K cache).
int64_t v_cache_row_bytes(const Spec& spec);

// The Spec of `spec`'s vision tower as a bidirectional encoder: its widths,
// norms, attention, MLP and weights, no token table (dims.vocab 0;
// build_manifest of it: the positions, norms and layers; the patch
// embedding, class token and projector are build_vision_manifest's).
Spec vision_tower(const Spec& spec);
// A tiled tower's global layers (Llama 3.2 Vision's global_transformer) as
// an encoder of their own: vision_tower's layers, vision.global_layers of
// them named by vision.weights.global_names, no positions or norms around
// them (build_manifest of it: the layers, without their gates).
Spec vision_global_layers(const Spec& spec);

// m(factor, k) = 0.1·k·ln(factor) + 1 (1 for factor ≤ 1): YaRN's magnitude
// scale as DeepSeek's yarn_get_mscale and transformers' get_mscale write it.
double yarn_mscale(double factor, double k);

}  // namespace lathe::spec
