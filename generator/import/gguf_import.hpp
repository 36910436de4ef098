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
// preset's; vectors are f32.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "generator/import/import.hpp"
#include "core/spec.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::importer {

// The llama.cpp architectures import_gguf reads.
std::vector<std::string> supported_gguf_architectures();

// The spec of a GGUF file's metadata and tensors (name → row-major shape and
// dtype). Throws ImportError naming each key or tensor the spec cannot
// represent (an unknown architecture, stacked MoE experts, precomputed
// rope_freqs, matrices of mixed dtypes, …), all at once.
TomlDoc import_gguf_metadata(const std::map<std::string, weights::GgufValue, std::less<>>& metadata,
                             const std::vector<weights::TensorInfo>& tensors, const ImportOptions& options);

// `path`: a .gguf file. The spec's manifest must name exactly the file's
// tensors with their shapes (so its parameter count is the file's); any
// difference is an ImportError naming the tensors.
ImportResult import_gguf(const std::string& path, ImportOptions options = {});

// The metadata llama.cpp would write for `spec` (general.*, <arch>.*), for
// tests and tools. Throws Error(Unsupported) naming the field when no
// supported architecture says what the spec says (a Llama spec with neox
// pairing: llama.cpp's Llama files are interleaved; MoE; llama3 scaling,
// which llama.cpp stores as a rope_freqs tensor).
std::map<std::string, weights::GgufValue> gguf_metadata_from_spec(const spec::Spec& spec);

// `spec` as llama.cpp's converter would write it: the gguf preset's names,
// f32 vectors, and for each family what the converter changes (interleaved
// pairing for Llama, Gemma's 1 + w norm weights), with the default KV cache.
// Its manifest names the tensors of the GGUF file of the same model.
spec::Spec gguf_twin(const spec::Spec& spec);

}  // namespace lathe::importer
