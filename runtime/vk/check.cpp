#include "runtime/vk/check.hpp"

#include <string>

#include "runtime/error.hpp"

namespace lathe::vk {

std::string_view result_name(VkResult result) {
  switch (result) {
#define LATHE_RESULT(r) \
  case r: return #r;
    LATHE_RESULT(VK_SUCCESS)
    LATHE_RESULT(VK_NOT_READY)
    LATHE_RESULT(VK_TIMEOUT)
    LATHE_RESULT(VK_EVENT_SET)
    LATHE_RESULT(VK_EVENT_RESET)
    LATHE_RESULT(VK_INCOMPLETE)
    LATHE_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    LATHE_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    LATHE_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    LATHE_RESULT(VK_ERROR_DEVICE_LOST)
    LATHE_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    LATHE_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    LATHE_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    LATHE_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    LATHE_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    LATHE_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    LATHE_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    LATHE_RESULT(VK_ERROR_FRAGMENTED_POOL)
    LATHE_RESULT(VK_ERROR_UNKNOWN)
    LATHE_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    LATHE_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    LATHE_RESULT(VK_ERROR_FRAGMENTATION)
    LATHE_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    LATHE_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef LATHE_RESULT
    default: return "VkResult(unknown)";
  }
}

void check(VkResult result, std::string_view call) {
  if (result == VK_SUCCESS) return;
  const bool memory = result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY;
  throw Error(memory ? ErrorKind::OutOfMemory : ErrorKind::Vulkan,
              std::string(call) + " failed: " + std::string(result_name(result)) + " (" +
                  std::to_string(static_cast<int>(result)) + ")");
}

void no_driver() {
  throw Error(ErrorKind::NotFound,
              "no Vulkan driver found: install mesa-vulkan-drivers (lavapipe) or your GPU's driver");
}

}  // namespace lathe::vk
