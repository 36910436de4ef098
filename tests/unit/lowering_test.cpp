// The lowering of a typed schedule to dispatches, without a device: the
// fusions, the packing of q/k/v, the column views, the in-place residual, and
// the errors for schedules the kernels cannot run.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/model/lowering.hpp"

using namespace lathe;
using typed::Vector;
using typed::Weight;

namespace {

// A one-layer Llama-shaped model: d 16, 2 query heads over 1 KV head of 8,
// SwiGLU 32, vocab 40, f16 weights.
constexpr ManifestEntry kManifest[] = {
    {Role::Embed, false, -1, -1, "embed", 2, {40, 16}, DType::F16},
    {Role::AttnNorm, false, 0, -1, "attn_norm", 1, {16, 1}, DType::F16},
    {Role::Q, false, 0, -1, "q", 2, {16, 16}, DType::F16},
    {Role::K, false, 0, -1, "k", 2, {8, 16}, DType::F16},
    {Role::V, false, 0, -1, "v", 2, {8, 16}, DType::F16},
    {Role::O, false, 0, -1, "o", 2, {16, 16}, DType::F16},
    {Role::MlpNorm, false, 0, -1, "mlp_norm", 1, {16, 1}, DType::F16},
    {Role::Gate, false, 0, -1, "gate", 2, {32, 16}, DType::F16},
    {Role::Up, false, 0, -1, "up", 2, {32, 16}, DType::F16},
    {Role::Down, false, 0, -1, "down", 2, {16, 32}, DType::F16},
    {Role::FinalNorm, false, -1, -1, "final_norm", 1, {16, 1}, DType::F16},
    {Role::LmHead, false, -1, -1, "lm_head", 2, {40, 16}, DType::F16},
};

std::vector<KernelBinary> kernels_named(std::initializer_list<const char*> names) {
  std::vector<KernelBinary> out;
  for (const char* n : names) out.push_back({n, "", nullptr, 0, 0});
  return out;
}

const std::vector<KernelBinary> kKernels =
    kernels_named({"embed_16_f16", "matmul_16_f16_norm", "rope_kv_8_neox", "attention", "matmul_16_f16_residual",
                   "matmul_16_f16_gated_silu_norm", "matmul_32_f16_residual", "argmax", "attention_combine"});

typed::Schedule llama(bool standalone_add = false) {
  typed::Recorder r;
  auto x = r.embed(Weight<40, 16>{0}, 1.0);
  auto h = r.rmsnorm(x, Vector<16>{1}, 1e-5);
  auto q = r.matmul(Weight<16, 16>{2}, h);
  auto k = r.matmul(Weight<8, 16>{3}, h);
  auto v = r.matmul(Weight<8, 16>{4}, h);
  r.rope<2, 1, 8, 8>(q, k, typed::RopePairing::Neox, 10000.0);
  auto a = r.attention<2, 1, 8>(q, k, v, 0, 0.35);
  if (standalone_add) {
    x = r.add(x, a);  // a residual without the matmul of its branch
  } else {
    x = r.add(x, r.matmul(Weight<16, 16>{5}, a));
  }
  auto m = r.rmsnorm(x, Vector<16>{6}, 1e-5);
  auto g = r.matmul(Weight<32, 16>{7}, m);
  auto u = r.matmul(Weight<32, 16>{8}, m);
  x = r.add(x, r.matmul(Weight<16, 32>{9}, r.gated(g, u, typed::Activation::SiLU)));
  r.logits(Weight<40, 16>{11}, r.rmsnorm(x, Vector<16>{10}, 1e-5));
  return std::move(r.schedule());
}

ModelInfo info(const std::vector<KernelBinary>& kernels) {
  return ModelInfo{"tiny", "tiny.toml", 16, 1, 2, 1, 8, 32, 40, 64, 0, Layout::OutIn, DType::F16,
                   kManifest, {}, nullptr, kernels};
}

std::vector<std::string> names(const plan::Plan& p) {
  std::vector<std::string> out;
  for (const plan::Dispatch& d : p.dispatches) out.push_back(d.kernel);
  return out;
}

}  // namespace

TEST_SUITE("lowering") {

TEST_CASE("a Llama layer lowers to six dispatches with norms folded and q, k, v packed") {
  const ModelInfo m = info(kKernels);
  const plan::Plan p = plan::lower(m, llama(), {});
  CHECK(names(p) == std::vector<std::string>{"embed_16_f16", "matmul_16_f16_norm", "rope_kv_8_neox", "attention",
                                             "matmul_16_f16_residual", "matmul_16_f16_gated_silu_norm",
                                             "matmul_32_f16_residual", "matmul_16_f16_norm", "argmax"});
  REQUIRE(p.packs.size() == 1);
  CHECK(p.packs[0].weights == std::vector<int32_t>{2, 3, 4});
  CHECK(p.packs[0].biases.empty());

  const plan::Dispatch& qkv = p.dispatches[1];
  CHECK(qkv.bindings[0].resource == plan::Resource::Pack);
  CHECK(qkv.n == 32);  // 16 + 8 + 8 rows
  // The norm folds in: x is the embedding's slot, the scale the attn_norm tensor.
  CHECK(qkv.bindings[2].index == p.dispatches[0].bindings[3].index);
  CHECK(qkv.bindings[6].resource == plan::Resource::Vector);
  CHECK(qkv.bindings[6].index == 1);

  // q, k, v are column views of the packed output: offsets 0, 16, 24, stride 32.
  const plan::Dispatch& rope = p.dispatches[2];
  CHECK(rope.push == std::vector<uint32_t>{0, 0, 32, 16, 32, 24, 32});
  CHECK(rope.bindings[1].index == qkv.bindings[5].index);

  // The residual adds write the residual stream in place.
  CHECK(p.dispatches[4].bindings[5].index == p.dispatches[0].bindings[3].index);
  CHECK(p.dispatches[6].bindings[5].index == p.dispatches[0].bindings[3].index);
  // The gated MLP reads gate and up together.
  CHECK(p.dispatches[5].bindings[0].index == 7);
  CHECK(p.dispatches[5].bindings[1].index == 8);
  // Only the last row's logits, unless every row's are asked for.
  CHECK(p.dispatches[7].last_row);
  CHECK_FALSE(plan::lower(m, llama(), {.all_logits = true}).dispatches[7].last_row);
  // One workgroup per KV head.
  CHECK(p.dispatches[3].groups_x == 1);
}

TEST_CASE("split attention adds the combine pass and the scratch binding") {
  const plan::Plan p = plan::lower(info(kKernels), llama(), {.attention_splits = 4});
  CHECK(p.dispatches.size() == 10);
  CHECK(p.dispatches[3].kernel == "attention");
  CHECK(p.dispatches[3].groups_z == 4);
  CHECK(p.dispatches[3].bindings[5].resource == plan::Resource::Scratch);
  CHECK(p.dispatches[4].kernel == "attention_combine");
  CHECK(p.dispatches[4].groups_x == 2);  // one per query head
}

TEST_CASE("a schedule the kernels cannot run is refused naming the op") {
  try {
    plan::lower(info(kKernels), llama(true), {});
    FAIL("a standalone residual add was lowered");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK(std::string(e.what()).find("tiny: schedule op") != std::string::npos);
    CHECK(std::string(e.what()).find("residual add must follow the matmul") != std::string::npos);
  }
}

TEST_CASE("a build without a needed kernel instance is refused naming the kernel") {
  const std::vector<KernelBinary> fewer = kernels_named({"embed_16_f16", "matmul_16_f16_norm", "attention"});
  try {
    plan::lower(info(fewer), llama(), {});
    FAIL("a plan was built from missing kernels");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("no kernel instance 'rope_kv_8_neox'") != std::string::npos);
  }
}

}  // TEST_SUITE
