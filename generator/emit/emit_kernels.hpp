// The kernels of a model: the instances its plan names (generator/lower),
// each a shaders/ family with exact constants; compiled to SPIR-V and
// embedded in kernels.cpp.
#pragma once

#include <string>
#include <vector>

#include "generator/emit/push_layout.hpp"
#include "generator/emit/shader_compiler.hpp"
#include "core/spec.hpp"
#include "generator/lower/lowering.hpp"

namespace lathe::emit {

struct KernelInstance {
  std::string name;  // unique within the model: "norm_576"
  KernelSource source;
  const PushLayout* push;
};

struct CompiledKernel {
  KernelInstance instance;
  std::vector<uint32_t> spirv;
};

// The instance of one kernel key: its shaders/ file and its constants (the
// key's, the spec's single-valued ones and its family's interface block).
KernelInstance kernel_instance(const spec::Spec& spec, const lower::KernelKey& key);
// Exactly the instances the plan uses, in the order of its kernel list.
std::vector<KernelInstance> kernel_instances(const spec::Spec& spec, const lower::Plan& plan);
// The same for a spec's own plan (lowered here); throws std::runtime_error
// with the diagnostics when the spec cannot be lowered.
std::vector<KernelInstance> kernel_instances(const spec::Spec& spec);
std::vector<CompiledKernel> compile_kernels(const spec::Spec& spec, const lower::Plan& plan);

// kernels.cpp: the SPIR-V of every instance and the table
// lathe::ModelInfo::kernels points at, pinned to the order of model.hpp's
// plan_kernels by static_asserts.
std::string emit_kernels_source(const spec::Spec& spec, const std::string& spec_path,
                                const std::vector<CompiledKernel>& kernels);

// For --dump: the GLSL and SPIR-V disassembly of every instance.
std::string dump_kernels(const std::vector<CompiledKernel>& kernels);

}  // namespace lathe::emit
