// `lathe devices` for the GPU kit: the Vulkan devices, their limits and
// features, the device class each gets, and the chosen device's copy
// bandwidth per buffer size, without the generator's Clang libraries (which
// a bare GPU machine lacks and the kit does not carry).
//
//   lathe_kit_devices [--bandwidth MiB,MiB,…]   the listing; the bandwidth
//                                                rows of those sizes (0: none)
//   lathe_kit_devices --forced-only             the forced-only classes the
//                                                chosen device meets, a line
//                                                each (bench/gpu/run forces each)
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bench/device_bandwidth.hpp"
#include "generator/lower/device_report.hpp"
#include "runtime/error.hpp"
#include "runtime/vk/device.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

namespace {

// "16,256,1024" as MiB; throws naming --bandwidth and the item at fault.
std::vector<uint64_t> parse_sizes(const std::string& text) {
  std::vector<uint64_t> sizes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    size_t end = 0;
    uint64_t mib = 0;
    try {
      mib = std::stoull(item, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (end == 0 || end != item.size())
      throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--bandwidth: \"" + item + "\" is not a size in MiB");
    if (mib > 0) sizes.push_back(mib << 20);
  }
  return sizes;
}

// vkCmdCopyBuffer against stream_copy.comp on the same buffers, a row per
// size: a copy engine's rate and the multiprocessors' (the decode
// roofline), and where each leaves the caches (50 MiB of L2 on an H100);
// then reads alone, through a storage buffer and through a texel buffer.
void print_bandwidth(const lathe::vk::DeviceInfo& chosen, const std::vector<uint64_t>& sizes) {
  lathe::vk::Device device(chosen);
  std::printf("\ncopy bandwidth of [%u] (GB/s, bytes read + written, best of 5 after an untimed run):\n\n", chosen.index);
  std::printf("| buffer MiB | vkCmdCopyBuffer | stream_copy.comp |\n|---:|---:|---:|\n");
  for (const uint64_t bytes : sizes) {
    const lathe::bench::DeviceBandwidth b = lathe::bench::device_bandwidth(device, bytes, 5);
    std::printf("| %.0f | %.1f | %.1f |\n", static_cast<double>(b.bytes) / (1 << 20), b.copy_command, b.kernel);
    std::fflush(stdout);
  }
  // Read alone, as weights are: whether a storage-buffer path would read
  // them faster than the texel buffers the matmul kernels read today.
  std::printf("\nread bandwidth of [%u] (GB/s, bytes read, best of 5 after an untimed run; stream_read.comp):\n\n",
              chosen.index);
  std::printf("| buffer MiB | storage buffer, uvec4 loads | uniform texel buffer, RGBA32UI texelFetch |\n|---:|---:|---:|\n");
  for (const uint64_t bytes : sizes) {
    const lathe::bench::ReadBandwidth r = lathe::bench::read_bandwidth(device, bytes, 5);
    std::printf("| %.0f | %.1f | %.1f |\n", static_cast<double>(r.bytes) / (1 << 20), r.storage, r.texel);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool forced_only = false;
    std::vector<uint64_t> sizes = parse_sizes("16,256,1024");
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--forced-only") forced_only = true;
      else if (arg == "--bandwidth" && i + 1 < argc) sizes = parse_sizes(argv[++i]);
      else throw lathe::Error(lathe::ErrorKind::InvalidArgument, "usage: lathe_kit_devices [--forced-only] [--bandwidth MiB,MiB,…]");
    }
    lathe::vk::Instance instance(lathe::vk::InstanceOptions{false});
    const auto devices = lathe::vk::query_devices(instance);
    if (devices.empty()) {
      std::cout << lathe::vk::format_device_list(devices);
      return 1;
    }
    const auto& chosen = lathe::vk::select_device(devices, lathe::vk::device_selector());
    if (forced_only) {
      for (const std::string& name : lathe::lower::forced_only_met(chosen)) std::cout << name << "\n";
      return 0;
    }
    std::cout << lathe::vk::format_device_list(devices) << "selected: [" << chosen.index << "] " << chosen.name << "\n"
              << lathe::lower::device_class_report(devices) << std::flush;
    if (!sizes.empty()) print_bandwidth(chosen, sizes);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "lathe_kit_devices: " << e.what() << "\n";
    return 1;
  }
}
