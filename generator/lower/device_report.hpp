// Which device class each Vulkan device gets: `lathe devices` and the GPU
// kit's device listing (bench/gpu) print the same lines. Every plan has
// these classes; their tiles depend on a model's dtypes (`<model> info`).
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "generator/lower/lowering.hpp"
#include "runtime/vk/device_features.hpp"

namespace lathe::lower {

// Every plan's classes, whatever its weights: a class that only plans with
// block weights (integer dot products read q8_0 and k-quant blocks) is
// listed too, after those of f16 and f32 models; the flash classes as a
// model with 8B's attention plans them (4 query heads a KV head, 128 wide,
// an f16 cache: their shared memory depends on it).
inline std::vector<plan::DeviceClass> report_classes() {
  std::vector<plan::DeviceClass> all;
  for (const DType dtype : {DType::F16, DType::Q8_0, DType::Q4_K}) {
    Plan p;
    p.kernels.push_back(KernelKey{.family = kernels::Family::Attention, .head_tile = 4});
    p.classes = device_classes(std::vector<DType>{dtype});
    add_flash_classes(p, 128, true, 0);
    for (const plan::DeviceClass& c : p.classes)
      if (std::none_of(all.begin(), all.end(), [&](const plan::DeviceClass& a) { return a.name == c.name; })) all.push_back(c);
  }
  return all;
}

// Per device, the class it takes, then every class with whether the device
// meets it (and, where not, what the class needs); a forced-only class,
// whose kernels no device has passed the tests on yet, is marked "taken
// only when named": LATHE_DEVICE_CLASS=<name> runs it.
inline std::string device_class_report(const std::vector<vk::DeviceInfo>& devices, std::span<const plan::DeviceClass> classes) {
  size_t width = 0;
  for (const plan::DeviceClass& c : classes) width = std::max(width, c.name.size());
  std::string out = "device classes (the first each device meets; LATHE_DEVICE_CLASS forces another it meets):\n";
  for (const vk::DeviceInfo& d : devices) {
    const plan::DeviceFeatures f = vk::device_features(d);
    const int32_t first = plan::first_met(classes, f);
    out += "  [" + std::to_string(d.index) + "] " + (first < 0 ? std::string("none") : std::string(classes[static_cast<size_t>(first)].name)) + "\n";
    for (const plan::DeviceClass& c : classes) {
      out += "      " + std::string(c.name) + std::string(width + 2 - c.name.size(), ' ');
      out += plan::meets(c, f) ? "meets" : "does not meet (needs " + plan::needs_text(c) + ")";
      if (c.forced_only) out += ", taken only when named";
      out += "\n";
    }
  }
  return out;
}

inline std::string device_class_report(const std::vector<vk::DeviceInfo>& devices) {
  return device_class_report(devices, report_classes());
}

// The forced-only classes `d` meets: those the GPU kit runs the tests of
// first, each named by LATHE_DEVICE_CLASS (bench/gpu/run).
inline std::vector<std::string> forced_only_met(const vk::DeviceInfo& d) {
  std::vector<std::string> names;
  for (const plan::DeviceClass& c : report_classes())
    if (c.forced_only && plan::meets(c, vk::device_features(d))) names.emplace_back(c.name);
  return names;
}

}  // namespace lathe::lower
