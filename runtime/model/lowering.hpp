// Lowering: a model's typed schedule (runtime/model/typed.hpp) becomes the
// exact list of kernel dispatches of one forward pass over a chunk of T
// token rows. Plain data, no Vulkan: the session binds it to buffers and
// records it; tests check it without a device.
//
// Fusions (each cuts a dispatch and an activation round trip per layer):
//   matmul → add(x, ·)        the residual add in the matmul's epilogue (y += W·a)
//   matmul → activation       φ in the epilogue
//   gate, up → gated          both projections in one pass: φ(W_g·m) ⊙ (W_u·m)
//   gate_up → split → gated   the same over the two halves of a fused tensor
//   rope → attention          rotation and KV-cache append in one kernel, then attention
//   q, k, v                   one matmul over the three weights stacked (a Pack)
//   split                     no copy: a column view of the fused qkv activation
//   embed → add_positions     the learned position table in the gather
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/model_info.hpp"

namespace lathe::plan {

enum class Resource : uint8_t {
  Io,          // the session's host-visible IO buffer: position and tokens
  Activation,  // an activation slot: [rows][width] f32
  Logits,      // [rows or 1][vocab] f32
  Weight,      // a manifest tensor as a texel buffer of its dtype
  Vector,      // a manifest tensor as an f32 storage buffer (norm scales, biases)
  KCache,      // a layer's K cache (storage)
  VCache,      // a layer's V cache (storage)
  KCacheTexel, // a layer's K cache through a texel view
  VCacheTexel, // a layer's V cache through a texel view
  Pack,        // a pack of weights stacked by rows, as one texel buffer (index: the pack)
  PackBias,    // their biases, stacked the same way, f32
  Scratch,     // the attention partials of split key ranges
  NoTexel,     // an unused texel-buffer binding
  NoBuffer,    // an unused storage-buffer binding
};

struct Binding {
  Resource resource;
  int32_t index = 0;  // slot, manifest tensor or layer
  bool texel() const {
    return resource == Resource::Weight || resource == Resource::Pack || resource == Resource::NoTexel ||
           resource == Resource::KCacheTexel || resource == Resource::VCacheTexel;
  }
};

enum class Grid : uint8_t {
  Rows,       // one workgroup per token row
  HeadsRows,  // groups_x (KV) heads × one per token row
  Tiles,      // matmul: ceil(n / ROWS) × ceil(rows / TOKENS) (the session picks ROWS and TOKENS)
  Single,     // one workgroup
};

struct Dispatch {
  std::string kernel;
  std::vector<Binding> bindings;  // binding i of the kernel
  std::vector<uint32_t> push;     // push-constant words; word 0 (rows) is filled in when recorded
  Grid grid = Grid::Rows;
  uint32_t groups_x = 1;   // HeadsRows: KV heads
  uint32_t groups_z = 1;   // HeadsRows: key ranges of split attention
  std::vector<uint32_t> spec;  // specialization constants after the workgroup size (Tiles: the session's tile)
  uint32_t n = 0;          // Tiles: output rows (MatmulPush::n)
  bool last_row = false;   // the last row only: rows 1 (and for a matmul x_row0 = T − 1)
  int32_t op = -1;         // the schedule op it comes from, for messages
};

// Matrices of one input width whose products are taken together (a layer's
// q, k and v): the session stores them stacked by rows in one buffer, so one
// matmul dispatch computes them all into one activation, which the next
// kernels read as column views.
struct Pack {
  std::vector<int32_t> weights;  // manifest tensors, in row order
  std::vector<int32_t> biases;   // their biases (all or none)
};

struct Plan {
  std::vector<Dispatch> dispatches;
  std::vector<Pack> packs;
  std::vector<int64_t> slot_widths;  // f32 values per token row of each activation slot
  bool all_logits = false;           // the Logits resource holds every row (else the last)
  uint32_t attention_splits = 1;     // key ranges per attention row (Scratch: [rows][heads][splits][head_dim + 2])
};

struct LowerOptions {
  bool all_logits = false;
  // Key ranges per (KV head, row) of attention, each its own workgroup, then
  // a combine dispatch: keeps a GPU busy over a long cache. 1: no split.
  uint32_t attention_splits = 1;
};

// Throws Error(Unsupported) naming the op when the schedule holds a pattern
// the kernels cannot run, or when the build has no kernel instance of a
// needed name (generator and runtime disagree).
Plan lower(const ModelInfo& model, const typed::Schedule& schedule, const LowerOptions& options);

}  // namespace lathe::plan
