#include "bench/device_bandwidth.hpp"

#include <algorithm>
#include <vector>

#include "runtime/vk/buffer.hpp"
#include "runtime/vk/check.hpp"
#include "runtime/vk/descriptors.hpp"
#include "runtime/vk/pipeline.hpp"
#include "stream_copy.spv.h"        // stream_copy_spv: bench/stream_copy.comp
#include "stream_read.spv.h"        // stream_read_spv: bench/stream_read.comp
#include "stream_read_texel.spv.h"  // stream_read_texel_spv: the same, -DTEXEL

namespace lathe::bench {

namespace {

constexpr uint32_t kGroup = 256;

// `bytes` within the device's largest allocation and storage range, in
// 16-byte units.
VkDeviceSize fitted(const vk::DeviceInfo& info, VkDeviceSize bytes) {
  if (info.max_memory_allocation_size > 0) bytes = std::min<VkDeviceSize>(bytes, info.max_memory_allocation_size);
  if (info.max_storage_buffer_range > 0) bytes = std::min<VkDeviceSize>(bytes, info.max_storage_buffer_range);
  return bytes / 16 * 16;
}

// Times recorded work by timestamps around it: the best of `repeats` runs
// after an untimed one (first touch of the pages, the kernel's compile).
class Timer {
 public:
  explicit Timer(vk::Device& device) : device_(device), once_(device) {
    VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    query_info.queryCount = 2;
    vk::check(vkCreateQueryPool(device.handle(), &query_info, nullptr, &pool_), "vkCreateQueryPool");
  }
  ~Timer() { vkDestroyQueryPool(device_.handle(), pool_, nullptr); }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // The best seconds of `record`'s work.
  template <class Record>
  double best_of(int repeats, const Record& record) {
    double best = 1e30;
    for (int r = -1; r < repeats; ++r) {
      const VkCommandBuffer cb = once_.begin();
      vkCmdResetQueryPool(cb, pool_, 0, 2);
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool_, 0);
      record(cb);
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, 1);
      once_.submit_and_wait();
      uint64_t ticks[2] = {0, 0};
      vk::check(vkGetQueryPoolResults(device_.handle(), pool_, 0, 2, sizeof ticks, ticks, 8,
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                "vkGetQueryPoolResults");
      if (r >= 0) best = std::min(best, static_cast<double>(ticks[1] - ticks[0]) * device_.info().timestamp_period * 1e-9);
    }
    return best;
  }

 private:
  vk::Device& device_;
  vk::OneShot once_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
};

// The best seconds of a grid-stride kernel over n uvec4 elements with its
// two bindings (push constant: n).
double kernel_seconds(vk::Device& device, Timer& timer, int repeats, const vk::KernelCode& code,
                      std::vector<VkDescriptorType> kinds, const std::vector<vk::Binding>& bindings, uint32_t n,
                      uint32_t groups) {
  vk::Pipelines pipelines(device, "-");
  const vk::Pipeline& p = pipelines.get(code, vk::PipelineKey{std::string(code.name), std::move(kinds), {kGroup}, 4});
  vk::DescriptorArena arena(device);
  const VkDescriptorSet set = arena.allocate(p);
  vk::write_descriptors(device, p, set, bindings);
  return timer.best_of(repeats, [&](VkCommandBuffer cb) {
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &n);
    vkCmdDispatch(cb, groups, 1, 1);
  });
}

}  // namespace

DeviceBandwidth device_bandwidth(vk::Device& device, VkDeviceSize bytes, int repeats) {
  bytes = fitted(device.info(), bytes);
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  vk::Buffer a(device, bytes, usage, vk::MemoryUse::Device), b(device, bytes, usage, vk::MemoryUse::Device);
  Timer timer(device);
  DeviceBandwidth out;
  out.bytes = bytes;
  const double both = 2.0 * static_cast<double>(bytes) / 1e9;  // read + written
  out.copy_command = both / timer.best_of(repeats, [&](VkCommandBuffer cb) {
    const VkBufferCopy region{0, 0, bytes};
    vkCmdCopyBuffer(cb, a.handle(), b.handle(), 1, &region);
  });
  const uint32_t n = static_cast<uint32_t>(bytes / 16);
  out.kernel = both / kernel_seconds(device, timer, repeats,
                                     vk::KernelCode{"stream_copy", stream_copy_spv, std::size(stream_copy_spv), 4},
                                     {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER},
                                     {vk::BufferBinding{a.handle(), 0, bytes}, vk::BufferBinding{b.handle(), 0, bytes}}, n,
                                     std::min<uint32_t>((n + kGroup - 1) / kGroup, 65535));
  return out;
}

ReadBandwidth read_bandwidth(vk::Device& device, VkDeviceSize bytes, int repeats) {
  const vk::DeviceInfo& info = device.info();
  bytes = fitted(info, bytes);
  if (info.max_texel_buffer_elements > 0) bytes = std::min<VkDeviceSize>(bytes, VkDeviceSize{info.max_texel_buffer_elements} * 16);
  vk::Buffer a(device, bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT,
               vk::MemoryUse::Device);
  vk::Buffer b(device, 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk::MemoryUse::Device);
  const vk::TexelView view(device, a.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, bytes);
  Timer timer(device);
  const uint32_t n = static_cast<uint32_t>(bytes / 16);
  // About 8 loads an invocation in flight over the grid-stride loop.
  const uint32_t groups = std::clamp<uint32_t>(n / kGroup / 8, 1, 65535);
  const vk::Binding out = vk::BufferBinding{b.handle(), 0, 16};
  ReadBandwidth r;
  r.bytes = bytes;
  const double read = static_cast<double>(bytes) / 1e9;
  r.storage = read / kernel_seconds(device, timer, repeats,
                                    vk::KernelCode{"stream_read", stream_read_spv, std::size(stream_read_spv), 4},
                                    {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER},
                                    {vk::BufferBinding{a.handle(), 0, bytes}, out}, n, groups);
  r.texel = read / kernel_seconds(device, timer, repeats,
                                  vk::KernelCode{"stream_read_texel", stream_read_texel_spv, std::size(stream_read_texel_spv), 4},
                                  {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER},
                                  {vk::TexelBinding{view.handle()}, out}, n, groups);
  return r;
}

}  // namespace lathe::bench
