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
#include <string_view>
#include <vector>

#include "core/plan.hpp"
#include "core/typed.hpp"
#include "generator/lower/kernel_key.hpp"

namespace lathe::lower {

// A dispatch as the lowering builds it: core/plan.hpp's, with the graph op
// it comes from and its kernel's family, whose interface (core/kernels.hpp)
// names its bindings and push words. A name the family lacks is a
// std::logic_error: a misspelt one would otherwise bind nothing.
struct Dispatch : plan::Dispatch {
  size_t op = 0;  // the graph op it comes from
  kernels::Family family = kernels::Family::Embed;  // Plan::kernels[kernel]'s

  plan::Binding binding(std::string_view name) const { return bindings[binding_index(name)]; }
  uint32_t push_value(std::string_view name) const { return push[push_index(name)]; }
  void bind(std::string_view name, plan::Binding b) { bindings[binding_index(name)] = b; }
  // `rows` is the runtime's to set when it records.
  void set_push(std::string_view name, uint32_t value);

 private:
  size_t binding_index(std::string_view name) const;
  size_t push_index(std::string_view name) const;
};

// The plan as the lowering builds it: the vectors core/plan.hpp's Plan views
// (View below), and that Plan's other fields in `scalars`, whose spans stay
// empty. Nothing here is a second copy of a plan:: field.
struct Plan {
  std::vector<KernelKey> kernels;  // the distinct instances the dispatches use, in first-use order
  std::vector<Dispatch> dispatches;
  std::vector<int64_t> slot_widths;  // f32 values per token row of each activation slot
  std::vector<plan::Pack> packs;
  std::vector<int64_t> windows;  // per cache layer: its attention's window (0: every key); a window makes its cache a ring
  std::vector<plan::DeviceClass> classes;  // device_classes()
  std::vector<plan::Part> parts;           // row ranges of the matrices over max_part_bytes
  // Per block (Dispatch::block): the activation slots (bit i: slot i) live
  // at its first dispatch. Empty: the plan cannot be split into stages.
  std::vector<uint64_t> carried;
  // The lowering sets encode_dispatches, max_part_bytes and the Mamba state
  // and latent expansion sizes; plan_graph (model_plan.hpp) the cache,
  // partials and widest row sizes.
  plan::Plan scalars;

  const KernelKey& kernel(const Dispatch& d) const { return kernels[d.kernel]; }
  std::string kernel_name(const Dispatch& d) const { return kernels[d.kernel].name(); }
};

// core/plan.hpp's Plan over a lowered one, as the runtime will read it: for
// the generator's counts and checks (plan::dispatch_count, plan::runs …),
// which are then the runtime's own. It holds the kernels' and dispatches'
// plan:: forms; `plan` must outlive it.
class View {
 public:
  explicit View(const Plan& plan);
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  const plan::Plan& operator*() const { return plan_; }
  const plan::Plan* operator->() const { return &plan_; }

 private:
  std::vector<std::string> names_;
  std::vector<plan::Kernel> kernels_;
  std::vector<plan::Dispatch> dispatches_;
  plan::Plan plan_;
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
