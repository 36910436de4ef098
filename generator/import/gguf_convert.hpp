// A Hugging Face checkpoint's tensors as llama.cpp's converter writes them
// into a GGUF file: for `lathe quantize` (a checkpoint in, GGUF out) and the
// test tool that writes GGUF twins of checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/spec.hpp"

namespace lathe::importer {

// One tensor of the GGUF file: its name, row-major shape and the dtype the
// GGUF spec gives it, with its values in f32.
struct GgufTensorValues {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  std::vector<float> values;
};

// Every tensor of `gg`'s manifest (gg: the GGUF twin of `hf`, gguf_twin()),
// read from the checkpoint `in` of `hf` under the HF name of the same role,
// layer and expert, and changed as llama.cpp's converter changes it:
//   - with `permute`, when hf pairs RoPE dims neox-style (i, i + d/2) and gg
//     interleaved (2i, 2i+1), the rows of q and k (and their biases) are
//     permuted head by head, row 2i ← row i and row 2i+1 ← row i + d/2 (the
//     dot products of rotated q and k are unchanged);
//   - Conv1D [in, out] matrices are transposed to [out, in];
//   - an LM head gg has and a tied hf does not is a copy of the embedding
//     (llama.cpp's GPT-2 files);
//   - norm scales of a (1 + w) hf that gg reads plainly are stored as 1 + w
//     (Gemma);
//   - fused q/k/v rows per head or per KV group are stored q | k | v;
//   - the experts of a layer are stacked in one tensor per role,
//     [experts][rows][cols] (gg's expert names have no {expert}).
// Under llama3 RoPE scaling a last tensor, rope_freqs.weight, holds head_dim
// / 2 f32 factors as the converter computes them. `emit` receives each
// tensor in manifest order (one at a time: a large checkpoint is never all
// in memory as f32). Throws Error naming the tensor the checkpoint lacks.
// Rows [h·d + 2i + j] ← [h·d + j·d/2 + i] for every head h of `head_dim`
// rows, i < d/2, j < 2: llama.cpp's permutation of q/k rows for adjacent
// RoPE pairs (its LlamaModel.permute).
std::vector<float> interleave_rows(const std::vector<float>& v, int64_t rows, int64_t cols, int64_t head_dim);

void for_each_gguf_tensor(const spec::Spec& hf, const spec::Spec& gg, const std::string& in, bool permute,
                          const std::function<void(GgufTensorValues&)>& emit);

}  // namespace lathe::importer
