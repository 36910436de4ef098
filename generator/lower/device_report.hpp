// Which device class each Vulkan device gets: `lathe devices` and the GPU
// kit's device listing (bench/gpu) print the same lines. Every plan has
// these classes; their tiles depend on a model's dtypes (`<model> info`).
#pragma once

#include <string>
#include <vector>

#include "generator/lower/lowering.hpp"
#include "runtime/vk/device_features.hpp"

namespace lathe::lower {

inline std::string device_class_report(const std::vector<vk::DeviceInfo>& devices) {
  const std::vector<plan::DeviceClass> classes = device_classes({});
  std::string out = "device classes (the first each device meets; LATHE_DEVICE_CLASS forces another it meets):\n";
  for (const vk::DeviceInfo& d : devices) {
    const plan::DeviceFeatures f = vk::device_features(d);
    const int32_t first = plan::first_met(classes, f);
    std::string also;
    for (size_t i = 0; i < classes.size(); ++i)
      if (plan::meets(classes[i], f) && static_cast<int32_t>(i) != first) also += (also.empty() ? "" : ", ") + std::string(classes[i].name);
    out += "  [" + std::to_string(d.index) + "] " + (first < 0 ? std::string("none") : std::string(classes[static_cast<size_t>(first)].name)) +
           (also.empty() ? "" : " (also meets " + also + ")") + "\n";
  }
  return out;
}

}  // namespace lathe::lower
