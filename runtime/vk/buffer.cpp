#include "runtime/vk/buffer.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "runtime/error.hpp"
#include "runtime/vk/check.hpp"

namespace lathe::vk {
namespace {

// The first memory type allowed by `bits` that has all of `wanted`.
int find_type(VkPhysicalDevice physical, uint32_t bits, VkMemoryPropertyFlags wanted) {
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(physical, &memory);
  for (uint32_t t = 0; t < memory.memoryTypeCount; ++t)
    if ((bits & (1u << t)) && (memory.memoryTypes[t].propertyFlags & wanted) == wanted) return static_cast<int>(t);
  return -1;
}

std::string mib(VkDeviceSize bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

void check_range(const Buffer& buffer, size_t bytes, VkDeviceSize offset, const char* what) {
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    throw Error(ErrorKind::InvalidArgument, std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                                                std::to_string(offset) + " lies outside a buffer of " +
                                                std::to_string(buffer.size()) + " bytes");
}

constexpr VkMemoryPropertyFlags kHostCoherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

}  // namespace

Buffer::Buffer(Device& device, VkDeviceSize bytes, VkBufferUsageFlags usage, MemoryUse use) : device_(device.handle()), size_(bytes) {
  const DeviceInfo& info = device.info();
  if (bytes == 0) throw Error(ErrorKind::InvalidArgument, "a buffer of 0 bytes was asked for");
  if (info.max_memory_allocation_size != 0 && bytes > info.max_memory_allocation_size)
    throw Error(ErrorKind::OutOfMemory, "a buffer of " + mib(bytes) + " exceeds maxMemoryAllocationSize (" +
                                            mib(info.max_memory_allocation_size) + ") of " + info.name +
                                            "; large tensors must be split");

  VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  create.size = bytes;
  create.usage = usage | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &create, nullptr, &buffer_), "vkCreateBuffer");

  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, buffer_, &req);
  int type = -1;
  if (use == MemoryUse::Device) {
    if (info.unified_memory) type = find_type(info.physical, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | kHostCoherent);
    if (type < 0) type = find_type(info.physical, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  } else {
    type = find_type(info.physical, req.memoryTypeBits, kHostCoherent | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (type < 0) type = find_type(info.physical, req.memoryTypeBits, kHostCoherent);
  }
  if (type < 0) {
    release();
    throw Error(ErrorKind::Unsupported, info.name + " has no suitable memory type for a buffer");
  }

  VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate.allocationSize = req.size;
  allocate.memoryTypeIndex = static_cast<uint32_t>(type);
  const VkResult r = vkAllocateMemory(device_, &allocate, nullptr, &memory_);
  if (r != VK_SUCCESS) {
    release();
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
      throw Error(ErrorKind::OutOfMemory, "allocating " + mib(bytes) + " on " + info.name + " failed: " +
                                              std::string(result_name(r)));
    check(r, "vkAllocateMemory");
  }
  check(vkBindBufferMemory(device_, buffer_, memory_, 0), "vkBindBufferMemory");

  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(info.physical, &memory);
  if ((memory.memoryTypes[type].propertyFlags & kHostCoherent) == kHostCoherent)
    check(vkMapMemory(device_, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : device_(other.device_),
      buffer_(std::exchange(other.buffer_, VK_NULL_HANDLE)),
      memory_(std::exchange(other.memory_, VK_NULL_HANDLE)),
      size_(other.size_),
      mapped_(std::exchange(other.mapped_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = other.size_;
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(device_, memory_, nullptr);  // unmaps too
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

OneShot::OneShot(Device& device) : device_(device) {
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT | VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = device.info().compute_queue_family;
  check(vkCreateCommandPool(device.handle(), &pool, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = pool_;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  try {
    check(vkAllocateCommandBuffers(device.handle(), &allocate, &commands_), "vkAllocateCommandBuffers");
    check(vkCreateFence(device.handle(), &fence, nullptr, &fence_), "vkCreateFence");
  } catch (...) {
    vkDestroyCommandPool(device.handle(), pool_, nullptr);
    throw;
  }
}

OneShot::~OneShot() {
  if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_.handle(), fence_, nullptr);
  vkDestroyCommandPool(device_.handle(), pool_, nullptr);  // frees the command buffer
}

VkCommandBuffer OneShot::begin() {
  check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  return commands_;
}

void OneShot::submit_and_wait() {
  check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands_;
  check(vkResetFences(device_.handle(), 1, &fence_), "vkResetFences");
  check(vkQueueSubmit(device_.queue(), 1, &submit, fence_), "vkQueueSubmit");
  check(vkWaitForFences(device_.handle(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

void upload(Device& device, Buffer& dst, const void* data, size_t bytes, VkDeviceSize offset) {
  check_range(dst, bytes, offset, "an upload");
  if (bytes == 0) return;
  if (dst.mapped() != nullptr) {
    std::memcpy(static_cast<char*>(dst.mapped()) + offset, data, bytes);
    return;
  }
  Buffer staging(device, bytes, 0, MemoryUse::Staging);
  std::memcpy(staging.mapped(), data, bytes);
  OneShot once(device);
  VkBufferCopy region{0, offset, bytes};
  vkCmdCopyBuffer(once.begin(), staging.handle(), dst.handle(), 1, &region);
  once.submit_and_wait();
}

void download(Device& device, const Buffer& src, void* data, size_t bytes, VkDeviceSize offset) {
  check_range(src, bytes, offset, "a download");
  if (bytes == 0) return;
  if (src.mapped() != nullptr) {
    std::memcpy(data, static_cast<const char*>(src.mapped()) + offset, bytes);
    return;
  }
  Buffer staging(device, bytes, 0, MemoryUse::Staging);
  OneShot once(device);
  VkBufferCopy region{offset, 0, bytes};
  vkCmdCopyBuffer(once.begin(), src.handle(), staging.handle(), 1, &region);
  once.submit_and_wait();
  std::memcpy(data, staging.mapped(), bytes);
}

}  // namespace lathe::vk
