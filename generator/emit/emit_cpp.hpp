// Emission of a model's C++: the constexpr configuration, static_asserts of
// the contract, the weight manifest, typed weight handles, the typed forward
// schedule and the lowered plan, from templates/model.hpp.mustache.
#pragma once

#include <string>

#include "core/spec.hpp"
#include "generator/lower/model_plan.hpp"
#include "generator/spec/diagnostics.hpp"

namespace lathe::emit {

// Fields the runtime cannot run yet: each is an error "not supported yet: <field>"
// at the field's spec position. True when the spec is supported.
bool check_supported(const spec::Spec& spec, spec::Diagnostics& diagnostics);

// `v` as a C++/GLSL floating-point literal with `digits` significant digits
// (17 round-trips a double, 9 a float).
std::string number_literal(double v, int digits = 17);

// The C++ namespace of a model: its name with every non-identifier character
// replaced by '_' ("smollm2-135m" -> "smollm2_135m").
std::string model_namespace(const std::string& name);

// The C++ namespace of a draft's build (`lathe gen --draft`, draft.hpp):
// its name's with "_draft" after it, apart from the model's even when a
// model drafts for itself ("tiny-llama" -> "tiny_llama_draft").
std::string draft_namespace(const std::string& name);

// The header text. `spec_path` is the path written into #line directives;
// `header_name` is the file name the header will have (for #line resets);
// `ns` the C++ namespace under lathe::models (empty: model_namespace of the
// spec's name; a draft's: draft_namespace).
std::string emit_model_header(const spec::Spec& spec, const lower::ModelPlan& model, const std::string& spec_path,
                              const std::string& header_name, const std::string& ns = {});

// The same for the spec's own plan (lowered here); throws std::runtime_error
// with the diagnostics when the spec cannot be lowered.
std::string emit_model_header(const spec::Spec& spec, const std::string& spec_path, const std::string& header_name);

// model.cpp: defines lathe::model_info(), lathe::vision_info() (the
// tower's build of a [vision] spec, emitted into tower.hpp; null without)
// and lathe::draft_info() (the draft's build, emitted into draft.hpp in the
// namespace `draft_ns`; null when `draft_ns` is empty) for the generic
// runtime.
std::string emit_model_source(const spec::Spec& spec, const std::string& spec_path, const std::string& draft_ns = {});

// Writes `text` to `path` unless the file already holds exactly that, so that
// builds depending on generated files do not redo work. True when written.
bool write_if_changed(const std::string& path, const std::string& text);

}  // namespace lathe::emit
