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
  bool has_compute_queue = false;
  uint32_t compute_queue_family = 0;
};

std::string_view type_name(VkPhysicalDeviceType type);
std::string api_version_string(uint32_t version);

// Every device of Vulkan 1.1 or later. Throws Error(NotFound) saying what to
// install when the instance has no physical device at all (check.hpp's
// no_driver()).
std::vector<DeviceInfo> query_devices(VkInstance instance);

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
