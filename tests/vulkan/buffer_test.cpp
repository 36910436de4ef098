// Buffers, uploads and read-backs on the chosen device, validation on.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/vk/buffer.hpp"
#include "tests/harness/vulkan_harness.hpp"

using lathe::Error;
using lathe::ErrorKind;
using lathe::test::VulkanTest;
using namespace lathe::vk;

namespace {

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST_CASE_FIXTURE(VulkanTest, "an upload reads back unchanged, at an offset too") {
  Buffer buffer(device, 4096 * sizeof(float), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, MemoryUse::Device);
  CHECK((buffer.mapped() != nullptr) == device.info().unified_memory);
  const std::vector<float> data = ramp(4096, 0.5f);
  upload(device, buffer, data.data(), data.size() * sizeof(float));
  const std::vector<float> tail = ramp(100, -7.0f);
  upload(device, buffer, tail.data(), tail.size() * sizeof(float), 1000 * sizeof(float));
  std::vector<float> back(4096);
  download(device, buffer, back.data(), back.size() * sizeof(float));
  for (size_t i = 0; i < back.size(); ++i) {
    const float expected = i >= 1000 && i < 1100 ? tail[i - 1000] : data[i];
    if (back[i] != expected) FAIL_CHECK("element " << i << ": " << back[i] << " != " << expected);
  }
}

TEST_CASE_FIXTURE(VulkanTest, "a copy on the compute queue moves bytes between buffers (the staging path)") {
  const std::vector<float> data = ramp(1024, 3.0f);
  Buffer staging(device, data.size() * sizeof(float), 0, MemoryUse::Staging);
  REQUIRE(staging.mapped() != nullptr);
  upload(device, staging, data.data(), data.size() * sizeof(float));
  Buffer target(device, data.size() * sizeof(float), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, MemoryUse::Device);
  OneShot once(device);
  VkBufferCopy region{0, 0, data.size() * sizeof(float)};
  vkCmdCopyBuffer(once.begin(), staging.handle(), target.handle(), 1, &region);
  once.submit_and_wait();
  std::vector<float> back(data.size());
  download(device, target, back.data(), back.size() * sizeof(float));
  CHECK(back == data);
}

TEST_CASE_FIXTURE(VulkanTest, "a range outside the buffer is refused with the sizes") {
  Buffer buffer(device, 64, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, MemoryUse::Device);
  std::vector<char> bytes(65);
  try {
    upload(device, buffer, bytes.data(), bytes.size());
    FAIL("an upload past the end was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK(std::string(e.what()).find("65 bytes at offset 0 lies outside a buffer of 64 bytes") != std::string::npos);
  }
  CHECK_THROWS_AS(download(device, buffer, bytes.data(), 8, 60), Error);
}

TEST_CASE_FIXTURE(VulkanTest, "a buffer larger than maxMemoryAllocationSize is refused before allocating") {
  const VkDeviceSize too_big = device.info().max_memory_allocation_size + 1;
  try {
    Buffer buffer(device, too_big, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, MemoryUse::Device);
    FAIL("an oversized buffer was created");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::OutOfMemory);
    CHECK(std::string(e.what()).find("maxMemoryAllocationSize") != std::string::npos);
  }
}
