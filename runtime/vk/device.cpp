#include "runtime/vk/device.hpp"

#include <algorithm>

#include "runtime/error.hpp"
#include "runtime/vk/check.hpp"
#include "runtime/vk/khr_cooperative_matrix.hpp"
#include "runtime/vk/pnext.hpp"

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

  // Enable what the device has: kernels pick variants by the same flags
  // (device_features.hpp). Each structure is chained only where the device
  // has its extension, and the extension named, as validation requires.
  std::vector<const char*> extensions;
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  f16i8.shaderFloat16 = info_.shader_float16;
  f16i8.shaderInt8 = info_.shader_int8;
  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  storage16.storageBuffer16BitAccess = info_.storage_buffer_16bit;
  VkPhysicalDevice8BitStorageFeatures storage8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  storage8.storageBuffer8BitAccess = info_.storage_buffer_8bit;
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  dot.shaderIntegerDotProduct = VK_TRUE;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  coop_nv.cooperativeMatrix = VK_TRUE;
  khr::CooperativeMatrixFeatures coop_khr;
  coop_khr.cooperativeMatrix = VK_TRUE;
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  memory_model.vulkanMemoryModel = info_.vulkan_memory_model;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  PNextChain chain(&features.pNext);
  chain.add(storage16);
  if (info_.api_version >= VK_API_VERSION_1_2) {
    chain.add(f16i8);
    chain.add(storage8);
    chain.add(memory_model);
  }
  if (info_.integer_dot) {
    chain.add(dot);
    // Core in 1.3, but the instance asks for kApiVersion: below 1.3 the
    // device is used as a device of that version.
    if (std::min(info_.api_version, kApiVersion) < VK_API_VERSION_1_3)
      extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  // A cooperative-matrix feature is only queried (DeviceInfo) where the
  // validation layer, if any, knows its structure.
  if (info_.coop_nv.feature) {
    chain.add(coop_nv);
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  }
  if (info_.coop_khr.feature) {
    chain.add(coop_khr);
    extensions.push_back(khr::kCooperativeMatrixExtension);
  }

  VkDeviceCreateInfo create{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  create.pNext = &features;
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue_info;
  create.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  create.ppEnabledExtensionNames = extensions.data();
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
  const std::vector<DeviceInfo> devices = query_devices(*instance_);
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
