#include "generator/lower/lowering.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>

namespace lathe::lower {
namespace {

using kernels::Family;
using plan::Binding;
using typed::Op;
using typed::OpKind;

// Where a value lives: a slot, and a column window of its rows.
struct Loc {
  int32_t slot = -1;
  uint32_t offset = 0;  // first column
  uint32_t stride = 0;  // the slot's row width
};

// The most bytes latent attention's expanded keys and values of one prompt
// take (a session holds min(these rows, its context)): 16,384 keys of
// DeepSeek-V2-Lite (16 heads of 128 + 128), 2,048 of V3 (128 heads).
constexpr int64_t kExpandedBytes = int64_t{256} << 20;

// The input of a matmul: x, and the folded norm's scale and shift if any.
struct MatmulInput {
  Binding x, norm_scale, norm_shift;
};

// The index of instance `key` in p's kernels, which grow by each new key.
uint16_t kernel_index(Plan& p, const KernelKey& key) {
  auto it = std::find(p.kernels.begin(), p.kernels.end(), key);
  if (it == p.kernels.end()) it = p.kernels.insert(p.kernels.end(), key);
  const size_t index = static_cast<size_t>(it - p.kernels.begin());
  if (index > UINT16_MAX) throw std::logic_error("lowering: more kernel instances than plan::Dispatch::kernel holds");
  return static_cast<uint16_t>(index);
}

class Lowering {
 public:
  Lowering(const typed::Schedule& graph, std::span<const DType> dtypes, int64_t max_part_bytes)
      : s_(graph), ops_(graph.ops), dtypes_(dtypes), max_part_bytes_(max_part_bytes) {
    last_use_.assign(graph.values, -1);
    for (size_t i = 0; i < ops_.size(); ++i)
      for (uint32_t in : inputs(ops_[i])) last_use_[in] = static_cast<int32_t>(i);
  }

  Plan run() {
    for (size_t i = 0; i < ops_.size();) {
      const size_t consumed = lower_at(i);
      i += consumed;
      release_dead(static_cast<int32_t>(i) - 1);
    }
    split_parts();
    for (const Dispatch& d : plan_.dispatches) plan_.scalars.encode_dispatches += d.op < s_.encode_ops ? 1 : 0;
    for (int64_t& w : plan_.windows)
      if (w == -1) w = 0;  // a cache no attention named
    plan_.scalars.max_part_bytes = max_part_bytes_;
    if (!splittable_ || s_.encode_ops > 0) plan_.carried.clear();
    return std::move(plan_);
  }

 private:
  static std::vector<uint32_t> inputs(const Op& op) {
    switch (op.kind) {
      case OpKind::Embed: case OpKind::Input: return {};
      case OpKind::QKNorm: case OpKind::Rope: case OpKind::GatedAct: case OpKind::Add: case OpKind::Experts:
        return {op.in[0], op.in[1]};
      case OpKind::Attention:
        if (op.variant == typed::kCross) return {op.in[0]};
        return {op.in[0], op.in[1], op.in[2]};
      case OpKind::CrossKv: return {op.in[0], op.in[1]};
      case OpKind::SsmScan: return {op.in[0], op.in[1], op.in[2]};
      case OpKind::Mamba2Scan: return {op.in[0], op.in[1]};
      case OpKind::MlaValues: return {op.in[0], op.in[1], op.in[2]};
      case OpKind::FeatureStack:
        if (op.variant == typed::kStackFirst) return {op.in[1]};
        return {op.in[0], op.in[1]};
      case OpKind::MoeCombine: {
        std::vector<uint32_t> in(op.in, op.in + 3 + (op.dims[3] > 0) + (op.dims[3] > 1));  // + shared, + its gate
        return in;
      }
      default: return {op.in[0]};
    }
  }

  [[noreturn]] static void unsupported(size_t i, const std::string& why) { throw LowerError(i, why); }

  const Op* at(size_t i) const { return i < ops_.size() ? &ops_[i] : nullptr; }
  DType dtype(int32_t tensor) const { return dtypes_[static_cast<size_t>(tensor)]; }

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

  // Before the dispatch about to be emitted: at the first of a block, the
  // slots whose values were live when its op's lowering began (a stage that
  // starts at the block receives them: Plan::carried; the dispatches of one
  // lower_at call share their first op's block). A plan whose blocks are
  // not in order, or with a dispatch outside the blocks between two of
  // them, cannot be split into stages.
  void note_boundary() {
    if (block_ < 0) {
      after_layers_ = after_layers_ || !plan_.carried.empty();
      return;
    }
    if (after_layers_) splittable_ = false;
    if (static_cast<size_t>(block_) == plan_.carried.size()) {
      plan_.carried.push_back(live_);
    } else if (static_cast<size_t>(block_) + 1 != plan_.carried.size()) {
      splittable_ = false;
    }
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

  // A dispatch of the instance `key`; the kernel list grows by each new key.
  Dispatch& emit(size_t i, const KernelKey& key, plan::Grid grid, std::map<std::string, Binding> bindings,
                 std::map<std::string, uint32_t> push = {}) {
    Dispatch d;
    d.kernel = kernel_index(plan_, key);
    d.family = key.family;
    d.grid = grid;
    for (const auto& [name, b] : bindings) d.bind(name, b);
    for (const auto& [name, v] : push) d.set_push(name, v);
    d.op = i;
    d.layer = layer_;
    d.block = block_;
    note_boundary();
    plan_.dispatches.push_back(std::move(d));
    return plan_.dispatches.back();
  }

  Binding vector_or_none(int32_t tensor) const { return tensor >= 0 ? plan::weight(tensor) : Binding{}; }

  // The input bindings of a matmul reading `in`: the pending norm's input and
  // scale/shift when `in` is that norm's output.
  MatmulInput matmul_input(size_t i, uint32_t in, int64_t width, Epilogue& e) {
    const bool fold = norm_ && norm_->out == in;
    const Loc x = loc(i, fold ? norm_->in[0] : in);
    if (x.offset != 0 || x.stride != static_cast<uint32_t>(width))
      unsupported(i, "a matmul reads a column view; only whole activations are supported");
    e.norm = fold;
    if (!fold) return {plan::activation(x.slot), {}, {}};
    return {plan::activation(x.slot), plan::weight(norm_->tensor[0]), vector_or_none(norm_->tensor[1])};
  }

  // One matmul dispatch of W (and W2 for a gated epilogue); `out` is the binding it writes.
  void matmul(size_t i, const Op& w, const Op* w2, Epilogue e, uint32_t in, Binding out, uint32_t gate_row0 = 0,
              uint32_t up_row0 = 0, uint32_t n = 0, bool last_row = false, int32_t residual_gate = -1) {
    const MatmulInput x = matmul_input(i, in, w.dims[1], e);
    std::map<std::string, Binding> b = {{"w", plan::weight(w.tensor[0])}, {"x", x.x},
                                        {"bias", vector_or_none(w.tensor[1])}, {"y", out},
                                        {"norm_scale", x.norm_scale}, {"norm_shift", x.norm_shift},
                                        {"gate", vector_or_none(residual_gate)}};
    if (w2) {
      b["w2"] = plan::weight(w2->tensor[0]);
      b["bias2"] = vector_or_none(w2->tensor[1]);
    }
    const uint32_t rows = n ? n : static_cast<uint32_t>(w.dims[0]);
    matrix(w.tensor[0], w.dims[0], w.dims[1]);
    if (w2) matrix(w2->tensor[0], w2->dims[0], w2->dims[1]);
    if (w2 == &w && bytes(w.tensor[0], w.dims[0], w.dims[1]) > max_part_bytes_)
      unsupported(i, "a fused gate_up tensor over max_part_bytes (" + std::to_string(max_part_bytes_) +
                         " bytes): only matrices read whole are split into row ranges");
    Dispatch& d = emit(i, matmul_key(w.dims[1], dtype(w.tensor[0]), e), plan::Grid::Tiles, std::move(b),
                       {{"n", rows}, {"gate_row0", gate_row0}, {"up_row0", up_row0}, {"y_stride", rows}});
    d.groups_x = rows;
    d.last_row = last_row;
  }

  static KernelKey matmul_key(int64_t cols, DType dtype, const Epilogue& e) {
    return KernelKey{.family = Family::Matmul, .width = cols, .dtype = dtype, .epilogue = e};
  }

  // How many ops right after i are projections reading `value` (q, k, v; gate, up).
  size_t readers_next(size_t i, uint32_t value) const {
    size_t n = 0;
    while (const Op* op = at(i + 1 + n)) {
      if ((op->kind != OpKind::MatMul && op->kind != OpKind::Logits) || op->in[0] != value) break;
      ++n;
    }
    return n;
  }

  // add(x, branch) at i + 1, done in place by the kernel at i that makes
  // `branch` (y += …): x's slot, which x must leave there.
  Loc residual_slot(size_t i, const Op& add, uint32_t branch) const {
    const uint32_t x = add.in[0] == branch ? add.in[1] : add.in[0];
    const Loc xl = loc(i, x);
    if (last_use_[x] != static_cast<int32_t>(i + 1) || xl.offset != 0)
      unsupported(i, "the residual stream is read after the add; the in-place residual needs it to end there");
    return xl;
  }
  // Once that kernel is emitted, the sum takes over the slot (its user count stays).
  void take_over(const Op& add, uint32_t branch) {
    const uint32_t x = add.in[0] == branch ? add.in[1] : add.in[0];
    locs_[add.out] = locs_.at(x);
    locs_.erase(x);
  }

  // Op i and the ops its pattern takes with it, by kind: the dispatches
  // they become (a function a kind); the ops taken.
  size_t lower_at(size_t i) {
    const Op& op = ops_[i];
    layer_ = op.layer;
    block_ = op.block;
    live_ = 0;
    for (const auto& [value, l] : locs_) {
      (void)value;
      if (l.slot < 0) continue;
      if (l.slot >= 64) throw std::logic_error("lowering: more than 64 activation slots");
      live_ |= uint64_t{1} << l.slot;
    }
    switch (op.kind) {
      case OpKind::Embed: return lower_embed(i);
      case OpKind::Input: return lower_input(i);
      case OpKind::RMSNorm:
      case OpKind::LayerNorm: return lower_norm(i);
      case OpKind::MatMul: return lower_matmul(i);
      case OpKind::Split: return lower_split(i);
      case OpKind::QKNorm: return lower_qk_norm(i);
      case OpKind::Rope: return lower_rope(i);
      case OpKind::MlaQuery:
      case OpKind::MlaValues: return lower_mla(i);
      case OpKind::Attention:
        lower_attention(i, 0, RopePairing::Neox, false);
        return 1;
      case OpKind::CrossKv: return lower_cross_kv(i);
      case OpKind::Logits: return lower_logits(i);
      case OpKind::Route: return lower_route(i);
      case OpKind::Experts: return lower_experts(i);
      case OpKind::MoeCombine: return lower_moe_combine(i);
      case OpKind::SsmConv: return lower_ssm_conv(i);
      case OpKind::SsmScan: return lower_ssm_scan(i);
      case OpKind::Mamba2Scan: return lower_mamba2_scan(i);
      case OpKind::PosEmbed: return lower_positions(i);
      case OpKind::PoolNorm: return lower_pool_norm(i);
      case OpKind::MergeNorm: return lower_pool_norm(i);
      case OpKind::TileEmbed: return lower_tiles(i);
      case OpKind::FeatureStack: return lower_stack(i);
      case OpKind::Output: unsupported(i, "an encoder's output must follow the norm that ends its stack");
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
    // Stacked, they must fit one binding; apart, each may be split into row ranges.
    int64_t stacked = 0;
    for (size_t j = i; j < i + n; ++j) stacked += bytes(ops_[j].tensor[0], ops_[j].dims[0], ops_[j].dims[1]);
    return stacked > max_part_bytes_ ? 1 : n;
  }

  // OpKind::Embed.
  size_t lower_embed(size_t i) {
    const Op& op = ops_[i];
    const Op* next = at(i + 1);
    const bool positions = next && next->kind == OpKind::PosEmbed && next->in[0] == op.out;
    const Loc out = materialize(positions ? next->out : op.out);
    matrix(op.tensor[0], op.dims[0], op.dims[1]);
    if (positions && bytes(next->tensor[0], next->dims[0], next->dims[1]) > max_part_bytes_)
      unsupported(i + 1, "the position table is over max_part_bytes; only the token table is split into row ranges");
    // BERT's token-type table, added with the positions (row 0: one segment).
    const int32_t types = positions ? next->tensor[1] : -1;
    if (positions && dtype(next->tensor[0]) != dtype(op.tensor[0]))
      unsupported(i + 1, "the position table's dtype differs from the token table's");
    if (types >= 0 && dtype(types) != dtype(op.tensor[0]))
      unsupported(i + 1, "the token-type table's dtype differs from the token table's");
    if (positions && next->extra[0] >= 0) unsupported(i + 1, "a class embedding is added to a vision tower's patch rows only");
    const bool splice = op.variant == typed::kSplice;
    // (A spliced row is the host's as it is: embed.comp adds no table to it.)
    if (splice && (positions || types >= 0))
      unsupported(i, "a decoder that splices image rows adds no learned positions or token types to its embeddings");
    if (splice) plan_.scalars.input_row_floats = std::max(plan_.scalars.input_row_floats, op.dims[1]);
    emit(i, KernelKey{.family = Family::Embed, .width = op.dims[1], .dtype = dtype(op.tensor[0]), .positions = positions,
                      .types = types >= 0, .splice = splice},
         plan::Grid::Rows,
         {{"io", plan::io()},
          {"table", plan::weight(op.tensor[0])},
          {"positions", positions ? plan::weight(next->tensor[0]) : Binding{}},
          {"types", vector_or_none(types)},
          {"y", plan::activation(out.slot)},
          {"x", splice ? plan::input() : Binding{}}},
         {{"token0", 0}, {"tokens", static_cast<uint32_t>(op.dims[0])}});
    return positions ? 2 : 1;
  }

  // OpKind::Input and the patch embedding's matmul that reads it: the
  // host's rows copied into an activation (embed's rows gather, no table),
  // as wide as the weight's device rows (whole texels: the host pads each
  // row with zeros, which meet the weight's zero padding), then the matmul
  // over that width.
  size_t lower_input(size_t i) {
    const Op& op = ops_[i];
    const Op* next = at(i + 1);
    if (!next || next->kind != OpKind::MatMul || next->in[0] != op.out || last_use_[op.out] != static_cast<int32_t>(i + 1)) {
      // Rows several ops read (an image's features, Llama 3.2 Vision's
      // image pass): copied into an activation as they are.
      if (device_cols(DType::F32, op.dims[0]) != op.dims[0]) unsupported(i, "host rows of whole texels");
      const Loc rows = materialize(op.out);
      plan_.scalars.input_row_floats = std::max(plan_.scalars.input_row_floats, op.dims[0]);
      emit(i, KernelKey{.family = Family::Embed, .width = op.dims[0], .dtype = DType::F32, .rows = true},
           plan::Grid::Rows, {{"io", plan::io()}, {"x", plan::input()}, {"y", plan::activation(rows.slot)}},
           {{"token0", 0}, {"tokens", 0}});
      return 1;
    }
    const int64_t width = device_cols(dtype(next->tensor[0]), op.dims[0]);
    const Loc rows = bind(op.out, Loc{allocate(width), 0, static_cast<uint32_t>(width)});
    plan_.scalars.input_row_floats = std::max(plan_.scalars.input_row_floats, width);
    emit(i, KernelKey{.family = Family::Embed, .width = width, .dtype = DType::F32, .rows = true}, plan::Grid::Rows,
         {{"io", plan::io()}, {"x", plan::input()}, {"y", plan::activation(rows.slot)}},
         {{"token0", 0}, {"tokens", 0}});
    Op patch = *next;
    patch.dims[1] = width;
    const Loc out = materialize(next->out);
    matmul(i + 1, patch, nullptr, Epilogue{.bias = patch.tensor[1] >= 0}, op.out, plan::activation(out.slot));
    return 2;
  }

  // OpKind::PosEmbed of a value no embedding gathers (a vision tower's patch
  // rows): its own rows gather, with the class embedding (extra[0]).
  size_t lower_positions(size_t i) {
    const Op& op = ops_[i];
    if (op.tensor[1] >= 0) unsupported(i, "a token-type table is added with the token embedding only");
    const Loc x = loc(i, op.in[0]);
    if (x.offset != 0 || x.stride != static_cast<uint32_t>(op.dims[1]))
      unsupported(i, "the positions are added to whole rows of their input");
    if (is_block_dtype(dtype(op.tensor[0]))) unsupported(i, "a position table of block dtype is added to token tables only");
    if (bytes(op.tensor[0], op.dims[0], op.dims[1]) > max_part_bytes_)
      unsupported(i, "the position table is over max_part_bytes");
    matrix(op.tensor[0], op.dims[0], op.dims[1]);
    const Loc out = materialize(op.out);
    emit(i, KernelKey{.family = Family::Embed, .width = op.dims[1], .dtype = dtype(op.tensor[0]), .positions = true,
                      .rows = true, .class_row = op.extra[0] >= 0},
         plan::Grid::Rows,
         {{"io", plan::io()},
          {"positions", plan::weight(op.tensor[0])},
          {"x", plan::activation(x.slot)},
          {"cls", vector_or_none(op.extra[0])},
          {"y", plan::activation(out.slot)}},
         {{"token0", 0}, {"tokens", 0}});
    return 1;
  }

  // OpKind::RMSNorm, OpKind::LayerNorm.
  size_t lower_norm(size_t i) {
    const Op& op = ops_[i];
    const Op* next = at(i + 1);
    // A norm per group of features (Mamba-2's gated norm; 0: the whole
    // row): matmul epilogues norm whole rows, so it folds into none.
    const int64_t group = op.dims[1] > 0 && op.dims[1] != op.dims[0] ? op.dims[1] : 0;
    // Dispatches of their own: a cross-attention query's per-head norm (one
    // scale for every head), a norm whose rows that see no image are zeros,
    // a tiled tower's pre-norm whose padding rows are zeros.
    const bool heads = op.variant == typed::kHeadScale, image_rows = op.variant == typed::kImageRows;
    if (heads || image_rows || op.dims[2] > 0) {
      if (heads ? group == 0 || op.dims[0] % group != 0 : group != 0)
        unsupported(i, heads ? "a per-head norm of whole heads" : "a norm that zeroes rows norms whole rows");
      emit(i,
           KernelKey{.family = Family::Norm, .width = op.dims[0], .group = group, .zero_from = op.dims[2],
                     .head_scale = heads, .row_mask = image_rows},
           plan::Grid::Rows,
           {{"x", plan::activation(loc(i, op.in[0]).slot)},
            {"scale", plan::weight(op.tensor[0])},
            {"shift", vector_or_none(op.tensor[1])},
            {"y", plan::activation(materialize(op.out).slot)},
            {"io", image_rows ? plan::io() : Binding{}}});
      return 1;
    }
    // A mixture of experts' input norm: folded into the router and into
    // the gated experts, which read it through moe_route's lists.
    if (group == 0 && next && next->kind == OpKind::MatMul && next->in[0] == op.out && at(i + 2) &&
        at(i + 2)->kind == OpKind::Route && at(i + 3) && at(i + 3)->kind == OpKind::Experts &&
        at(i + 3)->in[0] == op.out && last_use_[op.out] == static_cast<int32_t>(i + 3)) {
      norm_ = &op;
      lower_matmul(i + 1);
      lower_at(i + 2);
      lower_at(i + 3);
      norm_ = nullptr;
      return 4;
    }
    // Folded into the projections that read it, when they come next and
    // nothing after them reads it (a parallel block's shared norm, a
    // post-norm block's output: materialized).
    if (group == 0 && next && (next->kind == OpKind::MatMul || next->kind == OpKind::Logits) && next->in[0] == op.out &&
        last_use_[op.out] <= static_cast<int32_t>(i + readers_next(i, op.out))) {
      norm_ = &op;
      size_t consumed = next->kind == OpKind::Logits ? lower_at(i + 1) : lower_matmul(i + 1);
      // Readers left out of the pack (a v of another dtype than q and k,
      // as llama.cpp's _M mixtures give): each folds the norm too.
      for (const Op* more = at(i + 1 + consumed);
           last_use_[op.out] > static_cast<int32_t>(i + consumed) && more && more->kind == OpKind::MatMul &&
           more->in[0] == op.out;
           more = at(i + 1 + consumed))
        consumed += lower_matmul(i + 1 + consumed);
      norm_ = nullptr;
      if (last_use_[op.out] > static_cast<int32_t>(i + consumed))
        unsupported(i, "a norm folded into the projections after it is read again later");
      return 1 + consumed;
    }
    const Binding in = plan::activation(loc(i, op.in[0]).slot);
    // norm → add(x, ·): x += N(branch) in place, when x dies there (the
    // norm of a branch's output: sandwich and branch_output blocks).
    if (next && next->kind == OpKind::Add && (next->in[0] == op.out || next->in[1] == op.out)) {
      const Loc sum = residual_slot(i, *next, op.out);
      emit(i, KernelKey{.family = Family::Norm, .width = op.dims[0], .residual = true, .group = group}, plan::Grid::Rows,
           {{"x", in}, {"scale", plan::weight(op.tensor[0])}, {"shift", vector_or_none(op.tensor[1])},
            {"y", plan::activation(sum.slot)}});
      take_over(*next, op.out);
      return 2;
    }
    // An encoder's last norm writes its hidden states, every row, to the output.
    const bool output = next && next->kind == OpKind::Output && next->in[0] == op.out;
    const Binding y = output ? plan::logits() : plan::activation(materialize(op.out).slot);
    emit(i, KernelKey{.family = Family::Norm, .width = op.dims[0], .group = group}, plan::Grid::Rows,
         {{"x", in}, {"scale", plan::weight(op.tensor[0])}, {"shift", vector_or_none(op.tensor[1])}, {"y", y}});
    return output ? 2 : 1;
  }

  // OpKind::PoolNorm: norm's pooled form, a workgroup an output row; the
  // rows past the blocks written zeros (every row of the pass is the
  // grid's). OpKind::MergeNorm: its merged form, the same way.
  size_t lower_pool_norm(size_t i) {
    const Op& op = ops_[i];
    const Loc x = loc(i, op.in[0]);
    if (x.offset != 0 || x.stride != static_cast<uint32_t>(op.dims[0]))
      unsupported(i, "a pooled or merged norm reads whole rows of its input");
    const Loc out = materialize(op.out);
    const bool merged = op.kind == OpKind::MergeNorm;
    emit(i,
         merged ? KernelKey{.family = Family::Norm, .width = op.dims[0], .merge = op.dims[1]}
                : KernelKey{.family = Family::Norm, .width = op.dims[0], .pool = op.dims[2], .pool_grid = op.dims[1]},
         plan::Grid::Rows,
         {{"x", plan::activation(x.slot)},
          {"scale", plan::weight(op.tensor[0])},
          {"shift", vector_or_none(op.tensor[1])},
          {"y", plan::activation(out.slot)}});
    return 1;
  }

  // OpKind::TileEmbed: tiles.comp's embedding forms, a workgroup a row.
  size_t lower_tiles(size_t i) {
    const Op& op = ops_[i];
    const bool pre = op.variant == typed::kTilePre;
    const Loc x = loc(i, op.in[0]);
    if (x.offset != 0 || x.stride != static_cast<uint32_t>(op.dims[0]))
      unsupported(i, "a tiled tower's embeddings are added to whole rows");
    const int32_t table = op.tensor[0], positions = pre ? op.extra[2] : -1, tile_positions = pre ? op.tensor[1] : -1;
    const DType d = dtype(table);
    for (int32_t t : {table, positions, tile_positions}) {
      if (t < 0) continue;
      if (is_block_dtype(dtype(t))) unsupported(i, "a tiled tower's embedding tables of block dtype");
      if (dtype(t) != d) unsupported(i, "a tiled tower's embedding tables differ in dtype");
    }
    // dims: the width, tiles, a tile's rows, its padding rows, the aspect ratios' rows.
    const int64_t width = op.dims[0], tiles = op.dims[1], tile_rows = op.dims[2], ratios = op.dims[4];
    matrix(table, ratios, tiles * width);
    if (pre) {
      matrix(positions, tile_rows, width);
      matrix(tile_positions, ratios, tiles * tile_rows * width);
      if (bytes(tile_positions, ratios, tiles * tile_rows * width) > max_part_bytes_)
        unsupported(i, "the tiles' position table is over max_part_bytes");
    }
    const Loc out = materialize(op.out);
    emit(i,
         KernelKey{.family = Family::Tiles, .width = op.dims[0], .dtype = d, .tile_form = static_cast<uint8_t>(pre ? 0 : 1),
                   .tiles = op.dims[1], .tile_rows = op.dims[2], .tile_pad = op.dims[3]},
         plan::Grid::Rows,
         {{"io", plan::io()},
          {"x", plan::activation(x.slot)},
          {"y", plan::activation(out.slot)},
          {"table", plan::weight(table)},
          {"gate", vector_or_none(pre ? op.extra[1] : op.tensor[1])},
          {"cls", vector_or_none(pre ? op.extra[0] : -1)},
          {"positions", pre ? plan::weight(positions) : Binding{}},
          {"tile_positions", pre ? plan::weight(tile_positions) : Binding{}},
          {"position_gate", vector_or_none(pre ? op.extra[3] : -1)}});
    return 1;
  }

  // OpKind::FeatureStack: tiles.comp's stack form, writing one slot of the
  // stack (a new one, or in[0]'s in place: it dies here).
  size_t lower_stack(size_t i) {
    const Op& op = ops_[i];
    const Loc x = loc(i, op.in[1]);
    if (x.offset != 0 || x.stride != static_cast<uint32_t>(op.dims[0]))
      unsupported(i, "a stacked hidden state is a whole row");
    Loc out;
    if (op.variant == typed::kStackFirst) {
      out = materialize(op.out);
    } else {
      out = loc(i, op.in[0]);
      if (last_use_[op.in[0]] != static_cast<int32_t>(i)) unsupported(i, "a stack is read after a slot is written into it");
      locs_[op.out] = out;  // the stack's slot, taken over
      locs_.erase(op.in[0]);
    }
    emit(i,
         KernelKey{.family = Family::Tiles, .width = op.dims[0], .tile_form = 2, .states = op.dims[1], .slot = op.dims[2]},
         plan::Grid::Rows, {{"io", plan::io()}, {"x", plan::activation(x.slot)}, {"y", plan::activation(out.slot)}});
    return 1;
  }

  // OpKind::Split.
  size_t lower_split(size_t i) {
    const Op& op = ops_[i];
    const Loc src = loc(i, op.in[0]);
    bind(op.out, Loc{src.slot, src.offset + static_cast<uint32_t>(op.dims[0]), src.stride});
    return 1;
  }

  // OpKind::QKNorm.
  size_t lower_qk_norm(size_t i) {
    const Op& op = ops_[i];
    const Op* next = at(i + 1);
    // Folded into rope_kv, which normalizes q and k as it reads them.
    if (!next || next->kind != OpKind::Rope || next->in[0] != op.in[0] || next->in[1] != op.in[1])
      unsupported(i, "a q/k norm must be followed by the rope of the same q and k");
    qk_norm_ = &op;
    const size_t consumed = lower_at(i + 1);
    qk_norm_ = nullptr;
    return 1 + consumed;
  }

  // OpKind::Rope.
  size_t lower_rope(size_t i) {
    const Op& op = ops_[i];
    const Op* next = at(i + 1);
    if (!next || next->kind != OpKind::Attention || next->in[0] != op.in[0] || next->in[1] != op.in[1])
      unsupported(i, "rope must be followed by the attention of the same q and k");
    lower_attention(i + 1, op.dims[3], static_cast<RopePairing>(op.variant), op.local, op.dims[4]);
    return 2;
  }

  // OpKind::MlaQuery, OpKind::MlaValues.
  size_t lower_mla(size_t i) {
    const Op& op = ops_[i];
    // One workgroup per (head, row): kv_b's rows of the head, read as f32.
    // Latent attention's absorbed form; the expanded form's query is its
    // rotary part alone, and its attention writes the values (below).
    const bool query = op.kind == OpKind::MlaQuery, split = op.variant == typed::kSplitKvB;
    const Loc x = loc(i, op.in[0]);
    const Loc out = materialize(op.out);
    const std::map<std::string, Binding> bindings = {
        {"x", plan::activation(x.slot)}, {"w", plan::weight(op.tensor[0])}, {"y", plan::activation(out.slot)}};
    for (const bool expand : {false, true}) {
      if (expand && (!query || expanded_min_rows(op) == 0)) break;
      Dispatch& d = emit(i, KernelKey{.family = Family::Mla, .query = query, .split = split, .expand = expand},
                         plan::Grid::Heads, bindings, {{"x_offset", x.offset}, {"x_stride", x.stride}});
      d.groups_x = static_cast<uint32_t>(op.dims[0]);
      d.form = expand ? plan::Form::Expanded : plan::Form::Absorbed;
    }
    if (!query && expanded_min_rows(op) > 0) mla_expanded(i, op, out);
    return 1;
  }

  // OpKind::CrossKv.
  size_t lower_cross_kv(size_t i) {
    const Op& op = ops_[i];
    // The KV append alone, into the cross-attention cache (no q: q's
    // binding is k's, which the kernel does not touch without rotation or
    // a q norm); an image's keys with k's heads normed as they are read.
    const Loc k = loc(i, op.in[0]), v = loc(i, op.in[1]);
    const bool k_norm = op.tensor[0] >= 0;
    std::map<std::string, Binding> bindings = kv_append_bindings(k, k, v, op.layer);
    if (k_norm) bindings["k_norm"] = plan::weight(op.tensor[0]);
    emit(i, KernelKey{.family = Family::RopeKv, .qk_norm = k_norm, .k_norm_only = k_norm}, plan::Grid::Heads,
         std::move(bindings),
         {{"q_offset", k.offset}, {"q_stride", k.stride}, {"k_offset", k.offset}, {"k_stride", k.stride},
          {"v_offset", v.offset}, {"v_stride", v.stride}})
        .groups_x = static_cast<uint32_t>(op.dims[0]);  // a workgroup a KV head (rope_kv.comp)
    window_of(i, op.layer, k_norm ? image_window(i, op.dims[2]) : 0);
    return 1;
  }

  // An image cross-attention layer's cache (Llama 3.2 Vision): `rows` keys
  // an image, as plan::ring_positions reads a window ≤ −2.
  static int64_t image_window(size_t i, int64_t rows) {
    if (rows < 2) unsupported(i, "an image of fewer than two cross-attention keys");
    return -rows;
  }

  // OpKind::Logits.
  size_t lower_logits(size_t i) {
    const Op& op = ops_[i];
    matmul(i, op, nullptr, Epilogue{.bias = op.tensor[1] >= 0, .softcap = op.param > 0, .scaled = op.scale != 1.0},
           op.in[0], plan::logits(), 0, 0, 0, true);
    emit(i, KernelKey{.family = Family::Argmax}, plan::Grid::Single,
         {{"io", plan::io()}, {"logits", plan::logits()}})
        .last_row = true;
    return 1;
  }

  // OpKind::Route.
  size_t lower_route(size_t i) {
    const Op& op = ops_[i];
    // The logits are a column view when the shared expert's gate shares their matmul.
    const Loc logits = loc(i, op.in[0]);
    if (logits.offset != 0) unsupported(i, "the router's logits must open their rows");
    const Loc out = materialize(op.out);
    emit(i, KernelKey{.family = Family::MoeRoute, .stride = logits.stride}, plan::Grid::Single,
         {{"logits", plan::activation(logits.slot)},
          {"route", plan::activation(out.slot)},
          {"bias", vector_or_none(op.tensor[0])}});
    return 1;
  }

  // OpKind::Experts.
  size_t lower_experts(size_t i) {
    const Op& op = ops_[i];
    // One matmul over the experts' matrices stacked in a pack (grid z:
    // the expert), each reading the rows routed to it.
    const bool gated = op.tensor[1] >= 0;
    if (gated && dtype(op.tensor[1]) != dtype(op.tensor[0])) unsupported(i, "expert gate and up differ in dtype");
    const int32_t stride = static_cast<int32_t>(op.param);
    const bool fold = norm_ && norm_->out == op.in[0];  // the MLP's norm, applied as x is read
    const Loc x = loc(i, fold ? norm_->in[0] : op.in[0]), routing = loc(i, op.in[1]);
    const Loc out = materialize(op.out);
    // A layer's experts of a role stacked in one binding, or (over
    // max_part_bytes together) in parts of as many experts as one
    // binding holds, a dispatch each; the kernel finds expert e's rows
    // at (e − expert0) · n of its part.
    const int64_t experts = op.dims[0], one = bytes(op.tensor[0], op.dims[1], op.dims[2]);
    if (one > max_part_bytes_)
      unsupported(i, "one expert's matrix takes " + std::to_string(one) + " bytes, over max_part_bytes (" +
                         std::to_string(max_part_bytes_) + ")");
    const int64_t per_part = std::min(experts, max_part_bytes_ / one);
    const Epilogue e{.gated = gated, .act = static_cast<Activation>(op.variant), .norm = fold,
                     .experts = static_cast<uint8_t>(gated ? 1 : 2),
                     .part_experts = static_cast<uint16_t>(per_part < experts ? per_part : 0)};
    const uint32_t rows = static_cast<uint32_t>(op.dims[1]);
    for (int64_t e0 = 0; e0 < experts; e0 += per_part) {
      const int64_t count = std::min(per_part, experts - e0);
      const int32_t first = static_cast<int32_t>(e0) * stride;
      std::map<std::string, Binding> b = {{"w", plan::pack(expert_pack(op.tensor[0] + first, stride, count))},
                                          {"x", plan::activation(x.slot)},
                                          {"y", plan::activation(out.slot)},
                                          {"route", plan::activation(routing.slot)}};
      if (fold) {
        b["norm_scale"] = plan::weight(norm_->tensor[0]);
        b["norm_shift"] = vector_or_none(norm_->tensor[1]);
      }
      if (gated) b["w2"] = plan::pack(expert_pack(op.tensor[1] + first, stride, count));
      Dispatch& d = emit(i, matmul_key(op.dims[2], dtype(op.tensor[0]), e), plan::Grid::Experts, std::move(b),
                         {{"n", rows}, {"gate_row0", 0}, {"up_row0", 0}, {"y_stride", rows},
                          {"expert0", static_cast<uint32_t>(e0)}});
      d.groups_x = rows;
      d.groups_z = static_cast<uint32_t>(experts);  // every expert with tokens: the part's run, the others leave
      d.groups_z_per_row = static_cast<uint32_t>(op.dims[3]);  // a chunk of T rows uses at most T · top_k experts
    }
    return 1;
  }

  // OpKind::MoeCombine.
  size_t lower_moe_combine(size_t i) {
    const Op& op = ops_[i];
    // x += the weighted experts' outputs, in place: x ends here.
    const uint32_t x = op.in[0];
    const Loc xl = loc(i, x);
    if (last_use_[x] != static_cast<int32_t>(i) || xl.offset != 0)
      unsupported(i, "the residual stream is read after the experts' sum; it must end there");
    // A shared expert's output (a whole activation) and its gate's logit
    // (a column of the router's matmul, or an activation of its own).
    const int64_t shared = op.dims[3];
    Binding shared_out, gate;
    KernelKey key{.family = Family::MoeCombine, .shared = static_cast<uint8_t>(shared)};
    if (shared > 0) {
      const Loc s = loc(i, op.in[3]);
      if (s.offset != 0 || s.stride != static_cast<uint32_t>(op.dims[2]))
        unsupported(i, "the shared expert's output must be rows of its own");
      shared_out = plan::activation(s.slot);
    }
    if (shared > 1) {
      const Loc g = loc(i, op.in[4]);
      gate = plan::activation(g.slot);
      key.stride = g.stride;
      key.offset = g.offset;
    }
    emit(i, key, plan::Grid::Rows,
         {{"route", plan::activation(loc(i, op.in[2]).slot)},
          {"y", plan::activation(loc(i, op.in[1]).slot)},
          {"x", plan::activation(xl.slot)},
          {"shared", shared_out},
          {"gate", gate}});
    locs_[op.out] = xl;
    locs_.erase(x);
    return 1;
  }

  // OpKind::SsmConv.
  size_t lower_ssm_conv(size_t i) {
    const Op& op = ops_[i];
    const Loc xz = whole_rows(i, op.in[0]);
    const Loc out = materialize(op.out);
    state_of(i, op.layer);
    plan_.scalars.conv_state_floats = op.dims[0] * (op.dims[1] - 1);
    Dispatch& d = emit(i, KernelKey{.family = Family::SsmConv}, plan::Grid::Channels,
                       {{"io", plan::io()},
                        {"xz", plan::activation(xz.slot)},
                        {"w", plan::weight(op.tensor[0])},
                        {"bias", vector_or_none(op.tensor[1])},
                        {"state", plan::conv_state(op.layer)},
                        {"u", plan::activation(out.slot)}});
    d.groups_x = ssm_groups(op.dims[0]);
    return 1;
  }

  // OpKind::SsmScan.
  size_t lower_ssm_scan(size_t i) {
    const Op& op = ops_[i];
    const Loc u = whole_rows(i, op.in[0]), dbc = whole_rows(i, op.in[1]), xz = whole_rows(i, op.in[2]);
    const Loc out = materialize(op.out);
    state_of(i, op.layer);
    plan_.scalars.scan_state_floats = op.dims[0] * op.dims[1];
    Dispatch& d = emit(i, KernelKey{.family = Family::SsmScan}, plan::Grid::Channels,
                       {{"io", plan::io()},
                        {"u", plan::activation(u.slot)},
                        {"dbc", plan::activation(dbc.slot)},
                        {"dt_w", plan::weight(op.tensor[0])},
                        {"dt_bias", plan::weight(op.extra[0])},
                        {"xz", plan::activation(xz.slot)},
                        {"a_log", plan::weight(op.tensor[1])},
                        {"d", plan::weight(op.extra[1])},
                        {"state", plan::scan_state(op.layer)},
                        {"y", plan::activation(out.slot)}});
    d.groups_x = ssm_groups(op.dims[0]);
    return 1;
  }

  // OpKind::Mamba2Scan.
  size_t lower_mamba2_scan(size_t i) {
    const Op& op = ops_[i];
    const Loc u = whole_rows(i, op.in[0]), xz = whole_rows(i, op.in[1]);
    const Loc out = materialize(op.out);
    state_of(i, op.layer);
    plan_.scalars.scan_state_floats = op.dims[0] * op.dims[1];
    const std::map<std::string, plan::Binding> bindings{{"io", plan::io()},
                                                         {"u", plan::activation(u.slot)},
                                                         {"xz", plan::activation(xz.slot)},
                                                         {"dt_bias", plan::weight(op.extra[0])},
                                                         {"a_log", plan::weight(op.tensor[0])},
                                                         {"d", plan::weight(op.tensor[1])},
                                                         {"state", plan::scan_state(op.layer)},
                                                         {"y", plan::activation(out.slot)}};
    // Two forms of one scan (plan::Form): the recurrence, a lane a
    // channel; the chunked form, a workgroup a head's block of channels.
    Dispatch& step = emit(i, KernelKey{.family = Family::Mamba2Scan}, plan::Grid::Channels, bindings);
    step.groups_x = ssm_groups(op.dims[0]);
    step.form = plan::Form::Recurrent;
    const int64_t heads = op.dims[2], channels = op.dims[0] / heads;
    Dispatch& chunk = emit(i, KernelKey{.family = Family::Mamba2Chunk}, plan::Grid::Channels, bindings);
    chunk.groups_x = static_cast<uint32_t>(heads * (channels / kernels::mamba2_chunk_channels(channels, op.dims[1])));
    chunk.form = plan::Form::Chunked;
    return 1;
  }

  // The pack of one role's matrices of `experts` experts, the first at
  // `first` and the others `stride` apart in the manifest (made once).
  int32_t expert_pack(int32_t first, int32_t stride, int64_t experts) {
    const plan::Pack pack{.weights = {first}, .count = 1, .stride = stride, .experts = static_cast<uint16_t>(experts)};
    for (size_t p = 0; p < plan_.packs.size(); ++p)
      if (plan_.packs[p] == pack) return static_cast<int32_t>(p);
    plan_.packs.push_back(pack);
    return static_cast<int32_t>(plan_.packs.size() - 1);
  }

  size_t lower_pack(size_t i, size_t count) {
    if (count > plan::Pack{}.weights.size()) unsupported(i, "a pack of more than four matrices");
    plan::Pack pack;
    int64_t rows = 0;
    for (size_t j = i; j < i + count; ++j) {
      pack.weights[pack.count++] = ops_[j].tensor[0];
      if (ops_[j].tensor[1] >= 0) pack.biases[pack.bias_count++] = ops_[j].tensor[1];
      rows += ops_[j].dims[0];
    }
    const int32_t index = static_cast<int32_t>(plan_.packs.size());
    plan_.packs.push_back(pack);
    const Op& op = ops_[i];
    const bool bias = op.tensor[1] >= 0;
    Epilogue e{.bias = bias};
    const MatmulInput x = matmul_input(i, op.in[0], op.dims[1], e);
    // One activation of all the rows; each product is a column view of it.
    const int32_t slot = allocate(rows);
    uint32_t offset = 0;
    for (size_t j = i; j < i + count; ++j) {
      bind(ops_[j].out, Loc{slot, offset, static_cast<uint32_t>(rows)});
      offset += static_cast<uint32_t>(ops_[j].dims[0]);
    }
    Dispatch& d = emit(i, matmul_key(op.dims[1], dtype(op.tensor[0]), e), plan::Grid::Tiles,
                       {{"w", plan::pack(index)},
                        {"x", x.x},
                        {"bias", bias ? plan::pack_bias(index) : Binding{}},
                        {"y", plan::activation(slot)},
                        {"norm_scale", x.norm_scale},
                        {"norm_shift", x.norm_shift}},
                       {{"n", static_cast<uint32_t>(rows)}, {"y_stride", static_cast<uint32_t>(rows)}});
    d.groups_x = static_cast<uint32_t>(rows);
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
      const Epilogue e{.bias = bias, .gated = true, .act = static_cast<Activation>(b->variant)};
      if ((a->tensor[1] >= 0) != bias) unsupported(i, "gate and up differ in having a bias");
      // One kernel reads both with one WDTYPE (llama.cpp's _M mixtures keep them alike).
      if (dtype(a->tensor[0]) != dtype(op.tensor[0])) unsupported(i, "gate and up differ in dtype");
      const Loc out = materialize(b->out);
      matmul(i, op, a, e, op.in[0], plan::activation(out.slot));
      return 3;
    }
    // gate_up → split, split → gated: both halves of one tensor.
    if (a && b && c && a->kind == OpKind::Split && b->kind == OpKind::Split && a->in[0] == op.out &&
        b->in[0] == op.out && c->kind == OpKind::GatedAct) {
      const Op* gate = c->in[0] == a->out ? a : c->in[0] == b->out ? b : nullptr;
      const Op* up = c->in[1] == a->out ? a : c->in[1] == b->out ? b : nullptr;
      if (gate && up && gate != up) {
        const Epilogue e{.bias = bias, .gated = true, .act = static_cast<Activation>(c->variant)};
        const Loc out = materialize(c->out);
        matmul(i, op, &op, e, op.in[0], plan::activation(out.slot), static_cast<uint32_t>(gate->dims[0]),
               static_cast<uint32_t>(up->dims[0]), static_cast<uint32_t>(gate->dims[1]));
        return 4;
      }
    }
    // matmul → activation
    if (a && a->kind == OpKind::Act && a->in[0] == op.out) {
      const Epilogue e{.bias = bias, .activation = true, .act = static_cast<Activation>(a->variant)};
      const Loc out = materialize(a->out);
      matmul(i, op, nullptr, e, op.in[0], plan::activation(out.slot));
      return 2;
    }
    // matmul → add(x, ·): y += W·in in place, when x dies here (gated:
    // y += tanh(g) · W·in, the branch the add's second input).
    if (a && a->kind == OpKind::Add && (a->in[0] == op.out || a->in[1] == op.out)) {
      const bool gated = a->tensor[0] >= 0;
      if (gated && a->in[1] != op.out) unsupported(i + 1, "a gated residual gates its second input, the branch");
      const Epilogue e{.bias = bias, .residual = true, .residual_gated = gated};
      const Loc sum = residual_slot(i, *a, op.out);
      matmul(i, op, nullptr, e, op.in[0], plan::activation(sum.slot), 0, 0, 0, false, a->tensor[0]);
      take_over(*a, op.out);
      return 2;
    }
    const Epilogue e{.bias = bias};
    // matmul → output: a vision tower's projection writes its rows, every
    // row, to the output.
    if (a && a->kind == OpKind::Output && a->in[0] == op.out) {
      matmul(i, op, nullptr, e, op.in[0], plan::logits());
      return 2;
    }
    const Loc out = materialize(op.out);
    matmul(i, op, nullptr, e, op.in[0], plan::activation(out.slot));
    return 1;
  }

  // A value the Mamba kernels read as rows of their own ([rows][width]).
  Loc whole_rows(size_t i, uint32_t value) const {
    const Loc l = loc(i, value);
    if (l.offset != 0 || l.stride != static_cast<uint32_t>(s_.widths[value]))
      unsupported(i, "a Mamba kernel reads whole activations, not a column view of one");
    return l;
  }
  // The Mamba kernels' workgroups over d_inner channels, kSsmChannelsPerGroup each.
  static uint32_t ssm_groups(int64_t channels) {
    return static_cast<uint32_t>((channels + kernels::kSsmChannelsPerGroup - 1) / kernels::kSsmChannelsPerGroup);
  }
  // Layer `layer` keeps a Mamba state per sequence (layers 0 … state_layers − 1).
  void state_of(size_t i, int32_t layer) {
    if (layer < 0) unsupported(i, "a Mamba kernel outside the layers: no state of a layer to keep");
    plan_.scalars.state_layers = std::max<int64_t>(plan_.scalars.state_layers, int64_t{layer} + 1);
  }

  // The values' cache of `layer`: its V cache, or (latent attention, whose
  // values are its keys' latent part) its K cache.
  static Binding value_cache(int32_t layer, bool values_in_keys) {
    return values_in_keys ? plan::k_cache(layer) : plan::v_cache(layer);
  }
  // rope_kv's bindings: q (rotated in place), k and v appended to the caches of `layer`.
  static std::map<std::string, Binding> kv_append_bindings(const Loc& q, const Loc& k, const Loc& v, int32_t layer,
                                                           bool values_in_keys = false) {
    return {{"io", plan::io()},
            {"q", plan::activation(q.slot)},
            {"k", plan::activation(k.slot)},
            {"v", plan::activation(v.slot)},
            {"k_cache", plan::k_cache(layer)},
            {"v_cache", value_cache(layer, values_in_keys)}};
  }

  // The cache `layer`'s window: every attention and append of it agrees.
  void window_of(size_t i, int32_t layer, int64_t window) {
    if (layer < 0) unsupported(i, "attention outside the layers: no cache of a layer to read");
    const size_t l = static_cast<size_t>(layer);
    if (plan_.windows.size() <= l) plan_.windows.resize(l + 1, -1);
    if (plan_.windows[l] != -1 && plan_.windows[l] != window)
      unsupported(i, "two attentions of one cache see different windows");
    plan_.windows[l] = window;
  }

  void lower_attention(size_t i, int64_t rotary, RopePairing pairing, bool local, int64_t rot_offset = 0) {
    const Op& op = ops_[i];
    if (op.variant == typed::kCross || op.variant == typed::kImageCross) {
      // Cross-attention: the cache holds the encoder's output already (an
      // image's keys: its cache holds dims[4] keys an image).
      const bool images = op.variant == typed::kImageCross;
      const Loc q = loc(i, op.in[0]);
      const Loc out = materialize(op.out);
      window_of(i, op.layer, images ? image_window(i, op.dims[4]) : 0);
      attention_dispatches(i, op,
                           KernelKey{.family = Family::Attention, .bidirectional = true, .cross = true, .image_cross = images},
                           q, out, {{"q_offset", q.offset}, {"q_stride", q.stride}});
      return;
    }
    const Loc q = loc(i, op.in[0]), k = loc(i, op.in[1]), v = loc(i, op.in[2]);
    const std::map<std::string, uint32_t> views = {{"q_offset", q.offset}, {"q_stride", q.stride},
                                                   {"k_offset", k.offset}, {"k_stride", k.stride},
                                                   {"v_offset", v.offset}, {"v_stride", v.stride}};
    // Latent attention: k is also the value (the same activation), so the
    // layer has no V cache: the values are read from the K cache.
    const bool latent = op.in[1] == op.in[2];
    if (latent && !(qk_norm_ && qk_norm_->variant == typed::kLatentNorm))
      unsupported(i, "latent attention needs its latent norm, fused into the cache append");
    // Attributed to the rope op before the attention, when there is one.
    std::map<std::string, Binding> rope_bindings = kv_append_bindings(q, k, v, op.layer, latent);  // (V not written)
    if (qk_norm_) {
      rope_bindings["q_norm"] = vector_or_none(qk_norm_->tensor[0]);
      rope_bindings["k_norm"] = plan::weight(qk_norm_->tensor[1]);
    }
    // A workgroup a query head (and its KV head), rope_kv.comp; one for a
    // norm summed over a whole projection (or latent), before any of the row is written.
    const bool whole_norm = qk_norm_ && (latent || qk_norm_->dims[3] != qk_norm_->dims[2]);
    emit(rotary > 0 ? i - 1 : i,
         KernelKey{.family = Family::RopeKv, .width = rotary, .pairing = pairing, .qk_norm = qk_norm_ != nullptr,
                   .local = local, .rot_offset = rot_offset, .latent = latent},
         plan::Grid::Heads, std::move(rope_bindings), views)
        .groups_x = whole_norm ? 1u : static_cast<uint32_t>(op.dims[0]);
    const Loc out = materialize(op.out);
    // The layer's window: its attention instance, and its cache (a ring when windowed).
    const int64_t window = op.dims[3];
    window_of(i, op.layer, window);
    if (latent && op.variant == typed::kImageSpans)
      unsupported(i, "latent attention's kernels see keys causally: an image's rows cannot see each other both ways");
    attention_dispatches(i, op,
                         KernelKey{.family = Family::Attention,
                                   .window = window,
                                   .bidirectional = op.variant == typed::kBidirectional,
                                   .image_spans = op.variant == typed::kImageSpans},
                         q, out, views, latent);
    if (latent)  // the absorbed form: a prompt chunk may run the expanded one (mla_expanded)
      for (auto d = plan_.dispatches.end() - 2; d != plan_.dispatches.end(); ++d) d->form = plan::Form::Absorbed;
  }

  // The fewest rows of a prompt chunk for which latent attention's expanded
  // form does fewer multiply-adds than the absorbed one; 0: never. Per key
  // and head, a chunk of n rows costs the absorbed form n · (RANK + ROPE +
  // RANK) (scores over the cached latent and rotary key, values over the
  // latent) and the expanded form (NOPE + VD) · RANK (the key's expansion,
  // once a chunk) + n · (NOPE + ROPE + VD). DeepSeek-V2/V3: from 171 rows,
  // 1.9× fewer at 512, 3.4× at most.
  static int64_t expanded_min_rows(const Op& op) {
    const int64_t nope = op.dims[1], rope = op.dims[2], rank = op.dims[3], vd = op.dims[4];
    const int64_t saved = 2 * rank + rope - (nope + rope + vd);  // a row's multiply-adds fewer, per key and head
    return saved > 0 ? (nope + vd) * rank / saved + 1 : 0;
  }

  // Latent attention's expanded form, at its values op (MlaValues: in[1] q,
  // in[2] the absorbed query, its rotary part rotated; the cache appended):
  // every cached latent of the prompt's sequence through kv_b to each head's
  // [k_nope | v] (grid: heads × keys), then each (head, row)'s attention at
  // the head's widths into the values' slot.
  void mla_expanded(size_t i, const Op& op, const Loc& out) {
    const bool split = op.variant == typed::kSplitKvB;
    const Loc q = loc(i, op.in[1]), r = loc(i, op.in[2]);
    // Split: k_b is the query op's tensor, v_b this op's.
    int32_t k_b = op.tensor[0];
    for (size_t j = i; split && j-- > 0;)
      if (ops_[j].kind == OpKind::MlaQuery && ops_[j].out == op.in[2]) k_b = ops_[j].tensor[0];
    const int64_t heads = op.dims[0], row_floats = heads * (op.dims[1] + op.dims[4]);
    plan_.scalars.expanded_row_floats = row_floats;
    // (A dispatch's grid y is a key: at most 65,535, every device's limit.)
    plan_.scalars.expanded_rows = std::clamp<int64_t>(kExpandedBytes / (row_floats * 4), 1, 65535);
    plan_.scalars.expanded_min_rows = expanded_min_rows(op);
    Dispatch& e = emit(i, KernelKey{.family = Family::MlaPrefill, .split = split, .expand = true}, plan::Grid::Keys,
                       {{"io", plan::io()},
                        {"k_cache", plan::k_cache(op.layer)},
                        {"w", plan::weight(k_b)},
                        {"w2", split ? plan::weight(op.tensor[0]) : Binding{}},
                        {"e", plan::expanded()}});
    e.groups_x = static_cast<uint32_t>(heads);
    e.form = plan::Form::Expanded;
    Dispatch& a = emit(i, KernelKey{.family = Family::MlaPrefill}, plan::Grid::Heads,
                       {{"io", plan::io()},
                        {"q", plan::activation(q.slot)},
                        {"r", plan::activation(r.slot)},
                        {"k_cache", plan::k_cache(op.layer)},
                        {"e", plan::expanded()},
                        {"out", plan::activation(out.slot)}},
                       {{"q_offset", q.offset}, {"q_stride", q.stride}, {"r_offset", r.offset}, {"r_stride", r.stride}});
    a.groups_x = static_cast<uint32_t>(heads);
    a.form = plan::Form::Expanded;
  }

  // The query heads one attention workgroup serves: the G = Hq / Hkv of a
  // KV head, or (G > 8: latent attention's one cached head, Falcon's MQA)
  // the largest divisor of G up to 8, so that their state stays in registers.
  static int64_t head_tile(const Op& op) {
    const int64_t g = op.dims[0] / op.dims[1];
    int64_t tile = std::min<int64_t>(g, 8);
    while (g % tile != 0) --tile;
    return tile;
  }

  // Attention over the cache op.layer, and the combine of its key ranges.
  void attention_dispatches(size_t i, const Op& op, KernelKey key, const Loc& q, const Loc& out,
                            const std::map<std::string, uint32_t>& views, bool values_in_keys = false) {
    // One workgroup per GT query heads of a KV head (and key range, when split).
    key.head_tile = head_tile(op);
    emit(i, key, plan::Grid::Split,
         {{"io", plan::io()},
          {"q", plan::activation(q.slot)},
          {"k_cache", plan::k_cache(op.layer)},
          {"v_cache", value_cache(op.layer, values_in_keys)},
          {"out", plan::activation(out.slot)},
          {"partials", plan::partials()},
          {"rel_bias", vector_or_none(op.tensor[0])}},
         views)
        .groups_x = static_cast<uint32_t>(op.dims[0] / key.head_tile);
    Dispatch& c = emit(i, KernelKey{.family = Family::AttentionCombine}, plan::Grid::Heads,
                       {{"partials", plan::partials()}, {"out", plan::activation(out.slot)}});
    c.groups_x = static_cast<uint32_t>(op.dims[0]);  // one per query head
    c.split_only = true;
  }

  // The device bytes of `rows` rows of a tensor `cols` wide, in its device dtype.
  int64_t bytes(int32_t tensor, int64_t rows, int64_t cols) const {
    return device_tensor_bytes(dtype(tensor), 2, rows, cols);
  }
  void matrix(int32_t tensor, int64_t rows, int64_t cols) { matrices_[tensor] = {rows, cols}; }

  // The row ranges of `tensor`, cut once: as many rows as max_part_bytes
  // holds (a multiple of 64 when it holds more), the last range the rest.
  std::pair<size_t, size_t> parts_of(size_t i, int32_t tensor) {
    size_t first = 0;
    for (; first < plan_.parts.size(); ++first)
      if (plan_.parts[first].tensor == tensor) break;
    if (first == plan_.parts.size()) {
      const auto [rows, cols] = matrices_.at(tensor);
      const int64_t row = bytes(tensor, 1, cols);
      if (row > max_part_bytes_)
        unsupported(i, "a row of its matrix takes " + std::to_string(row) + " bytes, over max_part_bytes (" +
                           std::to_string(max_part_bytes_) + ")");
      int64_t per = max_part_bytes_ / row;
      if (per > 64) per -= per % 64;
      for (int64_t r = 0; r < rows; r += per)
        plan_.parts.push_back(plan::Part{tensor, r, std::min(per, rows - r)});
    }
    size_t end = first;
    while (end < plan_.parts.size() && plan_.parts[end].tensor == tensor) ++end;
    return {first, end};
  }

  // A matrix over max_part_bytes is never bound whole: each dispatch that
  // reads it (a matmul's W and W2, an embedding's table) becomes one per row
  // range, over that range's output columns or tokens.
  void split_parts() {
    std::vector<Dispatch> out;
    for (Dispatch& d : plan_.dispatches) {
      const Family family = d.family;
      const std::string w = family == Family::Embed ? "table" : "w";
      const bool reads_matrix = family == Family::Matmul || family == Family::Embed;
      const Binding b = reads_matrix ? d.binding(w) : Binding{};
      if (b.resource != plan::Resource::Weight ||
          bytes(b.index, matrices_.at(b.index)[0], matrices_.at(b.index)[1]) <= max_part_bytes_) {
        out.push_back(std::move(d));
        continue;
      }
      const auto [first, end] = parts_of(d.op, b.index);
      const Binding b2 = family == Family::Matmul ? d.binding("w2") : Binding{};
      std::pair<size_t, size_t> second{first, end};
      if (b2.resource == plan::Resource::Weight) {
        second = parts_of(d.op, b2.index);  // gate and up: one shape, one dtype, the same ranges
        if (second.second - second.first != end - first) unsupported(d.op, "gate and up split into different row ranges");
      }
      for (size_t p = first; p < end; ++p) {
        const plan::Part& part = plan_.parts[p];
        Dispatch copy = d;
        copy.bind(w, plan::part(static_cast<int32_t>(p)));
        if (family == Family::Embed) {
          copy.set_push("token0", static_cast<uint32_t>(part.row0));
          copy.set_push("tokens", static_cast<uint32_t>(part.rows));
        } else {
          if (b2.resource == plan::Resource::Weight) copy.bind("w2", plan::part(static_cast<int32_t>(second.first + p - first)));
          copy.set_push("n", static_cast<uint32_t>(part.rows));
          copy.set_push("col0", static_cast<uint32_t>(part.row0));
          copy.groups_x = static_cast<uint32_t>(part.rows);
        }
        out.push_back(std::move(copy));
      }
    }
    plan_.dispatches = std::move(out);
  }

  const typed::Schedule& s_;
  const std::vector<Op>& ops_;
  std::span<const DType> dtypes_;
  int64_t max_part_bytes_;
  std::map<int32_t, std::array<int64_t, 2>> matrices_;  // tensor → rows, columns, as its kernels read it
  Plan plan_;
  std::vector<int32_t> last_use_;
  std::map<uint32_t, Loc> locs_;
  std::vector<bool> slot_free_;
  std::vector<int32_t> slot_users_;
  const Op* norm_ = nullptr;  // a norm being folded into the matmuls that read its output
  const Op* qk_norm_ = nullptr;  // a q/k norm being folded into the rope_kv after it
  int32_t layer_ = -1;        // the layer of the ops being lowered
  int32_t block_ = -1;        // their block (Op::block)
  bool after_layers_ = false;  // a dispatch outside the layers came after one in them (note_boundary)
  bool splittable_ = true;
  uint64_t live_ = 0;  // the slots of the values live when the current op's lowering began
};

}  // namespace

size_t Dispatch::binding_index(std::string_view name) const {
  const kernels::FamilyInfo& f = kernels::family(family);
  for (size_t i = 0; i < f.bindings.size(); ++i)
    if (f.bindings[i].name == name) return i;
  throw std::logic_error("lowering: " + std::string(f.key) + " has no binding '" + std::string(name) + "'");
}

size_t Dispatch::push_index(std::string_view name) const {
  const kernels::FamilyInfo& f = kernels::family(family);
  for (size_t i = 0; i < f.push.size(); ++i)
    if (f.push[i].name == name) return i;
  throw std::logic_error("lowering: " + std::string(f.key) + " has no push field '" + std::string(name) + "'");
}

void Dispatch::set_push(std::string_view name, uint32_t value) {
  if (name == "rows") throw std::logic_error("lowering: `rows` is the runtime's to set");
  push[push_index(name)] = value;
}

View::View(const Plan& p) : plan_(p.scalars) {
  for (const KernelKey& k : p.kernels) names_.push_back(k.name());
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelKey& k = p.kernels[i];
    kernels_.push_back(plan::Kernel{names_[i], k.family,
                                    k.family == Family::Matmul ? k.width : k.family == Family::Attention ? k.window : 0});
  }
  dispatches_.assign(p.dispatches.begin(), p.dispatches.end());
  plan_.kernels = kernels_;
  plan_.dispatches = dispatches_;
  plan_.slot_widths = p.slot_widths;
  plan_.packs = p.packs;
  plan_.windows = p.windows;
  plan_.classes = p.classes;
  plan_.parts = p.parts;
  plan_.carried = p.carried;
}

// The dot layout's input: before each matmul of block weights, a quantize
// dispatch writes its x (normalized under a folded norm) in 8-bit blocks to
// one slot that the matmul reads as xq; it runs only in passes whose matmul
// tile is the dot layout (Form::Quantized). Consecutive matmuls of one input
// (the row ranges of a split matrix, projections left out of a pack) share
// one. The expert down projection's input holds top_k rows per token row
// (its slots): that quantize's rows are the slots.
void add_quantize(Plan& p) {
  std::vector<Dispatch> out;
  const int32_t slot = static_cast<int32_t>(p.slot_widths.size());
  int64_t width = 0;
  size_t encode = p.scalars.encode_dispatches;
  std::optional<KernelKey> last;  // the quantize the dispatch before read through xq
  plan::Binding last_x;
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    Dispatch& d = p.dispatches[i];
    const KernelKey& m = p.kernel(d);
    if (m.family != Family::Matmul || !is_block_dtype(m.dtype)) {
      last.reset();
      out.push_back(std::move(d));
      continue;
    }
    const bool slots = m.epilogue.experts == 2;
    const KernelKey q{.family = Family::Quantize,
                      .width = m.width,
                      .epilogue = Epilogue{.norm = m.epilogue.norm, .experts = static_cast<uint8_t>(slots ? 2 : 0)}};
    const plan::Binding x = d.binding("x");
    if (!(last && *last == q && last_x == x)) {
      Dispatch qd;
      qd.kernel = kernel_index(p, q);
      qd.family = q.family;
      qd.grid = plan::Grid::Heads;  // a row's blocks over a row of workgroups
      qd.groups_x = static_cast<uint32_t>(kernels::quantize_groups(m.width));
      qd.form = plan::Form::Quantized;
      qd.bind("x", x);
      qd.bind("xq", plan::activation(slot));
      qd.bind("norm_scale", d.binding("norm_scale"));
      qd.bind("norm_shift", d.binding("norm_shift"));
      qd.op = d.op;
      qd.layer = d.layer;
      qd.block = d.block;
      out.push_back(std::move(qd));
      if (i < p.scalars.encode_dispatches) ++encode;
      width = std::max(width, (slots ? d.groups_z_per_row : 1) * kernels::xq_row_words(m.width));
      last = q;
      last_x = x;
    }
    d.bind("xq", plan::activation(slot));
    out.push_back(std::move(d));
  }
  p.dispatches = std::move(out);
  p.scalars.encode_dispatches = encode;
  if (width > 0) p.slot_widths.push_back(width);
}

Plan lower(const typed::Schedule& graph, std::span<const DType> dtypes, int64_t max_part_bytes) {
  Plan p = Lowering(graph, dtypes, max_part_bytes).run();
  p.classes = device_classes(dtypes);
  const auto dot = [](const plan::DeviceClass& c) { return c.decode.variant == plan::Variant::Dot || c.batch.variant == plan::Variant::Dot; };
  if (std::any_of(p.classes.begin(), p.classes.end(), dot)) add_quantize(p);
  return p;
}

}  // namespace lathe::lower
