// The kernels of a model: which shaders/ families its schedule needs, with
// which exact constants; compiled to SPIR-V and embedded in kernels.cpp.
#pragma once

#include <string>
#include <vector>

#include "generator/emit/push_layout.hpp"
#include "generator/emit/shader_compiler.hpp"
#include "generator/spec/spec.hpp"

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

std::vector<KernelInstance> kernel_instances(const spec::Spec& spec);
std::vector<CompiledKernel> compile_kernels(const spec::Spec& spec);

// kernels.cpp: the push-constant structs, the SPIR-V of every instance and
// the table lathe::ModelInfo::kernels points at.
std::string emit_kernels_source(const spec::Spec& spec, const std::string& spec_path,
                                const std::vector<CompiledKernel>& kernels);

// For --dump: the GLSL and SPIR-V disassembly of every instance.
std::string dump_kernels(const std::vector<CompiledKernel>& kernels);

}  // namespace lathe::emit
