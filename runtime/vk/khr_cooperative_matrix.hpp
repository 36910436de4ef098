// VK_KHR_cooperative_matrix, which Debian 12's Vulkan headers (1.3.239)
// predate: the few declarations lathe queries and enables it with, under
// names of our own so that newer headers, which declare the real ones, do
// not clash. Every value is the Khronos registry's (Vulkan-Headers
// include/vulkan/vulkan_core.h, commit 0007545e; the extension is number
// 507, so its values are 1000000000 + 506 × 1000 + offset).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>

namespace lathe::vk::khr {

inline constexpr const char* kCooperativeMatrixExtension = "VK_KHR_cooperative_matrix";

// VkStructureType values (vulkan_core.h: VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_
// COOPERATIVE_MATRIX_FEATURES_KHR = 1000506000, VK_STRUCTURE_TYPE_
// COOPERATIVE_MATRIX_PROPERTIES_KHR = 1000506001, VK_STRUCTURE_TYPE_PHYSICAL_
// DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR = 1000506002; the last is unused).
inline constexpr VkStructureType kStructureFeatures = static_cast<VkStructureType>(1000506000);
inline constexpr VkStructureType kStructureProperties = static_cast<VkStructureType>(1000506001);

// The header version that first declared the extension (Vulkan-Headers
// v1.3.255, June 2023). A validation layer built from older headers
// reports a structure of it in a pNext chain as an unknown sType (an
// error), so lathe neither queries nor enables its feature under one.
inline constexpr uint32_t kFirstHeader = VK_MAKE_API_VERSION(0, 1, 3, 255);

// VkComponentTypeKHR: the same values as VkComponentTypeNV (FLOAT16_KHR =
// 0, FLOAT32_KHR = 1, …, UINT64_KHR = 10; vulkan_core.h), which the 1.3.239
// headers have.
using ComponentType = VkComponentTypeNV;
// VkScopeKHR: the same values as VkScopeNV (DEVICE_KHR = 1, WORKGROUP_KHR
// = 2, SUBGROUP_KHR = 3, QUEUE_FAMILY_KHR = 5).
using Scope = VkScopeNV;

// VkPhysicalDeviceCooperativeMatrixFeaturesKHR (vulkan_core.h): extends
// VkPhysicalDeviceFeatures2 and VkDeviceCreateInfo.
struct CooperativeMatrixFeatures {
  VkStructureType sType = kStructureFeatures;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

// VkCooperativeMatrixPropertiesKHR (vulkan_core.h): one shape the device
// runs. ResultType is the D of VK_NV_cooperative_matrix's shapes.
struct CooperativeMatrixProperties {
  VkStructureType sType = kStructureProperties;
  void* pNext = nullptr;
  uint32_t MSize = 0;
  uint32_t NSize = 0;
  uint32_t KSize = 0;
  ComponentType AType = VK_COMPONENT_TYPE_FLOAT16_NV;
  ComponentType BType = VK_COMPONENT_TYPE_FLOAT16_NV;
  ComponentType CType = VK_COMPONENT_TYPE_FLOAT16_NV;
  ComponentType ResultType = VK_COMPONENT_TYPE_FLOAT16_NV;
  VkBool32 saturatingAccumulation = VK_FALSE;
  Scope scope = VK_SCOPE_SUBGROUP_NV;
};

// PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR (vulkan_core.h),
// through vkGetInstanceProcAddr: the loader exports core functions only.
using GetPhysicalDeviceCooperativeMatrixProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice physicalDevice,
                                                                          uint32_t* pPropertyCount,
                                                                          CooperativeMatrixProperties* pProperties);
inline constexpr const char* kGetPropertiesName = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR";

}  // namespace lathe::vk::khr
