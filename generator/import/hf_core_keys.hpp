// Where each Hugging Face family's config.json keeps the core dimensions:
// every family's config names the same few, each its own way. A row says
// where (the key, an older name read in its place, the config class's
// default); the importer reads a config by it (Importer::read_core,
// hf_importer.hpp) and the exporter writes one by it (hf_export.cpp), so
// that the two cannot name a key differently; so too the tensors of
// SigLIP's pooling head (siglip_head_tensors). Private to generator/import.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::importer::hf {

// A core dimension's key: required, or `fallback` (the config class's
// default) when the config leaves it out; `alias` is an older name read
// when the key is absent (Falcon's and BLOOM's n_embed).
struct CoreDim {
  const char* key = nullptr;
  int64_t fallback = 0;  // 0: the key is required
  const char* alias = nullptr;
};

// How a family's config gives the MLP width (dims.intermediate).
enum class Width {
  Key,           // the `intermediate` key (no key: the family has no MLP width of its own)
  KeyElse4x,     // the key, else (absent or null) 4 * hidden: GPT-2's and GPT-J's n_inner
  KeyDefault4x,  // the key, whose class default is 4 * hidden: Falcon's ffn_hidden_size
  Always4x,      // 4 * hidden whatever the config says: BloomMLP
  Ratio,         // the key's ratio (its fallback as the default) times hidden: MPT's expansion_ratio
};

struct CoreKeys {
  CoreDim hidden, layers;
  CoreDim heads;  // no key: no attention heads (the state-space families)
  CoreDim intermediate;
  CoreDim vocab;
  // max_context; no key: none from the config, but `fallback` when set
  // (a state-space model's fixed state bounds no context).
  CoreDim context;
  const char* eps = nullptr;  // the LayerNorm's epsilon (default 1e-5); null: the reader sets the norm
  Width width = Width::Key;
  const char* intermediate_note = nullptr;  // dims.intermediate's note, in place of the key's
  const char* context_note = nullptr;       // max_context's note when the config does not give it
  // dims.heads is the heads, each hidden / heads wide; false: the reader
  // writes heads itself (the Llama family's head_dim).
  bool split = true;
  // The end of the head-split error, in place of "<Class> splits the width into heads".
  const char* split_why = nullptr;
  // vocab and context read with hidden, layers and heads, before the head
  // split is checked: GPT-2's reader has always said their errors first.
  bool reads_first = false;
};

inline constexpr CoreKeys kGpt2Core = {
    .hidden = {"n_embd"}, .layers = {"n_layer"}, .heads = {"n_head"}, .intermediate = {"n_inner"},
    .vocab = {"vocab_size"}, .context = {"n_positions"}, .eps = "layer_norm_epsilon", .width = Width::KeyElse4x,
    .split_why = "GPT2Attention splits n_embd into n_head heads", .reads_first = true};
inline constexpr CoreKeys kGptNeoxCore = {
    .hidden = {"hidden_size"}, .layers = {"num_hidden_layers"}, .heads = {"num_attention_heads"},
    .intermediate = {"intermediate_size"}, .vocab = {"vocab_size"}, .context = {"max_position_embeddings", 2048},
    .eps = "layer_norm_eps"};
inline constexpr CoreKeys kPhiCore = kGptNeoxCore;  // PhiConfig names them as GPTNeoXConfig does
inline constexpr CoreKeys kGptjCore = {
    .hidden = {"n_embd"}, .layers = {"n_layer"}, .heads = {"n_head"}, .intermediate = {"n_inner"},
    .vocab = {"vocab_size"}, .context = {"n_positions", 2048}, .eps = "layer_norm_epsilon", .width = Width::KeyElse4x};
inline constexpr CoreKeys kFalconCore = {
    .hidden = {"hidden_size", 0, "n_embed"}, .layers = {"num_hidden_layers"}, .heads = {"num_attention_heads"},
    .intermediate = {"ffn_hidden_size"}, .vocab = {"vocab_size"}, .context = {"max_position_embeddings", 2048},
    .eps = "layer_norm_epsilon", .width = Width::KeyDefault4x};
// The context: ALiBi has no table to bound it, and BloomConfig has no such key.
inline constexpr CoreKeys kBloomCore = {
    .hidden = {"hidden_size", 0, "n_embed"}, .layers = {"n_layer", 0, "num_hidden_layers"},
    .heads = {"n_head", 0, "num_attention_heads"}, .vocab = {"vocab_size"}, .context = {"seq_length", 2048},
    .eps = "layer_norm_epsilon", .width = Width::Always4x,
    .context_note = "BloomConfig has no context length (ALiBi); the models were trained on 2048"};
inline constexpr CoreKeys kMptCore = {
    .hidden = {"d_model"}, .layers = {"n_layers"}, .heads = {"n_heads"}, .intermediate = {"expansion_ratio", 4},
    .vocab = {"vocab_size"}, .context = {"max_seq_len", 2048}, .eps = "layer_norm_epsilon", .width = Width::Ratio};
// BERT's positions (RoBERTa's start past the padding row) and its epsilon,
// read after them, are read_bert's.
inline constexpr CoreKeys kBertCore = {
    .hidden = {"hidden_size"}, .layers = {"num_hidden_layers"}, .heads = {"num_attention_heads"},
    .intermediate = {"intermediate_size"}, .vocab = {"vocab_size"}};
inline constexpr CoreKeys kModernBertCore = {
    .hidden = {"hidden_size"}, .layers = {"num_hidden_layers"}, .heads = {"num_attention_heads"},
    .intermediate = {"intermediate_size", 1152}, .vocab = {"vocab_size", 50368},
    .context = {"max_position_embeddings", 8192}, .eps = "norm_eps"};
inline constexpr CoreKeys kLlamaCore = {
    .hidden = {"hidden_size"}, .layers = {"num_hidden_layers"}, .heads = {"num_attention_heads"},
    .intermediate = {"intermediate_size"}, .vocab = {"vocab_size"}, .context = {"max_position_embeddings"},
    .split = false};
// DeepSeek's: Llama's keys; its intermediate_size is the dense layers' alone.
inline constexpr CoreKeys kDeepseekCore = [] {
  CoreKeys k = kLlamaCore;
  k.intermediate_note = "intermediate_size (the dense layers' MLP width)";
  return k;
}();
inline constexpr CoreKeys kMambaCore = {
    .hidden = {"hidden_size", 768}, .layers = {"num_hidden_layers", 32}, .vocab = {"vocab_size", 50280},
    .context = {nullptr, 8192},
    .context_note = "MambaConfig has no context length (no position table, a fixed state): a default"};
inline constexpr CoreKeys kMamba2Core = {
    .hidden = {"hidden_size", 4096}, .layers = {"num_hidden_layers", 64}, .vocab = {"vocab_size", 32768},
    .context = {nullptr, 8192},
    .context_note = "Mamba2Config has no context length (no position table, a fixed state): a default"};

// SigLIP's attention-pooling head in a multimodal checkpoint's tower
// (SiglipVisionTransformer builds it unless vision_use_head = false), which
// Gemma 3 does not use: the importer adds its tensors to weights.ignore, the
// exporter reads them there as vision_use_head.
inline std::vector<std::string> siglip_head_tensors() {
  const std::string H = "vision_tower.vision_model.head.";
  return {H + "probe", H + "attention.in_proj_weight", H + "attention.in_proj_bias", H + "attention.out_proj.weight",
          H + "attention.out_proj.bias", H + "layernorm.weight", H + "layernorm.bias", H + "mlp.fc1.weight",
          H + "mlp.fc1.bias", H + "mlp.fc2.weight", H + "mlp.fc2.bias"};
}

}  // namespace lathe::importer::hf
