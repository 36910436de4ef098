// Every Vulkan call is checked: a failure becomes a lathe::Error that names
// the call and the VkResult.
#pragma once

#include <vulkan/vulkan.h>

#include <string_view>

namespace lathe::vk {

std::string_view result_name(VkResult result);

// Throws lathe::Error(ErrorKind::Vulkan, or OutOfMemory for the memory results)
// naming `call` when `result` is not VK_SUCCESS.
void check(VkResult result, std::string_view call);

// Throws lathe::Error(ErrorKind::NotFound) saying what to install: for a
// machine without a Vulkan driver, where the loader answers vkCreateInstance
// with VK_ERROR_INCOMPATIBLE_DRIVER or enumerates no physical device.
[[noreturn]] void no_driver();

}  // namespace lathe::vk
