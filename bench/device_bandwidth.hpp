// The device's own copy bandwidth, the roofline lathe_bench reads decode
// against and the GPU kit's devices.txt reports per buffer size.
#pragma once

#include <vulkan/vulkan.h>

#include "runtime/vk/device.hpp"

namespace lathe::bench {

// Two ways over the same buffers, best of `repeats` each after one untimed
// run, counting bytes read plus written (as STREAM does), timed by
// timestamps around the work: vkCmdCopyBuffer between two device-local
// buffers, and stream_copy.comp, the multiprocessors reading and writing 16
// bytes an invocation. `bytes` is what both copied: the size asked for,
// within the device's largest allocation and maxStorageBufferRange, in
// 16-byte units. On an H200 the copy command ran at 850 GB/s, a copy
// engine's rate, where decode read 1818 GB/s of f16 weights: the kernel's
// rate is the roofline decode reads weights against. On lavapipe the copy
// command is the host's memcpy (59 GB/s on 2 cores) and the kernel slower
// (13 GB/s): the faster of the two is the roofline.
struct DeviceBandwidth {
  VkDeviceSize bytes = 0;
  double copy_command = 0, kernel = 0;  // GB/s
};

DeviceBandwidth device_bandwidth(vk::Device& device, VkDeviceSize bytes, int repeats);

// Read alone, the two ways a kernel may read weights (stream_read.comp):
// uvec4 loads from a storage buffer, and texelFetch of RGBA32UI texels from
// a uniform texel buffer (how the matmul kernels read them), best of
// `repeats` after an untimed run, over the same `bytes` (within
// maxStorageBufferRange, the largest allocation and maxTexelBufferElements).
// What a storage-buffer path for weights would gain, measured where a lease
// runs the kit.
struct ReadBandwidth {
  VkDeviceSize bytes = 0;
  double storage = 0, texel = 0;  // GB/s
};

ReadBandwidth read_bandwidth(vk::Device& device, VkDeviceSize bytes, int repeats);

}  // namespace lathe::bench
