// matmul's CoopKhr layout (kernels::Layout::CoopKhr): the Coop layout's
// module, which glslang 12 compiles from GL_NV_cooperative_matrix (it knows
// no GL_KHR_cooperative_matrix), rewritten instruction by instruction for
// SPV_KHR_cooperative_matrix, which VK_KHR_cooperative_matrix devices take.
//
// Debian 12's SPIRV-Tools (2023.1, SPIRV-Headers 1.3.239) predates the KHR
// extension: spirv-val refuses its capability and opcodes. So a rewritten
// module cannot be validated as it is here; check_coop_khr checks what can
// be checked without it (its instructions, and its types through NV's),
// and the KHR instructions themselves are left to a device's run (its
// driver, and the validation layer it runs with).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lathe::emit {

// The module on SPV_KHR_cooperative_matrix. Every NV matrix type becomes a
// KHR type of the use (A, B or accumulator) its values have where they reach
// OpCooperativeMatrixMulAddNV; a type whose values take two uses (matmul's
// f16 A and B) becomes two types, and the variables, pointers, arrays and
// instructions that carry its values are retyped by use. Throws ShaderError
// naming what it cannot rewrite (a value used in two roles, a matrix passed
// to a function, a column-major flag that is no constant).
std::vector<uint32_t> coop_khr_from_nv(std::span<const uint32_t> nv);

// What can be checked of a rewritten module here: its instruction stream
// parses, no NV cooperative-matrix instruction, capability or extension is
// left, every result id is below the bound and defined once, every id the
// KHR instructions and every result type name is defined, and the matrix
// operands agree (MulAdd's A, B and accumulator uses and shapes, loads and
// stores of a constant layout, a matrix loaded or stored through a pointer to
// its own type); then the module, mapped back to NV's instructions with each
// KHR type an NV type of its own, passes spirv-val, which so checks the type
// of every value, variable and pointer the rewrite retyped. The empty string
// when it holds; else the problems, a line each.
std::string check_coop_khr(std::span<const uint32_t> khr);

}  // namespace lathe::emit
