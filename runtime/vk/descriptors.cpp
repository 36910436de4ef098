#include "runtime/vk/descriptors.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/error.hpp"
#include "runtime/vk/check.hpp"

namespace lathe::vk {
namespace {

constexpr uint32_t kPoolSets = 256;
constexpr uint32_t kPoolDescriptors = 1024;  // of each kind

// Bytes per texel of the formats kernels read through texel buffers; 0 for any other.
VkDeviceSize texel_size(VkFormat format) {
  switch (format) {
    case VK_FORMAT_R8_UINT: case VK_FORMAT_R8_SINT: case VK_FORMAT_R8_UNORM: case VK_FORMAT_R8_SNORM:
      return 1;
    case VK_FORMAT_R16_UINT: case VK_FORMAT_R16_SINT: case VK_FORMAT_R16_SFLOAT:
      return 2;
    case VK_FORMAT_R32_UINT: case VK_FORMAT_R32_SINT: case VK_FORMAT_R32_SFLOAT:
    case VK_FORMAT_R16G16_UINT: case VK_FORMAT_R16G16_SINT: case VK_FORMAT_R16G16_SFLOAT:
    case VK_FORMAT_R8G8B8A8_UINT: case VK_FORMAT_R8G8B8A8_SINT:
    case VK_FORMAT_R8G8B8A8_UNORM: case VK_FORMAT_R8G8B8A8_SNORM:
      return 4;
    case VK_FORMAT_R32G32_UINT: case VK_FORMAT_R32G32_SINT: case VK_FORMAT_R32G32_SFLOAT:
    case VK_FORMAT_R16G16B16A16_UINT: case VK_FORMAT_R16G16B16A16_SINT: case VK_FORMAT_R16G16B16A16_SFLOAT:
      return 8;
    case VK_FORMAT_R32G32B32A32_UINT: case VK_FORMAT_R32G32B32A32_SINT: case VK_FORMAT_R32G32B32A32_SFLOAT:
      return 16;
    default:
      return 0;
  }
}

std::string describe(const Pipeline& pipeline, size_t binding) {
  return "kernel '" + pipeline.key->kernel + "' binding " + std::to_string(binding);
}

}  // namespace

DescriptorArena::DescriptorArena(Device& device) : device_(device) {}

DescriptorArena::~DescriptorArena() {
  for (VkDescriptorPool pool : pools_) vkDestroyDescriptorPool(device_.handle(), pool, nullptr);  // frees its sets
}

void DescriptorArena::add_pool(uint32_t storage, uint32_t texel) {
  const VkDescriptorPoolSize sizes[] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, storage},
                                        {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, texel}};
  VkDescriptorPoolCreateInfo create{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  create.maxSets = kPoolSets;
  create.poolSizeCount = 2;
  create.pPoolSizes = sizes;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(vkCreateDescriptorPool(device_.handle(), &create, nullptr, &pool), "vkCreateDescriptorPool");
  pools_.push_back(pool);
  sets_left_ = kPoolSets;
  storage_left_ = storage;
  texel_left_ = texel;
}

VkDescriptorSet DescriptorArena::allocate(const Pipeline& pipeline) {
  const auto& kinds = pipeline.key->bindings;
  const auto storage = static_cast<uint32_t>(std::count(kinds.begin(), kinds.end(), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER));
  const auto texel = static_cast<uint32_t>(kinds.size()) - storage;
  if (sets_left_ == 0 || storage > storage_left_ || texel > texel_left_)
    add_pool(std::max(storage, kPoolDescriptors), std::max(texel, kPoolDescriptors));

  VkDescriptorSetAllocateInfo allocate{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  allocate.descriptorPool = pools_.back();
  allocate.descriptorSetCount = 1;
  allocate.pSetLayouts = &pipeline.set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(vkAllocateDescriptorSets(device_.handle(), &allocate, &set), "vkAllocateDescriptorSets");
  sets_left_ -= 1;
  storage_left_ -= storage;
  texel_left_ -= texel;
  return set;
}

void write_descriptors(Device& device, const Pipeline& pipeline, VkDescriptorSet set, std::span<const Binding> bindings) {
  const DeviceInfo& info = device.info();
  const auto& kinds = pipeline.key->bindings;
  if (bindings.size() != kinds.size())
    throw Error(ErrorKind::InvalidArgument, "kernel '" + pipeline.key->kernel + "' has " + std::to_string(kinds.size()) +
                                                " bindings, " + std::to_string(bindings.size()) + " were given");

  // Reserved up front: the writes point into these.
  std::vector<VkDescriptorBufferInfo> buffers;
  std::vector<VkBufferView> views;
  buffers.reserve(bindings.size());
  views.reserve(bindings.size());
  std::vector<VkWriteDescriptorSet> writes(bindings.size(), {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET});
  for (size_t i = 0; i < bindings.size(); ++i) {
    VkWriteDescriptorSet& w = writes[i];
    w.dstSet = set;
    w.dstBinding = static_cast<uint32_t>(i);
    w.descriptorCount = 1;
    w.descriptorType = kinds[i];
    if (const auto* b = std::get_if<BufferBinding>(&bindings[i])) {
      if (kinds[i] != VK_DESCRIPTOR_TYPE_STORAGE_BUFFER)
        throw Error(ErrorKind::InvalidArgument,
                    describe(pipeline, i) + " is a uniform texel buffer but a storage buffer range was given");
      const uint32_t align = std::max(info.min_storage_buffer_offset_alignment, 1u);
      if (b->offset % align != 0)
        throw Error(ErrorKind::InvalidArgument, describe(pipeline, i) + ": offset " + std::to_string(b->offset) +
                                                    " is not a multiple of minStorageBufferOffsetAlignment (" +
                                                    std::to_string(align) + ") of " + info.name);
      if (b->range != VK_WHOLE_SIZE && b->range > info.max_storage_buffer_range)
        throw Error(ErrorKind::InvalidArgument, describe(pipeline, i) + ": a range of " + std::to_string(b->range) +
                                                    " bytes exceeds maxStorageBufferRange (" +
                                                    std::to_string(info.max_storage_buffer_range) + ") of " + info.name +
                                                    "; bind the tensor in chunks");
      buffers.push_back({b->buffer, b->offset, b->range});
      w.pBufferInfo = &buffers.back();
    } else {
      if (kinds[i] != VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER)
        throw Error(ErrorKind::InvalidArgument,
                    describe(pipeline, i) + " is a storage buffer but a texel view was given");
      views.push_back(std::get<TexelBinding>(bindings[i]).view);
      w.pTexelBufferView = &views.back();
    }
  }
  vkUpdateDescriptorSets(device.handle(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
}

TexelView::TexelView(Device& device, VkBuffer buffer, VkFormat format, VkDeviceSize offset, VkDeviceSize bytes)
    : device_(device.handle()) {
  const DeviceInfo& info = device.info();
  const VkDeviceSize texel = texel_size(format);
  const std::string what = "a texel view of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset);
  if (texel == 0)
    throw Error(ErrorKind::InvalidArgument, what + ": format " + std::to_string(static_cast<int>(format)) +
                                                " is not one lathe reads through texel buffers");
  if (bytes == 0 || bytes % texel != 0)
    throw Error(ErrorKind::InvalidArgument, what + ": not a whole number of " + std::to_string(texel) + "-byte texels");
  if (bytes / texel > info.max_texel_buffer_elements)
    throw Error(ErrorKind::OutOfMemory, what + ": " + std::to_string(bytes / texel) +
                                            " texels exceed maxTexelBufferElements (" +
                                            std::to_string(info.max_texel_buffer_elements) + ") of " + info.name +
                                            "; split the tensor");
  const VkDeviceSize align = std::max<VkDeviceSize>(info.min_texel_buffer_offset_alignment, 1);
  if (offset % align != 0)
    throw Error(ErrorKind::InvalidArgument, what + ": offset " + std::to_string(offset) +
                                                " is not a multiple of minTexelBufferOffsetAlignment (" +
                                                std::to_string(align) + ") of " + info.name);
  VkFormatProperties properties{};
  vkGetPhysicalDeviceFormatProperties(info.physical, format, &properties);
  if ((properties.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) == 0)
    throw Error(ErrorKind::Unsupported, info.name + " cannot read format " + std::to_string(static_cast<int>(format)) +
                                            " through a uniform texel buffer");

  VkBufferViewCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  create.buffer = buffer;
  create.format = format;
  create.offset = offset;
  create.range = bytes;
  check(vkCreateBufferView(device_, &create, nullptr, &view_), "vkCreateBufferView");
}

TexelView::~TexelView() {
  if (view_ != VK_NULL_HANDLE) vkDestroyBufferView(device_, view_, nullptr);
}

TexelView::TexelView(TexelView&& other) noexcept
    : device_(other.device_), view_(std::exchange(other.view_, VK_NULL_HANDLE)) {}

TexelView& TexelView::operator=(TexelView&& other) noexcept {
  if (this != &other) {
    if (view_ != VK_NULL_HANDLE) vkDestroyBufferView(device_, view_, nullptr);
    device_ = other.device_;
    view_ = std::exchange(other.view_, VK_NULL_HANDLE);
  }
  return *this;
}

}  // namespace lathe::vk
