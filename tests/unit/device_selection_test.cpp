// Device choice without a Vulkan instance: synthetic device lists.
#include <doctest/doctest.h>

#include "runtime/error.hpp"
#include "runtime/vk/device_info.hpp"

using lathe::Error;
using lathe::ErrorKind;
using lathe::vk::DeviceInfo;
using lathe::vk::select_device;

namespace {

DeviceInfo make(uint32_t index, const char* name, VkPhysicalDeviceType type, bool compute = true) {
  DeviceInfo d;
  d.index = index;
  d.name = name;
  d.type = type;
  d.has_compute_queue = compute;
  return d;
}

ErrorKind kind_of(const std::vector<DeviceInfo>& devices, std::string_view selector) {
  try {
    select_device(devices, selector);
  } catch (const Error& e) {
    return e.kind();
  }
  FAIL("select_device did not throw for '" << selector << "'");
  return ErrorKind::Io;
}

}  // namespace

TEST_CASE("the best device is discrete, then integrated, then virtual, then CPU") {
  const std::vector<DeviceInfo> devices = {
      make(0, "llvmpipe (LLVM 15.0.6, 256 bits)", VK_PHYSICAL_DEVICE_TYPE_CPU),
      make(1, "Intel(R) UHD Graphics", VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU),
      make(2, "NVIDIA H100", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU),
      make(3, "virtio", VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU),
  };
  CHECK(select_device(devices, "").index == 2);
  CHECK(select_device({devices[0], devices[1], devices[3]}, "").index == 1);
  CHECK(select_device({devices[0], devices[3]}, "").index == 3);
  CHECK(select_device({devices[0]}, "").index == 0);
}

TEST_CASE("a device without a compute queue is never picked by preference") {
  const std::vector<DeviceInfo> devices = {
      make(0, "display only", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, false),
      make(1, "llvmpipe", VK_PHYSICAL_DEVICE_TYPE_CPU),
  };
  CHECK(select_device(devices, "").index == 1);
  CHECK(kind_of(devices, "display") == ErrorKind::Unsupported);
}

TEST_CASE("a selector picks by index or by case-insensitive name substring") {
  const std::vector<DeviceInfo> devices = {
      make(0, "NVIDIA H100", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU),
      make(1, "llvmpipe (LLVM 15.0.6, 256 bits)", VK_PHYSICAL_DEVICE_TYPE_CPU),
  };
  CHECK(select_device(devices, "1").index == 1);
  CHECK(select_device(devices, "LLVMPIPE").index == 1);
  CHECK(select_device(devices, "h100").index == 0);
}

TEST_CASE("an unknown selector is an error that lists the devices") {
  const std::vector<DeviceInfo> devices = {make(0, "llvmpipe", VK_PHYSICAL_DEVICE_TYPE_CPU)};
  CHECK(kind_of(devices, "7") == ErrorKind::NotFound);
  CHECK(kind_of(devices, "radeon") == ErrorKind::NotFound);
  try {
    select_device(devices, "radeon");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("'radeon'") != std::string::npos);
    CHECK(message.find("[0] llvmpipe") != std::string::npos);
  }
  CHECK(kind_of({}, "") == ErrorKind::NotFound);
}
