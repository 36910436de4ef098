#include "runtime/vk/device.hpp"

#include <string_view>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/vk/check.hpp"

namespace lathe::vk {

void check_requirements(const DeviceInfo& info, const DeviceRequirements& req) {
  auto refuse = [&](const std::string& what) {
    throw Error(ErrorKind::Unsupported, "device [" + std::to_string(info.index) + "] " + info.name + " lacks " + what);
  };
  if (!info.has_compute_queue) refuse("a compute queue");
  if (req.subgroup_arithmetic && !(info.subgroup_compute && info.subgroup_arithmetic))
    refuse("subgroup arithmetic in compute shaders (VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)");
  if (req.subgroup_ballot && !(info.subgroup_compute && info.subgroup_ballot))
    refuse("subgroup ballot operations in compute shaders (VK_SUBGROUP_FEATURE_BALLOT_BIT)");
  if (req.shader_float16 && !info.shader_float16) refuse("shaderFloat16");
  if (req.storage_buffer_16bit && !info.storage_buffer_16bit) refuse("storageBuffer16BitAccess");
  if (info.subgroup_size < req.min_subgroup_size)
    refuse("a subgroup size of at least " + std::to_string(req.min_subgroup_size) + " (it has " +
           std::to_string(info.subgroup_size) + ")");
  if (info.max_compute_shared_memory < req.min_compute_shared_memory)
    refuse(std::to_string(req.min_compute_shared_memory) + " bytes of compute shared memory (it has " +
           std::to_string(info.max_compute_shared_memory) + ")");
}

Device::Device(const DeviceInfo& info, const DeviceRequirements& requirements) : info_(info) {
  check_requirements(info_, requirements);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = info_.compute_queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;

  // Enable what the device has: kernels pick variants by the same flags.
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  f16i8.shaderFloat16 = info_.shader_float16;
  f16i8.shaderInt8 = info_.shader_int8;
  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  storage16.storageBuffer16BitAccess = info_.storage_buffer_16bit;
  VkPhysicalDevice8BitStorageFeatures storage8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  storage8.storageBuffer8BitAccess = info_.storage_buffer_8bit;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &storage16;
  if (info_.api_version >= VK_API_VERSION_1_2) {
    storage16.pNext = &f16i8;
    f16i8.pNext = &storage8;
  }

  // Integer dot products (matmul_dot.comp's OpSDot) where the device has
  // them: VK_KHR_shader_integer_dot_product's feature, under Vulkan 1.2.
  uint32_t extension_count = 0;
  vkEnumerateDeviceExtensionProperties(info_.physical, nullptr, &extension_count, nullptr);
  std::vector<VkExtensionProperties> extensions(extension_count);
  vkEnumerateDeviceExtensionProperties(info_.physical, nullptr, &extension_count, extensions.data());
  std::vector<const char*> enabled;
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR integer_dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
  for (const VkExtensionProperties& e : extensions)
    if (std::string_view(e.extensionName) == VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME) {
      VkPhysicalDeviceFeatures2 query{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &integer_dot};
      vkGetPhysicalDeviceFeatures2(info_.physical, &query);
      if (integer_dot.shaderIntegerDotProduct) {
        enabled.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
        integer_dot.pNext = features.pNext;
        features.pNext = &integer_dot;
      }
    }

  VkDeviceCreateInfo create{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  create.pNext = &features;
  create.enabledExtensionCount = static_cast<uint32_t>(enabled.size());
  create.ppEnabledExtensionNames = enabled.data();
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue_info;
  check(vkCreateDevice(info_.physical, &create, nullptr, &device_), "vkCreateDevice");
  vkGetDeviceQueue(device_, info_.compute_queue_family, 0, &queue_);
}

Device::~Device() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
}

Context::Context(const ContextOptions& options) {
  instance_ = std::make_unique<Instance>(InstanceOptions{options.validation});
  const std::vector<DeviceInfo> devices = query_devices(instance_->handle());
  // "0,1": several devices, each its own logical device (a model split over
  // them); one named twice is opened twice.
  for (const std::string& one : device_list(device_selector(options.device)))
    devices_.push_back(std::make_unique<Device>(select_device(devices, one), options.requirements));
}

std::vector<Device*> Context::devices() {
  std::vector<Device*> all;
  for (const std::unique_ptr<Device>& d : devices_) all.push_back(d.get());
  return all;
}

}  // namespace lathe::vk
