// lathe — the command-line front end: devices, report, …
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "runtime/error.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

namespace {

int cmd_devices(bool validation) {
  lathe::vk::Instance instance(lathe::vk::InstanceOptions{validation});
  const auto devices = lathe::vk::query_devices(instance.handle());
  std::cout << lathe::vk::format_device_list(devices);
  if (!devices.empty()) {
    const auto& chosen = lathe::vk::select_device(devices, lathe::vk::device_selector());
    std::cout << "selected: [" << chosen.index << "] " << chosen.name << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lathe: a transformer spec in, a model-specific Vulkan inference build out"};
  app.require_subcommand(1);

  bool validation = false;
  auto* devices = app.add_subcommand("devices", "List the Vulkan devices, their memory and the limits that matter");
  devices->add_flag("--validation", validation, "Enable the Khronos validation layer");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*devices) return cmd_devices(validation);
  } catch (const lathe::Error& e) {
    std::cerr << "lathe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
