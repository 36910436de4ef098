// GLSL -> SPIR-V in-process (glslang), validated and disassembled with
// SPIRV-Tools. Kernel sources come from shaders/ (carried in the generator);
// each instantiation prepends a block of exact constants.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::emit {

struct ShaderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct KernelSource {
  std::string file;       // the shaders/ file, for error messages ("norm.comp")
  std::string constants;  // generated: #defines and the push-constant block
};

// The text glslang compiles: #version, extensions (the common ones, then the
// kernel file's own, hoisted from its head), the constants, then
// `#line 1` and the kernel file, so errors report the kernel file's lines.
std::string assemble_glsl(const KernelSource& source);

// Compiles a compute kernel for Vulkan 1.2 / SPIR-V 1.5 and validates the
// result. Throws ShaderError with "shaders/<file>:LINE: message" lines on any
// compile or validation error. `#include "x.glsl"` resolves in shaders/.
std::vector<uint32_t> compile_kernel(const KernelSource& source);

// Compiles complete GLSL text (its own #version and extensions) the same way:
// tests and tools with a kernel that is not in shaders/. Errors name `name`.
std::vector<uint32_t> compile_glsl(std::string_view name, std::string_view source);

// SPIRV-Tools' validator; the empty string when the module is valid.
std::string validate_spirv(const std::vector<uint32_t>& spirv);
std::string disassemble_spirv(const std::vector<uint32_t>& spirv);

}  // namespace lathe::emit
