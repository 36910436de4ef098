// `lathe quantize`: a GGUF file (f32, f16, bf16) or a Hugging Face
// checkpoint in, a GGUF file of ggml's block formats out, tensor for tensor
// what llama.cpp's `llama-quantize` (without an importance matrix, without
// --pure or overrides) writes: the same per-tensor types (its
// llama-quant.cpp rules, below) and the same bytes (quant.hpp follows
// ggml's reference quantizers).
//
// The per-tensor rules, for the mixtures offered (the default type D:
// q4_0 → Q4_0, q8_0 → Q8_0, q6_k → Q6_K, q4_k_m → Q4_K, q5_k_m → Q5_K;
// f16, llama.cpp's MOSTLY_F16, as its converter's --outtype f16 writes:
// every quantizable matrix F16, the rules below not applying):
//   - Quantized: tensors of 2 or more dims whose name ends in "weight",
//     except norms ("_norm.weight"), MoE routers (ffn_gate_inp), learned
//     position tables (position_embd) and token types (token_types); the
//     others keep their dtype, and 1-D tensors are f32.
//   - output.weight, and token_embd.weight when there is no output.weight
//     (tied embeddings): Q8_0 for Falcon or when the row length is not a
//     multiple of D's block, else Q6_K unless D is Q8_0.
//   - attn_v, attn_qkv (and attn_kv_b), counted in llama.cpp's tensor order
//     (by layer, then name): Q6_K for q4_k_m and q5_k_m where use_more_bits
//     holds, i.e. for index i of n: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2;
//     a Llama 70B (80 layers, grouped KV) moves a Q4_K left there to Q5_K;
//     with 8 experts, Q8_0.
//   - attn_k: Q8_0 with 8 experts.
//   - ffn_down of layer i of n: q4_k_m: Q6_K where use_more_bits(i, n)
//     (Falcon: Q6_K for i < n/16, Q5_K where use_more_bits, else Q4_K);
//     q5_k_m: Q6_K where use_more_bits(i, n).
//   - attn_output: Q5_K for q4_k_m with 8 experts (not Falcon).
//   - Then rows whose length is not a multiple of the chosen block fall back:
//     Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, and to F16 when even that
//     block does not divide them; a Q4_0 or Q8_0 row that is not whole
//     blocks is an error, as in llama.cpp.
// general.file_type is llama.cpp's llama_ftype of the mixture and
// general.quantization_version is 2 (GGML_QNT_VERSION).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/contract.hpp"

namespace lathe::importer {

enum class Mixture : uint8_t { F16, Q4_0, Q8_0, Q6_K, Q4_K_M, Q5_K_M };

struct MixtureInfo {
  Mixture mixture;
  std::string_view key;  // as --type spells it
  DType base;            // the type of most matrices
  uint32_t file_type;    // llama.cpp's llama_ftype (include/llama.h)
};
inline constexpr MixtureInfo kMixtures[] = {
    {Mixture::F16, "f16", DType::F16, 1},
    {Mixture::Q4_0, "q4_0", DType::Q4_0, 2},       {Mixture::Q8_0, "q8_0", DType::Q8_0, 7},
    {Mixture::Q4_K_M, "q4_k_m", DType::Q4_K, 15},  {Mixture::Q5_K_M, "q5_k_m", DType::Q5_K, 17},
    {Mixture::Q6_K, "q6_k", DType::Q6_K, 18},
};
const MixtureInfo& mixture_info(Mixture m);
std::optional<Mixture> mixture_from_key(std::string_view key);

// What llama.cpp's choice reads of the model: its GGUF architecture
// ("llama", "falcon", …), layer count, expert count (0: dense) and heads.
struct QuantizeModel {
  std::string arch;
  int64_t layers = 0;
  int64_t experts = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
};

// A tensor of the GGUF file: its name, row-major shape and stored dtype.
struct TensorShape {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
};

// The dtype of each tensor (by name) under `mixture`, by the rules above.
// Throws Error(InvalidArgument) naming a tensor whose rows no type of the
// mixture can hold.
std::map<std::string, DType> choose_dtypes(Mixture mixture, const QuantizeModel& model,
                                           const std::vector<TensorShape>& tensors);

struct QuantizeResult {
  std::map<DType, int64_t> tensors;  // how many tensors of each dtype were written
  uint64_t bytes = 0;                // of the tensors' data
  std::string vocabulary;            // the tokenizer written (text::gguf_vocabulary's summary); "" from a GGUF file
};

// Reads `in` — a .gguf file of f32, f16 or bf16 tensors (its metadata
// kept), a Hugging Face directory / config.json with its checkpoint, or a
// spec (.toml) with the checkpoint `weights` (a file or a directory); the
// latter two converted as llama.cpp's converter would (for_each_gguf_tensor)
// with the tokenizer of the checkpoint's directory (text::gguf_vocabulary)
// — and writes `out`. Throws Error (a
// GGUF file's own errors name the file and tensor; an already quantized
// input is Error(Unsupported)) or ImportError (a checkpoint whose config
// the importer cannot read).
// `progress(done, total, name)`, when given, is called before each tensor is
// converted (for a progress line; a 7B model takes minutes).
using QuantizeProgress = std::function<void(size_t done, size_t total, const std::string& name)>;
QuantizeResult quantize_model(const std::string& in, const std::string& out, Mixture mixture,
                              const std::string& weights = {}, const QuantizeProgress& progress = {});

}  // namespace lathe::importer
