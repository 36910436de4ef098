// What several of the `lathe` tool's commands share (generator/commands/):
// a spec parsed with its errors printed, a spec planned for the kernels, and
// the generated build written out (gen, check, build and run). common.cpp
// defines them.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/spec.hpp"
#include "generator/lower/model_plan.hpp"

namespace lathe::tool {

// Parses a spec, printing every error of the file; nullopt when there were any.
std::optional<lathe::spec::Spec> load_spec(const std::string& path);

// The generated header as `gen` writes it (formatted with libFormat, as is
// model.cpp), named `header_name` for its #line resets, in the namespace `ns`
// (empty: the spec's name's; emit_model_header).
std::string model_header(const lathe::spec::Spec& spec, const lathe::lower::ModelPlan& model, const std::string& path,
                         const std::string& header_name, const std::string& ns = {});

// A spec the kernels can run, and its plan: parse errors, fields the runtime
// cannot run yet and graphs the lowering cannot turn into dispatches are all
// errors at the spec.
struct Planned {
  lathe::spec::Spec spec;
  lathe::lower::ModelPlan model;
  std::optional<lathe::lower::ModelPlan> tower;  // a [vision] spec's tower build (lower::plan_tower)
  // `lathe gen --draft`: the draft's spec and plan (its path: draft->spec.file).
  std::unique_ptr<Planned> draft;
};
// With `draft_path`: the draft planned as the model is, and the two checked
// against each other (spec::validate_draft: the errors at either spec).
std::optional<Planned> load_planned(const std::string& path, const std::string& draft_path = {});

// Writes <out>/model.hpp, model.cpp and kernels.cpp (and a [vision] spec's
// tower.hpp, a draft's draft.hpp, their kernels in kernels.cpp too), each
// only when its text changed; unsupported fields and graphs the kernels
// cannot run are errors at the spec (load_planned). `dump`: also the plan as
// text (<out>/plan.dump) and the GLSL and SPIR-V disassembly of every kernel
// instance (<out>/kernels.dump); a draft's in draft-plan.dump and
// draft-kernels.dump.
void write_build(const Planned& planned, const std::string& path, const std::string& out_dir, bool quiet, bool dump);

}  // namespace lathe::tool
