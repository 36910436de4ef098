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
// The config is checked by importing it again: every spec field must come
// back unchanged (spec_differences; cache.dtype is a build choice no config
// holds and is not compared). A spec that no supported config expresses
// throws Error(InvalidArgument) naming the fields that would change, e.g.
// "norm.placement: \"parallel\" …" or "weights.dtype: q8_0 …".
nlohmann::json hf_config_from_spec(const spec::Spec& spec);

}  // namespace lathe::importer
