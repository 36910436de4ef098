#include "runtime/model/session.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "runtime/error.hpp"
#include "runtime/model/lowering.hpp"
#include "runtime/model/push.hpp"
#include "runtime/vk/buffer.hpp"
#include "runtime/vk/check.hpp"
#include "runtime/vk/descriptors.hpp"
#include "runtime/vk/pipeline.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/safetensors.hpp"

namespace lathe {
namespace {

constexpr VkBufferUsageFlags kStorage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
constexpr VkBufferUsageFlags kWeights = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
constexpr VkDeviceSize kTexel = 16;  // RGBA32UI

// matmul.comp's layouts: decode (tokens 1) gives a workgroup `rows` weight
// rows; prefill (tokens 8) gives each lane `rows` rows for 8 tokens.
struct Tile {
  uint32_t rows, tokens, texels;  // texels: per lane per chunk of K (decode)
  uint32_t rows_per_group(uint32_t lanes) const { return tokens == 1 ? rows : rows * lanes; }
};
// Measured with `<model> profile` on the 125M bench model, lavapipe on 2
// cores: decode 32 rows × 2 texels per lane; prefill 32 rows per lane (8
// tokens × 32 rows of accumulators: fine on a CPU, where they are vectors in
// cache, far too many registers for a GPU, which gets 4). LATHE_TILE_DECODE /
// LATHE_TILE_PREFILL = "rows,tokens,texels" override them for such measurements.
Tile tile_from_env(const char* name, Tile t) {
  Tile e = t;
  if (const char* v = std::getenv(name); v && std::sscanf(v, "%u,%u,%u", &e.rows, &e.tokens, &e.texels) == 3 &&
                                         e.rows >= 1 && e.rows <= 64 && e.texels >= 1 && e.texels <= 8)
    return Tile{e.rows, t.tokens, e.texels};  // the layout (tokens) is not the variable's to choose
  return t;
}

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// A manifest tensor on the device: matrices keep their dtype and are read
// through a texel view; vectors (norm scales, biases) become f32.
struct DeviceTensor {
  std::optional<vk::Buffer> buffer;
  std::optional<vk::TexelView> view;
  DType dtype = DType::F32;
  bool uploaded = false;
  // Packed tensors live in a pack's buffer instead, at `offset` bytes.
  vk::Buffer* home = nullptr;
  VkDeviceSize offset = 0;
};

// A plan::Pack on the device: its weights stacked in one buffer (with a
// texel view), their biases in another.
struct DevicePack {
  std::optional<vk::Buffer> weights, biases;
  std::optional<vk::TexelView> view;
};

}  // namespace

struct Session::Impl {
  vk::Device& device;
  const ModelInfo& model;
  SessionOptions options;
  int64_t context = 0;
  int64_t position = 0;
  plan::Plan plan;
  uint32_t lanes = 0;
  Tile decode{}, prefill{};

  vk::Pipelines pipelines;
  vk::DescriptorArena arena;
  std::vector<DeviceTensor> tensors;
  std::vector<DevicePack> packs;
  std::vector<vk::Buffer> slots;  // [max_chunk][width] f32 each
  std::vector<vk::Buffer> k_cache, v_cache;  // per layer [context][kv_heads][head_dim]
  std::vector<vk::TexelView> k_views, v_views;  // the same, as RGBA32UI texels for attention
  std::optional<vk::Buffer> io;       // host-visible: position, tokens[max_chunk]
  std::optional<vk::Buffer> logits;   // [max_chunk or 1][vocab] f32
  std::optional<vk::Buffer> scratch;  // attention partials: [max_chunk][heads][splits][head_dim + 2] f32
  std::optional<vk::Buffer> dummy;    // unused bindings
  std::optional<vk::TexelView> dummy_view;
  std::vector<VkDescriptorSet> sets;  // one per dispatch

  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer prefill_commands = VK_NULL_HANDLE, decode_commands = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  bool decode_recorded = false;

  Impl(vk::Device& d, const ModelInfo& m, const SessionOptions& o)
      : device(d), model(m), options(o), pipelines(d, o.pipeline_cache), arena(d) {}

  ~Impl() {
    if (device.handle() != VK_NULL_HANDLE) vkDeviceWaitIdle(device.handle());
    if (fence != VK_NULL_HANDLE) vkDestroyFence(device.handle(), fence, nullptr);
    if (pool != VK_NULL_HANDLE) vkDestroyCommandPool(device.handle(), pool, nullptr);
  }

  const KernelBinary& kernel(const std::string& name) const {
    for (const KernelBinary& k : model.kernels)
      if (k.name == name) return k;
    throw Error(ErrorKind::Unsupported, std::string(model.name) + ": no kernel instance '" + name + "'");
  }

  uint32_t* io_words() const { return static_cast<uint32_t*>(io->mapped()); }

  VkDeviceSize device_bytes(size_t tensor) const {
    return static_cast<VkDeviceSize>(model.manifest[tensor].elements()) * weights::dtype_size(tensors[tensor].dtype);
  }

  // Each pack's members are laid end to end in one buffer.
  void allocate_packs() {
    packs.resize(plan.packs.size());
    for (size_t p = 0; p < plan.packs.size(); ++p) {
      auto stack = [&](const std::vector<int32_t>& members, std::optional<vk::Buffer>& buffer) {
        VkDeviceSize total = 0;
        for (int32_t m : members) total += device_bytes(static_cast<size_t>(m));
        if (members.empty()) return total;
        buffer.emplace(device, total, kWeights, vk::MemoryUse::Device);
        VkDeviceSize offset = 0;
        for (int32_t m : members) {
          tensors[static_cast<size_t>(m)].home = &*buffer;
          tensors[static_cast<size_t>(m)].offset = offset;
          offset += device_bytes(static_cast<size_t>(m));
        }
        return total;
      };
      const VkDeviceSize bytes = stack(plan.packs[p].weights, packs[p].weights);
      stack(plan.packs[p].biases, packs[p].biases);
      packs[p].view.emplace(device, packs[p].weights->handle(), VK_FORMAT_R32G32B32A32_UINT, 0, bytes);
    }
  }

  void allocate() {
    const vk::DeviceInfo& info = device.info();
    tensors.resize(model.manifest.size());
    for (size_t i = 0; i < model.manifest.size(); ++i)
      tensors[i].dtype = model.manifest[i].rank == 2 ? device_dtype(model.manifest[i].dtype) : DType::F32;
    allocate_packs();
    for (size_t i = 0; i < model.manifest.size(); ++i) {
      const ManifestEntry& e = model.manifest[i];
      DeviceTensor& t = tensors[i];
      if (t.home != nullptr) continue;
      const VkDeviceSize bytes = device_bytes(i);
      try {
        t.buffer.emplace(device, bytes, kWeights, vk::MemoryUse::Device);
        t.home = &*t.buffer;
        if (e.rank == 2) {
          if (bytes % kTexel != 0)
            throw Error(ErrorKind::Unsupported,
                        std::to_string(bytes) + " bytes are not a whole number of 16-byte texels");
          t.view.emplace(device, t.buffer->handle(), VK_FORMAT_R32G32B32A32_UINT, 0, bytes);
        }
      } catch (const Error& error) {  // name the tensor: a device limit alone does not say which one
        throw Error(error.kind(), std::string(e.name) + ": " + error.what());
      }
    }
    const VkDeviceSize rows = static_cast<VkDeviceSize>(options.max_chunk);
    for (int64_t width : plan.slot_widths)
      slots.emplace_back(device, rows * static_cast<VkDeviceSize>(width) * 4, kStorage, vk::MemoryUse::Device);
    const VkDeviceSize cache_bytes = static_cast<VkDeviceSize>(context) * model.kv_heads * model.head_dim *
                                     (model.cache_dtype == DType::F16 ? 2 : 4);
    for (int64_t l = 0; l < model.layers; ++l) {
      k_cache.emplace_back(device, cache_bytes, kWeights, vk::MemoryUse::Device);
      v_cache.emplace_back(device, cache_bytes, kWeights, vk::MemoryUse::Device);
      k_views.emplace_back(device, k_cache.back().handle(), VK_FORMAT_R32G32B32A32_UINT, 0, cache_bytes);
      v_views.emplace_back(device, v_cache.back().handle(), VK_FORMAT_R32G32B32A32_UINT, 0, cache_bytes);
    }
    io.emplace(device, (1 + rows) * 4, kStorage, vk::MemoryUse::Staging);
    logits.emplace(device, (plan.all_logits ? rows : 1) * static_cast<VkDeviceSize>(model.vocab) * 4, kStorage,
                   vk::MemoryUse::Device);
    if (plan.attention_splits > 1)
      scratch.emplace(device, rows * static_cast<VkDeviceSize>(model.heads) * plan.attention_splits * (model.head_dim + 2) * 4,
                      kStorage, vk::MemoryUse::Device);
    dummy.emplace(device, kTexel, kWeights, vk::MemoryUse::Device);
    dummy_view.emplace(device, dummy->handle(), VK_FORMAT_R32G32B32A32_UINT, 0, kTexel);
    (void)info;
  }

  // A tensor bound on its own (not through its pack).
  const DeviceTensor& own(int32_t index) const {
    const DeviceTensor& t = tensors[static_cast<size_t>(index)];
    if (!t.buffer)
      throw Error(ErrorKind::Unsupported, std::string(model.manifest[static_cast<size_t>(index)].name) +
                                              ": bound alone, but the plan packed it with others");
    return t;
  }

  vk::Binding resolve(const plan::Binding& b) const {
    auto whole = [](const vk::Buffer& buffer) { return vk::BufferBinding{buffer.handle(), 0, buffer.size()}; };
    switch (b.resource) {
      case plan::Resource::Io: return whole(*io);
      case plan::Resource::Activation: return whole(slots[static_cast<size_t>(b.index)]);
      case plan::Resource::Logits: return whole(*logits);
      case plan::Resource::Weight: return vk::TexelBinding{own(b.index).view->handle()};
      case plan::Resource::Vector: return whole(*own(b.index).buffer);
      case plan::Resource::KCache: return whole(k_cache[static_cast<size_t>(b.index)]);
      case plan::Resource::VCache: return whole(v_cache[static_cast<size_t>(b.index)]);
      case plan::Resource::KCacheTexel: return vk::TexelBinding{k_views[static_cast<size_t>(b.index)].handle()};
      case plan::Resource::VCacheTexel: return vk::TexelBinding{v_views[static_cast<size_t>(b.index)].handle()};
      case plan::Resource::Pack: return vk::TexelBinding{packs[static_cast<size_t>(b.index)].view->handle()};
      case plan::Resource::PackBias: return whole(*packs[static_cast<size_t>(b.index)].biases);
      case plan::Resource::Scratch: return whole(*scratch);
      case plan::Resource::NoTexel: return vk::TexelBinding{dummy_view->handle()};
      case plan::Resource::NoBuffer: return whole(*dummy);
    }
    return whole(*dummy);
  }

  vk::PipelineKey key(const plan::Dispatch& d, const Tile& tile) const {
    vk::PipelineKey k;
    k.kernel = d.kernel;
    for (const plan::Binding& b : d.bindings)
      k.bindings.push_back(b.texel() ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
    k.spec_constants = {lanes};
    k.spec_constants.insert(k.spec_constants.end(), d.spec.begin(), d.spec.end());
    if (d.grid == plan::Grid::Tiles) k.spec_constants.insert(k.spec_constants.end(), {tile.rows, tile.tokens, tile.texels});
    k.push_size = static_cast<uint32_t>(kernel(d.kernel).push_size);
    return k;
  }

  const vk::Pipeline& pipeline(const plan::Dispatch& d, const Tile& tile) {
    const KernelBinary& k = kernel(d.kernel);
    return pipelines.get(vk::KernelCode{k.name, k.spirv, k.words, static_cast<uint32_t>(k.push_size)}, key(d, tile));
  }

  // Creates every pipeline up front (both matmul layouts), so that no pass
  // pays for a driver's compile, and writes each dispatch's descriptor set.
  void build_sets() {
    for (const plan::Dispatch& d : plan.dispatches) {
      if (d.grid == plan::Grid::Tiles) pipeline(d, prefill_tile());
      const vk::Pipeline& p = pipeline(d, decode_tile());
      const VkDescriptorSet set = arena.allocate(p);
      std::vector<vk::Binding> bindings;
      for (const plan::Binding& b : d.bindings) bindings.push_back(resolve(b));
      vk::write_descriptors(device, p, set, bindings);
      sets.push_back(set);
    }
  }

  void create_commands() {
    VkCommandPoolCreateInfo create{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    create.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    create.queueFamilyIndex = device.info().compute_queue_family;
    vk::check(vkCreateCommandPool(device.handle(), &create, nullptr, &pool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    allocate.commandPool = pool;
    allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    allocate.commandBufferCount = 1;
    vk::check(vkAllocateCommandBuffers(device.handle(), &allocate, &prefill_commands), "vkAllocateCommandBuffers");
    vk::check(vkAllocateCommandBuffers(device.handle(), &allocate, &decode_commands), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    vk::check(vkCreateFence(device.handle(), &fence_info, nullptr, &fence), "vkCreateFence");
  }

  // Records the whole plan for a chunk of `rows` tokens; with a query pool,
  // a timestamp before the first dispatch and after each one.
  void record(VkCommandBuffer cb, uint32_t rows, const Tile& tile, VkQueryPool timestamps = VK_NULL_HANDLE) {
    vk::check(vkResetCommandBuffer(cb, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk::check(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
    VkMemoryBarrier between{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    between.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    if (timestamps != VK_NULL_HANDLE) {
      vkCmdResetQueryPool(cb, timestamps, 0, static_cast<uint32_t>(plan.dispatches.size() + 1));
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, timestamps, 0);
    }
    for (size_t i = 0; i < plan.dispatches.size(); ++i) {
      const plan::Dispatch& d = plan.dispatches[i];
      const vk::Pipeline& p = pipeline(d, tile);
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
      vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &sets[i], 0, nullptr);
      std::vector<uint32_t> push = d.push;
      uint32_t used_rows = rows;
      if (d.last_row) {
        used_rows = 1;
        if (d.grid == plan::Grid::Tiles) push[2] = rows - 1;  // MatmulPush::x_row0
      }
      push[0] = used_rows;
      vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(push.size() * 4),
                         push.data());
      switch (d.grid) {
        case plan::Grid::Rows: vkCmdDispatch(cb, used_rows, 1, 1); break;
        case plan::Grid::HeadsRows: vkCmdDispatch(cb, d.groups_x, used_rows, d.groups_z); break;
        case plan::Grid::Tiles:
          vkCmdDispatch(cb, ceil_div(d.n, tile.rows_per_group(lanes)), ceil_div(used_rows, tile.tokens), 1);
          break;
        case plan::Grid::Single: vkCmdDispatch(cb, 1, 1, 1); break;
      }
      vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                           &between, 0, nullptr, 0, nullptr);
      if (timestamps != VK_NULL_HANDLE)
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, timestamps, static_cast<uint32_t>(i + 1));
    }
    VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &to_host, 0, nullptr, 0,
                         nullptr);
    vk::check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  }

  void submit(VkCommandBuffer cb) {
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cb;
    vk::check(vkResetFences(device.handle(), 1, &fence), "vkResetFences");
    vk::check(vkQueueSubmit(device.queue(), 1, &submit, fence), "vkQueueSubmit");
    vk::check(vkWaitForFences(device.handle(), 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  }

  void check_ready(size_t count) const {
    for (size_t i = 0; i < tensors.size(); ++i)
      if (!tensors[i].uploaded)
        throw Error(ErrorKind::InvalidArgument, std::string(model.manifest[i].name) + ": not loaded before the first forward pass");
    if (position + static_cast<int64_t>(count) > context)
      throw Error(ErrorKind::InvalidArgument,
                  "the context of " + std::to_string(context) + " positions is full: " + std::to_string(position) +
                      " cached + " + std::to_string(count) + " new tokens (raise the context, up to " +
                      std::to_string(model.max_context) + ")");
  }

  void check_token(int32_t token) const {
    if (token < 0 || token >= model.vocab)
      throw Error(ErrorKind::InvalidArgument,
                  "token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(model.vocab) + ")");
  }

  Tile decode_tile() const { return decode; }
  Tile prefill_tile() const { return prefill; }

  void choose_tiles() {
    decode = tile_from_env("LATHE_TILE_DECODE", {32, 1, 2});
    // The prefill layout broadcasts 8 tokens from 8 lanes: narrower subgroups
    // run the decode layout for every row.
    const bool cpu = device.info().type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    prefill = lanes < 8 ? decode : tile_from_env("LATHE_TILE_PREFILL", {cpu ? 32u : 4u, 8, 1});
  }

  // Runs one chunk (rows ≤ max_chunk) already written to io; advances the position.
  void run_chunk(uint32_t rows) {
    io_words()[0] = static_cast<uint32_t>(position);
    if (rows == 1) {
      if (!decode_recorded) {
        record(decode_commands, 1, decode_tile());
        decode_recorded = true;
      }
      submit(decode_commands);
    } else {
      record(prefill_commands, rows, prefill_tile());
      submit(prefill_commands);
    }
    position += rows;
  }

  std::vector<float> read_logits(uint32_t rows) {
    std::vector<float> out(static_cast<size_t>(rows) * static_cast<size_t>(model.vocab));
    vk::download(device, *logits, out.data(), out.size() * sizeof(float));
    return out;
  }
};

Session::Session(vk::Device& device, const ModelInfo& model, const SessionOptions& options)
    : impl_(std::make_unique<Impl>(device, model, options)) {
  Impl& s = *impl_;
  vk::check_requirements(device.info(), vk::DeviceRequirements{.subgroup_arithmetic = true, .subgroup_ballot = true});
  s.context = options.context ? options.context : model.max_context;
  if (s.context < 1 || s.context > model.max_context)
    throw Error(ErrorKind::InvalidArgument, "context " + std::to_string(options.context) + " is outside [1, " +
                                                std::to_string(model.max_context) + "], the spec's max_context of " +
                                                std::string(model.name));
  if (options.max_chunk < 1)
    throw Error(ErrorKind::InvalidArgument, "max_chunk must be at least 1, not " + std::to_string(options.max_chunk));
  s.lanes = device.info().subgroup_size;
  s.choose_tiles();
  // A CPU device has a few threads and many workgroups already; a GPU needs
  // more of them over a long cache than heads × rows gives in decode.
  const uint32_t splits = options.attention_splits > 0 ? static_cast<uint32_t>(options.attention_splits)
                          : device.info().type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 1u : 16u;
  s.plan = plan::lower(model, model.schedule(), {options.all_logits, splits});
  // Every activation (and the logits of every row) is bound whole as a
  // storage buffer: a chunk may hold no more rows than maxStorageBufferRange
  // allows (128 MiB on lavapipe: 261 rows of a 128256-token vocabulary).
  int64_t widest = s.plan.all_logits ? model.vocab : 0;
  for (int64_t w : s.plan.slot_widths) widest = std::max(widest, w);
  const uint64_t range = device.info().max_storage_buffer_range;
  if (range > 0 && widest > 0) {
    const int64_t fit = static_cast<int64_t>(range / (static_cast<uint64_t>(widest) * 4));
    if (fit < 1)
      throw Error(ErrorKind::Unsupported, "a row of " + std::to_string(widest) + " values exceeds maxStorageBufferRange (" +
                                              std::to_string(range) + " bytes) of " + device.info().name);
    s.options.max_chunk = std::min(s.options.max_chunk, fit);
  }
  s.allocate();
  s.build_sets();
  s.create_commands();
}

Session::~Session() = default;

const ModelInfo& Session::model() const { return impl_->model; }
int64_t Session::context() const { return impl_->context; }
int64_t Session::position() const { return impl_->position; }
void Session::reset() { impl_->position = 0; }
size_t Session::dispatches_per_token() const { return impl_->plan.dispatches.size(); }

void Session::upload(size_t index, DType dtype, std::span<const std::byte> data) {
  Impl& s = *impl_;
  if (index >= s.tensors.size())
    throw Error(ErrorKind::InvalidArgument, "tensor index " + std::to_string(index) + " is outside the manifest");
  const ManifestEntry& e = s.model.manifest[index];
  DeviceTensor& t = s.tensors[index];
  const size_t elements = static_cast<size_t>(e.elements());
  if (dtype == DType::Q8_0) {
    // GGUF's Q8_0 blocks (34 bytes per 32 values), dequantized at load.
    if (elements % 32 != 0 || data.size() != elements / 32 * 34)
      throw Error(ErrorKind::InvalidArgument, std::string(e.name) + ": " + std::to_string(data.size()) +
                                                  " bytes are not the Q8_0 blocks of " + std::to_string(elements) +
                                                  " values");
    std::vector<float> values(elements);
    weights::dequantize_q8_0(data, values);
    return upload(index, DType::F32, std::as_bytes(std::span(values)));
  }
  if (data.size() != elements * weights::dtype_size(dtype))
    throw Error(ErrorKind::InvalidArgument, std::string(e.name) + ": " + std::to_string(data.size()) + " bytes given, " +
                                                std::to_string(elements * weights::dtype_size(dtype)) + " expected for " +
                                                std::to_string(elements) + " " + std::string(dtype_name(dtype)) + " values");
  const size_t size = weights::dtype_size(t.dtype);
  const bool transpose = e.rank == 2 && s.model.layout == Layout::InOut && is_linear(e.role);
  if (t.home->mapped() != nullptr && !transpose) {
    // Unified memory: convert straight into the mapping, no host copy.
    weights::convert(dtype, data, t.dtype,
                     std::span(static_cast<std::byte*>(t.home->mapped()) + t.offset, elements * size));
    t.uploaded = true;
    return;
  }
  std::vector<std::byte> converted(elements * size);
  weights::convert(dtype, data, t.dtype, converted);
  if (transpose) {
    // Stored [in, out] (GPT-2's Conv1D): the kernels read [out, in] rows.
    const size_t in = static_cast<size_t>(e.shape[0]), out = static_cast<size_t>(e.shape[1]);
    std::vector<std::byte> transposed(converted.size());
    for (size_t i = 0; i < in; ++i)
      for (size_t o = 0; o < out; ++o)
        std::memcpy(&transposed[(o * in + i) * size], &converted[(i * out + o) * size], size);
    converted.swap(transposed);
  }
  vk::upload(s.device, *t.home, converted.data(), converted.size(), t.offset);
  t.uploaded = true;
}

void Session::load(const std::string& path) {
  using Clock = std::chrono::steady_clock;
  const weights::Checkpoint checkpoint(path);
  const ModelInfo& m = impl_->model;
  const std::vector<std::string> ignore(m.ignored_tensors.begin(), m.ignored_tensors.end());
  std::vector<std::string> problems = checkpoint.audit(m.manifest, ignore);
  for (const auto& file : checkpoint.files())
    if (const auto* gguf = dynamic_cast<const weights::GgufFile*>(file.get()))
      for (std::string& p : weights::metadata_problems(
               *gguf, {m.hidden, m.layers, m.heads, m.kv_heads, m.head_dim, m.intermediate}))
        problems.push_back(std::move(p));
  weights::raise_problems(checkpoint.path(), problems);
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const Clock::time_point start = Clock::now();
  uint64_t done = 0, total = 0;
  for (const ManifestEntry& e : m.manifest) total += checkpoint.find(e.name)->info->bytes;
  bool shown = false;
  for (size_t i = 0; i < m.manifest.size(); ++i) {
    const weights::Checkpoint::Tensor* t = checkpoint.find(m.manifest[i].name);
    upload(i, t->info->dtype, t->file->data(*t->info));
    done += t->info->bytes;
    if (terminal && (shown || Clock::now() - start > std::chrono::seconds(1))) {
      std::fprintf(stderr, "\rloading %s: %zu/%zu tensors, %llu/%llu MiB", checkpoint.path().c_str(), i + 1,
                   m.manifest.size(), static_cast<unsigned long long>(done >> 20),
                   static_cast<unsigned long long>(total >> 20));
      shown = true;
    }
  }
  if (shown) std::fprintf(stderr, "\n");
}

std::vector<float> Session::prefill(std::span<const int32_t> tokens) {
  Impl& s = *impl_;
  if (tokens.empty()) throw Error(ErrorKind::InvalidArgument, "prefill of no tokens");
  for (int32_t t : tokens) s.check_token(t);
  s.check_ready(tokens.size());
  std::vector<float> all;
  std::vector<float> last;
  for (size_t at = 0; at < tokens.size(); at += static_cast<size_t>(s.options.max_chunk)) {
    const uint32_t rows = static_cast<uint32_t>(std::min<size_t>(tokens.size() - at, static_cast<size_t>(s.options.max_chunk)));
    for (uint32_t r = 0; r < rows; ++r) s.io_words()[1 + r] = static_cast<uint32_t>(tokens[at + r]);
    s.run_chunk(rows);
    if (s.plan.all_logits) {
      const std::vector<float> chunk = s.read_logits(rows);
      all.insert(all.end(), chunk.begin(), chunk.end());
    } else if (at + rows == tokens.size()) {
      last = s.read_logits(1);
    }
  }
  return s.plan.all_logits ? all : last;
}

std::vector<float> Session::decode(int32_t token) {
  Impl& s = *impl_;
  s.check_token(token);
  s.check_ready(1);
  s.io_words()[1] = static_cast<uint32_t>(token);
  s.run_chunk(1);
  return s.read_logits(1);
}

std::vector<int32_t> Session::generate_greedy(int32_t token, int64_t steps) {
  Impl& s = *impl_;
  s.check_token(token);
  s.check_ready(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  std::vector<int32_t> out;
  s.io_words()[1] = static_cast<uint32_t>(token);
  for (int64_t i = 0; i < steps; ++i) {
    s.run_chunk(1);  // argmax leaves its pick in tokens[0], where the next step's embedding reads it
    out.push_back(argmax());
    s.io_words()[1] = static_cast<uint32_t>(out.back());
  }
  return out;
}

std::vector<Session::KernelTime> Session::profile(uint32_t rows) {
  Impl& s = *impl_;
  s.check_ready(rows);
  if (rows < 1 || rows > s.options.max_chunk)
    throw Error(ErrorKind::InvalidArgument, "profile: rows must be in [1, max_chunk]");
  const uint32_t count = static_cast<uint32_t>(s.plan.dispatches.size() + 1);
  VkQueryPoolCreateInfo create{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  create.queryType = VK_QUERY_TYPE_TIMESTAMP;
  create.queryCount = count;
  VkQueryPool pool = VK_NULL_HANDLE;
  vk::check(vkCreateQueryPool(s.device.handle(), &create, nullptr, &pool), "vkCreateQueryPool");
  std::vector<uint64_t> ticks(count);
  try {
    s.io_words()[0] = static_cast<uint32_t>(s.position);
    s.record(s.prefill_commands, rows, rows == 1 ? s.decode_tile() : s.prefill_tile(), pool);
    s.submit(s.prefill_commands);
    vk::check(vkGetQueryPoolResults(s.device.handle(), pool, 0, count, ticks.size() * 8, ticks.data(), 8,
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
              "vkGetQueryPoolResults");
  } catch (...) {
    vkDestroyQueryPool(s.device.handle(), pool, nullptr);
    throw;
  }
  vkDestroyQueryPool(s.device.handle(), pool, nullptr);
  const double ns_per_tick = s.device.info().timestamp_period;
  std::vector<KernelTime> out;
  for (size_t i = 0; i < s.plan.dispatches.size(); ++i)
    out.push_back({s.plan.dispatches[i].kernel, static_cast<double>(ticks[i + 1] - ticks[i]) * ns_per_tick / 1000.0});
  return out;
}

int32_t Session::argmax() const { return static_cast<int32_t>(impl_->io_words()[1]); }

}  // namespace lathe
