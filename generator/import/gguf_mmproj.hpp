// llama.cpp's multimodal pair (mtmd): a text model's GGUF file and the
// "mmproj" GGUF file its converter writes beside it, which holds the vision
// tower and the projector under clip.* keys and v.* / mm.* tensors
// (tools/mtmd/clip-impl.h). Together they are one spec: the text file's, with
// [vision] from the mmproj's metadata and tensors, and the image tokens from
// the text file's vocabulary, looked up by their text as mtmd does.
//
// Three projector types are read, each a family of tower and projector:
//   mlp      LLaVA-1.5: a CLIP tower (class token, pre_ln), linear–GELU–linear
//            as mm.0 and mm.2. llama.cpp's LLaVA converter
//            (legacy-models/convert_image_encoder_to_gguf.py) drops the layers
//            after the feature layer and the unused post_layernorm, names fc1
//            ffn_down and fc2 ffn_up (clip.cpp swaps them back, told by the
//            shapes, as this importer does), and writes clip.use_gelu false
//            for CLIP's quick GELU.
//   gemma3   Gemma 3: a SigLIP tower (post_ln), its features average-pooled
//            to (grid / scale_factor)² tokens (clip.vision.projector.scale_factor,
//            4 when absent), mm.soft_emb_norm (stored as 1 + w) and
//            mm.input_projection ([vision hidden, hidden], Gemma's parameter
//            as it is).
//   pixtral  Pixtral and Mistral 3: a Pixtral tower with 2D RoPE whose q/k
//            rows the converter permutes for adjacent pairs (the spec says
//            vision.rope_pairing = "interleaved"), linear_1 and linear_2 as mm.1
//            and mm.2; Mistral 3's mm.input_norm and mm.patch_merger with
//            clip.vision.spatial_merge_size. v.token_embd.img_break, a copy of
//            the text model's [IMG_BREAK] row, is ignored.
// Anything else (another projector type, an audio encoder) is refused,
// naming the file and the key.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "generator/import/gguf_convert.hpp"
#include "generator/import/import.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::importer {

// The clip.projector_type values import_mmproj reads.
std::vector<std::string> supported_mmproj_projectors();

// [vision] of the pair, written into `doc` (the text file's spec, parsed as
// `text`): the tower and projector from an mmproj's `metadata` and
// `tensors`, the image tokens from `vocabulary` (the text file's
// tokenizer.ggml.tokens; empty: none, and a marker is then missing). Every
// problem names `file` (the mmproj) and its key or tensor, or `text_file`
// and its vocabulary; all are thrown at once as an ImportError. The tower's
// dtypes other than its matrices' are import_gguf's to add (they need the
// parsed manifest).
void import_mmproj_metadata(TomlDoc& doc, const std::map<std::string, weights::GgufValue, std::less<>>& metadata,
                            const std::vector<weights::TensorInfo>& tensors, const spec::Spec& text,
                            const std::vector<std::string>& vocabulary, const std::string& text_file,
                            const std::string& file);

// `hf` (a spec with a [vision] splice of one of the three families) as the
// pair states it: gguf_twin(hf) for the decoder, and a tower with the
// mmproj's names (the gguf vision preset), f32 vectors, matrices in
// `dtype` with the converter's exceptions as [vision.weights.dtypes], a
// LLaVA tower cut after its feature layer, Gemma 3's projector norm stored
// as 1 + w, Pixtral's pairs interleaved. Throws Error(Unsupported) naming
// the field for a tower no projector type holds.
spec::Spec mmproj_twin(const spec::Spec& hf, DType dtype);

// The metadata llama.cpp's converter writes into the mmproj of `hf`, with
// the image processor's mean and std (its preprocessor_config.json's) and
// general.file_type of `dtype`.
std::map<std::string, weights::GgufValue> mmproj_metadata_from_spec(const spec::Spec& hf, DType dtype,
                                                                     const std::array<double, 3>& mean,
                                                                     const std::array<double, 3>& std);

// Every tensor of the mmproj of `hf` (mmproj_twin(hf, dtype)'s tower and
// projector), read from the checkpoint `in` of `hf` and changed as the
// converter changes it (Pixtral's q/k rows permuted, Gemma 3's projector
// norm stored as 1 + w), in the converter's dtypes; then Pixtral's
// v.token_embd.img_break, row `hf.vision.tokens.row_end` of the token table.
void for_each_mmproj_tensor(const spec::Spec& hf, DType dtype, const std::string& in,
                            const std::function<void(GgufTensorValues&)>& emit);

}  // namespace lathe::importer
