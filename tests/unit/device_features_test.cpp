// A device's integer dot products and cooperative matrices, from a synthetic
// DeviceInfo (no Vulkan): what plan::DeviceFeatures makes of them, what
// `lathe devices` prints, and the class report's verdict per class.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "generator/lower/device_report.hpp"
#include "runtime/vk/device_features.hpp"
#include "runtime/vk/device_info.hpp"

using lathe::vk::CoopMatrix;
using lathe::vk::CoopShape;
using lathe::vk::DeviceInfo;

namespace {

constexpr CoopShape kF16F32{16, 16, 16, VK_COMPONENT_TYPE_FLOAT16_NV, VK_COMPONENT_TYPE_FLOAT16_NV,
                            VK_COMPONENT_TYPE_FLOAT32_NV, VK_COMPONENT_TYPE_FLOAT32_NV, VK_SCOPE_SUBGROUP_NV, false};
constexpr CoopShape kInt8{16, 8, 32, VK_COMPONENT_TYPE_SINT8_NV, VK_COMPONENT_TYPE_SINT8_NV,
                          VK_COMPONENT_TYPE_SINT32_NV, VK_COMPONENT_TYPE_SINT32_NV, VK_SCOPE_SUBGROUP_NV, true};

// A GPU with both extensions, the integer dot product and f16 arithmetic.
DeviceInfo gpu() {
  DeviceInfo d;
  d.name = "a GPU";
  d.type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  d.subgroup_size = 32;
  d.max_compute_shared_memory = 49152;
  d.max_workgroup_invocations = 1024;
  d.has_compute_queue = true;
  d.shader_float16 = true;
  d.vulkan_memory_model = true;
  d.integer_dot_extension = d.integer_dot = true;
  d.integer_dot_4x8_signed_accelerated = true;
  d.coop_nv = CoopMatrix{true, true, {kF16F32}, {}};
  d.coop_khr = CoopMatrix{true, true, {kInt8, kF16F32}, {}};
  return d;
}

}  // namespace

TEST_CASE("cooperative matrices count with the feature, f16 arithmetic and the 16×16×16 f16 → f32 subgroup shape") {
  DeviceInfo d = gpu();
  lathe::plan::DeviceFeatures f = lathe::vk::device_features(d);
  CHECK(f.integer_dot);
  CHECK(f.coop_nv);
  CHECK(f.coop_khr);

  d.shader_float16 = false;  // the kernels' f16 arithmetic
  f = lathe::vk::device_features(d);
  CHECK(!f.coop_nv);
  CHECK(!f.coop_khr);

  d = gpu();
  d.vulkan_memory_model = false;  // the coop modules' memory model
  f = lathe::vk::device_features(d);
  CHECK(!f.coop_nv);
  CHECK(!f.coop_khr);

  d = gpu();
  d.coop_nv.feature = false;                                        // listed, but the feature is not there
  d.coop_khr.shapes = {kInt8};                                      // no f16 shape
  d.coop_khr.shapes.push_back(kF16F32);
  d.coop_khr.shapes.back().scope = VK_SCOPE_WORKGROUP_NV;           // the shape, but not a subgroup's
  f = lathe::vk::device_features(d);
  CHECK(!f.coop_nv);
  CHECK(!f.coop_khr);
  CHECK(f.integer_dot);
}

TEST_CASE("lathe devices prints the integer dot product, each cooperative-matrix extension and every shape") {
  DeviceInfo d = gpu();
  d.coop_nv = CoopMatrix{};
  const std::string text = lathe::vk::format_device_list({d});
  CHECK(text.find("integer dot product   yes (VK_KHR_shader_integer_dot_product; 4×8-bit packed accelerated: signed yes, "
                  "mixed signedness no)") != std::string::npos);
  CHECK(text.find("coop matrix NV        no\n") != std::string::npos);
  CHECK(text.find("coop matrix KHR       yes, cooperativeMatrix yes, 2 shapes (M×N×K: A·B + C → D, scope)\n"
                  "      16×8×32: i8·i8 + i32 → i32, subgroup, saturating\n"
                  "      16×16×16: f16·f16 + f32 → f32, subgroup\n") != std::string::npos);

  d.coop_khr.feature = false;
  d.coop_khr.unqueried = "not queried: the validation layer (1.3.239) predates it (1.3.255)";
  CHECK(lathe::vk::format_device_list({d}).find("cooperativeMatrix not queried: the validation layer (1.3.239)") !=
        std::string::npos);
}

TEST_CASE("the class report says per class whether the device meets it, and marks the forced-only ones") {
  lathe::plan::DeviceClass plain{"plain"};
  lathe::plan::DeviceClass coop{"coop"};
  coop.prefill = {64, 32, 1, 1, lathe::plan::Variant::CoopKhr};  // needs VK_KHR_cooperative_matrix
  coop.forced_only = true;
  lathe::plan::DeviceClass cpu{"cpu"};
  cpu.cpu_only = true;
  const std::vector<lathe::plan::DeviceClass> classes = {coop, cpu, plain};
  DeviceInfo d = gpu();
  d.index = 3;
  const std::string text = lathe::lower::device_class_report({d}, classes);
  CHECK(text.find("  [3] plain\n") != std::string::npos);  // coop is forced-only: not taken unnamed
  CHECK(text.find("      coop   meets, taken only when named\n") != std::string::npos);
  CHECK(text.find("      cpu    does not meet (needs a CPU device)\n") != std::string::npos);
  CHECK(text.find("      plain  meets\n") != std::string::npos);
}

TEST_CASE("the report's classes hold the flash classes as a model with 8B's attention plans them") {
  const std::vector<lathe::plan::DeviceClass> classes = lathe::lower::report_classes();
  for (const char* name : {"gpu-flash", "gpu-coop-flash", "gpu-coop-khr-flash"}) {
    CAPTURE(name);
    const auto c = std::find_if(classes.begin(), classes.end(), [&](const lathe::plan::DeviceClass& x) { return x.name == name; });
    REQUIRE(c != classes.end());
    CHECK(c->forced_only);  // the kit's forced and classes steps run them on a lease
    CHECK(c->flash == lathe::plan::Flash{8, 16});  // 8 rows × 4 heads, 16 keys a tile
  }
}
