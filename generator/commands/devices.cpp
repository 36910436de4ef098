// `lathe devices`: the Vulkan devices of this machine, the one a session
// selects, and the device class each takes and the classes it meets.
#include <iostream>

#include "generator/commands/commands.hpp"
#include "generator/lower/device_report.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

namespace lathe::tool {

int cmd_devices(bool validation) {
  lathe::vk::Instance instance(lathe::vk::InstanceOptions{validation});
  const auto devices = lathe::vk::query_devices(instance);
  std::cout << lathe::vk::format_device_list(devices);
  if (!devices.empty()) {
    const auto& chosen = lathe::vk::select_device(devices, lathe::vk::device_selector());
    std::cout << "selected: [" << chosen.index << "] " << chosen.name << "\n";
    std::cout << lathe::lower::device_class_report(devices);
  }
  return 0;
}

}  // namespace lathe::tool
