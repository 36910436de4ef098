// Specs from GGUF files, and GGUF metadata from specs, in llama.cpp's
// conventions: `general.architecture` names the family, `<arch>.*` keys give
// the numbers, and the tensor list says what the metadata does not (biases,
// tied embeddings, fused projections, QK norms, dtypes).
//
// What llama.cpp's converter changes on the way is part of the family: Llama
// checkpoints have their q/k rows permuted so that RoPE pairs dims (2i, 2i+1)
// (the imported spec says pairing = "interleaved"; the other families keep
// Hugging Face's rotate-half pairing), and Gemma norm weights hold 1 + w (the
// imported spec says unit_offset = false). Tensor names are the `gguf`
// preset's; vectors are f32. Llama 3.1/3.2's llama3 RoPE scaling is stored as
// a rope_freqs.weight tensor (one factor per rotary pair) and no metadata: the
// importer recovers the four parameters from the factors, and the spec ignores
// the tensor (it computes the frequencies itself). llama.cpp's t5 (a whole
// T5) is an encoder-decoder spec: block_count counts its encoder's layers,
// and whether output.weight is there says whether the head is the tied,
// hidden^-0.5-scaled table.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "generator/import/import.hpp"
#include "core/spec.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::importer {

// The llama.cpp architectures import_gguf reads.
std::vector<std::string> supported_gguf_architectures();

// The spec of a GGUF file's metadata and tensors (name → row-major shape and
// dtype). `rope_freqs`: the values of the file's rope_freqs.weight, when it
// has one (llama3 scaling, recovered by llama3_scaling_from_rope_freqs).
// Throws ImportError naming each key or tensor the spec cannot represent (an
// unknown architecture, stacked MoE experts, rope_freqs that no llama3
// parameters give, matrices of mixed dtypes, …), all at once.
TomlDoc import_gguf_metadata(const std::map<std::string, weights::GgufValue, std::less<>>& metadata,
                             const std::vector<weights::TensorInfo>& tensors, const ImportOptions& options,
                             std::span<const float> rope_freqs = {});

// The rope_freqs.weight llama.cpp's converter writes for llama3 scaling
// (conversion/llama.py, LlamaModel.generate_extra_tensors), in its f32
// arithmetic: rotary_dim / 2 factors, 1 for the pairs kept, `factor` for
// those slowed, the blend between; llama.cpp divides each inverse frequency
// by its factor.
std::vector<float> llama3_rope_freqs(const spec::RopeScalingParams& scaling, double theta, int64_t rotary_dim);

// The llama3 scaling whose factors are `factors` (a rope_freqs.weight):
// factor is the largest; low_freq_factor, high_freq_factor and
// original_max_context are the values of a small grid that give every factor
// (relative 1e-5). Only original / low and original / high enter the
// factors, so sets that scale all three together are one model; of those,
// the one with low_freq_factor = 1 (Meta's configs) is returned. Throws
// ImportError naming rope_freqs.weight when no set, or two different models,
// give the factors.
spec::RopeScalingParams llama3_scaling_from_rope_freqs(std::span<const float> factors, double theta,
                                                       int64_t rotary_dim);

// `path`: a .gguf file. The spec's manifest must name exactly the file's
// tensors with their shapes, less those its weights.ignore names
// (rope_freqs.weight), so its parameter count is the file's; any difference
// is an ImportError naming the tensors.
ImportResult import_gguf(const std::string& path, ImportOptions options = {});

// The metadata llama.cpp would write for `spec` (general.*, <arch>.*), for
// tests and tools. Throws Error(Unsupported) naming the field when no
// supported architecture says what the spec says (a Llama spec with neox
// pairing: llama.cpp's Llama files are interleaved; MoE; dynamic_ntk). llama3
// scaling has no metadata: llama.cpp stores it as the rope_freqs.weight
// tensor (llama3_rope_freqs), which the caller writes.
std::map<std::string, weights::GgufValue> gguf_metadata_from_spec(const spec::Spec& spec);

// `spec` as llama.cpp's converter would write it: the gguf preset's names,
// f32 vectors, and for each family what the converter changes (interleaved
// pairing for Llama, Gemma's 1 + w norm weights), with the default KV cache
// and without [vision] (llama.cpp's converter writes a tower to a file of its
// own, the mmproj).
// Its manifest names the tensors of the GGUF file of the same model; under
// llama3 scaling the file also holds rope_freqs.weight, which the twin's
// weights.ignore names.
spec::Spec gguf_twin(const spec::Spec& spec);

}  // namespace lathe::importer
