#include "runtime/version.hpp"

#include <vulkan/vulkan.h>

#include "runtime/error.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

#ifndef LATHE_VERSION
#define LATHE_VERSION "unknown"
#endif
#ifndef LATHE_COMMIT
#define LATHE_COMMIT "unknown"
#endif

namespace lathe {

std::string_view version() { return LATHE_VERSION; }
std::string_view commit() { return LATHE_COMMIT; }

std::string version_text(std::string_view program) {
  std::string out = std::string(program) + " " + LATHE_VERSION + " (commit " + LATHE_COMMIT + ")\n";
  uint32_t loader = 0;
  if (vkEnumerateInstanceVersion(&loader) == VK_SUCCESS)
    out += "Vulkan loader " + vk::api_version_string(loader) + "\n";
  try {
    const vk::Instance instance(vk::InstanceOptions{});
    for (const vk::DeviceInfo& d : vk::query_devices(instance))
      out += "device [" + std::to_string(d.index) + "] " + d.name + ": driver " + d.driver_name + " " + d.driver_info +
             ", Vulkan " + vk::api_version_string(d.api_version) + "\n";
  } catch (const Error& e) {
    out += std::string("no Vulkan device: ") + e.what() + "\n";
  }
  out.pop_back();  // the caller ends the last line
  return out;
}

}  // namespace lathe
