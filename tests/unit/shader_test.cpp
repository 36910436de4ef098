// Kernel compilation: GLSL from shaders/ with generated constants, to valid
// SPIR-V whose push-constant layout is the one the C++ struct is emitted from.
#include <doctest/doctest.h>

#include "generator/emit/emit_kernels.hpp"
#include "generator/emit/push_layout.hpp"
#include "generator/emit/shader_compiler.hpp"
#include "generator/spec/parse.hpp"

using namespace lathe;

namespace {

spec::Spec load(const std::string& name) {
  spec::Diagnostics diag(name);
  auto s = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR) + "/models/" + name, diag);
  REQUIRE_MESSAGE(s, diag.format());
  return *s;
}

// The standalone norm of smollm2-135m's width: no plan of a pre-norm model
// uses it (every norm folds into the projections after it), but the
// lowering dispatches it for a norm whose reader is no matmul.
emit::KernelInstance norm_instance() {
  const spec::Spec s = load("smollm2-135m.toml");
  return emit::kernel_instance(s, lower::KernelKey{.family = kernels::Family::Norm, .width = s.dims.hidden});
}

}  // namespace

TEST_CASE("every kernel instance of the shipped Llama and GPT-2 specs compiles to valid SPIR-V") {
  for (const char* name : {"smollm2-135m.toml", "gpt2.toml", "qwen2.5-0.5b.toml"}) {
    for (const emit::KernelInstance& k : emit::kernel_instances(load(name))) {
      CAPTURE(k.name);
      const std::vector<uint32_t> spirv = emit::compile_kernel(k.source);
      REQUIRE(spirv.size() > 5);
      CHECK(spirv[0] == 0x07230203u);  // the SPIR-V magic number
      CHECK(emit::validate_spirv(spirv).empty());
    }
  }
}

TEST_CASE("the SPIR-V push-constant block has the offsets the C++ struct is emitted with") {
  for (const emit::KernelInstance& k : emit::kernel_instances(load("gpt2.toml"))) {
    CAPTURE(k.name);
    const std::vector<uint32_t> offsets = emit::reflect_push_offsets(emit::compile_kernel(k.source));
    REQUIRE(offsets.size() == k.push->fields.size());
    for (size_t i = 0; i < offsets.size(); ++i) CHECK(offsets[i] == k.push->offset(i));
    const std::string cpp = emit::cpp_struct(*k.push);
    for (size_t i = 0; i < offsets.size(); ++i)
      CHECK(cpp.find("offsetof(" + k.push->name + ", " + k.push->fields[i].name + ") == " +
                     std::to_string(offsets[i])) != std::string::npos);
  }
}

TEST_CASE("the reflection sees a GLSL block that drifted from the description") {
  emit::PushLayout drifted = emit::rows_push_layout();
  drifted.fields.insert(drifted.fields.begin(), {"extra", emit::PushType::F32, ""});
  emit::KernelInstance k = norm_instance();
  const std::string block = emit::glsl_block(emit::rows_push_layout());
  REQUIRE(k.source.constants.find(block) != std::string::npos);
  k.source.constants.replace(k.source.constants.find(block), block.size(), emit::glsl_block(drifted));
  const std::vector<uint32_t> described = {emit::rows_push_layout().offset(0)};
  const std::vector<uint32_t> reflected = emit::reflect_push_offsets(emit::compile_kernel(k.source));
  CHECK(reflected == std::vector<uint32_t>{0, 4});
  CHECK(reflected != described);
}

TEST_CASE("a kernel compile error names the shaders/ file and line") {
  emit::KernelInstance k = norm_instance();
  const std::string n_define = "#define N 576u\n";
  REQUIRE(k.source.constants.find(n_define) != std::string::npos);
  k.source.constants.erase(k.source.constants.find(n_define), n_define.size());
  try {
    emit::compile_kernel(k.source);
    FAIL("a kernel without its N constant compiled");
  } catch (const emit::ShaderError& e) {
    const std::string message = e.what();
    CHECK(message.find("shaders/norm.comp:") != std::string::npos);
    CHECK(message.find("'N' : undeclared identifier") != std::string::npos);
  }
}
