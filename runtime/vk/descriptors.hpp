// Descriptor sets and texel-buffer views. A model's sets are allocated and
// written once, when its plan is built, and bound unchanged every step; large
// tensors are bound in chunks (maxStorageBufferRange is 128 MiB on lavapipe)
// and weights are read through texel buffers (about 2x storage buffers there,
// see docs/lavapipe.md).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include "runtime/vk/device.hpp"
#include "runtime/vk/pipeline.hpp"

namespace lathe::vk {

// Descriptor sets that live as long as the arena: never freed one by one.
class DescriptorArena {
 public:
  explicit DescriptorArena(Device& device);
  ~DescriptorArena();
  DescriptorArena(const DescriptorArena&) = delete;
  DescriptorArena& operator=(const DescriptorArena&) = delete;

  // A set for `pipeline`'s layout. Grows by adding pools of 256 sets, 1024 storage and 1024 texel
  // descriptors (more when one set needs more).
  VkDescriptorSet allocate(const Pipeline& pipeline);

 private:
  void add_pool(uint32_t storage, uint32_t texel);

  Device& device_;
  std::vector<VkDescriptorPool> pools_;
  // What the newest pool has left. Tracked here, not left to the driver: past its sizes a pool may
  // still hand out sets or fail with VK_ERROR_OUT_OF_POOL_MEMORY (the spec allows both).
  uint32_t sets_left_ = 0, storage_left_ = 0, texel_left_ = 0;
};

// What a binding points at: a range of a storage buffer, or a texel buffer view.
struct BufferBinding {
  VkBuffer buffer;
  VkDeviceSize offset;
  VkDeviceSize range;  // VK_WHOLE_SIZE is passed through unchecked (the buffer's size is not known here)
};
struct TexelBinding {
  VkBufferView view;
};
using Binding = std::variant<BufferBinding, TexelBinding>;

// Writes binding i = bindings[i] of `set`. Throws Error(InvalidArgument) naming the kernel and binding
// when the count or a kind differs from the pipeline's key, a storage range exceeds
// maxStorageBufferRange or an offset is not a multiple of minStorageBufferOffsetAlignment.
void write_descriptors(Device& device, const Pipeline& pipeline, VkDescriptorSet set, std::span<const Binding> bindings);

// RAII VkBufferView over [offset, offset + bytes) of a buffer created with
// VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT, in a format such as VK_FORMAT_R32G32B32A32_UINT or _SFLOAT.
// Throws, naming the numbers, Error(OutOfMemory) when bytes / texel size exceeds maxTexelBufferElements
// (split the tensor), Error(InvalidArgument) when the offset is not a multiple of
// minTexelBufferOffsetAlignment or bytes not a multiple of the texel size, Error(Unsupported) when the
// device cannot read the format through a uniform texel buffer.
class TexelView {
 public:
  TexelView(Device& device, VkBuffer buffer, VkFormat format, VkDeviceSize offset, VkDeviceSize bytes);
  ~TexelView();
  TexelView(TexelView&& other) noexcept;
  TexelView& operator=(TexelView&& other) noexcept;
  TexelView(const TexelView&) = delete;
  TexelView& operator=(const TexelView&) = delete;

  VkBufferView handle() const { return view_; }

 private:
  VkDevice device_ = VK_NULL_HANDLE;
  VkBufferView view_ = VK_NULL_HANDLE;
};

}  // namespace lathe::vk
