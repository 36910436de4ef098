#include "bench/device_bandwidth.hpp"

#include <algorithm>
#include <vector>

#include "runtime/vk/buffer.hpp"
#include "runtime/vk/check.hpp"
#include "runtime/vk/descriptors.hpp"
#include "runtime/vk/pipeline.hpp"
#include "stream_copy.spv.h"  // stream_copy_spv: bench/stream_copy.comp

namespace lathe::bench {

DeviceBandwidth device_bandwidth(vk::Device& device, VkDeviceSize bytes, int repeats) {
  const vk::DeviceInfo& info = device.info();
  if (info.max_memory_allocation_size > 0) bytes = std::min<VkDeviceSize>(bytes, info.max_memory_allocation_size);
  if (info.max_storage_buffer_range > 0) bytes = std::min<VkDeviceSize>(bytes, info.max_storage_buffer_range);
  bytes = bytes / 16 * 16;
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  vk::Buffer a(device, bytes, usage, vk::MemoryUse::Device), b(device, bytes, usage, vk::MemoryUse::Device);
  VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  query_info.queryCount = 2;
  struct Owned {  // destroyed on every way out
    VkDevice device;
    VkQueryPool pool = VK_NULL_HANDLE;
    ~Owned() { vkDestroyQueryPool(device, pool, nullptr); }
  } owned{device.handle()};
  vk::check(vkCreateQueryPool(device.handle(), &query_info, nullptr, &owned.pool), "vkCreateQueryPool");
  const VkQueryPool queries = owned.pool;
  vk::OneShot once(device);
  // Best GB/s of `record`'s work over `bytes` read and as many written.
  const auto best_of = [&](const auto& record) {
    double best = 1e30;
    for (int r = -1; r < repeats; ++r) {  // one untimed run: first touch of the pages, the kernel's compile
      const VkCommandBuffer cb = once.begin();
      vkCmdResetQueryPool(cb, queries, 0, 2);
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
      record(cb);
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
      once.submit_and_wait();
      uint64_t ticks[2] = {0, 0};
      vk::check(vkGetQueryPoolResults(device.handle(), queries, 0, 2, sizeof ticks, ticks, 8,
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                "vkGetQueryPoolResults");
      if (r >= 0) best = std::min(best, static_cast<double>(ticks[1] - ticks[0]) * info.timestamp_period * 1e-9);
    }
    return 2.0 * static_cast<double>(bytes) / best / 1e9;
  };
  DeviceBandwidth out;
  out.bytes = bytes;
  out.copy_command = best_of([&](VkCommandBuffer cb) {
    const VkBufferCopy region{0, 0, bytes};
    vkCmdCopyBuffer(cb, a.handle(), b.handle(), 1, &region);
  });
  vk::Pipelines pipelines(device, "-");
  constexpr uint32_t kGroup = 256;
  vk::PipelineKey key{"stream_copy", {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER}, {kGroup}, 4};
  const vk::Pipeline& p =
      pipelines.get(vk::KernelCode{"stream_copy", stream_copy_spv, sizeof stream_copy_spv / sizeof stream_copy_spv[0], 4}, key);
  vk::DescriptorArena arena(device);
  const VkDescriptorSet set = arena.allocate(p);
  const std::vector<vk::Binding> bindings = {vk::BufferBinding{a.handle(), 0, bytes}, vk::BufferBinding{b.handle(), 0, bytes}};
  vk::write_descriptors(device, p, set, bindings);
  const uint32_t n = static_cast<uint32_t>(bytes / 16);
  const uint32_t groups = std::min<uint32_t>((n + kGroup - 1) / kGroup, 65535);
  out.kernel = best_of([&](VkCommandBuffer cb) {
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &n);
    vkCmdDispatch(cb, groups, 1, 1);
  });
  return out;
}

}  // namespace lathe::bench
