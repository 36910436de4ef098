// What llama.cpp's converter does with each family, shared by the GGUF
// import (gguf_import.cpp: a file to a spec) and export (gguf_export.cpp: a
// spec to a file's metadata and its twin): the architectures, and the
// conventions each keeps (activations, scales, T5's tensor names).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/contract.hpp"
#include "core/spec.hpp"

namespace lathe::importer::gguf_families {

// How llama.cpp's converter treats each family: whether it permutes q/k rows
// for the interleaved pairing (only Llama), whether norm weights hold 1 + w
// (Gemma), whether its norms are LayerNorms, whether positions are ALiBi.
// (llama.cpp names a "gptj" architecture but neither converts nor runs it.)
struct Arch {
  std::string_view name;
  bool interleaved;
  bool gemma;
  bool layernorm = false;
  bool alibi = false;
  bool encoder = false;  // bidirectional, ending at its hidden states (encoder_sections)
  bool encdec = false;   // an encoder, then a decoder that attends to it (t5_sections)
  bool ssm = false;      // state-space layers, no attention (ssm_sections)
  bool hybrid = false;   // Mamba-2 layers and attention layers (granitehybrid_sections)
};
constexpr Arch kArchs[] = {
    {"llama", true, false},         {"qwen2", false, false},       {"qwen3", false, false},
    {"gemma", false, true},         {"gemma2", false, true},       {"gemma3", false, true},
    {"phi3", false, false},         {"gpt2", false, false, true},  {"olmo2", false, false},
    {"gptneox", false, false, true}, {"phi2", false, false, true}, {"falcon", false, false, true},
    {"bloom", false, false, true, true}, {"mpt", false, false, true, true},
    {"qwen3moe", false, false},     {"qwen2moe", false, false},
    {"bert", false, false, true, false, true}, {"nomic-bert", false, false, true, false, true},
    {"t5encoder", false, false, false, false, true}, {"t5", false, false, false, false, false, true},
    {"mamba", false, false, false, false, false, false, true}, {"mamba2", false, false, false, false, false, false, true},
    {"deepseek2", false, false},
    {"granitehybrid", true, false, false, false, false, false, false, true},
};

// The MLP activation each LayerNorm family's model computes (GGUF metadata
// does not say; llama.cpp itself evaluates every GELU by the tanh approximation).
const char* gelu_of(std::string_view arch);
const Arch* find_arch(std::string_view name);
// The gemma2/gemma3 models whose attention scale llama.cpp takes from
// hidden / heads rather than head_dim (the 27B sizes, told by layer count).
bool scale_by_hidden(std::string_view arch, int64_t layers);
// llama.cpp's general.file_type (include/llama.h's llama_ftype) of a
// checkpoint whose matrices are all `d`.
uint32_t file_type(DType d);
// Gemma's embedding scale as Hugging Face computes it: sqrt(hidden) in the
// checkpoint's dtype, bf16 for every released Gemma (llama.cpp: the exact root).
double gemma_embedding_scale(int64_t hidden);
// llama.cpp's converter writes Llama 3.1/3.2's llama3 RoPE scaling as this
// tensor, one factor per rotary pair, and no metadata for it.
inline const std::string kRopeFreqs = "rope_freqs.weight";
// llama.cpp's names of a T5 stack's layers ("enc" or "dec").
std::map<Role, std::string> t5_layer_names(const std::string& stack);
// t5encoder's tensors (its encoder-decoder T5's encoder, "enc."), which no preset holds.
const std::map<Role, std::string>& t5encoder_names();
// t5's (a whole T5): the decoder's layers and both stacks' tensors.
const std::map<Role, std::string>& t5_names();

}  // namespace lathe::importer::gguf_families
