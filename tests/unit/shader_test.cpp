// Kernel compilation: GLSL from shaders/ with generated constants, to valid
// SPIR-V whose push-constant layout is the one the C++ struct is emitted from.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "generator/emit/coop_khr.hpp"
#include "generator/emit/emit_cpp.hpp"
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

// Instances of every opcode count that matter to the rewrite.
size_t count_op(const std::vector<uint32_t>& spirv, uint32_t op) {
  size_t n = 0;
  for (size_t at = 5; at < spirv.size() && (spirv[at] >> 16) > 0; at += spirv[at] >> 16) n += (spirv[at] & 0xffffu) == op;
  return n;
}

// The coop layout of a matmul instance, compiled and valid, and its KHR
// rewrite: every NV instruction gone, one KHR instruction for each, and
// what check_coop_khr can check holds. Returns the KHR module.
std::vector<uint32_t> check_coop(const emit::KernelSource& source) {
  const std::vector<uint32_t> nv = emit::compile_layout(source, kernels::Layout::Coop);
  CHECK(emit::validate_spirv(nv).empty());
  CHECK(count_op(nv, 5361) > 0);  // OpCooperativeMatrixMulAddNV: the products are on matrix units
  const std::vector<uint32_t> khr = emit::coop_khr_from_nv(nv);  // compile_layout's CoopKhr, without compiling again
  CHECK(emit::check_coop_khr(khr).empty());
  for (uint32_t op = 0; op < 5; ++op) CHECK(count_op(khr, 5358 + op) == 0);
  for (uint32_t op = 1; op < 5; ++op) CHECK(count_op(khr, 4456 + op) == count_op(nv, 5358 + op));  // loads, stores, MulAdds, lengths
  return khr;
}

// The shipped specs the generator supports (models/*.toml), by file name.
std::vector<spec::Spec> shipped_specs() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(LATHE_SOURCE_DIR) / "models"))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<spec::Spec> out;
  for (const std::filesystem::path& file : files) {
    spec::Spec s = load(file.filename().string());
    spec::Diagnostics diagnostics(file.string());
    if (emit::check_supported(s, diagnostics)) out.push_back(std::move(s));
  }
  return out;
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

TEST_CASE("every matmul instance of the shipped specs compiles in the coop layout, NV's and rewritten for KHR") {
  // Debian 12's spirv-val predates SPV_KHR_cooperative_matrix: it refuses
  // the rewrite's capability, so only check_coop_khr's checks run on it here.
  std::set<std::string> seen;  // instances of the same constants compile once
  size_t specs = 0;
  for (const spec::Spec& s : shipped_specs()) {
    ++specs;
    for (const emit::KernelInstance& k : emit::kernel_instances(s)) {
      if (k.source.file != "matmul_rows.comp" || !seen.insert(k.source.constants).second) continue;
      CAPTURE(s.name);
      CAPTURE(k.name);
      check_coop(k.source);
    }
  }
  MESSAGE(seen.size() << " matmul instances of " << specs << " specs in the coop and coop-khr layouts");
  CHECK(specs >= 20);
}

TEST_CASE("every attention instance of the shipped specs compiles in its flash forms, on matrix units NV's and KHR's") {
  // The multiply-add form runs in the kernel tests on lavapipe; the
  // matrix-unit form only here (lavapipe has no cooperative matrices).
  std::set<std::string> seen;
  size_t coop = 0;
  for (const spec::Spec& s : shipped_specs()) {
    for (const emit::KernelInstance& k : emit::kernel_instances(s)) {
      if (k.source.file != "attention.comp" || !seen.insert(k.source.constants).second) continue;
      CAPTURE(s.name);
      CAPTURE(k.name);
      const std::vector<uint32_t> plain = emit::compile_flash(k.source, kernels::Layout::Tiled);
      CHECK(emit::validate_spirv(plain).empty());
      CHECK(count_op(plain, 5361) == 0);
      if (s.dims.head_dim % 16 != 0) continue;  // the matrix units take 16 dims a step: no flash class plans it
      const std::vector<uint32_t> nv = emit::compile_flash(k.source, kernels::Layout::Coop);
      CHECK(emit::validate_spirv(nv).empty());
      CHECK(count_op(nv, 5361) == 2);  // OpCooperativeMatrixMulAddNV: S = Q·Kᵀ and P·V
      const std::vector<uint32_t> khr = emit::coop_khr_from_nv(nv);
      CHECK(emit::check_coop_khr(khr).empty());
      for (uint32_t op = 0; op < 5; ++op) CHECK(count_op(khr, 5358 + op) == 0);
      for (uint32_t op = 1; op < 5; ++op) CHECK(count_op(khr, 4456 + op) == count_op(nv, 5358 + op));
      CHECK(emit::compile_flash(k.source, kernels::Layout::CoopKhr) == khr);
      ++coop;
    }
  }
  MESSAGE(seen.size() << " attention instances in the flash form, " << coop << " on matrix units");
  CHECK(coop >= 10);
}

TEST_CASE("the coop layout compiles for every weight dtype and every epilogue") {
  const spec::Spec s = load("mixtral-8x7b.toml");  // experts: the expert epilogues' constants
  using lower::Epilogue;
  const std::vector<Epilogue> epilogues = {
      {},
      {.bias = true},
      {.residual = true},
      {.bias = true, .gated = true, .activation = true, .act = Activation::GeluTanh, .norm = true},
      {.gated = true, .activation = true, .norm = true, .experts = 1},
      {.residual = true, .experts = 2, .part_experts = 3},
      {.norm = true, .softcap = true, .scaled = true},
  };
  for (int d = 0; d <= static_cast<int>(DType::Q6_K); ++d) {
    const DType dtype = static_cast<DType>(d);
    for (const Epilogue& e : epilogues) {
      const lower::KernelKey key{.family = kernels::Family::Matmul, .width = 512, .dtype = dtype, .epilogue = e};
      CAPTURE(key.name());
      check_coop(emit::kernel_instance(s, key).source);
    }
  }
}

TEST_CASE("the KHR rewrite gives A and B their own types, and check_coop_khr sees a broken one") {
  const spec::Spec s = load("smollm2-135m.toml");
  const lower::KernelKey key{.family = kernels::Family::Matmul, .width = s.dims.hidden, .dtype = DType::BF16,
                             .epilogue = {.gated = true, .activation = true, .norm = true}};
  const std::vector<uint32_t> khr = check_coop(emit::kernel_instance(s, key).source);
  CHECK(emit::compile_layout(emit::kernel_instance(s, key).source, kernels::Layout::CoopKhr) == khr);
  // Types (4456): f16 as A, f16 as B, the f32 accumulator.
  CHECK(count_op(khr, 4456) == 3);
  const std::string text = emit::assemble_glsl(emit::layout_source(emit::kernel_instance(s, key).source, kernels::Layout::Coop));
  // The kernel file's own #extension lines come before the generated constants (its push block).
  CHECK(text.find("#extension GL_NV_cooperative_matrix : require") < text.find("#define K "));
  CHECK(text.find("#extension GL_NV_cooperative_matrix", text.find("#line 1")) == std::string::npos);

  // A MulAdd whose A and B are swapped: the uses no longer match.
  std::vector<uint32_t> swapped = khr;
  for (size_t at = 5; at < swapped.size(); at += swapped[at] >> 16)
    if ((swapped[at] & 0xffffu) == 4459) std::swap(swapped[at + 3], swapped[at + 4]);
  CHECK(emit::check_coop_khr(swapped).find("operand's type is not of use") != std::string::npos);
  // An NV opcode left, and an id past the bound.
  std::vector<uint32_t> left = khr;
  for (size_t at = 5; at < left.size(); at += left[at] >> 16)
    if ((left[at] & 0xffffu) == 4459) left[at] = (left[at] & 0xffff0000u) | 5361u;
  CHECK(emit::check_coop_khr(left).find("NV cooperative-matrix instruction") != std::string::npos);
  std::vector<uint32_t> past = khr;
  past[3] = 10;
  CHECK(emit::check_coop_khr(past).find("is not below the bound") != std::string::npos);
  CHECK_FALSE(emit::check_coop_khr(std::vector<uint32_t>(khr.begin(), khr.end() - 1)).empty());  // a truncated stream
}

TEST_CASE("the KHR rewrite refuses a matrix it cannot give one use") {
  const std::string shader = R"(#version 460
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer B { float16_t h[]; float f[]; } b;
void main() {
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a;
  coopMatLoadNV(a, b.h, 0, 16, false);
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  c = coopMatMulAddNV(a, a, c);
  coopMatStoreNV(c, b.f, 0, 16, false);
}
)";
  const std::vector<uint32_t> nv = emit::compile_glsl("both_uses.comp", shader);
  CHECK_THROWS_WITH_AS(emit::coop_khr_from_nv(nv), doctest::Contains("used as two of A, B and accumulator"), emit::ShaderError);
}
