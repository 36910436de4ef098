#include "runtime/vk/instance.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/error.hpp"
#include "runtime/vk/check.hpp"

namespace lathe::vk {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// The layer's specVersion (the Vulkan headers it was built from), or 0 where
// it is not installed.
uint32_t layer_version(const char* name) {
  uint32_t count = 0;
  check(vkEnumerateInstanceLayerProperties(&count, nullptr), "vkEnumerateInstanceLayerProperties");
  std::vector<VkLayerProperties> layers(count);
  check(vkEnumerateInstanceLayerProperties(&count, layers.data()), "vkEnumerateInstanceLayerProperties");
  for (const VkLayerProperties& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return l.specVersion;
  return 0;
}

bool extension_available(const char* name) {
  uint32_t count = 0;
  check(vkEnumerateInstanceExtensionProperties(nullptr, &count, nullptr), "vkEnumerateInstanceExtensionProperties");
  std::vector<VkExtensionProperties> extensions(count);
  check(vkEnumerateInstanceExtensionProperties(nullptr, &count, extensions.data()),
        "vkEnumerateInstanceExtensionProperties");
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

}  // namespace

Instance::Instance(const InstanceOptions& options) {
  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  VkInstanceCreateFlags flags = 0;
  if (extension_available(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    // MoltenVK and other portability drivers are listed only when asked for.
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  if (options.validation) {
    validation_version_ = layer_version(kValidationLayer);
    if (validation_version_ == 0)
      throw Error(ErrorKind::Unsupported, std::string(kValidationLayer) +
                                              " is not installed (Debian package vulkan-validationlayers)");
    if (!extension_available(VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
      throw Error(ErrorKind::Unsupported, "the Vulkan loader lacks " + std::string(VK_EXT_DEBUG_UTILS_EXTENSION_NAME));
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "lathe";
  app.pEngineName = "lathe";
  app.apiVersion = kApiVersion;

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = &Instance::on_message;
  messenger_info.pUserData = this;

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  // Chained so that instance creation and destruction are validated too.
  if (options.validation) info.pNext = &messenger_info;
  const VkResult created = vkCreateInstance(&info, nullptr, &instance_);
  // The loader's answer when it finds no ICD (no driver installed, or
  // VK_DRIVER_FILES naming none that loads).
  if (created == VK_ERROR_INCOMPATIBLE_DRIVER) no_driver();
  check(created, "vkCreateInstance");

  if (options.validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create == nullptr) {
      vkDestroyInstance(instance_, nullptr);
      throw Error(ErrorKind::Unsupported, "vkCreateDebugUtilsMessengerEXT is not available");
    }
    VkResult r = create(instance_, &messenger_info, nullptr, &messenger_);
    if (r != VK_SUCCESS) {
      vkDestroyInstance(instance_, nullptr);
      check(r, "vkCreateDebugUtilsMessengerEXT");
    }
  }
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy != nullptr) destroy(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

std::vector<std::string> Instance::take_validation_messages() {
  std::lock_guard lock(mutex_);
  return std::exchange(messages_, {});
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT,
                                                    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<Instance*>(user);
  std::string text = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "validation error: " : "validation warning: ";
  if (data->pMessageIdName != nullptr) text += std::string("[") + data->pMessageIdName + "] ";
  if (data->pMessage != nullptr) text += data->pMessage;
  std::lock_guard lock(self->mutex_);
  self->messages_.push_back(std::move(text));
  return VK_FALSE;  // never abort the call: the tests decide what a message means
}

}  // namespace lathe::vk
