// What lathe needs to know about a physical device: its kind, driver, memory
// and the limits that shape kernels and buffer layout.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::vk {

struct MemoryHeap {
  uint64_t size = 0;
  bool device_local = false;
  bool host_visible = false;  // some memory type of this heap can be mapped
  // VK_EXT_memory_budget, when the device has it (else 0, 0): what this
  // process may allocate from the heap, and what it holds, when described.
  uint64_t budget = 0, usage = 0;
};

// One matrix shape a cooperative-matrix extension lists: D (M × N) = A (M ×
// K) · B (K × N) + C, each of a VkComponentTypeKHR (VK_NV_cooperative_matrix's
// VkComponentTypeNV has the same values), in a VkScopeKHR (NV's alike).
struct CoopShape {
  uint32_t m = 0, n = 0, k = 0;
  VkComponentTypeNV a = VK_COMPONENT_TYPE_FLOAT16_NV, b = VK_COMPONENT_TYPE_FLOAT16_NV, c = VK_COMPONENT_TYPE_FLOAT16_NV,
                    d = VK_COMPONENT_TYPE_FLOAT16_NV;
  VkScopeNV scope = VK_SCOPE_SUBGROUP_NV;
  bool saturating = false;  // KHR's saturatingAccumulation (integer shapes)
};

// What a device has of one cooperative-matrix extension.
struct CoopMatrix {
  bool extension = false;  // listed by vkEnumerateDeviceExtensionProperties
  bool feature = false;    // cooperativeMatrix, which lathe enables
  std::vector<CoopShape> shapes;
  // Why the feature was not queried though the extension is listed (empty
  // when it was): a validation layer older than the extension.
  std::string unqueried;
};

// The shape the matmul kernels' cooperative variants use: 16 × 16 × 16, A
// and B f16, C and D f32, a subgroup's.
bool has_f16_f32_16x16x16(const CoopMatrix& coop);

struct DeviceInfo {
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t api_version = 0;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::string driver_name;  // "llvmpipe", "NVIDIA", "radv", …
  std::string driver_info;
  uint8_t pipeline_cache_uuid[VK_UUID_SIZE] = {};

  std::vector<MemoryHeap> heaps;
  // Every device-local heap is also host-visible (CPU devices, integrated GPUs):
  // weights can be written in place instead of through a staging buffer.
  bool unified_memory = false;

  uint64_t max_storage_buffer_range = 0;
  uint64_t max_memory_allocation_size = 0;
  uint64_t max_texel_buffer_elements = 0;
  uint32_t max_push_constants_size = 0;
  uint32_t max_compute_shared_memory = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_size[3] = {};
  uint32_t min_storage_buffer_offset_alignment = 0;
  float timestamp_period = 1.0f;  // nanoseconds per timestamp tick
  uint32_t min_texel_buffer_offset_alignment = 0;

  uint32_t subgroup_size = 0;
  bool subgroup_compute = false;     // subgroup operations allowed in compute shaders
  bool subgroup_arithmetic = false;  // subgroupAdd & co.
  bool subgroup_shuffle = false;
  bool subgroup_ballot = false;  // subgroupBroadcast & co.

  bool shader_float16 = false;
  bool shader_int8 = false;
  bool storage_buffer_16bit = false;
  bool storage_buffer_8bit = false;
  // vulkanMemoryModel (core in 1.2): the coop layout's modules use it
  // (GL_KHR_memory_scope_semantics).
  bool vulkan_memory_model = false;
  // Integer dot products: shaderIntegerDotProduct, where the device lists
  // VK_KHR_shader_integer_dot_product (lathe's Vulkan 1.2 instance takes the
  // feature through the extension even on a 1.3 device); and whether its
  // 4 × 8-bit packed forms (dot4 of int8 in a 32-bit word, signed and
  // mixed signedness) are faster than the same arithmetic spelled out.
  bool integer_dot_extension = false;
  bool integer_dot = false;
  bool integer_dot_4x8_signed_accelerated = false;
  bool integer_dot_4x8_mixed_accelerated = false;
  CoopMatrix coop_nv;   // VK_NV_cooperative_matrix
  CoopMatrix coop_khr;  // VK_KHR_cooperative_matrix
  bool has_compute_queue = false;
  uint32_t compute_queue_family = 0;
};

std::string_view type_name(VkPhysicalDeviceType type);
std::string api_version_string(uint32_t version);

class Instance;

// Every device of Vulkan 1.1 or later. Throws Error(NotFound) saying what to
// install when the instance has no physical device at all (check.hpp's
// no_driver()). The instance's validation layer decides which extensions'
// structures are queried (Instance::validation_version).
std::vector<DeviceInfo> query_devices(const Instance& instance);

// A table for people: one block per device.
std::string format_device_list(const std::vector<DeviceInfo>& devices);

// The device to run on. `selector` is an index ("1") or a case-insensitive
// substring of the device name ("llvmpipe", "rtx"); empty picks the best:
// discrete, then integrated, then virtual, then CPU devices, keeping the
// enumeration order among equals. Only devices with a compute queue count.
// Throws ErrorKind::NotFound naming the selector and listing the devices.
const DeviceInfo& select_device(const std::vector<DeviceInfo>& devices, std::string_view selector);

// `explicit_selector` when it is non-empty, else the LATHE_DEVICE variable.
std::string device_selector(std::string_view explicit_selector = {});

// The entries of a selector that names several devices ("0,1": a model
// split over them; one named twice is two entries); one entry otherwise.
// Throws ErrorKind::InvalidArgument for an empty entry of a list.
std::vector<std::string> device_list(std::string_view selector);

// The memory a model's buffers can fill on a device: its largest
// device-local heap, or, for a CPU device, the host's physical memory when
// that is larger (lavapipe of Mesa 22 reports a heap of 2 GiB whatever the
// host holds, and allocates from host memory). What a session's memory
// check and a split's placement by memory count.
struct DeviceMemory {
  uint64_t bytes = 0;  // 0: the device reports no device-local heap
  bool host = false;   // the host's memory
  // What it can take now (0: not reported): the heap's budget less its
  // usage (VK_EXT_memory_budget: what other processes hold is out of the
  // budget), or the host's MemAvailable.
  uint64_t available = 0;
};
DeviceMemory device_memory(const DeviceInfo& info);

}  // namespace lathe::vk
