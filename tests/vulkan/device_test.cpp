// The chosen device, as seen through the validated context.
#include <doctest/doctest.h>

#include <cstdlib>

#include "runtime/vk/check.hpp"
#include "runtime/vk/device_features.hpp"
#include "tests/harness/vulkan_harness.hpp"

using lathe::test::VulkanTest;

TEST_CASE_FIXTURE(VulkanTest, "the context runs with validation on a device with a compute queue") {
  CHECK(ctx.instance().validation_enabled());
  const auto& info = device.info();
  CHECK(info.has_compute_queue);
  CHECK(info.subgroup_size > 0);
  CHECK(info.max_storage_buffer_range > 0);
  CHECK(info.max_compute_shared_memory >= 16384);  // the Vulkan minimum
  CHECK(!info.heaps.empty());
  MESSAGE("device: " << info.name << " (" << info.driver_name << ")");
}

// What the device can take now: a budgeted heap's budget within its size
// (VK_EXT_memory_budget), and device_memory's available within its bytes; a
// CPU device (lavapipe) reports the host's MemAvailable. Buffers this
// process holds count in a budgeted heap's usage.
TEST_CASE_FIXTURE(VulkanTest, "a device's memory: its size, and what it can take now") {
  const auto& info = device.info();
  for (const lathe::vk::MemoryHeap& h : info.heaps) {
    CHECK(h.budget <= h.size);
    CHECK((h.budget > 0 || h.usage == 0));
  }
  const lathe::vk::DeviceMemory m = lathe::vk::device_memory(info);
  CHECK(m.bytes > 0);
  CHECK(m.available <= m.bytes);
  if (info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    CHECK(m.host);
    CHECK(m.available > 0);
  }
  MESSAGE("memory: " << (m.bytes >> 20) << " MiB, " << (m.available >> 20) << " MiB available now");
}

TEST_CASE_FIXTURE(VulkanTest, "LATHE_DEVICE picks the device the harness runs on") {
  const char* selector = std::getenv("LATHE_DEVICE");
  if (selector == nullptr) {
    // No selector: the harness picks the best-ranked device present.
    auto devices = lathe::vk::query_devices(ctx.instance());
    CHECK(lathe::vk::select_device(devices, "").index == device.info().index);
  } else {
    auto devices = lathe::vk::query_devices(ctx.instance());
    CHECK(lathe::vk::select_device(devices, selector).index == device.info().index);
  }
}

TEST_CASE_FIXTURE(VulkanTest, "a correctly made buffer draws no validation message") {
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 256;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  lathe::vk::check(vkCreateBuffer(device.handle(), &info, nullptr, &buffer), "vkCreateBuffer");
  vkDestroyBuffer(device.handle(), buffer, nullptr);
}

// Integer dot products and cooperative matrices as the device reports them.
// lavapipe (Mesa 22.3, the CPU device of every test machine) lists
// VK_KHR_shader_integer_dot_product with its feature and neither
// cooperative-matrix extension; a GPU prints what it has.
TEST_CASE_FIXTURE(VulkanTest, "the device's integer dot product and cooperative matrices") {
  const lathe::vk::DeviceInfo& info = device.info();
  const lathe::plan::DeviceFeatures f = lathe::vk::device_features(info);
  CHECK(f.integer_dot == (info.integer_dot_extension && info.integer_dot));
  CHECK(f.coop_nv == (info.coop_nv.feature && info.shader_float16 && lathe::vk::has_f16_f32_16x16x16(info.coop_nv)));
  CHECK(f.coop_khr == (info.coop_khr.feature && info.shader_float16 && lathe::vk::has_f16_f32_16x16x16(info.coop_khr)));
  if (info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    CHECK(info.integer_dot_extension);
    CHECK(f.integer_dot);
    CHECK(!f.coop_nv);
    CHECK(!f.coop_khr);
  }
  MESSAGE(lathe::vk::format_device_list({info}));
}

// A second device on the validated instance, every feature it has enabled
// (the integer dot product's extension and structure, each cooperative-matrix
// extension present): the layer reports nothing (~VulkanTest checks).
TEST_CASE_FIXTURE(VulkanTest, "a device created with its integer dot product and cooperative matrices enabled passes validation") {
  const lathe::vk::DeviceInfo& info = device.info();
  lathe::vk::Device second(info);
  CHECK(second.handle() != VK_NULL_HANDLE);
  // The shapes came through vkGetInstanceProcAddr without a message either.
  if (info.coop_nv.extension) CHECK(!info.coop_nv.shapes.empty());
}
