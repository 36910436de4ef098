// The chosen device, as seen through the validated context.
#include <doctest/doctest.h>

#include <cstdlib>

#include "runtime/vk/check.hpp"
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
    auto devices = lathe::vk::query_devices(ctx.instance().handle());
    CHECK(lathe::vk::select_device(devices, "").index == device.info().index);
  } else {
    auto devices = lathe::vk::query_devices(ctx.instance().handle());
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
