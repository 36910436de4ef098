// Compute pipelines, created once per key and kept in a VkPipelineCache that
// lives on disk between runs: a driver that honours it skips recompiling
// kernels on the next start (lavapipe 22.x keeps only the header, NVIDIA and
// RADV keep the compiled code).
#pragma once

#include <vulkan/vulkan.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/vk/device.hpp"

namespace lathe::vk {

// A compute kernel as a generated model library embeds it.
struct KernelCode {
  std::string_view name;
  const uint32_t* spirv;
  size_t words;
  uint32_t push_size;
};

// Everything that makes two pipelines different: a value type, the key of the cache map.
struct PipelineKey {
  std::string kernel;                      // KernelCode::name
  std::vector<VkDescriptorType> bindings;  // binding i of set 0 has type bindings[i] (STORAGE_BUFFER or UNIFORM_TEXEL_BUFFER)
  std::vector<uint32_t> spec_constants;    // constant_id i = spec_constants[i] (uint32); id 0 is the workgroup size by convention
  uint32_t push_size = 0;
  auto operator<=>(const PipelineKey&) const = default;
};

struct Pipeline {  // owned by Pipelines
  VkPipeline pipeline;
  VkPipelineLayout layout;
  VkDescriptorSetLayout set_layout;
  const PipelineKey* key;
};

class Pipelines {
 public:
  // `cache_dir`: where the VkPipelineCache is kept between runs; empty: $LATHE_CACHE_DIR, else
  // $XDG_CACHE_HOME/lathe, else $HOME/.cache/lathe; "-": no disk cache. The file is named after the
  // device's pipelineCacheUUID (hex) and vendor/device id, so another driver or device never reads it;
  // a corrupt, truncated or foreign file is ignored (see cache_header_matches), never fatal.
  Pipelines(Device& device, std::string cache_dir = {});
  // The Pipelines that every holder on `device` with the same cache_dir shares while any of them
  // lives: a second session beside the first (a batched one beside a single one, one reloaded from
  // another file) creates only the kernels the first did not, rather than all of them again (on
  // lavapipe a pipeline's creation is most of a small model's start).
  static std::shared_ptr<Pipelines> shared(Device& device, const std::string& cache_dir = {});
  // Saves when pipelines were created since the last save (errors ignored: the cache is an
  // optimisation), then destroys everything.
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  // Creates on first use (shader module, set layout, pipeline layout with one push-constant range of
  // push_size bytes when > 0, compute pipeline through the VkPipelineCache), then returns the same
  // Pipeline for an equal key and the same code (two model libraries may both name a kernel
  // "argmax": their code tells them apart). Safe to call from several threads. Throws lathe::Error naming the kernel when the key does not fit the
  // code (name, push size, binding types) or the device, or creation fails.
  const Pipeline& get(const KernelCode& code, const PipelineKey& key);
  // The same for many at once: those not yet created are created on up to
  // `threads` threads (0: one per hardware thread), as a driver that builds
  // each pipeline on the calling thread (lavapipe translates SPIR-V there)
  // then starts in a fraction of the time. result[i] is requests[i]'s.
  struct Request {
    KernelCode code;
    PipelineKey key;
  };
  std::vector<const Pipeline*> get(std::span<const Request> requests, unsigned threads = 0);
  size_t size() const;
  // Writes the cache file now (no-op for "-"): to a temporary file renamed over the old one, so a
  // concurrent run never reads half a file. Throws Error(Io) naming the path on failure.
  void save();
  const std::string& cache_path() const { return cache_path_; }  // empty for "-"
  // Whether the cache started from a file on disk this device wrote: false
  // on a first run, whose pipelines (and a lazily compiling driver's first
  // dispatches) compile from scratch.
  bool from_disk() const { return from_disk_; }

 private:
  Device& device_;
  std::string cache_path_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  mutable std::mutex mutex_;                   // the map, from several sessions' threads
  std::shared_mutex creating_;                 // held shared while a pipeline is created, whole by save()
  const Pipeline* find(const KernelCode& code, const PipelineKey& key) const;  // under mutex_
  Pipeline create(const KernelCode& code, const PipelineKey& key);           // no lock taken
  const Pipeline& insert(const KernelCode& code, const PipelineKey& key, const Pipeline& p);
  // By the code's address, then the key; map nodes never move: Pipeline::key points into them.
  std::map<const uint32_t*, std::map<PipelineKey, Pipeline>> pipelines_;
  bool from_disk_ = false;
  bool dirty_ = false;                         // pipelines created since the cache was loaded or saved
};

// Whether `data` starts with a VkPipelineCacheHeaderVersionOne written by this device and driver
// (size, version, vendor, device, pipelineCacheUUID). Drivers are meant to reject foreign data
// themselves, but not all do so gracefully; Pipelines passes nothing else to Vulkan.
bool cache_header_matches(const DeviceInfo& info, std::span<const std::byte> data);

}  // namespace lathe::vk
