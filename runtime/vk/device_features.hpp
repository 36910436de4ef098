// What a device reports that the plan's device classes may need
// (plan::DeviceFeatures), from its Vulkan properties: never its vendor or
// name.
#pragma once

#include "core/plan.hpp"
#include "runtime/vk/device_info.hpp"

namespace lathe::vk {

inline plan::DeviceFeatures device_features(const DeviceInfo& d) {
  return {d.type == VK_PHYSICAL_DEVICE_TYPE_CPU, d.subgroup_size, d.max_compute_shared_memory, d.max_workgroup_invocations};
}

}  // namespace lathe::vk
