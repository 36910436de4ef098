// The logical device lathe runs on: one compute queue, and the optional
// features (fp16, 8/16-bit storage) enabled where the device has them.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

namespace lathe::vk {

// Features a build needs. A device that lacks one is refused with an error
// naming the feature and the device.
struct DeviceRequirements {
  bool subgroup_arithmetic = false;
  bool subgroup_ballot = false;  // subgroupBroadcast
  bool shader_float16 = false;
  bool storage_buffer_16bit = false;
  uint32_t min_subgroup_size = 0;
  uint32_t min_compute_shared_memory = 0;
};

// Throws ErrorKind::Unsupported naming the first missing feature.
void check_requirements(const DeviceInfo& info, const DeviceRequirements& requirements);

class Device {
 public:
  Device(const DeviceInfo& info, const DeviceRequirements& requirements = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }

 private:
  DeviceInfo info_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
};

struct ContextOptions {
  bool validation = false;
  // Index or name substring; empty: LATHE_DEVICE, then the best device.
  // Several, comma-separated ("0,1"): each opened (a model split over them).
  std::string device;
  DeviceRequirements requirements;
};

// An instance and the device chosen on it. Destroyed device first.
class Context {
 public:
  explicit Context(const ContextOptions& options = {});

  Instance& instance() { return *instance_; }
  Device& device() { return *devices_.front(); }  // the first
  std::vector<Device*> devices();                 // every one the options named, in order

 private:
  std::unique_ptr<Instance> instance_;
  std::vector<std::unique_ptr<Device>> devices_;  // destroyed before the instance
};

}  // namespace lathe::vk
