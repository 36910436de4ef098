// Lowering: a model's op graph (generator/lower/graph.hpp) becomes its plan,
// the exact list of kernel dispatches of one forward pass over a chunk of T
// token rows, emitted as constexpr data (core/plan.hpp) for the runtime to
// execute. Plain data, no Vulkan; tests check it without a device.
//
// Fusions (each cuts a dispatch and an activation round trip per layer):
//   norm → matmul             the norm applied to x as the projections read it
//   matmul → add(x, ·)        the residual add in the matmul's epilogue (y += W·a)
//   matmul → activation       φ in the epilogue
//   gate, up → gated          both projections in one pass: φ(W_g·m) ⊙ (W_u·m)
//   gate_up → split → gated   the same over the two halves of a fused tensor
//   rope → attention          rotation and KV-cache append in one kernel, then attention
//   q, k, v                   one matmul over the three weights stacked (a Pack)
//   split                     no copy: a column view of the fused qkv activation
//   embed → add_positions     the learned position table in the gather
// Activation slots are assigned by liveness: a value's slot is reused once
// its last reader has run.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/typed.hpp"
#include "generator/lower/kernel_key.hpp"

namespace lathe::lower {

struct Dispatch {
  size_t kernel = 0;  // index into Plan::kernels
  plan::Grid grid = plan::Grid::Rows;
  bool last_row = false;    // the last row only, unless the session keeps every row's logits
  bool split_only = false;  // only when attention is split into key ranges
  plan::Form form = plan::Form::Any;  // which passes record it
  uint32_t groups_x = 1;    // Heads, Split: heads; Tiles, Experts: output rows
  uint32_t groups_z = 1;    // Experts: the experts
  uint32_t groups_z_per_row = 0;  // Experts: at most this many per token row (top_k)
  // By the names of the family's interface (core/kernels.hpp); a binding not
  // named is unused, a push field not named is 0 (`rows` is the runtime's).
  std::map<std::string, plan::Binding> bindings;
  std::map<std::string, uint32_t> push;
  size_t op = 0;  // the graph op it comes from
  int32_t layer = -1;
  int32_t block = -1;  // the model's block (Op::block)

  plan::Binding binding(const std::string& name) const {
    auto it = bindings.find(name);
    return it == bindings.end() ? plan::Binding{} : it->second;
  }
  uint32_t push_value(const std::string& name) const {
    auto it = push.find(name);
    return it == push.end() ? 0 : it->second;
  }
};

struct Pack {
  std::vector<int32_t> weights;  // manifest tensors, in row order
  std::vector<int32_t> biases;   // their biases (all or none)
  int32_t stride = 0;            // an expert pack: weights are weights[0] + e · stride, e < weights.size()
};

struct Plan {
  std::vector<KernelKey> kernels;  // the distinct instances the dispatches use, in first-use order
  std::vector<Dispatch> dispatches;
  std::vector<Pack> packs;
  std::vector<int64_t> slot_widths;  // f32 values per token row of each activation slot
  std::vector<int64_t> windows;      // per cache layer: its attention's window (0: every key); a window makes its cache a ring
  // An encoder–decoder's: its first encode_dispatches dispatches are the
  // encode pass, the rest the decoder's (0: one pass).
  size_t encode_dispatches = 0;
  // A Mamba model's per-sequence state (core/plan.hpp's Plan): the layers
  // that hold it, and its floats per sequence and layer.
  int64_t state_layers = 0;
  int64_t conv_state_floats = 0;
  int64_t scan_state_floats = 0;
  // Latent attention's expanded form (core/plan.hpp's Plan): each key's
  // expanded floats, and the most keys the expansion holds.
  int64_t expanded_row_floats = 0;
  int64_t expanded_rows = 0;
  int64_t expanded_min_rows = 0;  // a prompt chunk's fewest rows that take it
  // Per block (Dispatch::block): the activation slots (bit i: slot i) live
  // at its first dispatch, which a pipeline stage starting there receives
  // from the stage before. Empty: the plan cannot be split into stages (an
  // encoder–decoder's two passes).
  std::vector<uint64_t> carried;
  std::vector<plan::DeviceClass> classes;  // device_classes()
  std::vector<plan::Part> parts;           // row ranges of the matrices over max_part_bytes
  int64_t max_part_bytes = 0;

  const KernelKey& kernel(const Dispatch& d) const { return kernels[d.kernel]; }
  std::string kernel_name(const Dispatch& d) const { return kernels[d.kernel].name(); }
  // The dispatches a decode step records: split_only ones only when
  // attention is split, never a prompt chunk's form (a chunked scan,
  // latent attention expanded).
  size_t dispatch_count(bool split) const {
    size_t n = 0;
    for (const Dispatch& d : dispatches)
      n += (!d.split_only || split) && !plan::prompt_only(d.form) && d.form != plan::Form::Quantized ? 1 : 0;
    return n;
  }
};

// A graph the kernels cannot run: `op` is the index of the op at fault.
class LowerError : public std::runtime_error {
 public:
  LowerError(size_t op, const std::string& what) : std::runtime_error(what), op_(op) {}
  size_t op() const { return op_; }

 private:
  size_t op_;
};

// The device classes of a model whose manifest tensors the device stores in
// `dtypes`, in order of preference (core/plan.hpp's DeviceClass).
std::vector<plan::DeviceClass> device_classes(std::span<const DType> dtypes);
// Adds the classes that run a prompt's attention in flash tiles
// (plan::Flash), planned for the model's attention kernels, head width,
// cache dtype and T5 relative-bias distance (0: none), to `p`'s classes.
void add_flash_classes(Plan& p, int64_t head_dim, bool cache_f16, int64_t relative_max);

// `dtypes`: each manifest tensor's dtype as the device stores it
// (device_dtype). Throws LowerError for a pattern the kernels cannot run.
// `max_part_bytes`: the most bytes one binding of a matrix holds (the spec's
// [weights] max_part_bytes); a larger matrix is split into row ranges
// (plan::Part).
Plan lower(const typed::Schedule& graph, std::span<const DType> dtypes, int64_t max_part_bytes = kDefaultMaxPartBytes);

}  // namespace lathe::lower
