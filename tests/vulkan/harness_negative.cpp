// A test that breaks a valid-usage rule on purpose. Run by ctest through
// expect_failure.cmake: it must fail, and name the rule it broke. If the
// harness ever stops failing tests on validation messages, this turns red.
#include <doctest/doctest.h>

#include "tests/harness/vulkan_harness.hpp"

TEST_CASE_FIXTURE(lathe::test::VulkanTest, "a buffer with no usage flags is a validation error") {
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 256;
  info.usage = 0;  // VUID-VkBufferCreateInfo-usage-requiredbitmask
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (vkCreateBuffer(device.handle(), &info, nullptr, &buffer) == VK_SUCCESS)
    vkDestroyBuffer(device.handle(), buffer, nullptr);
}
