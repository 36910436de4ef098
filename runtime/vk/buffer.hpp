// Buffers and their memory. Weights and activations live in device-local
// memory; on unified-memory devices (lavapipe, integrated GPUs) that memory
// is mapped and written in place, on discrete GPUs uploads go through a
// host-visible staging buffer and a copy on the compute queue.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>

#include "runtime/vk/device.hpp"

namespace lathe::vk {

enum class MemoryUse {
  Device,   // device-local; mapped too when the device has unified memory
  Staging,  // host-visible and coherent: uploads and read-backs
};

class Buffer {
 public:
  // Throws ErrorKind::OutOfMemory naming the sizes when `bytes` exceeds the
  // device's maxMemoryAllocationSize or no memory is left.
  Buffer(Device& device, VkDeviceSize bytes, VkBufferUsageFlags usage, MemoryUse use);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  void* mapped() const { return mapped_; }  // null unless host-visible

 private:
  void release() noexcept;

  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  void* mapped_ = nullptr;
};

// Records one command buffer, submits it and waits: uploads, read-backs and
// tests. Decode steps use pre-recorded command buffers instead.
class OneShot {
 public:
  explicit OneShot(Device& device);
  ~OneShot();
  OneShot(const OneShot&) = delete;
  OneShot& operator=(const OneShot&) = delete;

  VkCommandBuffer begin();
  void submit_and_wait();

 private:
  Device& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

// Copies host bytes into `dst` at `offset`: in place when mapped, else
// through a staging buffer. Throws ErrorKind::InvalidArgument when the range
// lies outside the buffer.
void upload(Device& device, Buffer& dst, const void* data, size_t bytes, VkDeviceSize offset = 0);
void download(Device& device, const Buffer& src, void* data, size_t bytes, VkDeviceSize offset = 0);

}  // namespace lathe::vk
