// The plan into commands: a pipeline per dispatch (its kernel, its bindings'
// kinds, the device's specialization constants), a descriptor set per
// dispatch written once, and a command buffer that records every dispatch
// with its push constants and workgroup counts.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "runtime/error.hpp"
#include "runtime/model/session_impl.hpp"
#include "runtime/vk/check.hpp"
#include "runtime/vk/device_features.hpp"

namespace lathe {
namespace {

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// LATHE_TILE_DECODE / _PREFILL / _BATCH = "rows,tokens,texels" override the
// class's tiles, for measurements (the generator's device_classes says what
// was measured). The layout is not the variable's to choose: tokens stay,
// except within the batch layout (1–7) and the tiled one (32 or 64, within
// `shared` bytes).
Tile tile_from_env(const char* name, Tile t, uint32_t shared) {
  const char* v = std::getenv(name);
  if (const std::optional<Tile> parsed = v ? plan::parse_tile(v) : std::nullopt; parsed && plan::tile_fits(*parsed)) {
    const Tile& e = *parsed;
    const bool batch_tokens = t.tokens > 1 && t.tokens < Tile::kPrefillTokens && e.tokens >= 1 && e.tokens < Tile::kPrefillTokens;
    if (t.tiled() != e.tiled() || (e.tiled() && e.shared_bytes(true) > shared)) return t;
    return Tile{e.rows, batch_tokens || e.tiled() ? e.tokens : t.tokens, e.texels,
                t.tiled() || t.tokens == Tile::kPrefillTokens ? 1u : e.groups, t.variant};
  }
  return t;
}

}  // namespace

const KernelModule& KernelBinary::module(kernels::Layout layout) const {
  const uint8_t i = layout_module[static_cast<size_t>(layout)];
  if (i == kNone || i >= modules.size())
    throw std::logic_error(std::string(name) + ": no module of the " + std::string(kernels::layout_name(layout)) +
                           " layout (the generator compiles those its plan's device classes run)");
  return modules[i];
}

void Session::Impl::choose_class() {
  const vk::DeviceInfo& info = device.info();
  const plan::DeviceFeatures features = vk::device_features(info);
  std::string wanted = options.device_class;
  if (wanted.empty())
    if (const char* v = std::getenv("LATHE_DEVICE_CLASS")) wanted = v;
  if (wanted.empty()) {
    const int32_t i = plan::first_met(plan.classes, features);
    if (i < 0) throw Error(ErrorKind::Unsupported, std::string(model.name) + ": " + info.name + " meets none of the plan's device classes");
    device_class = &plan.classes[static_cast<size_t>(i)];
  } else {
    std::string names;
    for (const plan::DeviceClass& c : plan.classes) {
      names += (names.empty() ? "" : ", ") + std::string(c.name);
      if (c.name == wanted) device_class = &c;
    }
    if (!device_class)
      throw Error(ErrorKind::InvalidArgument, "device class '" + wanted + "' (LATHE_DEVICE_CLASS) is not one of " +
                                                  std::string(model.name) + "'s: " + names);
    if (!plan::meets(*device_class, features))
      throw Error(ErrorKind::Unsupported, "device class '" + wanted + "' needs " + plan::needs_text(*device_class) + "; " +
                                              info.name + " is " + (features.cpu ? "a CPU device" : "not a CPU device") +
                                              " with subgroups of " + std::to_string(info.subgroup_size) + " lanes and " +
                                              std::to_string(features.shared) + " bytes of shared memory");
  }
  decode = tile_from_env("LATHE_TILE_DECODE", device_class->decode, features.shared);
  prefill = device_class->prefill == device_class->decode ? decode
                                                          : tile_from_env("LATHE_TILE_PREFILL", device_class->prefill, features.shared);
  batch = tile_from_env("LATHE_TILE_BATCH", device_class->batch, features.shared);
  batch.tokens = static_cast<uint32_t>(std::min<int64_t>(batch.tokens, decode_rows()));
  // SessionOptions::attention_splits, a measurement's, sets both.
  const auto given = [&](uint32_t planned) {
    return options.attention_splits > 0 ? static_cast<uint32_t>(options.attention_splits) : planned;
  };
  splits = given(device_class->splits);
  decode_splits = given(device_class->decode_splits);
  // Split attention's partials (a pass's rows × splits × heads × (head_dim
  // + 2) f32) are bound whole as a storage buffer: no more key ranges than
  // maxStorageBufferRange holds (128 MiB on lavapipe: a 256-row chunk of
  // DeepSeek's 16 heads × 578 takes 8 ranges, not 16).
  const uint64_t row = static_cast<uint64_t>(plan.partials_row_floats) * 4, range = info.max_storage_buffer_range;
  const auto fit = [&](uint32_t& ranges, uint64_t rows) {
    if (range > 0 && row > 0) ranges = static_cast<uint32_t>(std::clamp<uint64_t>(range / (rows * row), 1, ranges));
  };
  fit(splits, static_cast<uint64_t>(options.max_chunk));
  fit(decode_splits, step_rows(decode, prefill));
  const std::string& form = options.mla_form;
  if (!form.empty() && form != "absorbed" && form != "expanded")
    throw Error(ErrorKind::InvalidArgument, "mla_form: '" + form + "' is not absorbed or expanded (empty: the device class's)");
  if (form == "expanded" && plan.expanded_row_floats == 0)
    throw Error(ErrorKind::InvalidArgument, "mla_form: " + std::string(model.name) +
                                                " has no expanded form of latent attention (no [mla], or widths at "
                                                "which it never takes fewer multiply-adds)");
  const bool expanded = form.empty() ? device_class->expanded_mla : form == "expanded";
  expanded_rows = expanded ? std::min(plan.expanded_rows, context) : 0;
  expanded_min_rows = form.empty() ? plan.expanded_min_rows : 1;
}

void Session::set_tiles(const Tile& given_decode, const Tile& given_prefill) {
  Impl& s = *impl_;
  // A plain tile of the class's layout takes the class's variant: a sweep
  // of the dot or matrix-unit class measures its own kernels.
  const auto as_class = [](const Tile& t, const Tile& c) {
    Tile same = t;
    same.variant = c.variant;
    return t.variant == plan::Variant::Plain && same.layout() == c.layout() ? same : t;
  };
  const Tile decode = as_class(given_decode, s.device_class->decode), prefill = as_class(given_prefill, s.device_class->prefill);
  if (!plan::layouts_fit(decode, prefill, s.lanes, s.device.info().max_compute_shared_memory))
    throw Error(ErrorKind::InvalidArgument,
                "tiles: decode " + plan::tile_text(decode) + ", prefill " + plan::tile_text(prefill) +
                    ": rows 1–64, texels 1–8 and (decode) subgroups 1–8 each, decode 1 token, prefill the decode tile, " +
                    std::to_string(Tile::kPrefillTokens) + " tokens (on subgroups of as many lanes or more) or tiled " +
                    "(32 or 64 tokens, 64 or 128 rows, texels 1–4, within the device's " +
                    std::to_string(s.device.info().max_compute_shared_memory) + " bytes of shared memory" +
                    (prefill.tiled() ? "; this tile needs " + std::to_string(prefill.shared_bytes(true)) : std::string()) + ")");
  if (s.partials_bytes(decode, prefill) > (s.partials ? s.partials->size() : 0))
    throw Error(ErrorKind::InvalidArgument, "tiles: decode " + plan::tile_text(decode) + ", prefill " + plan::tile_text(prefill) +
                                                ": one layout for every pass takes a step's key ranges over a whole chunk, " +
                                                "more partials than the session holds");
  for (Impl* stage : s.stages()) {
    stage->decode = decode;
    stage->prefill = prefill;
    stage->decode_recorded.assign(stage->decode_recorded.size(), false);
  }
}

std::pair<Tile, Tile> Session::tiles() const { return {impl_->decode, impl_->prefill}; }

vk::Pipelines::Request Session::Impl::pipeline_request(const plan::Dispatch& d, const Tile& tile) const {
  const KernelBinary& k = kernel(d);
  const kernels::FamilyInfo& f = family(d);
  // A matmul's module is its tile's layout's (the generator compiled those
  // the plan's classes run), as is attention's in flash tiles; every other
  // family has one.
  const bool flash_tiles = f.spec_constants == kernels::SpecConstants::SplitsRing && flash(tile);
  const KernelModule& m =
      k.module(f.spec_constants == kernels::SpecConstants::Tile || flash_tiles ? tile.layout() : kernels::Layout::Rows);
  vk::PipelineKey key;
  key.kernel = std::string(k.name);
  for (const kernels::BindingInfo& b : f.bindings)
    key.bindings.push_back(b.kind == kernels::BindingKind::Texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                                 : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
  // Constant 0 is the workgroup size: a subgroup, matmul's tile's
  // (Tile::threads), or a subgroup for each of attention's rows.
  switch (f.spec_constants) {
    case kernels::SpecConstants::None: key.spec_constants = {lanes}; break;
    case kernels::SpecConstants::Tile:
      key.spec_constants = {tile.threads(lanes), tile.rows, tile.tokens, tile.texels, tile.groups};
      break;
    case kernels::SpecConstants::Splits: key.spec_constants = {lanes, splits_for(tile)}; break;
    case kernels::SpecConstants::Ring: key.spec_constants = {lanes, ring.at(static_cast<size_t>(d.layer))}; break;
    case kernels::SpecConstants::SplitsRing: {
      const uint32_t rows = attention_rows(tile), layer_ring = ring.at(static_cast<size_t>(d.layer));
      const uint32_t ranges = splits_for(tile);
      key.spec_constants = flash_tiles ? std::vector<uint32_t>{plan::kFlashThreads, ranges, layer_ring, rows, device_class->flash.keys}
                                       : std::vector<uint32_t>{lanes * rows, ranges, layer_ring, rows};
      break;
    }
  }
  key.push_size = static_cast<uint32_t>(k.push_size);
  return {vk::KernelCode{k.name, m.spirv, m.words, key.push_size}, std::move(key)};
}

// A layout's pipelines are created when a pass first records it, all at
// once on every hardware thread: a session that never runs a long prompt or
// a batched step never builds the prefill or batch layout's kernels (on
// lavapipe most of a quantized model's start).
const std::vector<const vk::Pipeline*>& Session::Impl::pipelines_for(const Tile& tile) {
  std::vector<const vk::Pipeline*>& out = layouts[{tile.rows, tile.tokens, tile.texels, tile.groups, static_cast<uint32_t>(tile.variant)}];
  if (out.empty()) {
    std::vector<vk::Pipelines::Request> requests;
    for (size_t i : active) requests.push_back(pipeline_request(plan.dispatches[i], tile));
    out = pipelines->get(requests);
  }
  return out;
}

// Writes each dispatch's descriptor set, with the decode layout's set layout
// (every layout of a kernel has the same bindings). A driver may still
// compile a kernel at its first dispatch, as llvmpipe does: Session::warm_up.
void Session::Impl::build_sets() {
  const std::vector<const vk::Pipeline*>& ps = pipelines_for(decode);
  for (size_t n = 0; n < active.size(); ++n) {
    const plan::Dispatch& d = plan.dispatches[active[n]];
    const VkDescriptorSet set = arena.allocate(*ps[n]);
    const kernels::FamilyInfo& f = family(d);
    std::vector<vk::Binding> bindings;
    for (size_t b = 0; b < f.bindings.size(); ++b) bindings.push_back(resolve(d.bindings[b], f.bindings[b].kind));
    vk::write_descriptors(device, *ps[n], set, bindings);
    sets.push_back(set);
  }
}

void Session::Impl::create_commands() {
  VkCommandPoolCreateInfo create{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  create.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  create.queueFamilyIndex = device.info().compute_queue_family;
  vk::check(vkCreateCommandPool(device.handle(), &create, nullptr, &pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = pool;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  vk::check(vkAllocateCommandBuffers(device.handle(), &allocate, &prefill_commands), "vkAllocateCommandBuffers");
  decode_commands.resize(static_cast<size_t>(decode_rows()));
  decode_recorded.assign(decode_commands.size(), false);
  allocate.commandBufferCount = static_cast<uint32_t>(decode_commands.size());
  vk::check(vkAllocateCommandBuffers(device.handle(), &allocate, decode_commands.data()), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk::check(vkCreateFence(device.handle(), &fence_info, nullptr, &fence), "vkCreateFence");
}

// Records the whole plan for a chunk of `rows` tokens; with a query pool,
// a timestamp before the first dispatch and after each one.
void Session::Impl::record(VkCommandBuffer cb, uint32_t rows, const Tile& tile, bool every_row, bool prompt,
                           VkQueryPool timestamps, bool encode_pass) {
  // An encoder–decoder's passes: the encode pass's dispatches come first.
  const size_t first = encode_pass ? 0 : encode_active, end = encode_pass ? encode_active : active.size();
  vk::check(vkResetCommandBuffer(cb, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  vk::check(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
  VkMemoryBarrier between{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  between.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  if (timestamps != VK_NULL_HANDLE) {
    vkCmdResetQueryPool(cb, timestamps, 0, static_cast<uint32_t>(end - first + 1));
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, timestamps, 0);
  }
  if (carried_in) {  // the stage before's carried slots, from host-visible memory, before any kernel reads them
    copy_carried(cb, rows, true);
    VkMemoryBarrier copied{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    copied.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    copied.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &copied, 0,
                         nullptr, 0, nullptr);
  }
  const std::vector<const vk::Pipeline*>& ps = pipelines_for(tile);
  const bool expanded = prompt && !encode_pass && expands(rows);
  const uint32_t keys = prompt ? io_rows()[0].position + rows : 0;  // a prompt chunk's sequence's, appended
  for (size_t n = first; n < end; ++n) {
    if (!in_pass(n, prompt, expanded, tile)) {  // the other form of a scan or of latent attention: no time passes
      if (timestamps != VK_NULL_HANDLE)
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, timestamps, static_cast<uint32_t>(n - first + 1));
      continue;
    }
    const plan::Dispatch& d = plan.dispatches[active[n]];
    const vk::Pipeline& p = *ps[n];
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &sets[n], 0, nullptr);
    // The run-time push fields, by name: every layout's rows, and the first
    // input row of a matmul that serves the last row alone.
    std::array<uint32_t, push::kMaxWords> push = d.push;
    const bool last_only = d.last_row && !every_row;
    const uint32_t used_rows = last_only ? 1 : rows;
    push[push::word(offsetof(push::RowsPush, rows))] = used_rows;
    if (last_only && family(d).family == kernels::Family::Matmul)
      push[push::word(offsetof(push::MatmulPush, x_row0))] = rows - 1;
    vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(kernel(d).push_size),
                       push.data());
    switch (d.grid) {
      case plan::Grid::Rows: vkCmdDispatch(cb, used_rows, 1, 1); break;
      case plan::Grid::Heads: vkCmdDispatch(cb, d.groups_x, used_rows, 1); break;
      case plan::Grid::Split: vkCmdDispatch(cb, d.groups_x, ceil_div(used_rows, attention_rows(tile)), splits_for(tile)); break;
      case plan::Grid::Tiles:
      case plan::Grid::Experts:
        // Experts: a column of tiles per expert with tokens (moe_route lists
        // them); a chunk of T rows has at most T · top_k.
        vkCmdDispatch(cb, ceil_div(d.groups_x, tile.rows_per_group(lanes)), ceil_div(used_rows, tile.tokens),
                      d.groups_z_per_row ? std::min(d.groups_z, used_rows * d.groups_z_per_row) : d.groups_z);
        break;
      case plan::Grid::Single: vkCmdDispatch(cb, 1, 1, 1); break;
      case plan::Grid::Channels: vkCmdDispatch(cb, d.groups_x, 1, 1); break;
      case plan::Grid::Keys: vkCmdDispatch(cb, d.groups_x, ceil_div(keys, kernels::kMlaExpandKeys), 1); break;
    }
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between,
                         0, nullptr, 0, nullptr);
    if (timestamps != VK_NULL_HANDLE)
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, timestamps, static_cast<uint32_t>(n - first + 1));
  }
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       0, 1, &to_host, 0, nullptr, 0, nullptr);
  if (carried_out) {  // the next stage's carried slots, to host-visible memory
    copy_carried(cb, rows, false);
    VkMemoryBarrier copied{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    copied.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    copied.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &copied, 0, nullptr, 0,
                         nullptr);
  }
  vk::check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
}

void Session::Impl::copy_carried(VkCommandBuffer cb, uint32_t rows, bool in) const {
  const uint64_t carried = in ? carried_in : carried_out;
  const vk::Buffer& handoff = in ? *handoff_in : *handoff_out;
  VkDeviceSize at = 0;
  for (size_t i = 0; i < plan.slot_widths.size(); ++i) {
    if (!(carried >> i & 1)) continue;
    VkBufferCopy region{};
    region.size = static_cast<VkDeviceSize>(rows) * static_cast<VkDeviceSize>(plan.slot_widths[i]) * 4;
    (in ? region.srcOffset : region.dstOffset) = at;
    if (in) vkCmdCopyBuffer(cb, handoff.handle(), slots[i].handle(), 1, &region);
    else vkCmdCopyBuffer(cb, slots[i].handle(), handoff.handle(), 1, &region);
    at += region.size;
  }
}

void Session::Impl::start(VkCommandBuffer cb) {
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cb;
  vk::check(vkResetFences(device.handle(), 1, &fence), "vkResetFences");
  vk::check(vkQueueSubmit(device.queue(), 1, &submit, fence), "vkQueueSubmit");
}

void Session::Impl::finish() {
  vk::check(vkWaitForFences(device.handle(), 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

void Session::Impl::submit(VkCommandBuffer cb) {
  start(cb);
  finish();
}

std::vector<Session::KernelTime> Session::profile(uint32_t rows) {
  Impl& s = *impl_;
  s.check_ready(0, rows);
  if (rows < 1 || rows > s.options.max_chunk) throw Error(ErrorKind::InvalidArgument, "profile: rows must be in [1, max_chunk]");
  if (!s.later.empty()) throw Error(ErrorKind::InvalidArgument, "profile: a session split over devices (profile one device's)");
  const uint32_t count = static_cast<uint32_t>(s.active.size() - s.encode_active + 1);
  VkQueryPoolCreateInfo create{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  create.queryType = VK_QUERY_TYPE_TIMESTAMP;
  create.queryCount = count;
  VkQueryPool pool = VK_NULL_HANDLE;
  vk::check(vkCreateQueryPool(s.device.handle(), &create, nullptr, &pool), "vkCreateQueryPool");
  std::vector<uint64_t> ticks(count);
  try {
    for (uint32_t r = 0; r < rows; ++r) s.io_rows()[r] = {0, 0, static_cast<uint32_t>(s.positions[0] + r)};
    s.record(s.prefill_commands, rows, s.tile_for(rows), s.options.all_logits, true, pool);
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
  const bool expanded = s.expands(rows);
  for (size_t n = s.encode_active; n < s.active.size(); ++n)
    if (s.in_pass(n, true, expanded, s.tile_for(rows)))
      out.push_back({std::string(s.kernel(s.plan.dispatches[s.active[n]]).name),
                   static_cast<double>(ticks[n - s.encode_active + 1] - ticks[n - s.encode_active]) * ns_per_tick / 1000.0});
  return out;
}

}  // namespace lathe
