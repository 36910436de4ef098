// `lathe devices` for the GPU kit: the Vulkan devices, their limits and the
// device class each gets, without the generator's Clang libraries (which a
// bare GPU machine lacks and the kit does not carry).
#include <iostream>

#include "generator/lower/device_report.hpp"
#include "runtime/error.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

int main() {
  try {
    lathe::vk::Instance instance(lathe::vk::InstanceOptions{false});
    const auto devices = lathe::vk::query_devices(instance.handle());
    std::cout << lathe::vk::format_device_list(devices);
    if (devices.empty()) return 1;
    const auto& chosen = lathe::vk::select_device(devices, lathe::vk::device_selector());
    std::cout << "selected: [" << chosen.index << "] " << chosen.name << "\n" << lathe::lower::device_class_report(devices);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "lathe_kit_devices: " << e.what() << "\n";
    return 1;
  }
}
