// The Vulkan test harness. Every test that touches Vulkan derives its fixture
// from VulkanTest: the one shared context runs with VK_LAYER_KHRONOS_validation,
// and any warning or error the layer reports during a test fails that test.
// The device is LATHE_DEVICE's pick, else the best device present (lavapipe
// on a machine without a GPU).
//
// One exception, for a lent GPU alone: LATHE_TEST_WITHOUT_VALIDATION=<why>
// runs the tests without the layer, and says so with the reason on stderr.
// Debian 12's layer (1.3.239) predates VK_KHR_cooperative_matrix and hides
// it (runtime/vk/device_info.cpp), so the gpu-coop-khr class can be tested
// only so (bench/gpu/run); CI never sets it.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "runtime/vk/device.hpp"

namespace lathe::test {

// The source tree whose specs a test reads: the LATHE_SOURCE_DIR variable
// (the GPU kit runs the binaries from another checkout), else `built`, the
// tree they were built from.
inline std::string source_dir(const char* built) {
  const char* v = std::getenv("LATHE_SOURCE_DIR");
  return v && *v ? v : built;
}

// The shared validated context, created on first use.
vk::Context& vulkan();

struct VulkanTest {
  VulkanTest();
  ~VulkanTest();  // fails the running test on any validation message
  vk::Context& ctx;
  vk::Device& device;
};

}  // namespace lathe::test
