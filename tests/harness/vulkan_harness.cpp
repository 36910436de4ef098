#include "tests/harness/vulkan_harness.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace lathe::test {

vk::Context& vulkan() {
  static std::unique_ptr<vk::Context> context = [] {
    vk::ContextOptions options;
    const char* without = std::getenv("LATHE_TEST_WITHOUT_VALIDATION");
    options.validation = without == nullptr || *without == '\0';
    if (!options.validation)
      std::fprintf(stderr, "lathe tests: the validation layer is OFF (LATHE_TEST_WITHOUT_VALIDATION: %s)\n", without);
    return std::make_unique<vk::Context>(options);
  }();
  return *context;
}

namespace {

void fail_on_messages(vk::Context& ctx) {
  for (const std::string& message : ctx.instance().take_validation_messages()) FAIL_CHECK(message);
}

}  // namespace

// Messages left over from before the test (instance creation, an earlier
// test that threw) are reported, not silently dropped.
VulkanTest::VulkanTest() : ctx(vulkan()), device(ctx.device()) { fail_on_messages(ctx); }

VulkanTest::~VulkanTest() {
  vkDeviceWaitIdle(device.handle());
  fail_on_messages(ctx);
}

}  // namespace lathe::test
