// The kernels of a model: the instances its plan names (generator/lower),
// each a shaders/ family with exact constants; compiled to SPIR-V and
// embedded in kernels.cpp.
#pragma once

#include <array>
#include <span>
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

struct CompiledModule {
  std::string file;  // its shaders/ source
  std::vector<uint32_t> spirv;
};

struct CompiledKernel {
  KernelInstance instance;
  // One module, or a matmul's one per layout its plan's classes run, or
  // attention's and its flash modules (flash_layouts).
  std::vector<CompiledModule> modules;
  std::array<uint8_t, kernels::kLayouts> layout_module{};  // as lathe::KernelBinary's (0xff: none)
};

// The layouts of matmul the plan's device classes run (their tiles').
std::vector<kernels::Layout> planned_layouts(std::span<const plan::DeviceClass> classes);
// The module a matmul instance of weight dtype `dtype` runs for `layout`:
// the layout itself, or where it has no kernel for that dtype the plain one
// (integer dot products serve block weights alone: others decode in rows).
kernels::Layout module_layout(kernels::Layout layout, DType dtype);
// A matmul instance's source for a layout: its constants, the layout's file.
KernelSource layout_source(const KernelSource& source, kernels::Layout layout);
// A matmul instance's module for a layout: its layout_source compiled, and
// for CoopKhr the Coop module rewritten (generator/emit/coop_khr.hpp), which
// the SPIRV-Tools here cannot validate; check_coop_khr has checked it.
std::vector<uint32_t> compile_layout(const KernelSource& source, kernels::Layout layout);
// The layouts whose prompts run attention in flash tiles on some class of
// the plan (its prefill tile's: Tiled, Coop, CoopKhr), and an attention
// instance's flash module for one (kernels::flash_file; CoopKhr rewritten).
std::vector<kernels::Layout> flash_layouts(std::span<const plan::DeviceClass> classes);
std::vector<uint32_t> compile_flash(const KernelSource& source, kernels::Layout layout);

// The instance of one kernel key: its shaders/ file and its constants (the
// key's, the spec's single-valued ones and its family's interface block).
KernelInstance kernel_instance(const spec::Spec& spec, const lower::KernelKey& key);
// Exactly the instances the plan uses, in the order of its kernel list.
std::vector<KernelInstance> kernel_instances(const spec::Spec& spec, const lower::Plan& plan);
// The same for a spec's own plan (lowered here); throws std::runtime_error
// with the diagnostics when the spec cannot be lowered.
std::vector<KernelInstance> kernel_instances(const spec::Spec& spec);
// The instances of the tower's build of a spec with a splice [vision]
// (lower::plan_tower), their constants vision_tower(spec)'s; throws
// std::runtime_error with the diagnostics for a tower the device path does
// not run yet.
std::vector<KernelInstance> tower_kernel_instances(const spec::Spec& spec);
std::vector<CompiledKernel> compile_kernels(const spec::Spec& spec, const lower::Plan& plan);

// kernels.cpp: the SPIR-V of every instance and the table
// lathe::ModelInfo::kernels points at, pinned to the order of model.hpp's
// plan_kernels by static_asserts. A draft's (`lathe gen --draft`), appended:
// in its namespace `ns` (emit_model_header's), its plan from `header`.
std::string emit_kernels_source(const spec::Spec& spec, const std::string& spec_path,
                                const std::vector<CompiledKernel>& kernels, const std::string& ns = {},
                                const std::string& header = "model.hpp");

// For --dump: the GLSL and SPIR-V disassembly of every instance.
std::string dump_kernels(const std::vector<CompiledKernel>& kernels);

}  // namespace lathe::emit
