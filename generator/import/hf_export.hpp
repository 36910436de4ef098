// The inverse of the importer: a Hugging Face config.json for a spec, for the
// round-trip tests and for making test checkpoints' configs.
#pragma once

#include <nlohmann/json.hpp>

#include "core/spec.hpp"

namespace lathe::importer {

// The config.json of `spec`. The model_type follows from its features:
// the hf-gpt2 preset → gpt2; sandwich norms → gemma2 (gemma3_text with
// local_theta or per-head qk-norm); branch_output norms → olmo2; experts with
// shared experts → qwen2_moe, without → mixtral; fused qkv and gate_up under
// hf-llama → phi3; unit_offset pre-norms → gemma; q/k/v biases → qwen2;
// per-head qk-norm → qwen3; a sliding window → mistral; else llama.
//
// A spec with [vision] (a splice) gets a multimodal config: the decoder's
// config as text_config, the tower's as vision_config, the projector's and
// the image tokens' keys at the top. The model type follows from the
// tower's preset and the projector: hf-clip or hf-pixtral with an mlp →
// llava, hf-pixtral with merge_mlp → mistral3, hf-siglip with pooled →
// gemma3 (its text_config always gemma3_text). Pixtral's row_end and end
// are written as image_break_token_id and image_end_token_id; Gemma 3's
// "\n\n" around an image (prefix [n, boi], suffix [eoi, n]) is the id
// tokenizer.json gives, which no config holds: the round trip takes the
// spec's, and the config imports to it beside a tokenizer.json that maps
// "\n\n" to n. cross_attention, another tower or projector, and what the
// config classes hard-code otherwise are refused, naming the [vision] key.
//
// The config is checked by importing it again: every spec field must come
// back unchanged (spec_differences; cache.dtype is a build choice no config
// holds and is not compared). A spec that no supported config expresses
// throws Error(InvalidArgument) naming the fields that would change, e.g.
// "norm.placement: \"parallel\" …" or "weights.dtype: q8_0 …".
nlohmann::json hf_config_from_spec(const spec::Spec& spec);

}  // namespace lathe::importer
