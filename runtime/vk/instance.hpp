// The Vulkan instance, optionally with the Khronos validation layer and a
// debug messenger that records every warning and error it reports.
#pragma once

#include <vulkan/vulkan.h>

#include <mutex>
#include <string>
#include <vector>

namespace lathe::vk {

// The Vulkan version lathe asks the instance for: a device of a later one is
// used as one of this version (a feature promoted to core since comes
// through its extension).
inline constexpr uint32_t kApiVersion = VK_API_VERSION_1_2;

struct InstanceOptions {
  // Enables VK_LAYER_KHRONOS_validation and records its warnings and errors.
  // Throws ErrorKind::Unsupported when the layer is not installed.
  bool validation = false;
};

class Instance {
 public:
  // Throws Error(NotFound) saying what to install when the loader finds no
  // Vulkan driver (check.hpp's no_driver()).
  explicit Instance(const InstanceOptions& options = {});
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  // The validation layer's specVersion (the Vulkan headers it was built
  // from; Debian 12's: 1.3.239), 0 without validation: structures of
  // extensions newer than it are unknown to it, and it reports them.
  uint32_t validation_version() const { return validation_enabled() ? validation_version_ : 0; }

  // Warnings and errors reported by the validation layer since the last call.
  std::vector<std::string> take_validation_messages();

 private:
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* user);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  uint32_t validation_version_ = 0;
  std::mutex mutex_;
  std::vector<std::string> messages_;
};

}  // namespace lathe::vk
