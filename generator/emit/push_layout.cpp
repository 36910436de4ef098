#include "generator/emit/push_layout.hpp"

#include <map>

#include "core/kernels.hpp"

namespace lathe::emit {
namespace {

const char* glsl_type(PushType t) { return t == PushType::U32 ? "uint" : t == PushType::I32 ? "int" : "float"; }
const char* cpp_type(PushType t) { return t == PushType::U32 ? "uint32_t" : t == PushType::I32 ? "int32_t" : "float"; }

// SPIR-V opcodes and enums used by the reflection (SPIR-V 1.5 spec, section 3).
constexpr uint32_t kOpTypeStruct = 30;
constexpr uint32_t kOpTypePointer = 32;
constexpr uint32_t kOpVariable = 59;
constexpr uint32_t kOpMemberDecorate = 72;
constexpr uint32_t kDecorationOffset = 35;
constexpr uint32_t kStorageClassPushConstant = 9;

}  // namespace

std::string glsl_block(const PushLayout& layout) {
  std::string out = "layout(push_constant) uniform " + layout.name + " {\n";
  for (const PushField& f : layout.fields) {
    out += "  " + std::string(glsl_type(f.type)) + " " + f.name + ";";
    if (!f.comment.empty()) out += "  // " + f.comment;
    out += "\n";
  }
  return out + "} pc;\n";
}

std::string cpp_struct(const PushLayout& layout) {
  std::string out = "struct " + layout.name + " {\n";
  for (const PushField& f : layout.fields) {
    out += "  " + std::string(cpp_type(f.type)) + " " + f.name + ";";
    if (!f.comment.empty()) out += "  // " + f.comment;
    out += "\n";
  }
  out += "};\n";
  for (size_t i = 0; i < layout.fields.size(); ++i)
    out += "static_assert(offsetof(" + layout.name + ", " + layout.fields[i].name + ") == " +
           std::to_string(layout.offset(i)) + ");\n";
  out += "static_assert(sizeof(" + layout.name + ") == " + std::to_string(layout.size()) + ");\n";
  return out;
}

std::vector<uint32_t> reflect_push_offsets(const std::vector<uint32_t>& spirv) {
  std::map<uint32_t, uint32_t> pointee;                        // pointer type id -> pointee type id
  std::map<uint32_t, std::map<uint32_t, uint32_t>> offsets;    // struct id -> member -> offset
  uint32_t push_pointer = 0;
  for (size_t at = 5; at < spirv.size();) {  // after the 5-word header
    const uint32_t count = spirv[at] >> 16, op = spirv[at] & 0xffff;
    if (count == 0 || at + count > spirv.size()) break;  // malformed: stop
    const uint32_t* w = &spirv[at];
    if (op == kOpTypePointer && count >= 4) pointee[w[1]] = w[3];
    if (op == kOpVariable && count >= 4 && w[3] == kStorageClassPushConstant) push_pointer = w[1];
    if (op == kOpMemberDecorate && count >= 5 && w[3] == kDecorationOffset) offsets[w[1]][w[2]] = w[4];
    (void)kOpTypeStruct;
    at += count;
  }
  std::vector<uint32_t> out;
  if (push_pointer == 0 || !pointee.count(push_pointer)) return out;
  for (const auto& [member, offset] : offsets[pointee[push_pointer]]) out.push_back(offset);
  return out;
}

namespace {

// The layouts are described once, in core/kernels.hpp, whose C++ structs
// the plans and the runtime fill; the GLSL blocks are emitted from the same
// list.
template <size_t N>
PushLayout from_table(const char* name, const push::FieldInfo (&fields)[N]) {
  PushLayout layout{name, {}};
  for (const push::FieldInfo& f : fields) layout.fields.push_back({std::string(f.name), PushType::U32, std::string(f.comment)});
  return layout;
}

}  // namespace

const PushLayout& push_layout(kernels::Family family) {
  static const std::map<kernels::Family, PushLayout> layouts = [] {
    std::map<kernels::Family, PushLayout> out;
    for (const kernels::FamilyInfo& f : kernels::kFamilies) {
      PushLayout layout{std::string(f.push_struct), {}};
      for (const push::FieldInfo& field : f.push)
        layout.fields.push_back({std::string(field.name), PushType::U32, std::string(field.comment)});
      out.emplace(f.family, std::move(layout));
    }
    return out;
  }();
  return layouts.at(family);
}

const PushLayout& rows_push_layout() {
  static const PushLayout layout = from_table("RowsPush", push::kRowsPush);
  return layout;
}

const PushLayout& matmul_push_layout() {
  static const PushLayout layout = from_table("MatmulPush", push::kMatmulPush);
  return layout;
}

const PushLayout& attention_push_layout() {
  static const PushLayout layout = from_table("AttentionPush", push::kAttentionPush);
  return layout;
}

}  // namespace lathe::emit
