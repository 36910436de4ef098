// Push-constant layouts: one description, emitted as a C++ struct and as a
// GLSL block, so the two sides cannot drift apart (ggml-vulkan's history has
// many fixes for hand-written twins that did). reflect_push_offsets reads the
// layout back from SPIR-V, so a test can check a compiled kernel against the
// description the C++ struct was emitted from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kernels.hpp"

namespace lathe::emit {

enum class PushType { U32, I32, F32 };

struct PushField {
  std::string name;
  PushType type;
  std::string comment;
};

struct PushLayout {
  std::string name;  // the C++ struct name
  std::vector<PushField> fields;

  uint32_t offset(size_t field) const { return static_cast<uint32_t>(field * 4); }  // std430: 4-byte scalars
  uint32_t size() const { return static_cast<uint32_t>(fields.size() * 4); }
};

std::string glsl_block(const PushLayout& layout);  // `layout(push_constant) uniform … { … } pc;`
std::string cpp_struct(const PushLayout& layout);  // struct with static_asserts on offsets and size

// Byte offsets of the members of the push-constant block of a SPIR-V module,
// in member order; empty when the module has none.
std::vector<uint32_t> reflect_push_offsets(const std::vector<uint32_t>& spirv);

// The layout of a kernel family, from its description in core/kernels.hpp.
const PushLayout& push_layout(kernels::Family family);
const PushLayout& rows_push_layout();       // kernels over a chunk of token rows
const PushLayout& matmul_push_layout();     // matmul.comp
const PushLayout& attention_push_layout();  // rope_kv.comp, attention.comp

}  // namespace lathe::emit
