// The CPU reference forward pass: the oracle later GPU kernels are tested
// against. Plain C++, double accumulation, no code shared with the kernels.
// It interprets any validated spec at run time; the features it does not
// implement are refused in the constructor with
// std::invalid_argument("reference: not supported: <field>").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "core/manifest.hpp"
#include "core/spec.hpp"

namespace lathe::reference {

// Tensors by manifest name, each in its stored layout (the manifest's shape,
// row-major): [out, in] for out_in linears, [in, out] for in_out ones; a
// stacked tensor (manifest entries with a slice) holds its slices in turn.
struct Weights {
  std::map<std::string, std::vector<float>> tensors;
  // A manifest entry's values: the tensor, or its slice of a stacked one.
  // Throws std::invalid_argument when the tensor is absent or too small.
  std::span<const float> of(const std::string& name, int64_t slice, int64_t elements) const;
};

// Every manifest tensor of `spec`, deterministic in `seed`: values uniform in
// [-scale, scale); norm scales near 1 (near 0 under norm.unit_offset, whose
// effective scale is 1 + w).
Weights random_weights(const spec::Spec& spec, uint64_t seed, float scale);

// RoPE's rotation: the inverse frequency of each pair of the rotary dims,
// and the factor its cos and sin are multiplied by (YaRN's attention factor;
// 1 otherwise), as Hugging Face transformers computes them
// (modeling_rope_utils.py) for the spec's position.scaling: none, linear,
// dynamic_ntk, llama3 or yarn. `seq_len`: the sequence length of the forward
// call, which dynamic_ntk's base grows with past original_max_context.
struct Rope {
  std::vector<double> inv_freq;  // [rotary_dim / 2]
  double scale = 1.0;
};
Rope rope_of(const spec::Spec& spec, int64_t seq_len = 0);

// Rotates one head's vector in place by RoPE at `position` over its first
// 2 · inv_freq.size() dims; neox pairs (i, i + rotary_dim/2), interleaved
// pairs (2i, 2i + 1).
void apply_rope(double* head, const Rope& rope, spec::RopePairing pairing, int64_t position);
// The same with inv_freq_i = theta^(-2i/rotary_dim).
void apply_rope(double* head, int64_t rotary_dim, double theta, spec::RopePairing pairing, int64_t position);

// Pixtral's 2D RoPE of one head at patch (row, col) of its image's grid:
// rotate-half pairs (i, i + d/2); pair i < d/4 turns by row · f[2i], the
// others by col · f[2(i − d/4) + 1], f = rope.inv_freq (θ^(−2j/d), j < d/2),
// as PixtralRotaryEmbedding's table of each patch's frequencies.
void apply_rope_2d(double* head, const Rope& rope, int64_t row, int64_t col,
                   spec::RopePairing pairing = spec::RopePairing::Neox);

// A norm of x (LayerNorm, or RMSNorm: no mean) with its scale (1 + w
// under unit_offset) and shift (null: none); and an activation, in double.
std::vector<double> norm_values(spec::NormKind kind, double eps, bool unit_offset, const float* weight,
                                const float* bias, const std::vector<double>& x);
double activation(spec::Activation kind, double x);

// T5's bucket of the relative position r = j − i (transformers'
// T5Attention._relative_position_bucket, in float32 as it computes it):
// bidirectional, half the buckets for r > 0; the first half of a side's
// buckets exact distances, the rest logarithmic up to max_distance.
int64_t relative_bucket(int64_t r, bool bidirectional, int64_t buckets, int64_t max_distance);

class Reference {
 public:
  // `weights` must outlive the Reference (it is read, not copied). Throws
  // std::invalid_argument for an unsupported spec field, a missing tensor or
  // a tensor of the wrong size.
  Reference(const spec::Spec& spec, const Weights& weights);

  // Appends `tokens` to the KV cache at positions cache_len().. and returns
  // their logits, row-major [tokens.size()][vocab]. Throws std::out_of_range
  // for a token outside the vocabulary or a position past max_context.
  // (An encoder: encode(tokens). An encoder–decoder: the decoder's tokens,
  // attending to the last source().)
  std::vector<float> forward(const std::vector<int32_t>& tokens);
  // An encoder–decoder: runs the encoder over `tokens`, keeps each decoder
  // layer's cross-attention keys and values of its output, and empties the
  // decoder's cache. Throws std::invalid_argument for another stack.
  void source(const std::vector<int32_t>& tokens);
  // An encoder's final hidden states of one input, [tokens.size()][hidden]:
  // every token attends to every token. The cache is left empty. Throws
  // std::invalid_argument for a decoder.
  std::vector<float> encode(const std::vector<int32_t>& tokens);

  void reset();
  int64_t cache_len() const { return cache_len_; }

  // A spec with a splice [vision] (CLIP, SigLIP and Pixtral towers): one
  // image's rows for the decoder, [rows][hidden], as transformers' models
  // compute them: the patches embedded, the class token and positions, the
  // tower up to its feature layer, then the projector. `pixels` is the
  // image as the processor writes it, [channels][height][width] (rescaled
  // and normalized); a fixed-size tower takes image_size², a variable one
  // whole patches up to longest_edge a side. Throws std::invalid_argument
  // for another spec or size.
  std::vector<float> image_features(std::span<const float> pixels, int64_t height, int64_t width) const;
  // The projected rows an image of height × width pixels gives (the
  // projector's grid), and its patch grid's rows and columns.
  int64_t image_rows(int64_t height, int64_t width) const;
  // forward() of a prompt whose rows at `at` (increasing indices into
  // tokens) take the rows of `features` ([at.size()][hidden]) in place of
  // their tokens' embeddings. Under vision.image_bidirectional each run of
  // consecutive spliced rows (an image) attends to itself both ways.
  std::vector<float> forward(const std::vector<int32_t>& tokens, const std::vector<int64_t>& at,
                             const std::vector<float>& features);

  // A tiled tower (Llama 3.2 Vision's MllamaVisionModel, then its
  // projector): one image's rows, [vision.tiles · (patches + 1)][hidden],
  // the tiles past the image's own included, as the model computes them of
  // the processor's zero-padded input. `pixels` holds the image's `tiles`
  // tiles, [tiles][channels][image_size][image_size] as MllamaImageProcessor
  // writes them; aspect_ratio_id is its aspect_ratio_ids entry (1 + the
  // canvas's index among the arrangements of at most vision.tiles tiles).
  // Throws std::invalid_argument for another spec or input.
  std::vector<float> tile_features(std::span<const float> pixels, int64_t tiles, int64_t aspect_ratio_id) const;
  // A cross_attention [vision] (Llama 3.2 Vision): forward() of a
  // sequence's first prompt, whose images (one vision.tokens.marker token
  // each) the cross-attention layers read. features: each image's
  // tile_features, in the order of the markers; tiles: each image's real
  // tiles. A row reads the real tiles of the images MllamaProcessor's mask
  // gives it: an image's from its marker up to the next image's (a run of
  // adjacent markers' all up to where the run's last ends), the last
  // image's to the end. A row before every image reads all rows of all the
  // images and its MLP branch is zeroed (transformers' masked-out text
  // rows); a prompt without images skips the cross-attention layers.
  // Decoding (forward(tokens)) reads what the prompt's last row read.
  std::vector<float> forward_images(const std::vector<int32_t>& tokens, const std::vector<float>& features,
                                    const std::vector<int64_t>& tiles);

 private:
  struct Tensor {
    const float* data = nullptr;
    std::vector<int64_t> shape;
  };
  struct Linear {
    Tensor weight;
    const float* bias = nullptr;  // null: none
    bool transposed = false;      // stored [in, out]
    int64_t out = 0, in = 0;
  };
  struct NormW {
    const float* weight = nullptr;
    const float* bias = nullptr;
  };
  // An MLP's projections: gated (gate, up or a fused gate_up) or not (up), then down.
  struct MlpW {
    Linear gate, up, gate_up, down;
  };
  struct Layer {
    NormW attn_norm, mlp_norm;            // before each branch (pre, sandwich)
    NormW attn_post_norm, mlp_post_norm;  // after each branch (sandwich, branch_output)
    NormW q_norm, k_norm;  // attention.qk_norm
    Linear q, k, v, qkv, o;
    MlpW mlp;                    // a dense layer's
    Linear router;               // a sparse layer's: router, experts, shared expert and its gate
    std::vector<MlpW> experts;
    MlpW shared;
    Linear shared_gate;
    const float* router_bias = nullptr;  // [experts]: DeepSeek-V3's correction bias, for choosing only
    std::vector<double> k_cache, v_cache;  // [position][kv_heads * head_dim]
    // An encoder–decoder's decoder layer: cross-attention, and its keys and
    // values of the source ([source position][kv_heads * head_dim]).
    NormW cross_norm;
    Linear cross_q, cross_k, cross_v, cross_o;
    std::vector<double> cross_k_cache, cross_v_cache;
    // Llama 3.2 Vision: a decoder layer that attends to the images (the
    // cross_* projections, per-head RMS norms of its queries and keys, the
    // caches the images' keys and values), and the tanh gates of its two
    // branches, as of a tiled tower's global layer (null: ungated).
    bool image_cross = false;
    NormW cross_q_norm, cross_k_norm;
    const float* attn_gate = nullptr;
    const float* mlp_gate = nullptr;
    // A Mamba layer (spec.ssm): its tensors, and its state of the one
    // sequence, zeros at the start: the last d_conv − 1 inputs of the
    // convolution, oldest first ([channels][d_conv − 1]), and the scan's h
    // ([d_inner][d_state]). Mamba-2: no x_proj or dt_proj; A_log, D and
    // dt_bias one a head, and the gated norm's scale.
    NormW ssm_norm, ssm_gate_norm;
    Linear ssm_in, ssm_x, ssm_dt, ssm_out;
    const float* ssm_conv = nullptr;       // [channels][1][d_conv]
    const float* ssm_conv_bias = nullptr;  // [channels], null: none
    const float* ssm_a_log = nullptr;      // [d_inner][d_state] (Mamba-2: [heads]): A = −exp(A_log)
    const float* ssm_d = nullptr;          // [d_inner] (Mamba-2: [heads])
    const float* ssm_dt_bias = nullptr;    // Mamba-2: [heads]
    std::vector<double> conv_state, scan_state;
    // Multi-head latent attention (spec.mla), as DeepSeek's release writes
    // it: k and v expanded from the latent for every head, the cache holding
    // them expanded ([position][heads·(nope + rope)] and [position][heads·v]
    // in k_cache and v_cache), no absorption.
    Linear q_a, q_b, kv_a, kv_b;
    NormW q_a_norm, kv_a_norm;
  };
  // A stack's tables and layers: the decoder's (or the only one), or an
  // encoder–decoder's encoder.
  struct Stack {
    Tensor pos_embed, rel_bias;
    NormW embed_norm, final_norm;
    bool bidirectional = false;
    size_t first = 0, end = 0;  // its layers in layers_
  };

  const Tensor& tensor(spec::Role role, bool bias, int64_t layer, int64_t expert = -1) const;
  const float* optional(spec::Role role, bool bias, int64_t layer, int64_t expert = -1) const;
  Linear linear(spec::Role role, int64_t layer, int64_t expert = -1) const;
  // Layer `layer`'s kv_b_proj whole, from a file that splits it
  // (mla.split_kv_b: k_b, each W_UK transposed, and v_b), kept in joined_.
  Linear joined_kv_b(int64_t layer);
  MlpW mlp_weights(spec::Role gate, spec::Role up, spec::Role down, int64_t layer, int64_t expert) const;
  std::vector<double> mlp(const MlpW& w, const std::vector<double>& x) const;
  std::vector<double> moe(const Layer& L, const std::vector<double>& x) const;
  NormW norm(spec::Role role, int64_t layer) const;

  std::vector<double> apply(const Linear& l, const std::vector<double>& x) const;
  std::vector<double> normalize(const NormW& n, const std::vector<double>& x) const;
  double activate(double x) const;
  void token(int32_t token, int64_t position, float* logits);
  // The stages of one token's pass (token() and encode() share them).
  bool attention_norm_in() const;
  // (`spliced`: a row in place of the token's scaled embedding.)
  std::vector<double> embed_row(const Stack& stack, int32_t token, int64_t position,
                                const float* spliced = nullptr) const;
  // Every row of an encoding stack (each attending to all), final norm applied.
  std::vector<std::vector<double>> run_encoder(const Stack& stack, const std::vector<int32_t>& tokens);
  void check_tokens(const std::vector<int32_t>& tokens) const;
  // A decoder pass's checks (tokens, context) and its dynamic NTK base.
  void begin_pass(const std::vector<int32_t>& tokens);
  void project_qkv(const Layer& L, const std::vector<double>& h, int64_t position, bool windowed, std::vector<double>& q,
                   std::vector<double>& k, std::vector<double>& v) const;
  // The heads' widths attention reads: a query and key head's, a value
  // head's, and the cached heads (0: the spec's head_dim and kv_heads).
  struct HeadWidths {
    int64_t qk, v, kv_heads;  // (no member initializers: `= {}` zeroes them in a default argument)
  };
  // Attention of q at `position` over the keys [first, last] of the caches
  // k, v, with the stack's relative bias (null: none); `allowed` (null:
  // all) says which keys, by index, it reads.
  std::vector<double> attend(const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& q,
                             int64_t position, int64_t first, int64_t last, const Stack* stack,
                             HeadWidths widths = {}, const std::vector<char>* allowed = nullptr) const;
  // Latent attention's q, k and v of one token (every head's, expanded, rotated).
  void project_mla(const Layer& L, const std::vector<double>& h, int64_t position, std::vector<double>& q,
                   std::vector<double>& k, std::vector<double>& v) const;
  // A Mamba mixer's output for one token's normed input h, advancing the
  // layer's state by that token.
  std::vector<double> mamba(Layer& L, const std::vector<double>& h) const;
  std::vector<double> mamba2(Layer& L, const std::vector<double>& h) const;
  // The causal depthwise conv and SiLU of one token's input (`channels`
  // values at `in`), sliding the layer's window by it.
  std::vector<double> causal_conv(Layer& L, const double* in, size_t channels) const;
  void finish_block(const Layer& L, int64_t layer, std::vector<double>& x, const std::vector<double>& block_in,
                    std::vector<double> h, const std::vector<double>& attn) const;

  // Rows through the layers [begin, end) of an encoding stack, each
  // attending to every row; positions[i] is row i's (its RoPE angle; a 2D
  // tower's row · side + column). `real` (null: all): a row that is not
  // real reads only the real ones (Mllama's padding rows and tiles).
  void run_layers(const Stack& stack, std::vector<std::vector<double>>& x, const std::vector<int64_t>& positions,
                  size_t begin, size_t end, const std::vector<char>* real = nullptr) const;
  // Llama 3.2 Vision's cross-attention layer of one row, reading the images
  // as cross_allowed_ and cross_open_ say.
  void image_cross_block(const Layer& L, std::vector<double>& x) const;
  // The rows of a prompt pass layer by layer (forward() with spliced rows):
  // row i at position cache_len() + i attends causally (its window too),
  // and besides to the rows [span_first[i], span_last[i]] of its span (an
  // image attending to itself both ways; i alone otherwise).
  void prefill_rows(std::vector<std::vector<double>> x, const std::vector<int64_t>& span_first,
                    const std::vector<int64_t>& span_last, float* logits);
  void logits_of(std::vector<double> x, float* logits) const;
  // The tower's patch embedding, a convolution of stride patch as a linear
  // map of a patch's values (channel, row, column).
  Linear patch_embedding() const;
  // The tower's own tensors (the patch embedding, class token, projector)
  // and the projector of its features.
  std::vector<std::vector<double>> project_features(std::vector<std::vector<double>> rows, int64_t grid_rows,
                                                    int64_t grid_cols) const;

  spec::Spec spec_;
  // A vision tower ([vision], splice): its layers as an encoder of their own
  // (vision_tower(spec)); its RoPE 2D over a grid of rope_2d_side_ a side.
  std::unique_ptr<Reference> tower_;
  std::unique_ptr<Reference> global_;  // a tiled tower's global layers (vision_global_layers)
  Tensor tile_positions_;              // a tiled tower's gated position table, [patches + 1][hidden]
  // Llama 3.2 Vision: which image rows of the cross caches the next row
  // reads, and whether it reads any (cross_open_; false: all, its MLP
  // zeroed). Empty: no images, the cross-attention layers skipped.
  std::vector<char> cross_allowed_;
  bool cross_open_ = false;
  int64_t rope_2d_side_ = 0;
  Rope rope_;
  Rope local_rope_;  // position.local_theta: the windowed layers', unscaled
  std::vector<double> alibi_slopes_;  // position.kind = alibi: each query head's
  std::map<std::tuple<spec::Role, bool, int64_t, int64_t>, Tensor> tensors_;  // role, bias, layer, expert
  Tensor embed_, token_types_, lm_head_;
  Stack stack_;          // the decoder's (or the only stack's)
  Stack encoder_stack_;  // an encoder–decoder's encoder
  int64_t source_len_ = 0;
  const float* lm_head_bias_ = nullptr;  // output.bias (Phi-2)
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> joined_;  // joined_kv_b()'s matrices
  int64_t cache_len_ = 0;
};

}  // namespace lathe::reference
