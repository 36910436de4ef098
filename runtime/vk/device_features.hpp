// What a device reports that the plan's device classes may need
// (plan::DeviceFeatures), from its Vulkan properties: never its vendor or
// name.
#pragma once

#include "core/plan.hpp"
#include "runtime/vk/device_info.hpp"

namespace lathe::vk {

// A cooperative-matrix extension counts when the matmul kernels' variant
// can run on it: its feature (which lathe::vk::Device enables), f16
// arithmetic, the Vulkan memory model its modules use, and the
// 16 × 16 × 16 f16 · f16 + f32 → f32 subgroup shape.
inline bool coop_usable(const DeviceInfo& d, const CoopMatrix& coop) {
  return coop.extension && coop.feature && d.shader_float16 && d.vulkan_memory_model && has_f16_f32_16x16x16(coop);
}

inline plan::DeviceFeatures device_features(const DeviceInfo& d) {
  return {d.type == VK_PHYSICAL_DEVICE_TYPE_CPU, d.subgroup_size,         d.max_compute_shared_memory,
          d.max_workgroup_invocations,           d.integer_dot,           coop_usable(d, d.coop_nv),
          coop_usable(d, d.coop_khr)};
}

}  // namespace lathe::vk
