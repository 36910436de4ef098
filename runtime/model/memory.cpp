// Every buffer a session's plan binds: weights (alone or stacked in packs),
// activation slots, the KV cache (a Mamba model's state), the IO buffer,
// logits and attention partials, each sized by the plan.

#include <algorithm>

#include "runtime/error.hpp"
#include "runtime/model/session_impl.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe {
namespace {

constexpr VkBufferUsageFlags kStorage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
constexpr VkBufferUsageFlags kTexels = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
constexpr VkDeviceSize kTexel = 16;  // RGBA32UI

// A tensor's dtype on the device: matrices in their own, vectors and tables f32.
DType held_dtype(const ManifestEntry& e) {
  return read_as_matrix(e.role, e.bias, e.rank) && e.rank >= 2 ? device_dtype(e.dtype) : DType::F32;
}
int64_t held_bytes(const ManifestEntry& e, DType held) {
  // (an [in, out] matrix is held [out][in])
  return e.in_out ? device_tensor_bytes(held, 2, e.shape[1], e.shape[0])
                  : device_tensor_bytes(held, e.rank >= 2 ? 2 : 1, e.shape[0], e.shape[1]);
}

}  // namespace

VkDeviceSize Session::Impl::device_bytes(size_t tensor) const {
  return static_cast<VkDeviceSize>(held_bytes(model.manifest[tensor], tensors[tensor].dtype));
}

// Before anything is allocated or uploaded: the weights as the device holds
// them, the KV cache at the session's context and the activations, against
// the device's largest device-local heap.
int64_t Session::Impl::ring_positions(int64_t layer) const {
  return plan::ring_positions(plan.windows[static_cast<size_t>(layer)], context, options.max_chunk, options.images);
}

void Session::Impl::own_bound() {
  const bool all = first_stage && last_stage;
  const auto mark = [all](std::vector<char>& v, size_t n) { v.assign(n, all ? 1 : 0); };
  mark(owned.tensors, model.manifest.size());
  mark(owned.packs, plan.packs.size());
  mark(owned.parts, plan.parts.size());
  mark(owned.caches, static_cast<size_t>(model.cache_layers));
  mark(owned.states, static_cast<size_t>(plan.state_layers));
  if (all) return;
  for (size_t n : active)
    for (const plan::Binding& b : plan.dispatches[n].bindings) {
      const size_t i = static_cast<size_t>(b.index);
      plan::for_each_bound_tensor(plan, b, [&](int32_t t) { owned.tensors.at(static_cast<size_t>(t)) = 1; });
      switch (b.resource) {
        case plan::Resource::Pack:
        case plan::Resource::PackBias: owned.packs.at(i) = 1; break;
        case plan::Resource::KCache:
        case plan::Resource::VCache: owned.caches.at(i) = 1; break;
        case plan::Resource::ConvState:
        case plan::Resource::ScanState: owned.states.at(i) = 1; break;
        default: break;
      }
    }
  // A split matrix's row ranges go where the matrix goes.
  for (size_t p = 0; p < plan.parts.size(); ++p) owned.parts[p] = owned.tensors[static_cast<size_t>(plan.parts[p].tensor)];
}

Session::SplitNeed Session::split_need(const ModelInfo& model, const SessionOptions& options) {
  const plan::Plan& p = model.plan;
  const int64_t layers = static_cast<int64_t>(p.carried.size());
  const int64_t context = Impl::context_of(model, options);
  SplitNeed out{std::vector<int64_t>(static_cast<size_t>(layers), 0)};
  if (layers == 0) return out;
  // Where a dispatch of no layer runs, its tensors are held (Impl::first_layered).
  std::vector<char> on_first(model.manifest.size(), 0), on_last(model.manifest.size(), 0);
  const size_t first_layered = Impl::first_layered(p);
  for (size_t n = 0; n < p.dispatches.size(); ++n) {
    if (p.dispatches[n].block >= 0) continue;
    for (const plan::Binding& b : p.dispatches[n].bindings)
      plan::for_each_bound_tensor(p, b, [&](int32_t t) { (n < first_layered ? on_first : on_last).at(static_cast<size_t>(t)) = 1; });
  }
  for (size_t i = 0; i < model.manifest.size(); ++i) {  // (a stacked tensor's slices each their own)
    const ManifestEntry& e = model.manifest[i];
    const int64_t bytes = held_bytes(e, held_dtype(e));
    if (e.layer >= 0 && e.layer < layers) {
      out.layers[static_cast<size_t>(e.layer)] += bytes;
    } else {
      out.first += on_first[i] ? bytes : 0;  // (one no dispatch binds: no stage's)
      out.last += on_last[i] ? bytes : 0;
    }
  }
  const int64_t row = p.cache_row_bytes + p.v_cache_row_bytes;
  int64_t spread = options.sequences * p.state_layers * (p.conv_state_floats + p.scan_state_floats) * 4;
  for (size_t l = 0; l < p.windows.size(); ++l) {
    const int64_t bytes =
        options.sequences * plan::ring_positions(p.windows[l], context, options.max_chunk, options.images) * row;
    if (static_cast<int64_t>(p.windows.size()) == layers) out.layers[l] += bytes;
    else spread += bytes;
  }
  for (int64_t& b : out.layers) b += spread / layers;
  return out;
}

Session::Memory Session::Impl::memory() const {
  Session::Memory m;
  for (size_t i = 0; i < model.manifest.size(); ++i)
    if (owned.tensors[i]) m.weights += device_bytes(i);
  for (int64_t l = 0; l < model.cache_layers; ++l)
    if (owned.caches[static_cast<size_t>(l)])
      m.cache += static_cast<uint64_t>(options.sequences) * static_cast<uint64_t>(ring_positions(l)) *
                 static_cast<uint64_t>(plan.cache_row_bytes + plan.v_cache_row_bytes);  // K and V (none: latent)
  for (int64_t l = 0; l < plan.state_layers; ++l)
    if (owned.states[static_cast<size_t>(l)])
      m.state += static_cast<uint64_t>(options.sequences) *
                 static_cast<uint64_t>(plan.conv_state_floats + plan.scan_state_floats) * 4;
  if (last_stage)
    m.activations = static_cast<uint64_t>(std::max(options.max_chunk, decode_rows())) *
                    static_cast<uint64_t>(model.output_width) * 4;  // the logits (an encoder's states)
  for (int64_t width : plan.slot_widths)
    m.activations += static_cast<uint64_t>(options.max_chunk) * static_cast<uint64_t>(width) * 4;
  m.activations += partials_bytes() + expanded_bytes();
  return m;
}

Session::Impl::Fit Session::Impl::fit() const {
  const Session::Memory m = memory();
  Fit f;
  f.need = m.weights + m.cache + m.activations + m.state;
  const vk::DeviceMemory memory = vk::device_memory(device.info());  // a CPU device's: the host's
  f.heap = memory.bytes;
  f.host = memory.host;
  f.available = memory.available;
  return f;
}

std::string Session::Impl::mib(VkDeviceSize bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

std::string Session::Impl::memory_text() const {
  const Session::Memory m = memory();
  return "weights " + mib(m.weights) + ", KV cache of " + std::to_string(options.sequences) + " sequence(s) at context " +
         std::to_string(context) + " " + mib(m.cache) + (m.state > 0 ? ", Mamba state " + mib(m.state) : "") +
         ", activations " + mib(m.activations);
}

void Session::Impl::check_memory() const {
  const Fit f = fit();
  if (f.heap > 0 && f.need > f.heap)
    throw Error(ErrorKind::Unsupported, std::string(model.name) + " needs " + mib(f.need) + " of device memory (" +
                                            memory_text() + "); the largest device-local heap of " + device.info().name +
                                            (f.host ? " (the host's memory)" : "") + " holds " + mib(f.heap));
}

void Session::Impl::assign_dtypes() {
  tensors.resize(model.manifest.size());
  for (size_t i = 0; i < model.manifest.size(); ++i) tensors[i].dtype = held_dtype(model.manifest[i]);
}

void Session::Impl::allocate() {
  // Each pack's members are laid end to end in one buffer.
  packs.resize(plan.packs.size());
  for (size_t p = 0; p < plan.packs.size(); ++p) {
    auto stack = [&](std::span<const int32_t> members, std::optional<vk::Buffer>& buffer) {
      VkDeviceSize total = 0;
      for (int32_t m : members) total += device_bytes(static_cast<size_t>(m));
      if (members.empty()) return total;
      buffer.emplace(device, total, kTexels, vk::MemoryUse::Device);
      VkDeviceSize offset = 0;
      for (int32_t m : members) {
        tensors[static_cast<size_t>(m)].home = &*buffer;
        tensors[static_cast<size_t>(m)].offset = offset;
        offset += device_bytes(static_cast<size_t>(m));
      }
      return total;
    };
    if (!owned.packs[p]) continue;
    const plan::Pack& pk = plan.packs[p];
    const std::vector<int32_t> members = plan::weight_members(pk);
    const VkDeviceSize bytes = stack(members, packs[p].weights);
    stack(std::span(pk.biases).first(pk.bias_count), packs[p].biases);
    packs[p].view.emplace(device, packs[p].weights->handle(), VK_FORMAT_R32G32B32A32_UINT, 0, bytes);
  }

  // A matrix split into row ranges (the plan lists each tensor's together,
  // in row order): a buffer and a view for each range.
  for (size_t first = 0, end = 0; first < plan.parts.size(); first = end) {
    const size_t i = static_cast<size_t>(plan.parts[first].tensor);
    int64_t rows = 0;  // the whole matrix's
    for (end = first; end < plan.parts.size() && plan.parts[end].tensor == plan.parts[first].tensor; ++end)
      rows += plan.parts[end].rows;
    tensors[i].first_part = first;
    tensors[i].part_count = end - first;
    const VkDeviceSize row = device_bytes(i) / static_cast<VkDeviceSize>(rows);
    for (size_t p = first; p < end; ++p) {
      const plan::Part& pt = plan.parts[p];
      if (!owned.parts[p]) {  // another stage's: a placeholder keeps the parts in the plan's order
        vk::Buffer buffer(device, kTexel, kTexels, vk::MemoryUse::Device);
        vk::TexelView view(device, buffer.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, kTexel);
        parts.push_back(DevicePart{std::move(buffer), std::move(view), 0});
        continue;
      }
      const VkDeviceSize bytes = row * static_cast<VkDeviceSize>(pt.rows);
      try {
        if (row * static_cast<VkDeviceSize>(rows) != device_bytes(i) || bytes % kTexel != 0)
          throw Error(ErrorKind::Unsupported, "rows " + std::to_string(pt.row0) + ".." + std::to_string(pt.row0 + pt.rows) +
                                                  " are not a whole number of 16-byte texels");
        vk::Buffer buffer(device, bytes, kTexels, vk::MemoryUse::Device);
        vk::TexelView view(device, buffer.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, bytes);
        parts.push_back(DevicePart{std::move(buffer), std::move(view), row * static_cast<VkDeviceSize>(pt.row0)});
      } catch (const Error& error) {  // a device whose limits are below the spec's max_part_bytes
        throw Error(error.kind(), std::string(model.manifest[i].name) + " rows " + std::to_string(pt.row0) + ".." +
                                      std::to_string(pt.row0 + pt.rows) + " (the plan's parts of at most " +
                                      std::to_string(plan.max_part_bytes) + " bytes): " + error.what() +
                                      "; regenerate with a smaller [weights] max_part_bytes");
      }
    }
  }
  for (size_t i = 0; i < model.manifest.size(); ++i) {
    const ManifestEntry& e = model.manifest[i];
    DeviceTensor& t = tensors[i];
    if (t.home != nullptr || t.part_count > 0 || !owned.tensors[i]) continue;
    const VkDeviceSize bytes = device_bytes(i);
    try {
      t.buffer.emplace(device, bytes, kTexels, vk::MemoryUse::Device);
      t.home = &*t.buffer;
      if (read_as_matrix(e.role, e.bias, e.rank)) {
        if (bytes % kTexel != 0)
          throw Error(ErrorKind::Unsupported, std::to_string(bytes) + " bytes are not a whole number of 16-byte texels");
        t.view.emplace(device, t.buffer->handle(), VK_FORMAT_R32G32B32A32_UINT, 0, bytes);
      }
    } catch (const Error& error) {  // name the tensor: a device limit alone does not say which one
      throw Error(error.kind(), std::string(e.name) + ": " + error.what());
    }
  }

  const VkDeviceSize rows = static_cast<VkDeviceSize>(options.max_chunk);
  for (int64_t width : plan.slot_widths)
    slots.emplace_back(device, rows * static_cast<VkDeviceSize>(width) * 4, kStorage, vk::MemoryUse::Device);
  // Each sequence has its ring, sequence s's after s − 1's; rope_kv binds the
  // whole cache as a storage buffer.
  const uint64_t range = device.info().max_storage_buffer_range;
  for (int64_t l = 0; l < model.cache_layers; ++l) {
    ring.push_back(static_cast<uint32_t>(ring_positions(l)));
    // Another stage's layer: a texel's placeholder keeps the layers' order.
    const VkDeviceSize cache_bytes = !owned.caches[static_cast<size_t>(l)]
                                         ? kTexel
                                         : static_cast<VkDeviceSize>(options.sequences) * ring.back() *
                                               static_cast<VkDeviceSize>(plan.cache_row_bytes);
    if (range > 0 && cache_bytes > range)
      throw Error(ErrorKind::Unsupported,
                  "layer " + std::to_string(l) + "'s K cache of " + std::to_string(options.sequences) + " sequences × " +
                      std::to_string(ring.back()) + " positions × " + std::to_string(plan.cache_row_bytes) + " bytes = " +
                      std::to_string(cache_bytes) + " bytes exceeds maxStorageBufferRange (" + std::to_string(range) +
                      " bytes) of " + device.info().name + ": lower the context or the sequences");
    k_cache.emplace_back(device, cache_bytes, kTexels, vk::MemoryUse::Device);
    k_views.emplace_back(device, k_cache.back().handle(), VK_FORMAT_R32G32B32A32_UINT, 0, cache_bytes);
    // Latent attention has no V cache: the values are read from the K cache
    // (the plan's V rows are none or the K rows' size: plan::first_invalid).
    if (plan.v_cache_row_bytes == 0) continue;
    v_cache.emplace_back(device, cache_bytes, kTexels, vk::MemoryUse::Device);
    v_views.emplace_back(device, v_cache.back().handle(), VK_FORMAT_R32G32B32A32_UINT, 0, cache_bytes);
  }
  // A Mamba layer's state of each sequence, sequence s's after s − 1's;
  // zeros are never read (a row at position 0 starts its sequence afresh).
  const auto state_buffer = [&](int64_t floats, bool held) {  // not held: another stage's layer, a word
    return vk::Buffer(device, held ? static_cast<VkDeviceSize>(options.sequences) * static_cast<VkDeviceSize>(std::max<int64_t>(floats, 1)) * 4 : 4,
                      kStorage, vk::MemoryUse::Device);
  };
  for (int64_t l = 0; l < plan.state_layers; ++l) {
    const bool held = owned.states[static_cast<size_t>(l)] != 0;
    conv_state.push_back(state_buffer(plan.conv_state_floats, held));  // d_conv 1 keeps no window: a word to bind
    scan_state.push_back(state_buffer(plan.scan_state_floats, held));
  }
  io.emplace(device, rows * sizeof(plan::IoRow), kStorage, vk::MemoryUse::Staging);
  if (plan.input_row_floats > 0)
    input.emplace(device, rows * static_cast<VkDeviceSize>(plan.input_row_floats) * 4, kStorage, vk::MemoryUse::Staging);
  const VkDeviceSize logit_rows = options.all_logits ? rows : static_cast<VkDeviceSize>(decode_rows());
  logits.emplace(device, last_stage ? logit_rows * static_cast<VkDeviceSize>(model.output_width) * 4 : 4, kStorage,
                 vk::MemoryUse::Device);
  // The carried slots' rows, slot after slot, on their way between stages.
  const auto handoff = [&](uint64_t carried) {
    return vk::Buffer(device, carried_bytes(carried, static_cast<uint32_t>(rows)), kStorage, vk::MemoryUse::Staging);
  };
  if (carried_in) handoff_in.emplace(handoff(carried_in));
  if (carried_out) handoff_out.emplace(handoff(carried_out));
  if (const VkDeviceSize bytes = partials_bytes()) partials.emplace(device, bytes, kStorage, vk::MemoryUse::Device);
  if (const VkDeviceSize bytes = expanded_bytes()) expanded.emplace(device, bytes, kStorage, vk::MemoryUse::Device);
  dummy.emplace(device, kTexel, kTexels, vk::MemoryUse::Device);
  dummy_view.emplace(device, dummy->handle(), VK_FORMAT_R32G32B32A32_UINT, 0, kTexel);
}

vk::Binding Session::Impl::resolve(const plan::Binding& b, kernels::BindingKind kind) const {
  auto whole = [](const vk::Buffer& buffer) { return vk::BufferBinding{buffer.handle(), 0, buffer.size()}; };
  const bool texel = kind == kernels::BindingKind::Texel;
  const size_t i = static_cast<size_t>(b.index);
  switch (b.resource) {
    case plan::Resource::None: break;
    case plan::Resource::Io: return whole(*io);
    case plan::Resource::Activation: return whole(slots[i]);
    case plan::Resource::Logits: return whole(*logits);
    case plan::Resource::Weight: {
      const DeviceTensor& t = tensors[i];
      if (!t.buffer)  // the plan stacked it in a pack or split it: it is bound through those
        throw Error(ErrorKind::Unsupported, std::string(model.manifest[i].name) + ": bound alone, but the plan packed or split it");
      if (texel) return vk::TexelBinding{t.view->handle()};
      return whole(*t.buffer);
    }
    case plan::Resource::Pack: return vk::TexelBinding{packs[i].view->handle()};
    case plan::Resource::PackBias: return whole(*packs[i].biases);
    case plan::Resource::KCache:
      if (texel) return vk::TexelBinding{k_views[i].handle()};
      return whole(k_cache[i]);
    case plan::Resource::VCache:
      if (texel) return vk::TexelBinding{v_views[i].handle()};
      return whole(v_cache[i]);
    case plan::Resource::Partials:
      if (partials) return whole(*partials);
      break;  // attention not split: the kernel writes no partials
    case plan::Resource::Part: return vk::TexelBinding{parts[i].view.handle()};
    case plan::Resource::ConvState: return whole(conv_state[i]);
    case plan::Resource::ScanState: return whole(scan_state[i]);
    case plan::Resource::Expanded:
      if (expanded) return whole(*expanded);
      break;
    case plan::Resource::Input:
      if (input) return whole(*input);
      break;
  }
  if (texel) return vk::TexelBinding{dummy_view->handle()};
  return whole(*dummy);
}

}  // namespace lathe
