#include "runtime/vk/device_info.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime/error.hpp"
#include "runtime/vk/check.hpp"
#include "runtime/vk/instance.hpp"
#include "runtime/vk/khr_cooperative_matrix.hpp"
#include "runtime/vk/pnext.hpp"

namespace lathe::vk {
namespace {

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string bytes_string(uint64_t bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes >= (1ull << 30)) out << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else if (bytes >= (1ull << 20)) out << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  else if (bytes >= (1ull << 10)) out << static_cast<double>(bytes) / (1ull << 10) << " KiB";
  else out << bytes << " B";
  return out.str();
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

// VkComponentTypeKHR (NV's alike) as GLSL's type names.
std::string component_name(VkComponentTypeNV t) {
  static constexpr const char* kNames[] = {"f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(kNames) ? kNames[i] : "type " + std::to_string(i);
}

std::string scope_name(VkScopeNV s) {
  switch (s) {
    case VK_SCOPE_DEVICE_NV: return "device";
    case VK_SCOPE_WORKGROUP_NV: return "workgroup";
    case VK_SCOPE_SUBGROUP_NV: return "subgroup";
    case VK_SCOPE_QUEUE_FAMILY_NV: return "queue family";
    default: return "scope " + std::to_string(static_cast<int>(s));
  }
}

// "VK_NV_cooperative_matrix   yes, cooperativeMatrix yes, 2 shapes (M×N×K: A·B + C → D, scope)" and a line a shape.
void format_coop(std::ostringstream& out, std::string_view label, const CoopMatrix& coop) {
  out << "    " << label;
  if (!coop.extension) {
    out << "no\n";
    return;
  }
  out << "yes, cooperativeMatrix "
      << (coop.unqueried.empty() ? yes_no(coop.feature) : coop.unqueried.c_str()) << ", " << coop.shapes.size()
      << (coop.shapes.size() == 1 ? " shape" : " shapes") << " (M×N×K: A·B + C → D, scope)\n";
  for (const CoopShape& s : coop.shapes)
    out << "      " << s.m << "×" << s.n << "×" << s.k << ": " << component_name(s.a) << "·" << component_name(s.b) << " + "
        << component_name(s.c) << " → " << component_name(s.d) << ", " << scope_name(s.scope)
        << (s.saturating ? ", saturating" : "") << "\n";
}

// The host's MemAvailable (/proc/meminfo: free memory and what the kernel
// can reclaim without swapping); 0 where it is not reported.
uint64_t host_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    uint64_t kib = 0;
    std::string unit;
    if (!(in >> kib >> unit)) break;
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

bool listed(const std::vector<VkExtensionProperties>& extensions, std::string_view name) {
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return std::string_view(e.extensionName) == name; });
}

// Every shape of vkGetPhysicalDeviceCooperativeMatrixProperties{NV,KHR}
// (`Properties` the extension's struct, `stype` its sType), fetched through
// vkGetInstanceProcAddr: the loader exports core functions only.
template <typename Properties, typename Get>
std::vector<CoopShape> coop_shapes(VkInstance instance, VkPhysicalDevice physical, const char* name, VkStructureType stype,
                                   const auto& to_shape) {
  const auto get = reinterpret_cast<Get>(vkGetInstanceProcAddr(instance, name));
  if (get == nullptr) return {};
  uint32_t count = 0;
  check(get(physical, &count, nullptr), name);
  std::vector<Properties> listed(count);
  for (Properties& p : listed) p.sType = stype;
  check(get(physical, &count, listed.data()), name);
  std::vector<CoopShape> shapes;
  for (uint32_t i = 0; i < count; ++i) shapes.push_back(to_shape(listed[i]));
  return shapes;
}

DeviceInfo describe(VkInstance instance, uint32_t validation_version, VkPhysicalDevice physical, uint32_t index) {
  DeviceInfo info;
  info.index = index;
  info.physical = physical;

  VkPhysicalDeviceProperties basic{};
  vkGetPhysicalDeviceProperties(physical, &basic);
  const bool v12 = basic.apiVersion >= VK_API_VERSION_1_2;

  uint32_t extension_count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &extension_count, nullptr);
  std::vector<VkExtensionProperties> extensions(extension_count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &extension_count, extensions.data());
  info.integer_dot_extension = listed(extensions, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  info.coop_nv.extension = listed(extensions, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  info.coop_khr.extension = listed(extensions, khr::kCooperativeMatrixExtension);
  // Structures of an extension newer than the validation layer are unknown
  // to it, an error wherever they are chained: not queried under it.
  const bool khr_known = validation_version == 0 || validation_version >= khr::kFirstHeader;
  if (info.coop_khr.extension && !khr_known)
    info.coop_khr.unqueried = "not queried: the validation layer (" + api_version_string(validation_version) +
                              ") predates it (" + api_version_string(khr::kFirstHeader) + ")";

  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maintenance3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceShaderIntegerDotProductProperties dot_props{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  PNextChain properties(&props.pNext);
  properties.add(subgroup);
  properties.add(maintenance3);
  if (v12) properties.add(driver);
  if (info.integer_dot_extension) properties.add(dot_props);
  vkGetPhysicalDeviceProperties2(physical, &props);

  VkPhysicalDeviceShaderFloat16Int8Features f16i8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeatures storage8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  khr::CooperativeMatrixFeatures coop_khr;
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  PNextChain chain(&features.pNext);
  chain.add(storage16);
  if (v12) {
    chain.add(f16i8);
    chain.add(storage8);
    chain.add(memory_model);
  }
  if (info.integer_dot_extension) chain.add(dot);
  if (info.coop_nv.extension) chain.add(coop_nv);
  if (info.coop_khr.extension && khr_known) chain.add(coop_khr);
  vkGetPhysicalDeviceFeatures2(physical, &features);

  info.vulkan_memory_model = memory_model.vulkanMemoryModel == VK_TRUE;
  info.integer_dot = dot.shaderIntegerDotProduct == VK_TRUE;
  info.integer_dot_4x8_signed_accelerated = dot_props.integerDotProduct4x8BitPackedSignedAccelerated == VK_TRUE;
  info.integer_dot_4x8_mixed_accelerated = dot_props.integerDotProduct4x8BitPackedMixedSignednessAccelerated == VK_TRUE;
  info.coop_nv.feature = coop_nv.cooperativeMatrix == VK_TRUE;
  info.coop_khr.feature = coop_khr.cooperativeMatrix == VK_TRUE;
  if (info.coop_nv.extension)
    info.coop_nv.shapes = coop_shapes<VkCooperativeMatrixPropertiesNV, PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
        instance, physical, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV", VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV,
        [](const VkCooperativeMatrixPropertiesNV& p) {
          return CoopShape{p.MSize, p.NSize, p.KSize, p.AType, p.BType, p.CType, p.DType, p.scope, false};
        });
  // The shapes' query is a function, not a structure: the layer passes it through.
  if (info.coop_khr.extension)
    info.coop_khr.shapes =
        coop_shapes<khr::CooperativeMatrixProperties, khr::GetPhysicalDeviceCooperativeMatrixProperties>(
            instance, physical, khr::kGetPropertiesName, khr::kStructureProperties,
            [](const khr::CooperativeMatrixProperties& p) {
              return CoopShape{p.MSize, p.NSize, p.KSize, p.AType, p.BType, p.CType, p.ResultType, p.scope,
                               p.saturatingAccumulation == VK_TRUE};
            });

  const VkPhysicalDeviceLimits& limits = props.properties.limits;
  info.name = props.properties.deviceName;
  info.type = props.properties.deviceType;
  info.api_version = props.properties.apiVersion;
  info.vendor_id = props.properties.vendorID;
  info.device_id = props.properties.deviceID;
  std::copy(std::begin(props.properties.pipelineCacheUUID), std::end(props.properties.pipelineCacheUUID),
            info.pipeline_cache_uuid);
  if (v12) {
    info.driver_name = driver.driverName;
    info.driver_info = driver.driverInfo;
  } else {
    info.driver_name = "unknown (Vulkan 1.1 device)";
  }

  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.max_memory_allocation_size = maintenance3.maxMemoryAllocationSize;
  info.max_texel_buffer_elements = limits.maxTexelBufferElements;
  info.max_push_constants_size = limits.maxPushConstantsSize;
  info.max_compute_shared_memory = limits.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  std::copy(std::begin(limits.maxComputeWorkGroupSize), std::end(limits.maxComputeWorkGroupSize),
            info.max_workgroup_size);
  info.min_storage_buffer_offset_alignment = static_cast<uint32_t>(limits.minStorageBufferOffsetAlignment);
  info.timestamp_period = limits.timestampPeriod;
  info.min_texel_buffer_offset_alignment = static_cast<uint32_t>(limits.minTexelBufferOffsetAlignment);

  info.subgroup_size = subgroup.subgroupSize;
  info.subgroup_compute = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  info.subgroup_arithmetic = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
  info.subgroup_shuffle = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
  info.subgroup_ballot = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT) != 0;

  info.shader_float16 = f16i8.shaderFloat16 == VK_TRUE;
  info.shader_int8 = f16i8.shaderInt8 == VK_TRUE;
  info.storage_buffer_16bit = storage16.storageBuffer16BitAccess == VK_TRUE;
  info.storage_buffer_8bit = storage8.storageBuffer8BitAccess == VK_TRUE;

  // Each heap's budget and usage where the device has VK_EXT_memory_budget.
  const bool budgeted = listed(extensions, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 memory2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  if (budgeted) memory2.pNext = &budget;
  vkGetPhysicalDeviceMemoryProperties2(physical, &memory2);
  const VkPhysicalDeviceMemoryProperties& memory = memory2.memoryProperties;
  info.heaps.resize(memory.memoryHeapCount);
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    info.heaps[h].size = memory.memoryHeaps[h].size;
    info.heaps[h].device_local = (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    if (budgeted) {
      info.heaps[h].budget = budget.heapBudget[h];
      info.heaps[h].usage = budget.heapUsage[h];
    }
  }
  for (uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
    if (memory.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
      info.heaps[memory.memoryTypes[t].heapIndex].host_visible = true;
  }
  info.unified_memory = std::all_of(info.heaps.begin(), info.heaps.end(),
                                    [](const MemoryHeap& h) { return !h.device_local || h.host_visible; });

  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &family_count, families.data());
  // Any compute family will do; one that also does graphics is preferred, as
  // most drivers schedule it best.
  for (uint32_t f = 0; f < family_count; ++f) {
    const VkQueueFlags flags = families[f].queueFlags;
    if ((flags & VK_QUEUE_COMPUTE_BIT) == 0) continue;
    if (!info.has_compute_queue || (flags & VK_QUEUE_GRAPHICS_BIT)) info.compute_queue_family = f;
    info.has_compute_queue = true;
    if (flags & VK_QUEUE_GRAPHICS_BIT) break;
  }
  return info;
}

}  // namespace

bool has_f16_f32_16x16x16(const CoopMatrix& coop) {
  return std::any_of(coop.shapes.begin(), coop.shapes.end(), [](const CoopShape& s) {
    return s.m == 16 && s.n == 16 && s.k == 16 && s.a == VK_COMPONENT_TYPE_FLOAT16_NV && s.b == VK_COMPONENT_TYPE_FLOAT16_NV &&
           s.c == VK_COMPONENT_TYPE_FLOAT32_NV && s.d == VK_COMPONENT_TYPE_FLOAT32_NV && s.scope == VK_SCOPE_SUBGROUP_NV;
  });
}

std::string_view type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

std::string api_version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

std::vector<DeviceInfo> query_devices(const Instance& vk) {
  const VkInstance instance = vk.handle();
  uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  if (count == 0) no_driver();  // loaders that create the instance without any driver
  std::vector<VkPhysicalDevice> physical(count);
  check(vkEnumeratePhysicalDevices(instance, &count, physical.data()), "vkEnumeratePhysicalDevices");
  std::vector<DeviceInfo> devices;
  for (uint32_t i = 0; i < count; ++i) {
    VkPhysicalDeviceProperties p{};
    vkGetPhysicalDeviceProperties(physical[i], &p);
    if (p.apiVersion < VK_API_VERSION_1_1) continue;  // subgroup queries need 1.1
    devices.push_back(describe(instance, vk.validation_version(), physical[i], i));
  }
  return devices;
}

std::string format_device_list(const std::vector<DeviceInfo>& devices) {
  std::ostringstream out;
  if (devices.empty()) {
    out << "no Vulkan 1.1 device found (install mesa-vulkan-drivers for lavapipe, the CPU device)\n";
    return out.str();
  }
  for (const DeviceInfo& d : devices) {
    out << "[" << d.index << "] " << d.name << "\n";
    out << "    type                  " << type_name(d.type) << "\n";
    out << "    driver                " << d.driver_name;
    if (!d.driver_info.empty()) out << " (" << d.driver_info << ")";
    out << "\n";
    out << "    vulkan                " << api_version_string(d.api_version) << "\n";
    for (size_t h = 0; h < d.heaps.size(); ++h) {
      out << "    memory heap " << h << "         " << bytes_string(d.heaps[h].size);
      if (d.heaps[h].device_local) out << ", device-local";
      if (d.heaps[h].host_visible) out << ", host-visible";
      if (d.heaps[h].budget > 0)
        out << ", budget " << bytes_string(d.heaps[h].budget) << " (" << bytes_string(d.heaps[h].usage) << " used)";
      out << "\n";
    }
    out << "    unified memory        " << yes_no(d.unified_memory) << "\n";
    out << "    maxStorageBufferRange " << bytes_string(d.max_storage_buffer_range) << "\n";
    out << "    maxMemoryAllocation   " << bytes_string(d.max_memory_allocation_size) << "\n";
    out << "    maxTexelBufferElements " << d.max_texel_buffer_elements << "\n";
    out << "    shared memory         " << bytes_string(d.max_compute_shared_memory) << "\n";
    out << "    workgroup invocations " << d.max_workgroup_invocations << "\n";
    out << "    push constants        " << d.max_push_constants_size << " B\n";
    out << "    subgroup size         " << d.subgroup_size << " (compute " << yes_no(d.subgroup_compute)
        << ", arithmetic " << yes_no(d.subgroup_arithmetic) << ", shuffle " << yes_no(d.subgroup_shuffle)
        << ", ballot " << yes_no(d.subgroup_ballot) << ")\n";
    out << "    fp16 arithmetic       " << yes_no(d.shader_float16) << "\n";
    out << "    int8 arithmetic       " << yes_no(d.shader_int8) << "\n";
    out << "    16-bit storage        " << yes_no(d.storage_buffer_16bit) << "\n";
    out << "    8-bit storage         " << yes_no(d.storage_buffer_8bit) << "\n";
    out << "    integer dot product   " << yes_no(d.integer_dot);
    if (d.integer_dot_extension)
      out << " (" VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME "; 4×8-bit packed accelerated: signed "
          << yes_no(d.integer_dot_4x8_signed_accelerated) << ", mixed signedness "
          << yes_no(d.integer_dot_4x8_mixed_accelerated) << ")";
    out << "\n";
    format_coop(out, "coop matrix NV        ", d.coop_nv);
    format_coop(out, "coop matrix KHR       ", d.coop_khr);
    // The kernels read ggml's blocks with 32-bit texel loads and bit
    // arithmetic, so they need neither of the two above nor integer dot
    // products: the same path, and the same results, on every device.
    out << "    block weights         q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k (32-bit loads, no 8/16-bit storage "
           "or integer dot products needed)\n";
    out << "    compute queue         " << (d.has_compute_queue ? "family " + std::to_string(d.compute_queue_family) : "none")
        << "\n";
  }
  return out.str();
}

std::string device_selector(std::string_view explicit_selector) {
  if (!explicit_selector.empty()) return std::string(explicit_selector);
  const char* env = std::getenv("LATHE_DEVICE");
  return env != nullptr ? std::string(env) : std::string();
}

const DeviceInfo& select_device(const std::vector<DeviceInfo>& devices, std::string_view selector) {
  auto listing = [&] {
    std::string names;
    for (const DeviceInfo& d : devices) names += "\n  [" + std::to_string(d.index) + "] " + d.name;
    return names.empty() ? std::string(" none") : names;
  };
  if (!selector.empty()) {
    const bool numeric = std::all_of(selector.begin(), selector.end(), [](unsigned char c) { return std::isdigit(c); });
    for (const DeviceInfo& d : devices) {
      const bool match = numeric ? std::to_string(d.index) == selector
                                 : lower(d.name).find(lower(selector)) != std::string::npos;
      if (!match) continue;
      if (!d.has_compute_queue)
        throw Error(ErrorKind::Unsupported, "device [" + std::to_string(d.index) + "] " + d.name + " has no compute queue");
      return d;
    }
    throw Error(ErrorKind::NotFound,
                "no Vulkan device matches '" + std::string(selector) + "' (LATHE_DEVICE or --device); devices:" + listing());
  }
  const DeviceInfo* best = nullptr;
  for (const DeviceInfo& d : devices) {
    if (!d.has_compute_queue) continue;
    if (best == nullptr || type_rank(d.type) < type_rank(best->type)) best = &d;
  }
  if (best == nullptr)
    throw Error(ErrorKind::NotFound, "no Vulkan 1.1 device with a compute queue; devices:" + listing() +
                                         "\n(install mesa-vulkan-drivers for lavapipe, the CPU device)");
  return *best;
}

std::vector<std::string> device_list(std::string_view selector) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= selector.size();) {
    const size_t comma = std::min(selector.find(',', at), selector.size());
    out.emplace_back(selector.substr(at, comma - at));
    at = comma + 1;
  }
  if (out.size() > 1)
    for (const std::string& one : out)
      if (one.empty()) throw Error(ErrorKind::InvalidArgument, "device list '" + std::string(selector) + "' has an empty entry");
  return out;
}

DeviceMemory device_memory(const DeviceInfo& info) {
  DeviceMemory m;
  for (const MemoryHeap& h : info.heaps)
    if (h.device_local && h.size > m.bytes) {
      m.bytes = h.size;
      m.available = h.budget > h.usage ? h.budget - h.usage : 0;
    }
  if (info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const uint64_t host = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
    if (host > m.bytes) m = {host, true, std::min(host, host_available())};
  }
  return m;
}

}  // namespace lathe::vk
