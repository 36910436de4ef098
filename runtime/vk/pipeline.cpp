#include "runtime/vk/pipeline.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <utility>

#include "runtime/cache_dir.hpp"
#include "runtime/error.hpp"
#include "runtime/vk/check.hpp"

namespace lathe::vk {
namespace {

namespace fs = std::filesystem;

std::string hex(uint64_t value, int digits) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = kDigits[value & 15];
  return out;
}

std::string resolve_cache_dir(std::string dir) {
  if (!dir.empty()) return dir;
  dir = lathe::cache_dir();
  return dir.empty() ? "-" : dir;  // "-": nowhere to keep it
}

// The whole file, or nothing when it is missing or unreadable: a cache is never required.
std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  if (size <= 0) return {};
  std::vector<std::byte> data(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(data.data()), size)) return {};
  return data;
}

std::string kernel_error(const PipelineKey& key, const std::string& what) {
  return "kernel '" + key.kernel + "': " + what;
}

// What the key promises must agree with the code and fit the device; checked before Vulkan sees it.
void check_key(const DeviceInfo& info, const KernelCode& code, const PipelineKey& key) {
  auto refuse = [&](ErrorKind kind, const std::string& what) { throw Error(kind, kernel_error(key, what)); };
  const std::string push = std::to_string(key.push_size);
  if (code.name != key.kernel)
    refuse(ErrorKind::InvalidArgument, "the key names it but the code is '" + std::string(code.name) + "'");
  if (code.spirv == nullptr || code.words == 0) refuse(ErrorKind::InvalidArgument, "no SPIR-V code");
  if (code.push_size != key.push_size)
    refuse(ErrorKind::InvalidArgument,
           "the key has " + push + " bytes of push constants, the code " + std::to_string(code.push_size));
  if (key.push_size % 4 != 0)
    refuse(ErrorKind::InvalidArgument, "push constants of " + push + " bytes, not a multiple of 4");
  if (key.push_size > info.max_push_constants_size)
    refuse(ErrorKind::Unsupported, push + " bytes of push constants exceed maxPushConstantsSize (" +
                                       std::to_string(info.max_push_constants_size) + ") of " + info.name);
  for (size_t i = 0; i < key.bindings.size(); ++i) {
    const VkDescriptorType type = key.bindings[i];
    if (type != VK_DESCRIPTOR_TYPE_STORAGE_BUFFER && type != VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER)
      refuse(ErrorKind::InvalidArgument, "binding " + std::to_string(i) + " has descriptor type " +
                                             std::to_string(static_cast<int>(type)) +
                                             "; only storage buffers and uniform texel buffers are supported");
  }
}

// Null handles are ignored by vkDestroy*.
void destroy(VkDevice device, const Pipeline& p) {
  vkDestroyPipeline(device, p.pipeline, nullptr);
  vkDestroyPipelineLayout(device, p.layout, nullptr);
  vkDestroyDescriptorSetLayout(device, p.set_layout, nullptr);
}

}  // namespace

bool cache_header_matches(const DeviceInfo& info, std::span<const std::byte> data) {
  VkPipelineCacheHeaderVersionOne header{};
  if (data.size() < sizeof(header)) return false;
  std::memcpy(&header, data.data(), sizeof(header));
  return header.headerSize >= sizeof(header) && header.headerSize <= data.size() &&
         header.headerVersion == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && header.vendorID == info.vendor_id &&
         header.deviceID == info.device_id &&
         std::memcmp(header.pipelineCacheUUID, info.pipeline_cache_uuid, VK_UUID_SIZE) == 0;
}

Pipelines::Pipelines(Device& device, std::string cache_dir) : device_(device) {
  const DeviceInfo& info = device.info();
  cache_dir = resolve_cache_dir(std::move(cache_dir));
  std::vector<std::byte> data;
  if (cache_dir != "-") {
    std::string uuid;
    for (uint8_t byte : info.pipeline_cache_uuid) uuid += hex(byte, 2);
    cache_path_ = (fs::path(cache_dir) / ("pipelines-" + uuid + "-" + hex(info.vendor_id, 4) + "-" +
                                          hex(info.device_id, 4) + ".vkcache"))
                      .string();
    data = read_file(cache_path_);
    if (!cache_header_matches(info, data)) data.clear();
  }
  VkPipelineCacheCreateInfo create{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  create.initialDataSize = data.size();
  create.pInitialData = data.empty() ? nullptr : data.data();
  // A driver may still refuse data whose header it accepted (a body it cannot parse): start empty.
  VkResult r = vkCreatePipelineCache(device.handle(), &create, nullptr, &cache_);
  if (r != VK_SUCCESS && !data.empty()) {
    create.initialDataSize = 0;
    create.pInitialData = nullptr;
    r = vkCreatePipelineCache(device.handle(), &create, nullptr, &cache_);
  }
  check(r, "vkCreatePipelineCache");
  from_disk_ = !data.empty() && create.pInitialData != nullptr;
}

Pipelines::~Pipelines() {
  if (dirty_) {
    try {
      save();
    } catch (const std::exception&) {
      // A read-only or full cache directory costs the next run its compile time, nothing else.
    }
  }
  for (auto& [code, of_code] : pipelines_)
    for (auto& [key, p] : of_code) destroy(device_.handle(), p);
  vkDestroyPipelineCache(device_.handle(), cache_, nullptr);
}

std::shared_ptr<Pipelines> Pipelines::shared(Device& device, const std::string& cache_dir) {
  static std::mutex mutex;
  // By device handle (unique while the device lives, and a holder keeps it alive) and directory.
  static std::map<std::pair<VkDevice, std::string>, std::weak_ptr<Pipelines>> live;
  const std::lock_guard lock(mutex);
  std::erase_if(live, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<Pipelines>& slot = live[{device.handle(), resolve_cache_dir(cache_dir)}];
  if (std::shared_ptr<Pipelines> alive = slot.lock()) return alive;
  auto made = std::make_shared<Pipelines>(device, cache_dir);
  slot = made;
  return made;
}

size_t Pipelines::size() const {
  const std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& [code, of_code] : pipelines_) n += of_code.size();
  return n;
}

const Pipeline* Pipelines::find(const KernelCode& code, const PipelineKey& key) const {
  const auto of_code = pipelines_.find(code.spirv);
  if (of_code == pipelines_.end()) return nullptr;
  const auto found = of_code->second.find(key);
  return found == of_code->second.end() ? nullptr : &found->second;
}

const Pipeline& Pipelines::get(const KernelCode& code, const PipelineKey& key) {
  {
    const std::lock_guard lock(mutex_);
    if (const Pipeline* p = find(code, key)) return *p;
  }
  return insert(code, key, create(code, key));
}

std::vector<const Pipeline*> Pipelines::get(std::span<const Request> requests, unsigned threads) {
  std::vector<const Pipeline*> out(requests.size(), nullptr);
  std::vector<size_t> missing;  // the first request of each missing key
  {
    const std::lock_guard lock(mutex_);
    for (size_t i = 0; i < requests.size(); ++i)
      if (!(out[i] = find(requests[i].code, requests[i].key))) {
        bool repeat = false;
        for (size_t m : missing)
          repeat = repeat || (requests[m].code.spirv == requests[i].code.spirv && requests[m].key == requests[i].key);
        if (!repeat) missing.push_back(i);
      }
  }
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, missing.size()));
  // Each thread takes the next missing request until none is left; the first
  // error is rethrown once every thread has stopped.
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&] {
    for (size_t n; (n = next.fetch_add(1)) < missing.size();) {
      try {
        const Request& r = requests[missing[n]];
        insert(r.code, r.key, create(r.code, r.key));
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = missing.size();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  if (threads > 0) work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  const std::lock_guard lock(mutex_);
  for (size_t i = 0; i < requests.size(); ++i)
    if (!out[i]) out[i] = find(requests[i].code, requests[i].key);
  return out;
}

const Pipeline& Pipelines::insert(const KernelCode& code, const PipelineKey& key, const Pipeline& p) {
  const std::lock_guard lock(mutex_);
  std::map<PipelineKey, Pipeline>& of_code = pipelines_[code.spirv];
  const auto [it, added] = of_code.emplace(key, p);
  if (!added) {  // another thread created the same one meanwhile: keep the first
    destroy(device_.handle(), p);
    return it->second;
  }
  it->second.key = &it->first;
  dirty_ = true;
  return it->second;
}

Pipeline Pipelines::create(const KernelCode& code, const PipelineKey& key) {
  check_key(device_.info(), code, key);
  const std::shared_lock creating(creating_);
  const VkDevice device = device_.handle();
  Pipeline p{VK_NULL_HANDLE, VK_NULL_HANDLE, VK_NULL_HANDLE, nullptr};
  VkShaderModule module = VK_NULL_HANDLE;
  try {
    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = code.words * sizeof(uint32_t);
    module_info.pCode = code.spirv;
    check(vkCreateShaderModule(device, &module_info, nullptr, &module), "vkCreateShaderModule");

    std::vector<VkDescriptorSetLayoutBinding> bindings(key.bindings.size());
    for (size_t i = 0; i < bindings.size(); ++i)
      bindings[i] = {static_cast<uint32_t>(i), key.bindings[i], 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set_info.bindingCount = static_cast<uint32_t>(bindings.size());
    set_info.pBindings = bindings.data();
    check(vkCreateDescriptorSetLayout(device, &set_info, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");

    const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, key.push_size};
    VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &p.set_layout;
    layout_info.pushConstantRangeCount = key.push_size > 0 ? 1 : 0;
    layout_info.pPushConstantRanges = &push;
    check(vkCreatePipelineLayout(device, &layout_info, nullptr, &p.layout), "vkCreatePipelineLayout");

    std::vector<VkSpecializationMapEntry> entries(key.spec_constants.size());
    for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, sizeof(uint32_t)};
    VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(),
                              key.spec_constants.size() * sizeof(uint32_t), key.spec_constants.data()};
    VkComputePipelineCreateInfo pipeline_info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    pipeline_info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    pipeline_info.stage.module = module;
    pipeline_info.stage.pName = "main";
    pipeline_info.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec;
    pipeline_info.layout = p.layout;
    check(vkCreateComputePipelines(device, cache_, 1, &pipeline_info, nullptr, &p.pipeline), "vkCreateComputePipelines");
  } catch (const Error& e) {
    vkDestroyShaderModule(device, module, nullptr);
    destroy(device, p);
    throw Error(e.kind(), kernel_error(key, e.what()));
  }
  vkDestroyShaderModule(device, module, nullptr);  // the pipeline keeps what it needs
  return p;
}

void Pipelines::save() {
  if (cache_path_.empty()) return;
  const std::unique_lock no_creation(creating_);  // vkGetPipelineCacheData while nothing adds to the cache
  const std::lock_guard lock(mutex_);
  size_t size = 0;
  check(vkGetPipelineCacheData(device_.handle(), cache_, &size, nullptr), "vkGetPipelineCacheData");
  std::vector<char> data(size);
  // VK_INCOMPLETE cannot happen here (nothing is added between the calls) but would only shorten the file.
  const VkResult r = vkGetPipelineCacheData(device_.handle(), cache_, &size, data.data());
  if (r != VK_INCOMPLETE) check(r, "vkGetPipelineCacheData");
  data.resize(size);

  const fs::path path(cache_path_);
  // Unique per writer, so two runs saving at once each rename a whole file of their own.
  const fs::path temp = path.string() + ".tmp-" + hex(std::random_device{}(), 8);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      throw Error(ErrorKind::Io, "cannot write the pipeline cache " + temp.string());
    }
  }
  fs::rename(temp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(temp, ec);
    throw Error(ErrorKind::Io, "cannot rename the pipeline cache to " + path.string() + ": " + why);
  }
  dirty_ = false;
}

}  // namespace lathe::vk
