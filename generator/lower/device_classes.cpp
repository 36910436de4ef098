// The device classes of a plan (core/plan.hpp's DeviceClass): which tiles,
// key ranges and kernel variants a kind of device runs, chosen by what the
// device reports (plan::DeviceFeatures), never by its vendor. Where each
// tile and count comes from, with the measurements: bench/README.md,
// "Device classes: where each tile comes from"; lavapipe's facts in
// docs/lavapipe.md. LATHE_TILE_DECODE, _PREFILL and _BATCH override a
// class's tiles at run time, for such measurements.
#include <algorithm>
#include <string_view>
#include <tuple>
#include <vector>

#include "generator/lower/lowering.hpp"

namespace lathe::lower {

std::vector<plan::DeviceClass> device_classes(std::span<const DType> dtypes) {
  const bool blocks = std::any_of(dtypes.begin(), dtypes.end(), [](DType d) { return is_block_dtype(d); });
  constexpr uint32_t wide = plan::Tile::kPrefillTokens;
  // A CPU device (lavapipe): 32 rows × 2 texels a lane to decode, 32 rows
  // of 8 tokens a lane for prompts (broadcast), 64 rows of 4 sequences a
  // lane for a batched step (16 × 2 with block weights).
  const plan::Tile cpu_decode{32, 1, 2};
  const plan::DeviceClass cpu{.name = "cpu",
                              .cpu_only = true,
                              .min_subgroup = wide,
                              .decode = cpu_decode,
                              .prefill = {32, wide, 1},
                              .batch = blocks ? plan::Tile{16, 4, 2} : plan::Tile{64, 4, 1},
                              .splits = 1};
  // A narrow CPU (subgroups under 8 lanes): the decode layout for prompts too.
  const plan::DeviceClass cpu_narrow{.name = "cpu-narrow",
                                     .cpu_only = true,
                                     .decode = cpu_decode,
                                     .prefill = cpu_decode,
                                     .batch = cpu.batch,
                                     .splits = 1};
  // A GPU: a subgroup a row (2 rows with block weights) in workgroups of 4
  // subgroups to decode, the tiled layout's 64 rows × 32 tokens for
  // prompts, attention in 16 key ranges for a prompt (4 rows a workgroup
  // over staged keys) and 64 for a step (bench/README.md, "Fourth GPU
  // run"); the chunked Mamba-2 scan and expanded latent attention for
  // prompts.
  const plan::Tile gpu_prefill{64, 32, 1};
  const plan::DeviceClass gpu{.name = "gpu",
                              .min_shared = std::max(gpu_prefill.shared_bytes(true), plan::kAttentionStageBytes),
                              .decode = {blocks ? 2u : 1u, 1, 2, 4},
                              .prefill = gpu_prefill,
                              .batch = {4, 4, 2, 4},
                              .splits = 16,
                              .decode_splits = 64,
                              .attention_rows = 4,
                              .chunked_scan = true,
                              .expanded_mla = true};
  // Any device: workgroups of one subgroup, no shared memory.
  const plan::DeviceClass gpu_basic{.name = "gpu-basic", .decode = {1, 1, 2}, .prefill = {1, 1, 2}, .batch = {4, 4, 2}, .splits = 16,
                                    .decode_splits = 16};
  // The dot and coop layouts passed their kernel and model tests on this
  // device (the KHR layout without the validation layer, which predates its
  // extension) and ran faster there: where met, they are the default.
  constexpr std::string_view kVerified = "NVIDIA H200 (driver 580.159.04), 2026-11-27";
  // Block weights decoded with integer dot products (matmul_dot.comp,
  // reading x as quantize's 8-bit blocks): the class's tiles in the dot
  // layout, a GPU's 1 row a subgroup. On lavapipe it is slower than the
  // exact path: the CPU one is taken only when named.
  const auto dot = [&](plan::DeviceClass c, std::string_view name) {
    c.name = name;
    if (!c.cpu_only) c.decode.rows = 1;
    c.decode.variant = c.batch.variant = plan::Variant::Dot;
    c.forced_only = c.cpu_only;
    c.verified = c.cpu_only ? "" : kVerified;
    return c;
  };
  // The gpu class with its prompts' products on matrix units (the coop
  // layout, NV's extension or KHR's).
  const auto on_matrix_units = [&](std::string_view name, plan::Variant variant) {
    plan::DeviceClass c = gpu;
    c.name = name;
    c.prefill.variant = variant;
    c.min_shared = std::max(c.prefill.shared_bytes(true), plan::kAttentionStageBytes);
    c.verified = kVerified;
    return c;
  };
  const plan::DeviceClass nv = on_matrix_units("gpu-coop", plan::Variant::Coop),
                          khr = on_matrix_units("gpu-coop-khr", plan::Variant::CoopKhr);
  // In order of preference; with block weights, each class first in its
  // copy that decodes them with integer dot products.
  std::vector<plan::DeviceClass> out;
  if (blocks) out.push_back(dot(cpu, "cpu-dot"));
  out.push_back(cpu);
  out.push_back(cpu_narrow);
  if (blocks) out.push_back(dot(nv, "gpu-coop-dot"));
  out.push_back(nv);
  if (blocks) out.push_back(dot(khr, "gpu-coop-khr-dot"));
  out.push_back(khr);
  if (blocks) out.push_back(dot(gpu, "gpu-dot"));
  out.push_back(gpu);
  out.push_back(gpu_basic);
  return out;
}

// Flash attention of prompts (plan::Flash) on the gpu class and its copies
// on matrix units, each in a copy of its own that only a name takes: its
// kernels have passed the tests on lavapipe (the multiply-add form) and
// spirv-val (the matrix-unit form), but no GPU has measured them yet. The
// tile is planned for the model: its workgroups' GT heads (one GT for all
// its attention kernels, or none is planned), head width and cache dtype,
// within plan::kFlashBudget or kFlashCoopBudget bytes of shared memory.
void add_flash_classes(Plan& p, int64_t head_dim, bool cache_f16, int64_t relative_max) {
  uint32_t gt = 0;
  for (const KernelKey& k : p.kernels) {
    if (k.family != kernels::Family::Attention) continue;
    if (gt != 0 && gt != static_cast<uint32_t>(k.head_tile)) return;
    gt = static_cast<uint32_t>(k.head_tile);
  }
  if (gt == 0 || p.classes.empty()) return;
  const uint32_t extra = plan::flash_relative_bytes(relative_max, gt);
  const uint32_t dh = static_cast<uint32_t>(head_dim);
  std::vector<plan::DeviceClass> added;
  for (const auto& [base, name, budget] : {std::tuple{"gpu-coop", "gpu-coop-flash", plan::kFlashCoopBudget},
                                           std::tuple{"gpu-coop-khr", "gpu-coop-khr-flash", plan::kFlashCoopBudget},
                                           std::tuple{"gpu", "gpu-flash", plan::kFlashBudget}}) {
    const auto it = std::find_if(p.classes.begin(), p.classes.end(), [&](const plan::DeviceClass& c) { return c.name == base; });
    if (it == p.classes.end()) continue;
    plan::DeviceClass c = *it;
    const bool coop = c.prefill.layout() != kernels::Layout::Tiled;
    c.flash = plan::flash_tile(coop, gt, dh, cache_f16, budget, extra);
    if (c.flash.rows == 0) continue;
    c.name = name;
    c.attention_rows = 1;  // the flash tile's rows replace the staged kernel's
    c.min_shared = std::max(c.min_shared, plan::flash_shared_bytes(coop, c.flash.rows * gt, c.flash.keys, dh, cache_f16, extra));
    c.forced_only = true;
    c.verified = "";
    added.push_back(c);
  }
  p.classes.insert(p.classes.end() - 1, added.begin(), added.end());  // before the last, which needs nothing
}

}  // namespace lathe::lower
