// TOML in, validated Spec out. All errors of a file are collected, each at
// its `file:line:col`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "generator/spec/diagnostics.hpp"
#include "core/spec.hpp"

namespace lathe::spec {

// Parses and validates; returns nullopt when `diagnostics` holds errors.
std::optional<Spec> parse_spec_string(std::string_view text, const std::string& file, Diagnostics& diagnostics);
std::optional<Spec> parse_spec_file(const std::string& path, Diagnostics& diagnostics);

// The architecture contract (d = H_q·d_h unless head_dim is explicit,
// H_q mod H_kv = 0, …); parse_spec_* runs it. Errors go to `diagnostics`.
void validate(const Spec& spec, Diagnostics& diagnostics);

// A draft model for `model` (`lathe gen --draft`): a plain decoder of the
// model's vocabulary, whose KV cache can be cut back after rejected
// proposals (no state-space layers); and a model that can verify proposals
// (a decoder without state-space layers). Errors at the model's lines go to
// `model_diagnostics`, at the draft's to `draft_diagnostics`; each names the
// other file (Spec::file).
void validate_draft(const Spec& model, const Spec& draft, Diagnostics& model_diagnostics,
                    Diagnostics& draft_diagnostics);

// Tensor module paths of a naming preset ("hf-llama", "hf-gpt2", "gguf") for
// this spec's placement; empty when the preset is unknown. A preset's paths: of the stack tensors and the (decoder's) layers, and of
// an encoder–decoder's encoder layers (empty for a preset without them).
std::map<Role, std::string> preset_names(const std::string& preset, NormPlacement placement, Stack stack = Stack::Decoder);
std::map<Role, std::string> preset_encoder_names(const std::string& preset, NormPlacement placement);
std::vector<std::string> preset_list();

// A vision tower's naming presets ("hf-clip", "hf-siglip", "hf-pixtral",
// "hf-mllama"): the tower's paths and its projector's (by the projector's
// kind), and Llama 3.2 Vision's global layers'; empty when unknown.
std::map<Role, std::string> vision_preset_names(const std::string& preset, const Vision& vision);
std::map<Role, std::string> vision_preset_global_names(const std::string& preset);
std::vector<std::string> vision_preset_list();

}  // namespace lathe::spec
