#include "runtime/model/lowering.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "runtime/error.hpp"
#include "runtime/model/kernel_names.hpp"
#include "runtime/model/push.hpp"

namespace lathe::plan {
namespace {

using typed::Op;
using typed::OpKind;

// Where a value lives: a slot, and a column window of its rows.
struct Loc {
  int32_t slot = -1;
  uint32_t offset = 0;  // first column
  uint32_t stride = 0;  // the slot's row width
};

class Lowering {
 public:
  Lowering(const ModelInfo& model, const typed::Schedule& schedule, const LowerOptions& options)
      : model_(model), s_(schedule), ops_(schedule.ops) {
    plan_.all_logits = options.all_logits;
    plan_.attention_splits = std::max<uint32_t>(1, options.attention_splits);
    last_use_.assign(schedule.values, -1);
    for (size_t i = 0; i < ops_.size(); ++i)
      for (uint32_t in : inputs(ops_[i])) last_use_[in] = static_cast<int32_t>(i);
    for (const KernelBinary& k : model.kernels) kernels_.insert(std::string(k.name));
  }

  Plan run() {
    for (size_t i = 0; i < ops_.size();) {
      const size_t consumed = lower_at(i);
      i += consumed;
      release_dead(static_cast<int32_t>(i) - 1);
    }
    return std::move(plan_);
  }

 private:
  static std::vector<uint32_t> inputs(const Op& op) {
    switch (op.kind) {
      case OpKind::Embed: return {};
      case OpKind::Rope: case OpKind::GatedAct: case OpKind::Add: return {op.in[0], op.in[1]};
      case OpKind::Attention: return {op.in[0], op.in[1], op.in[2]};
      default: return {op.in[0]};
    }
  }

  [[noreturn]] void unsupported(size_t i, const std::string& why) const {
    throw Error(ErrorKind::Unsupported, std::string(model_.name) + ": schedule op " + std::to_string(i) + ": " + why);
  }

  const Op* at(size_t i) const { return i < ops_.size() ? &ops_[i] : nullptr; }
  DType dtype(int32_t tensor) const { return device_dtype(model_.manifest[static_cast<size_t>(tensor)].dtype); }

  Loc materialize(uint32_t value) {
    const int64_t width = s_.widths[value];
    return bind(value, Loc{allocate(width), 0, static_cast<uint32_t>(width)});
  }

  // A free slot of `width` values per row, or a new one; its users are the
  // values bound to it afterwards.
  int32_t allocate(int64_t width) {
    int32_t slot = -1;
    for (size_t i = 0; i < slot_free_.size(); ++i)
      if (slot_free_[i] && plan_.slot_widths[i] == width) slot = static_cast<int32_t>(i);
    if (slot < 0) {
      slot = static_cast<int32_t>(plan_.slot_widths.size());
      plan_.slot_widths.push_back(width);
      slot_free_.push_back(false);
      slot_users_.push_back(0);
    }
    slot_free_[slot] = false;
    return slot;
  }

  Loc bind(uint32_t value, Loc loc) {
    locs_[value] = loc;
    slot_users_[loc.slot]++;
    return loc;
  }

  Loc loc(size_t i, uint32_t value) const {
    auto it = locs_.find(value);
    if (it == locs_.end()) unsupported(i, "value " + std::to_string(value) + " is read but was never stored");
    return it->second;
  }

  // Values whose last reader has run give their slot back.
  void release_dead(int32_t done) {
    for (auto it = locs_.begin(); it != locs_.end();) {
      if (last_use_[it->first] <= done) {
        if (--slot_users_[it->second.slot] == 0) slot_free_[it->second.slot] = true;
        it = locs_.erase(it);
      } else {
        ++it;
      }
    }
  }

  Binding act(size_t i, uint32_t value) const { return {Resource::Activation, loc(i, value).slot}; }

  Dispatch& emit(size_t i, std::string kernel, Grid grid, std::vector<Binding> bindings, std::vector<uint32_t> push) {
    if (!kernels_.count(kernel))
      throw Error(ErrorKind::Unsupported, std::string(model_.name) + ": the build has no kernel instance '" + kernel +
                                              "' for schedule op " + std::to_string(i) +
                                              " (the generator and the runtime disagree; regenerate the build)");
    Dispatch d;
    d.kernel = std::move(kernel);
    d.grid = grid;
    d.bindings = std::move(bindings);
    d.push = std::move(push);
    d.op = static_cast<int32_t>(i);
    plan_.dispatches.push_back(std::move(d));
    return plan_.dispatches.back();
  }

  Binding vector_or_none(int32_t tensor) const {
    return tensor >= 0 ? Binding{Resource::Vector, tensor} : Binding{Resource::NoBuffer, 0};
  }

  // The input binding of a matmul reading `in`, and the norm bindings: the
  // pending norm's input and scale/shift when `in` is that norm's output.
  std::array<Binding, 3> matmul_input(size_t i, uint32_t in, int64_t width, kernels::Epilogue& e) {
    const bool fold = norm_ && norm_->out == in;
    const Loc x = loc(i, fold ? norm_->in[0] : in);
    if (x.offset != 0 || x.stride != static_cast<uint32_t>(width))
      unsupported(i, "a matmul reads a column view; only whole activations are supported");
    e.norm = fold;
    if (!fold) return {Binding{Resource::Activation, x.slot}, Binding{Resource::NoBuffer, 0}, Binding{Resource::NoBuffer, 0}};
    return {Binding{Resource::Activation, x.slot}, Binding{Resource::Vector, norm_->tensor[0]}, vector_or_none(norm_->tensor[1])};
  }

  // One matmul dispatch; `out` is the binding it writes.
  void matmul(size_t i, const Op& w, const Op* w2, kernels::Epilogue e, uint32_t in, Binding out,
              uint32_t gate_row0 = 0, uint32_t up_row0 = 0, uint32_t n = 0, bool last_row = false) {
    const std::array<Binding, 3> x = matmul_input(i, in, w.dims[1], e);
    std::vector<Binding> b = {{Resource::Weight, w.tensor[0]},
                              w2 ? Binding{Resource::Weight, w2->tensor[0]} : Binding{Resource::NoTexel, 0},
                              x[0],
                              vector_or_none(w.tensor[1]),
                              w2 ? vector_or_none(w2->tensor[1]) : Binding{Resource::NoBuffer, 0},
                              out,
                              x[1],
                              x[2]};
    Dispatch& d = emit(i, kernels::matmul(w.dims[1], dtype(w.tensor[0]), e), Grid::Tiles, std::move(b), {});
    d.n = n ? n : static_cast<uint32_t>(w.dims[0]);
    d.push = {0, d.n, 0, gate_row0, up_row0};
    d.last_row = last_row;
  }

  size_t lower_at(size_t i) {
    const Op& op = ops_[i];
    const Op* next = at(i + 1);
    switch (op.kind) {
      case OpKind::Embed: {
        const bool positions = next && next->kind == OpKind::PosEmbed && next->in[0] == op.out;
        const Loc out = materialize(positions ? next->out : op.out);
        emit(i, kernels::embed(op.dims[1], dtype(op.tensor[0]), positions), Grid::Rows,
             {{Resource::Io, 0},
              {Resource::Weight, op.tensor[0]},
              positions ? Binding{Resource::Weight, next->tensor[0]} : Binding{Resource::NoTexel, 0},
              {Resource::Activation, out.slot}},
             {0});
        return positions ? 2 : 1;
      }
      case OpKind::RMSNorm:
      case OpKind::LayerNorm: {
        // Folded into the projections that read it, when they come next.
        if (next && (next->kind == OpKind::MatMul || next->kind == OpKind::Logits) && next->in[0] == op.out) {
          norm_ = &op;
          const size_t consumed = next->kind == OpKind::Logits ? lower_at(i + 1) : lower_matmul(i + 1);
          norm_ = nullptr;
          if (last_use_[op.out] > static_cast<int32_t>(i + consumed))
            unsupported(i, "a norm folded into the projections after it is read again later");
          return 1 + consumed;
        }
        const Binding in = act(i, op.in[0]);
        const Loc out = materialize(op.out);
        emit(i, kernels::norm(op.dims[0]), Grid::Rows,
             {in, {Resource::Vector, op.tensor[0]}, vector_or_none(op.tensor[1]), {Resource::Activation, out.slot}}, {0});
        return 1;
      }
      case OpKind::MatMul: return lower_matmul(i);
      case OpKind::Split: {
        const Loc src = loc(i, op.in[0]);
        bind(op.out, Loc{src.slot, src.offset + static_cast<uint32_t>(op.dims[0]), src.stride});
        return 1;
      }
      case OpKind::Rope: {
        if (!next || next->kind != OpKind::Attention || next->in[0] != op.in[0] || next->in[1] != op.in[1])
          unsupported(i, "rope must be followed by the attention of the same q and k");
        lower_attention(i + 1, op.dims[3], static_cast<typed::RopePairing>(op.variant));
        return 2;
      }
      case OpKind::Attention:
        lower_attention(i, 0, typed::RopePairing::Neox);
        return 1;
      case OpKind::Logits: {
        const kernels::Epilogue plain;
        matmul(i, op, nullptr, plain, op.in[0], {Resource::Logits, 0}, 0, 0, 0, !plan_.all_logits);
        emit(i, kernels::argmax(), Grid::Single, {{Resource::Io, 0}, {Resource::Logits, 0}}, {0}).last_row =
            !plan_.all_logits;
        return 1;
      }
      case OpKind::PosEmbed: unsupported(i, "add_positions must follow the embedding");
      case OpKind::Act: unsupported(i, "an activation must follow the matmul it applies to");
      case OpKind::GatedAct: unsupported(i, "a gated activation must follow its gate and up matmuls");
      case OpKind::Add: unsupported(i, "a residual add must follow the matmul of its branch");
    }
    unsupported(i, "unknown op");
  }

  // Consecutive plain matmuls of one input (q, k, v): how many, 1 if none.
  size_t siblings(size_t i) const {
    const Op& op = ops_[i];
    size_t n = 1;
    while (const Op* next = at(i + n)) {
      if (next->kind != OpKind::MatMul || next->in[0] != op.in[0] || next->dims[1] != op.dims[1] ||
          dtype(next->tensor[0]) != dtype(op.tensor[0]) || (next->tensor[1] >= 0) != (op.tensor[1] >= 0))
        break;
      ++n;
    }
    const Op* after = at(i + n);
    if (after && (after->kind == OpKind::Add || after->kind == OpKind::Act || after->kind == OpKind::GatedAct))
      return 1;  // the last one belongs to an epilogue pattern
    return n;
  }

  size_t lower_pack(size_t i, size_t count) {
    Pack pack;
    int64_t rows = 0;
    for (size_t j = i; j < i + count; ++j) {
      pack.weights.push_back(ops_[j].tensor[0]);
      if (ops_[j].tensor[1] >= 0) pack.biases.push_back(ops_[j].tensor[1]);
      rows += ops_[j].dims[0];
    }
    const int32_t index = static_cast<int32_t>(plan_.packs.size());
    plan_.packs.push_back(pack);
    const Op& op = ops_[i];
    const bool bias = op.tensor[1] >= 0;
    kernels::Epilogue e{.bias = bias};
    const std::array<Binding, 3> x = matmul_input(i, op.in[0], op.dims[1], e);
    // One activation of all the rows; each product is a column view of it.
    const int32_t slot = allocate(rows);
    uint32_t offset = 0;
    for (size_t j = i; j < i + count; ++j) {
      bind(ops_[j].out, Loc{slot, offset, static_cast<uint32_t>(rows)});
      offset += static_cast<uint32_t>(ops_[j].dims[0]);
    }
    Dispatch& d = emit(i, kernels::matmul(op.dims[1], dtype(op.tensor[0]), e), Grid::Tiles,
                       {{Resource::Pack, index},
                        {Resource::NoTexel, 0},
                        x[0],
                        bias ? Binding{Resource::PackBias, index} : Binding{Resource::NoBuffer, 0},
                        {Resource::NoBuffer, 0},
                        {Resource::Activation, slot},
                        x[1],
                        x[2]},
                       {});
    d.n = static_cast<uint32_t>(rows);
    d.push = {0, d.n, 0, 0, 0};
    return count;
  }

  size_t lower_matmul(size_t i) {
    const Op& op = ops_[i];
    const Op* a = at(i + 1);
    const Op* b = at(i + 2);
    const Op* c = at(i + 3);
    const bool bias = op.tensor[1] >= 0;
    if (const size_t n = siblings(i); n > 1) return lower_pack(i, n);
    // gate, up → gated(gate, up)
    if (a && b && a->kind == OpKind::MatMul && a->in[0] == op.in[0] && b->kind == OpKind::GatedAct &&
        b->in[0] == op.out && b->in[1] == a->out) {
      const kernels::Epilogue e{.bias = bias, .gated = true, .act = static_cast<typed::Activation>(b->variant)};
      if ((a->tensor[1] >= 0) != bias) unsupported(i, "gate and up differ in having a bias");
      const Loc out = materialize(b->out);
      matmul(i, op, a, e, op.in[0], {Resource::Activation, out.slot});
      return 3;
    }
    // gate_up → split, split → gated: both halves of one tensor.
    if (a && b && c && a->kind == OpKind::Split && b->kind == OpKind::Split && a->in[0] == op.out &&
        b->in[0] == op.out && c->kind == OpKind::GatedAct) {
      const Op* gate = c->in[0] == a->out ? a : c->in[0] == b->out ? b : nullptr;
      const Op* up = c->in[1] == a->out ? a : c->in[1] == b->out ? b : nullptr;
      if (gate && up && gate != up) {
        const kernels::Epilogue e{.bias = bias, .gated = true, .act = static_cast<typed::Activation>(c->variant)};
        const Loc out = materialize(c->out);
        matmul(i, op, &op, e, op.in[0], {Resource::Activation, out.slot}, static_cast<uint32_t>(gate->dims[0]),
               static_cast<uint32_t>(up->dims[0]), static_cast<uint32_t>(gate->dims[1]));
        return 4;
      }
    }
    // matmul → activation
    if (a && a->kind == OpKind::Act && a->in[0] == op.out) {
      const kernels::Epilogue e{.bias = bias, .activation = true, .act = static_cast<typed::Activation>(a->variant)};
      const Loc out = materialize(a->out);
      matmul(i, op, nullptr, e, op.in[0], {Resource::Activation, out.slot});
      return 2;
    }
    // matmul → add(x, ·): y += W·in in place, when x dies here.
    if (a && a->kind == OpKind::Add && (a->in[0] == op.out || a->in[1] == op.out)) {
      const uint32_t x = a->in[0] == op.out ? a->in[1] : a->in[0];
      const Loc xl = loc(i, x);
      if (last_use_[x] != static_cast<int32_t>(i + 1) || xl.offset != 0)
        unsupported(i, "the residual stream is read after the add; the in-place residual needs it to end there");
      const kernels::Epilogue e{.bias = bias, .residual = true};
      matmul(i, op, nullptr, e, op.in[0], {Resource::Activation, xl.slot});
      locs_.erase(x);  // the sum takes over the slot: its user count stays
      locs_[a->out] = xl;
      return 2;
    }
    const kernels::Epilogue e{.bias = bias};
    const Loc out = materialize(op.out);
    matmul(i, op, nullptr, e, op.in[0], {Resource::Activation, out.slot});
    return 1;
  }

  void lower_attention(size_t i, int64_t rotary, typed::RopePairing pairing) {
    const Op& op = ops_[i];
    const Loc q = loc(i, op.in[0]), k = loc(i, op.in[1]), v = loc(i, op.in[2]);
    const std::vector<uint32_t> push = {0, q.offset, q.stride, k.offset, k.stride, v.offset, v.stride};
    const Binding kc{Resource::KCache, op.layer}, vc{Resource::VCache, op.layer};
    emit(i, kernels::rope_kv(rotary, pairing), Grid::Rows,
         {{Resource::Io, 0}, {Resource::Activation, q.slot}, {Resource::Activation, k.slot}, {Resource::Activation, v.slot}, kc, vc},
         push);
    const Loc out = materialize(op.out);
    const uint32_t splits = plan_.attention_splits;
    Dispatch& d = emit(i, kernels::attention(), Grid::HeadsRows,
                       {{Resource::Io, 0},
                        {Resource::Activation, q.slot},
                        {Resource::KCacheTexel, op.layer},
                        {Resource::VCacheTexel, op.layer},
                        {Resource::Activation, out.slot},
                        splits > 1 ? Binding{Resource::Scratch, 0} : Binding{Resource::NoBuffer, 0}},
                       push);
    d.groups_x = static_cast<uint32_t>(op.dims[1]);  // one workgroup per KV head serves its G query heads
    d.groups_z = splits;
    d.spec = {splits};
    if (splits > 1) {
      Dispatch& c = emit(i, kernels::attention_combine(), Grid::HeadsRows,
                         {{Resource::Scratch, 0}, {Resource::Activation, out.slot}}, {0});
      c.groups_x = static_cast<uint32_t>(op.dims[0]);
      c.spec = {splits};
    }
  }

  const ModelInfo& model_;
  const typed::Schedule& s_;
  const std::vector<Op>& ops_;
  Plan plan_;
  std::set<std::string> kernels_;
  std::vector<int32_t> last_use_;
  std::map<uint32_t, Loc> locs_;
  std::vector<bool> slot_free_;
  std::vector<int32_t> slot_users_;
  const Op* norm_ = nullptr;  // a norm being folded into the matmuls that read its output
};

}  // namespace

Plan lower(const ModelInfo& model, const typed::Schedule& schedule, const LowerOptions& options) {
  return Lowering(model, schedule, options).run();
}

}  // namespace lathe::plan
