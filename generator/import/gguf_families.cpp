#include "generator/import/gguf_families.hpp"

#include <cmath>

#include "runtime/weights/dtype.hpp"

namespace lathe::importer::gguf_families {

// The MLP activation each LayerNorm family's model computes (GGUF metadata
// does not say; llama.cpp itself evaluates every GELU by the tanh approximation).
const char* gelu_of(std::string_view arch) {
  return arch == "gptneox" || arch == "falcon" || arch == "mpt" ? "gelu_erf" : "gelu_tanh";
}

const Arch* find_arch(std::string_view name) {
  for (const Arch& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

// The gemma2/gemma3 models whose attention scale llama.cpp takes from
// hidden / heads rather than head_dim (the 27B sizes, told by layer count).
bool scale_by_hidden(std::string_view arch, int64_t layers) {
  return (arch == "gemma2" && layers == 46) || (arch == "gemma3" && layers == 62);
}

// llama.cpp's general.file_type (include/llama.h's llama_ftype) of a
// checkpoint whose matrices are all `d`: the K-quants alone are its _S
// mixtures' numbers (Q4_K_S, Q5_K_S), the nearest it names.
uint32_t file_type(DType d) {
  switch (d) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q4_K: return 14;
    case DType::Q5_K: return 16;
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
  }
  return 0;
}

// Gemma's embedding scale as Hugging Face computes it: sqrt(hidden) in the
// checkpoint's dtype, bf16 for every released Gemma (llama.cpp: the exact root).
double gemma_embedding_scale(int64_t hidden) {
  return static_cast<double>(weights::bf16_to_f32(weights::f32_to_bf16(std::sqrt(static_cast<float>(hidden)))));
}

// llama.cpp's names of a T5 stack's layers ("enc" or "dec"): a decoder
// layer's self-attention, cross-attention and MLP, an encoder's the first
// and last.
std::map<Role, std::string> t5_layer_names(const std::string& stack) {
  const std::string L = stack + ".blk.{layer}.";
  std::map<Role, std::string> names = {
      {Role::AttnNorm, L + "attn_norm"}, {Role::Q, L + "attn_q"},        {Role::K, L + "attn_k"},
      {Role::V, L + "attn_v"},           {Role::O, L + "attn_o"},        {Role::MlpNorm, L + "ffn_norm"},
      {Role::Gate, L + "ffn_gate"},      {Role::Up, L + "ffn_up"},       {Role::Down, L + "ffn_down"}};
  if (stack == "dec") {
    names[Role::CrossNorm] = L + "cross_attn_norm";
    names[Role::CrossQ] = L + "cross_attn_q";
    names[Role::CrossK] = L + "cross_attn_k";
    names[Role::CrossV] = L + "cross_attn_v";
    names[Role::CrossO] = L + "cross_attn_o";
  }
  return names;
}

// A stack's layer names and the tensors outside its layers.
std::map<Role, std::string> with_stack_tensors(std::map<Role, std::string> names,
                                               std::initializer_list<std::pair<const Role, std::string>> tensors) {
  for (const auto& [role, name] : tensors) names[role] = name;
  return names;
}

// llama.cpp's names of t5encoder's tensors (its encoder-decoder T5's
// encoder, "enc."), which no preset holds.
const std::map<Role, std::string>& t5encoder_names() {
  static const std::map<Role, std::string> names = with_stack_tensors(
      t5_layer_names("enc"), {{Role::RelBias, "enc.blk.0.attn_rel_b"}, {Role::FinalNorm, "enc.output_norm"}});
  return names;
}

// llama.cpp's t5 (a whole T5): [weights.names] holds the decoder's layers
// and the tensors of both stacks, each stack's relative bias in its first
// layer; [weights.encoder_names] the encoder's layers.
const std::map<Role, std::string>& t5_names() {
  static const std::map<Role, std::string> names =
      with_stack_tensors(t5_layer_names("dec"), {{Role::EncoderRelBias, "enc.blk.0.attn_rel_b"},
                                                 {Role::EncoderFinalNorm, "enc.output_norm"},
                                                 {Role::RelBias, "dec.blk.0.attn_rel_b"},
                                                 {Role::FinalNorm, "dec.output_norm"}});
  return names;
}

}  // namespace lathe::importer::gguf_families
