#include "generator/emit/shader_compiler.hpp"

#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>
#include <spirv-tools/libspirv.hpp>

#include <algorithm>
#include <memory>
#include <mutex>
#include <regex>
#include <string_view>

namespace lathe::embedded {
std::string_view shaders(std::string_view name);
}

namespace lathe::emit {
namespace {

// glslang needs one process-wide initialization.
void ensure_glslang() {
  static std::once_flag once;
  std::call_once(once, [] {
    glslang::InitializeProcess();
    std::atexit([] { glslang::FinalizeProcess(); });
  });
}

// `#include "x.glsl"`: shared helpers from shaders/.
class Includer : public glslang::TShader::Includer {
 public:
  IncludeResult* includeLocal(const char* header, const char*, size_t) override { return lookup(header); }
  IncludeResult* includeSystem(const char* header, const char*, size_t) override { return lookup(header); }
  void releaseInclude(IncludeResult* result) override { delete result; }

 private:
  IncludeResult* lookup(const char* header) {
    const std::string_view text = lathe::embedded::shaders(header);
    if (text.empty()) return nullptr;
    return new IncludeResult(header, text.data(), text.size(), nullptr);
  }
};

// glslang reports "ERROR: 0:12: 'x' : undeclared identifier"; name the file.
std::string with_file(const std::string& log, const std::string& path) {
  static const std::regex location(R"(ERROR: (?:0|[^:]*):(\d+): )");
  std::string out = std::regex_replace(log, location, path + ":$1: error: ");
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// A kernel file's own #extension lines (matmul_coop.comp's cooperative
// matrices), among the comments and blank lines that open it: GLSL wants
// every #extension before the first token that is not a directive, and the
// generated constants end in a push-constant block. They move up beside the
// common ones; each leaves an empty line, so that `#line 1` still numbers
// the file's lines.
struct Hoisted {
  std::string extensions, body;
};
Hoisted hoist_extensions(std::string_view file) {
  Hoisted out;
  size_t at = 0;
  while (at < file.size()) {
    const size_t end = std::min(file.find('\n', at), file.size());
    std::string_view line = file.substr(at, end - at);
    const size_t first = line.find_first_not_of(" \t");
    line.remove_prefix(first == std::string_view::npos ? line.size() : first);
    if (line.starts_with("#extension")) {
      out.extensions += std::string(line) + "\n";
      out.body += "\n";
    } else if (line.empty() || line.starts_with("//")) {
      out.body += std::string(file.substr(at, end - at)) + "\n";
    } else {
      break;
    }
    at = end + 1;
  }
  if (at < file.size()) out.body += file.substr(at);
  return out;
}

}  // namespace

std::string assemble_glsl(const KernelSource& source) {
  const std::string_view file = lathe::embedded::shaders(source.file);
  if (file.empty()) throw ShaderError("shaders/" + source.file + ": no such kernel");
  const Hoisted kernel = hoist_extensions(file);
  return "#version 460\n"
         "#extension GL_GOOGLE_include_directive : require\n"
         "#extension GL_KHR_shader_subgroup_basic : require\n"
         "#extension GL_KHR_shader_subgroup_arithmetic : require\n"
         "#extension GL_KHR_shader_subgroup_ballot : require\n"
         "#extension GL_EXT_control_flow_attributes : require\n" +
         kernel.extensions + source.constants + "#line 1\n" + kernel.body;
}

namespace {

// `text` is the whole GLSL source; `path` is what errors call it ("shaders/norm.comp").
std::vector<uint32_t> compile_text(const std::string& text, const std::string& path) {
  ensure_glslang();
  const char* strings[] = {text.c_str()};
  const char* names[] = {path.c_str()};

  glslang::TShader shader(EShLangCompute);
  shader.setStringsWithLengthsAndNames(strings, nullptr, names, 1);
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, glslang::EShTargetVulkan_1_2);
  shader.setEnvTarget(glslang::EShTargetSpv, glslang::EShTargetSpv_1_5);
  Includer includer;
  const auto messages = static_cast<EShMessages>(EShMsgSpvRules | EShMsgVulkanRules);
  if (!shader.parse(GetDefaultResources(), 100, false, messages, includer))
    throw ShaderError(with_file(shader.getInfoLog(), path));

  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(messages)) throw ShaderError(with_file(program.getInfoLog(), path));

  std::vector<uint32_t> spirv;
  spv::SpvBuildLogger logger;
  glslang::SpvOptions options;
  options.validate = false;  // validated below, with the errors kept
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), spirv, &logger, &options);
  const std::string problems = validate_spirv(spirv);
  if (!problems.empty()) throw ShaderError(path + ": invalid SPIR-V: " + problems);
  return spirv;
}

}  // namespace

std::vector<uint32_t> compile_kernel(const KernelSource& source) {
  return compile_text(assemble_glsl(source), "shaders/" + source.file);
}

std::vector<uint32_t> compile_glsl(std::string_view name, std::string_view source) {
  return compile_text(std::string(source), std::string(name));
}

std::string validate_spirv(const std::vector<uint32_t>& spirv) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string problems;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& position, const char* message) {
    problems += "word " + std::to_string(position.index) + ": " + message + "\n";
  });
  if (tools.Validate(spirv) && problems.empty()) return {};
  return problems.empty() ? "invalid module" : problems;
}

std::string disassemble_spirv(const std::vector<uint32_t>& spirv) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string text;
  if (!tools.Disassemble(spirv, &text, SPV_BINARY_TO_TEXT_OPTION_INDENT | SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES))
    return "(cannot disassemble)";
  return text;
}

}  // namespace lathe::emit
