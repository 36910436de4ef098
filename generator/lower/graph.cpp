#include "generator/lower/graph.hpp"

#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

namespace lathe::lower {

using namespace lathe::spec;
using typed::Op;
using typed::OpKind;

std::string member_name(const TensorSpec& t) { return std::string(spec::name(t.role)) + (t.bias ? "_bias" : ""); }

namespace {

// Appends ops the way typed::Recorder does, with widths known at run time.
class Builder {
 public:
  Builder(const Spec& s, const Manifest& m) : s_(s), m_(m) {
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const TensorSpec& t = m.tensors[i];
      index_[{t.role, t.bias, t.layer, t.expert}] = static_cast<int32_t>(i);
    }
  }

  Graph take() { return std::move(g_); }

  // The manifest index of a tensor, -1 when the model has none.
  int32_t find(Role role, bool bias, int64_t layer, int64_t expert = -1) const {
    auto it = index_.find({role, bias, layer, expert});
    return it == index_.end() ? -1 : it->second;
  }
  // Expert 0's tensor of `role` in the layer, and the manifest distance to expert 1's.
  std::pair<int32_t, int32_t> experts(Role role, int64_t layer) const {
    const int32_t first = find(role, false, layer, 0);
    if (first < 0)
      throw std::logic_error(std::string("graph: the manifest has no ") + spec::name(role) + " of layer " +
                             std::to_string(layer));
    const int32_t second = find(role, false, layer, 1);
    return {first, second < 0 ? 0 : second - first};
  }
  int32_t need(Role role, int64_t layer) const {
    const int32_t i = find(role, false, layer);
    if (i < 0)
      throw std::logic_error(std::string("graph: the manifest has no ") + spec::name(role) + " tensor" +
                             (layer >= 0 ? " for layer " + std::to_string(layer) : ""));
    return i;
  }

  // A weight in math orientation: rows (outputs) × cols (inputs).
  std::pair<int64_t, int64_t> math_shape(int32_t tensor) const {
    const TensorSpec& t = m_.tensors[static_cast<size_t>(tensor)];
    if (t.shape.size() == 1) return {1, t.shape[0]};  // a one-row linear stored as a vector (GGUF's shared-expert gate)
    if (t.shape.size() == 4) return {t.shape[0], t.shape[1] * t.shape[2] * t.shape[3]};  // a patch embedding's conv
    return t.in_out ? std::pair{t.shape[1], t.shape[0]} : std::pair{t.shape[0], t.shape[1]};
  }

  std::string handle(int32_t tensor, bool lm_head = false) const {
    if (tensor < 0) return {};
    if (lm_head) return "weights.lm_head";
    const TensorSpec& t = m_.tensors[static_cast<size_t>(tensor)];
    return "weights." + member_name(t) + (t.layer >= 0 ? "[" + std::to_string(t.layer) + "]" : "");
  }

  uint32_t add(const std::string& key, Op op, int64_t width, std::array<std::string, 6> handles = {}) {
    const uint32_t id = g_.schedule.values++;
    g_.schedule.widths.push_back(width);
    op.out = id;
    push(key, op, std::move(handles));
    return id;
  }
  void push(const std::string& key, Op op, std::array<std::string, 6> handles = {}) {
    op.layer = layer;  // the layer every op of a block belongs to (attention: whose cache it reads)
    op.block = block;
    g_.schedule.ops.push_back(op);
    g_.keys.push_back(key);
    g_.handles.push_back(std::move(handles));
  }
  int32_t layer = -1;  // the block being built, -1 outside the blocks (a cache's or state's index in a hybrid)
  int32_t block = -1;  // the block being built in the stack's order, -1 outside (Op::block)

  int64_t width(uint32_t value) const { return g_.schedule.widths[value]; }
  void end_encode() { g_.schedule.encode_ops = static_cast<uint32_t>(g_.schedule.ops.size()); }

  uint32_t norm(const std::string& key, uint32_t x, Role role, int64_t layer) {
    const int32_t g = need(role, layer);
    const int32_t b = find(role, true, layer);
    const Op op{s_.norm.kind == NormKind::RMSNorm ? OpKind::RMSNorm : OpKind::LayerNorm, 0, {x},
                {g, b}, {width(x)}, s_.norm.eps};
    return add(key, op, width(x), {handle(g), handle(b)});
  }

  uint32_t matmul(const std::string& key, Role role, int64_t layer, uint32_t x) {
    const int32_t w = need(role, layer);
    const int32_t b = find(role, true, layer);
    const auto [rows, cols] = math_shape(w);
    return add(key, Op{OpKind::MatMul, 0, {x}, {w, b}, {rows, cols}}, rows, {handle(w), handle(b)});
  }

  uint32_t split(const std::string& key, uint32_t x, int64_t offset, int64_t width_) {
    return add(key, Op{OpKind::Split, 0, {x}, {-1, -1}, {offset, width_, width(x)}}, width_);
  }

 private:
  const Spec& s_;
  const Manifest& m_;
  std::map<std::tuple<Role, bool, int64_t, int64_t>, int32_t> index_;  // role, bias, layer, expert
  Graph g_;
};

// A stack's input rows: the token embedding, its positions and norm.
uint32_t stack_input(Builder& b, const Spec& s, Role positions, Role norm) {
  const Dims& d = s.dims;
  const int32_t embed = b.need(Role::Embed, -1);
  // A decoder of a splice [vision]: an image's rows take the host's features.
  const uint8_t splice = s.vision.enabled && s.vision.connection == VisionConnection::Splice ? typed::kSplice : typed::kTable;
  uint32_t x = b.add(splice ? "vision.tokens" : "embedding",
                     Op{OpKind::Embed, 0, {}, {embed, -1}, {s.embedding_rows(), d.hidden}, s.embedding.scale, -1, splice},
                     d.hidden,
                     {b.handle(embed)});
  if (s.position.kind == PositionKind::Learned) {
    const int32_t table = b.need(positions, -1);
    const int32_t types = b.find(Role::TokenTypes, false, -1);  // BERT: row 0 of it
    const auto [rows, cols] = b.math_shape(table);
    x = b.add("position.kind",
              Op{OpKind::PosEmbed, 0, {x}, {table, types}, {rows, cols}, static_cast<double>(s.position.offset)},
              d.hidden, {b.handle(table), b.handle(types)});
  }
  if (s.embedding.norm) x = b.norm("embedding.norm", x, norm, -1);
  return x;
}

// The Mamba mixer of layer `layer` (transformers' MambaMixer) on its normed
// input h: out_proj(scan(conv(in_proj(h)))). dt_proj runs inside the scan,
// on x_proj's first dt_rank columns. A Mamba-2 mixer (Mamba2Mixer): the conv
// over x, B and C of in_proj's output, the scan reading dt and the gate z
// from in_proj too, then the gated output's RMS norm per group before
// out_proj. Its ops name the layer's state (its index among the
// state-space layers).
uint32_t ssm_mixer(Builder& b, const Spec& s, uint32_t h, int64_t layer) {
  const Ssm& m = s.ssm;
  const int32_t outer = b.layer;
  b.layer = static_cast<int32_t>(m.state_index(layer));
  const uint32_t xz = b.matmul("ssm.d_inner", Role::SsmIn, layer, h);
  const int32_t taps = b.need(Role::SsmConv, layer), conv_bias = b.find(Role::SsmConv, true, layer);
  const uint32_t u = b.add("ssm.d_conv",
                           Op{OpKind::SsmConv, 0, {xz}, {taps, conv_bias}, {m.conv_channels(), m.d_conv, m.conv_offset()}},
                           m.conv_channels(), {b.handle(taps), b.handle(conv_bias)});
  const int32_t a_log = b.need(Role::SsmA, layer), d = b.need(Role::SsmD, layer);
  uint32_t y = 0;
  if (m.mamba2()) {
    const int32_t dt_bias = b.need(Role::SsmDtBias, layer);
    Op scan{OpKind::Mamba2Scan, 0, {u, xz}, {a_log, d}, {m.d_inner, m.d_state, m.heads, m.groups},
            m.dt_upper()};
    scan.extra[0] = dt_bias;
    scan.scale = m.dt_min;
    const uint32_t gated = b.add("ssm.heads", scan, m.d_inner, {b.handle(a_log), b.handle(d), b.handle(dt_bias)});
    const int32_t g = b.need(Role::SsmGateNorm, layer);
    y = b.add("ssm.groups", Op{OpKind::RMSNorm, 0, {gated}, {g, -1}, {m.d_inner, m.d_inner / m.groups}, s.norm.eps},
              m.d_inner, {b.handle(g), ""});
  } else {
    const uint32_t dbc = b.matmul("ssm.dt_rank", Role::SsmX, layer, u);
    const int32_t dt = b.need(Role::SsmDt, layer), dt_bias = b.find(Role::SsmDt, true, layer);
    Op scan{OpKind::SsmScan, 0, {u, dbc, xz}, {dt, a_log}, {m.d_inner, m.d_state, m.dt_rank}};
    scan.extra[0] = dt_bias;
    scan.extra[1] = d;
    y = b.add("ssm.d_state", scan, m.d_inner, {b.handle(dt), b.handle(a_log), b.handle(dt_bias), b.handle(d)});
  }
  const uint32_t o = b.matmul("ssm.d_inner", Role::SsmOut, layer, y);
  b.layer = outer;
  return o;
}

// A Mamba or Mamba-2 block (MambaBlock, Mamba2Block): x + mixer(N(x)). The
// norm folds into in_proj.
uint32_t ssm_block(Builder& b, const Spec& s, uint32_t x, int64_t layer) {
  b.layer = static_cast<int32_t>(s.ssm.state_index(layer));
  const uint32_t h = b.norm("norm.kind", x, Role::SsmNorm, layer);
  const uint32_t o = ssm_mixer(b, s, h, layer);
  x = b.add("dims.hidden", Op{OpKind::Add, 0, {x, o}, {-1, -1}, {s.dims.hidden}}, s.dims.hidden);
  b.layer = -1;
  return x;
}

// A block's self-attention of its normed input h: q, k, v, their norms and
// rotation, attention over the layer's cache (T5's bias table `rel` when ≥ 0).

uint32_t attention(Builder& b, const Spec& s, uint32_t h, int64_t layer, int32_t rel, uint8_t variant) {
  const Dims& d = s.dims;
  const int64_t q_width = d.heads * d.head_dim, kv_width = d.kv_heads * d.head_dim;
  uint32_t q, k, v;
  if (s.weights.fused_qkv) {
    const uint32_t qkv = b.matmul("weights.fused_qkv", Role::Qkv, layer, h);
    q = b.split("dims.heads", qkv, 0, q_width);
    k = b.split("dims.kv_heads", qkv, q_width, kv_width);
    v = b.split("dims.kv_heads", qkv, q_width + kv_width, kv_width);
  } else {
    q = b.matmul("dims.heads", Role::Q, layer, h);
    k = b.matmul("dims.kv_heads", Role::K, layer, h);
    v = b.matmul("dims.kv_heads", Role::V, layer, h);
  }
  if (s.attention.qk_norm != QKNorm::None) {
    const int32_t qn = b.need(Role::QNorm, layer), kn = b.need(Role::KNorm, layer);
    const int64_t group = s.attention.qk_norm == QKNorm::PerHead ? d.head_dim : q_width;
    b.push("attention.qk_norm",
           Op{OpKind::QKNorm, 0, {q, k}, {qn, kn}, {d.heads, d.kv_heads, d.head_dim, group}, s.norm.eps},
           {b.handle(qn), b.handle(kn)});
  }
  // A windowed layer's attention carries its window (0: it sees every key).
  const bool windowed = s.attention.windowed(layer);
  if (s.position.kind == PositionKind::Rope) {
    // Windowed layers may rotate by a base of their own (Gemma 3), unscaled.
    const bool local = windowed && s.position.local_theta.has_value();
    b.push(local ? "position.local_theta" : "position",
           Op{OpKind::Rope, 0, {q, k}, {-1, -1}, {d.heads, d.kv_heads, d.head_dim, s.position.rotary_dim},
              local ? *s.position.local_theta : s.position.theta, -1, static_cast<uint8_t>(s.position.pairing),
              local});
  }
  const uint32_t a = b.add(windowed ? "attention.sliding_window" : rel >= 0 ? "position.kind" : "dims.kv_heads",
                           Op{OpKind::Attention, 0, {q, k, v}, {rel, -1},
                              {d.heads, d.kv_heads, d.head_dim, windowed ? s.attention.sliding_window : 0},
                              s.attention.effective_scale(d.head_dim), static_cast<int32_t>(layer), variant},
                           q_width, {b.handle(rel), ""});
  return a;
}

// Multi-head latent attention (DeepseekV2Attention), absorbed: q (from
// q_proj, or q_a_proj, its norm and q_b_proj) into the latent's space per
// head; kv_a_proj_with_mqa's [latent | rotary key] normed in its latent part,
// rotated in its rotary part, appended to the cache as one head that is
// both the key and the value; each head's output leaves the latent by W_UV.
uint32_t mla_attention(Builder& b, const Spec& s, uint32_t h, int64_t layer) {
  const Mla& m = s.mla;
  const Dims& d = s.dims;
  uint32_t q;
  if (m.q_lora_rank > 0) {
    const uint32_t qa = b.matmul("mla.q_lora_rank", Role::QA, layer, h);
    q = b.matmul("mla.q_lora_rank", Role::QB, layer, b.norm("mla.q_lora_rank", qa, Role::QANorm, layer));
  } else {
    q = b.matmul("dims.heads", Role::Q, layer, h);
  }
  const uint32_t kv = b.matmul("mla.kv_lora_rank", Role::KvA, layer, h);
  // kv_b_proj whole, or split as llama.cpp's files hold it (k_b, v_b).
  const int32_t k_b = b.need(m.split_kv_b ? Role::KB : Role::KvB, layer);
  const int32_t v_b = m.split_kv_b ? b.need(Role::VB, layer) : k_b, kv_norm = b.need(Role::KvANorm, layer);
  const Op query{OpKind::MlaQuery, 0, {q}, {k_b, -1},
                 {d.heads, m.qk_nope_head_dim, m.qk_rope_head_dim, m.kv_lora_rank, m.v_head_dim}, 0, -1,
                 m.split_kv_b ? typed::kSplitKvB : typed::kJointKvB};
  const uint32_t qm = b.add("mla.kv_lora_rank", query, d.heads * d.head_dim, {b.handle(k_b), ""});
  b.push("mla.kv_lora_rank",
         Op{OpKind::QKNorm, 0, {qm, kv}, {-1, kv_norm}, {d.heads, 1, d.head_dim, m.kv_lora_rank}, s.norm.eps, -1,
            typed::kLatentNorm},
         {"", b.handle(kv_norm)});
  b.push("mla.qk_rope_head_dim",
         Op{OpKind::Rope, 0, {qm, kv}, {-1, -1}, {d.heads, 1, d.head_dim, m.qk_rope_head_dim, m.kv_lora_rank},
            s.position.theta, -1, static_cast<uint8_t>(s.position.pairing)});
  const uint32_t a = b.add("mla", Op{OpKind::Attention, 0, {qm, kv, kv}, {-1, -1}, {d.heads, 1, d.head_dim, 0},
                                     s.attention.effective_scale(d.head_dim), static_cast<int32_t>(layer)},
                           d.heads * d.head_dim);
  // A prompt chunk may take the expanded form instead (plan::Form): each
  // head's query q against keys expanded from the cache, the rotary part
  // read from qm, rotated; the values op reads both, so they live to it.
  Op values = query;  // the same widths
  values.kind = OpKind::MlaValues;
  values.in[0] = a;
  values.in[1] = q;
  values.in[2] = qm;
  values.tensor[0] = v_b;
  return b.add("mla.v_head_dim", values, d.heads * m.v_head_dim, {b.handle(v_b), ""});
}

// A dense MLP of layer `layer` on its normed input m: the down projection
// of φ(gate) ⊙ up (fused gate_up, or separate), or of φ(up).
uint32_t dense_mlp(Builder& b, const Spec& s, uint32_t m, int64_t layer) {
  const Dims& d = s.dims;
  const uint8_t act = static_cast<uint8_t>(s.mlp.activation);
  uint32_t f;
  if (s.mlp.gated && s.mlp.fused_gate_up != FusedGateUp::None) {
    const bool gate_first = s.mlp.fused_gate_up == FusedGateUp::GateUp;
    const uint32_t gu = b.matmul("mlp.fused_gate_up", Role::GateUp, layer, m);
    const uint32_t g = b.split("mlp.fused_gate_up", gu, gate_first ? 0 : d.intermediate, d.intermediate);
    const uint32_t u = b.split("mlp.fused_gate_up", gu, gate_first ? d.intermediate : 0, d.intermediate);
    f = b.add("mlp.activation", Op{OpKind::GatedAct, 0, {g, u}, {-1, -1}, {d.intermediate}, 0, -1, act}, d.intermediate);
  } else if (s.mlp.gated) {
    const uint32_t g = b.matmul("dims.intermediate", Role::Gate, layer, m);
    const uint32_t u = b.matmul("dims.intermediate", Role::Up, layer, m);
    f = b.add("mlp.activation", Op{OpKind::GatedAct, 0, {g, u}, {-1, -1}, {d.intermediate}, 0, -1, act}, d.intermediate);
  } else {
    const uint32_t u = b.matmul("dims.intermediate", Role::Up, layer, m);
    f = b.add("mlp.activation", Op{OpKind::Act, 0, {u}, {-1, -1}, {d.intermediate}, 0, -1, act}, d.intermediate);
  }
  return b.matmul("dims.hidden", Role::Down, layer, f);
}

// One block of layer `layer` (an encoder–decoder's numbering: encoder
// layers first) on the stream x: its attention (causal or bidirectional,
// with T5's bias table `rel` when ≥ 0), an encoder–decoder decoder layer's
// cross-attention over the cache `cross` (≥ 0), and its MLP.
uint32_t block(Builder& b, const Spec& s, uint32_t x, int64_t layer, int32_t rel, uint8_t variant, int32_t cross) {
  const Dims& d = s.dims;
  const int64_t q_width = d.heads * d.head_dim;
  // Where the norms of a block sit: before each branch (pre), before and
  // after (sandwich: x + N2(F(N1(x)))), after only (branch_output:
  // x + N(F(x))), after the residual add (post: N(x + F(x))), or before two
  // branches summed in parallel (parallel: x + Attn(N1(x)) + MLP(N2(x)),
  // N2 = N1 when the norm is shared). A norm after a branch is applied
  // before its residual add.
  const NormPlacement placement = s.norm.placement;
  const bool parallel = placement == NormPlacement::Parallel;
  const bool norm_in = placement == NormPlacement::Pre || placement == NormPlacement::Sandwich || parallel;
  const bool norm_out = placement == NormPlacement::Sandwich || placement == NormPlacement::BranchOutput;
  const bool norm_after = placement == NormPlacement::Post;
  // The ops of an attention layer name its KV cache (a hybrid numbers its
  // attention layers' caches in order).
  b.layer = static_cast<int32_t>(s.cache_index(layer));
  {
    // A hybrid's state-space layer: its Mamba mixer in attention's place.
    const bool ssm = s.ssm.layer(layer);
    const bool attn_norm = norm_in && (layer > 0 || s.norm.first_attn_norm);  // ModernBERT: none in layer 0
    const uint32_t h = attn_norm ? b.norm("norm.kind", x, ssm ? Role::SsmNorm : Role::AttnNorm, layer) : x;
    uint32_t a = 0;
    if (!ssm) a = s.mla.enabled ? mla_attention(b, s, h, layer) : attention(b, s, h, layer, rel, variant);
    // Parallel blocks read the block's input in both branches: the MLP's
    // norm of it is taken before the attention's residual add overwrites it.
    uint32_t m = x;
    if (parallel) m = s.norm.parallel_shared ? h : b.norm("norm.parallel_shared", x, Role::MlpNorm, layer);
    uint32_t o = ssm ? ssm_mixer(b, s, h, layer) : b.matmul("dims.hidden", Role::O, layer, a);
    if (norm_out) o = b.norm("norm.placement", o, Role::AttnPostNorm, layer);
    // A gated branch (a tiled tower's global layers): x + tanh(g) · o.
    const int32_t attn_gate = b.find(Role::AttnGate, false, layer);
    x = b.add("dims.hidden", Op{OpKind::Add, 0, {x, o}, {attn_gate, -1}, {d.hidden}}, d.hidden, {b.handle(attn_gate)});
    if (norm_after) x = b.norm("norm.placement", x, Role::AttnNorm, layer);
    if (cross >= 0) {
      // Cross-attention: queries of the stream, keys and values of the
      // encoder's output (the cache its encode pass filled).
      const uint32_t ch = norm_in ? b.norm("norm.kind", x, Role::CrossNorm, layer) : x;
      const uint32_t cq = b.matmul("model.stack", Role::CrossQ, layer, ch);
      b.layer = cross;  // whose cache it reads
      const uint32_t ca = b.add("model.stack",
                                Op{OpKind::Attention, 0, {cq}, {-1, -1}, {d.heads, d.kv_heads, d.head_dim, 0},
                                   s.attention.effective_scale(d.head_dim), cross, typed::kCross},
                                q_width);
      b.layer = static_cast<int32_t>(layer);
      const uint32_t co = b.matmul("model.stack", Role::CrossO, layer, ca);
      x = b.add("dims.hidden", Op{OpKind::Add, 0, {x, co}, {-1, -1}, {d.hidden}}, d.hidden);
      if (norm_after) x = b.norm("norm.placement", x, Role::CrossNorm, layer);
    }
    if (!parallel) m = norm_in ? b.norm("norm.placement", x, Role::MlpNorm, layer) : x;
    if (!s.moe.sparse(layer)) {
      uint32_t down = dense_mlp(b, s, m, layer);
      if (norm_out) down = b.norm("norm.placement", down, Role::MlpPostNorm, layer);
      const int32_t mlp_gate = b.find(Role::MlpGate, false, layer);
      x = b.add("dims.hidden", Op{OpKind::Add, 0, {x, down}, {mlp_gate, -1}, {d.hidden}}, d.hidden, {b.handle(mlp_gate)});
      if (norm_after) x = b.norm("norm.placement", x, Role::MlpNorm, layer);
      b.layer = -1;
      return x;
    }
    const uint8_t act = static_cast<uint8_t>(s.mlp.activation);
    {
      // A mixture of experts: the router's logits, their routing (top k per
      // token), the chosen experts' gated projections and down projections,
      // and their weighted sum added to the stream.
      const Moe& moe = s.moe;
      const int64_t E = moe.experts, K = moe.top_k, I = moe.expert_intermediate;
      const std::string l = "[" + std::to_string(layer) + "]";
      const uint32_t logits = b.matmul("moe.experts", Role::Router, layer, m);
      // Qwen2-MoE's shared-expert gate reads the same x: next to the router,
      // so that one matmul makes both.
      const uint32_t shared_gate =
          moe.shared_expert_gate ? b.matmul("moe.shared_expert_gate", Role::SharedExpertGate, layer, m) : 0;
      // DeepSeek-V3's correction bias, added to the scores for choosing only.
      const int32_t bias = b.find(Role::RouterBias, false, layer);
      const uint32_t routing = b.add("moe.top_k", Op{OpKind::Route, 0, {logits}, {bias, -1}, {E, K}, 0, -1,
                                                     static_cast<uint8_t>(moe.norm_topk_prob)},
                                     K + 3 * E + 1, {b.handle(bias), ""});
      const auto [gate, stride] = b.experts(Role::ExpertGate, layer);
      const auto [up, up_stride] = b.experts(Role::ExpertUp, layer);
      const auto [down, down_stride] = b.experts(Role::ExpertDown, layer);
      if (up_stride != stride || down_stride != stride)
        throw std::logic_error("graph: the experts' gate, up and down tensors are listed at different strides");
      const uint32_t hidden_slots = b.add("moe.expert_intermediate",
                               Op{OpKind::Experts, 0, {m, routing}, {gate, up}, {E, I, d.hidden, K},
                                  static_cast<double>(stride), -1, act},
                               K * I, {"weights.expert_gate" + l, "weights.expert_up" + l});
      const uint32_t y = b.add("moe.experts",
                               Op{OpKind::Experts, 0, {hidden_slots, routing}, {down, -1}, {E, d.hidden, I, K},
                                  static_cast<double>(stride)},
                               K * d.hidden, {"weights.expert_down" + l, ""});
      // A shared expert (Qwen2-MoE) is a dense gated MLP that every token
      // passes through, added by the combine (scaled by sigmoid of its gate).
      int64_t shared = 0;
      uint32_t shared_out = 0;
      if (moe.shared_experts > 0) {
        const uint32_t g = b.matmul("moe.shared_intermediate", Role::SharedGate, layer, m);
        const uint32_t u = b.matmul("moe.shared_intermediate", Role::SharedUp, layer, m);
        const uint32_t f = b.add("mlp.activation", Op{OpKind::GatedAct, 0, {g, u}, {-1, -1}, {b.width(g)}, 0, -1, act},
                                 b.width(g));
        shared_out = b.matmul("moe.shared_experts", Role::SharedDown, layer, f);
        shared = moe.shared_expert_gate ? 2 : 1;
      }
      x = b.add("moe.experts",
                Op{OpKind::MoeCombine, 0, {x, y, routing, shared_out, shared_gate}, {-1, -1}, {E, K, d.hidden, shared}},
                d.hidden);
      b.layer = -1;
      return x;
    }
  }
}

// A decoder layer that attends to an image instead of its own tokens
// (Llama 3.2 Vision's MllamaCrossAttentionDecoderLayer): its normed stream's
// query, each head RMS-normed, over the image's keys in the layer's cache
// (the image pass filled it), added through tanh(attn_gate); then its MLP,
// whose input is zeros on a row that sees no image, added through
// tanh(mlp_gate).
uint32_t image_cross_block(Builder& b, const Spec& s, uint32_t x, int64_t layer) {
  const Dims& d = s.dims;
  const int64_t q_width = d.heads * d.head_dim;
  b.layer = static_cast<int32_t>(layer);
  const uint32_t h = b.norm("norm.kind", x, Role::AttnNorm, layer);
  uint32_t q = b.matmul("vision.cross_layers", Role::CrossQ, layer, h);
  const int32_t q_norm = b.need(Role::CrossQNorm, layer);
  q = b.add("vision.cross_layers",
            Op{OpKind::RMSNorm, 0, {q}, {q_norm, -1}, {q_width, d.head_dim}, s.norm.eps, -1, typed::kHeadScale}, q_width,
            {b.handle(q_norm)});
  const uint32_t a = b.add("vision.cross_layers",
                           Op{OpKind::Attention, 0, {q}, {-1, -1}, {d.heads, d.kv_heads, d.head_dim, 0, s.vision.tile_keys()},
                              s.attention.effective_scale(d.head_dim), static_cast<int32_t>(layer), typed::kImageCross},
                           q_width);
  const uint32_t o = b.matmul("vision.cross_layers", Role::CrossO, layer, a);
  const int32_t attn_gate = b.need(Role::AttnGate, layer), mlp_gate = b.need(Role::MlpGate, layer);
  x = b.add("dims.hidden", Op{OpKind::Add, 0, {x, o}, {attn_gate, -1}, {d.hidden}}, d.hidden, {b.handle(attn_gate)});
  const int32_t mlp_norm = b.need(Role::MlpNorm, layer);
  const uint32_t m = b.add("vision.cross_layers",
                           Op{OpKind::RMSNorm, 0, {x}, {mlp_norm, -1}, {d.hidden}, s.norm.eps, -1, typed::kImageRows},
                           d.hidden, {b.handle(mlp_norm)});
  const uint32_t down = dense_mlp(b, s, m, layer);
  x = b.add("dims.hidden", Op{OpKind::Add, 0, {x, down}, {mlp_gate, -1}, {d.hidden}}, d.hidden, {b.handle(mlp_gate)});
  b.layer = -1;
  return x;
}

}  // namespace

Graph build_graph(const Spec& s, const Manifest& manifest) {
  const Dims& d = s.dims;
  Builder b(s, manifest);
  const bool relative = s.position.kind == PositionKind::Relative;
  // An encoder–decoder's encode pass: the encoder over the source rows,
  // then each decoder layer's cross-attention keys and values of its output.
  const int64_t encoder_layers = s.encoder_layers();
  if (s.encoder_decoder()) {
    uint32_t x = stack_input(b, s, Role::EncoderPosEmbed, Role::EncoderEmbedNorm);
    const int32_t rel = relative ? b.need(Role::EncoderRelBias, -1) : -1;
    for (int64_t layer = 0; layer < encoder_layers; ++layer)
      x = block(b, s, x, layer, rel, typed::kBidirectional, -1);
    if (s.norm.final_norm) x = b.norm("norm.final", x, Role::EncoderFinalNorm, -1);
    for (int64_t l = 0; l < d.layers; ++l) {
      const int64_t layer = encoder_layers + l;
      b.layer = static_cast<int32_t>(layer);
      const uint32_t k = b.matmul("model.stack", Role::CrossK, layer, x);
      const uint32_t v = b.matmul("model.stack", Role::CrossV, layer, x);
      b.layer = static_cast<int32_t>(s.cross_cache(l));  // the cache it fills
      b.push("model.stack", Op{OpKind::CrossKv, 0, {k, v}, {-1, -1}, {d.kv_heads, d.head_dim}, 0,
                               static_cast<int32_t>(s.cross_cache(l))});
    }
    b.layer = -1;
    b.end_encode();
  }
  // An image cross-attention decoder's image pass (Llama 3.2 Vision): the
  // projected features' rows (the host's, the decoder's width) into each
  // cross-attention layer's cache, k's heads normed, and v.
  const bool image_cross = s.vision.enabled && s.vision.connection == VisionConnection::CrossAttention;
  if (image_cross) {
    const uint32_t f = b.add("vision.cross_layers", Op{OpKind::Input, 0, {}, {-1, -1}, {d.hidden}}, d.hidden);
    for (int64_t l : s.vision.cross_layers) {
      b.layer = static_cast<int32_t>(l);
      const uint32_t k = b.matmul("vision.cross_layers", Role::CrossK, l, f);
      const uint32_t v = b.matmul("vision.cross_layers", Role::CrossV, l, f);
      const int32_t k_norm = b.need(Role::CrossKNorm, l);
      b.push("vision.cross_layers",
             Op{OpKind::CrossKv, 0, {k, v}, {k_norm, -1}, {d.kv_heads, d.head_dim, s.vision.tile_keys()}, 0, static_cast<int32_t>(l)},
             {b.handle(k_norm)});
    }
    b.layer = -1;
    b.end_encode();
  }
  uint32_t x = stack_input(b, s, Role::PosEmbed, Role::EmbedNorm);
  // T5: the relative position bias table, added to every layer's scores.
  const int32_t rel = relative ? b.need(Role::RelBias, -1) : -1;
  for (int64_t layer = encoder_layers; layer < s.blocks(); ++layer) {
    b.block = static_cast<int32_t>(layer - encoder_layers);
    if (image_cross && s.vision.cross_layer(layer)) {
      x = image_cross_block(b, s, x, layer);
      continue;
    }
    x = s.ssm.layer(layer) && !s.ssm.hybrid() ? ssm_block(b, s, x, layer)
                           : block(b, s, x, layer, rel,
                                   s.encoder()                                         ? typed::kBidirectional
                                   : s.vision.enabled && s.vision.image_bidirectional ? typed::kImageSpans
                                                                                       : typed::kCausal,
              s.encoder_decoder() ? static_cast<int32_t>(s.cross_cache(layer - encoder_layers)) : -1);
  }
  b.block = -1;
  if (s.norm.final_norm) x = b.norm("norm.final", x, Role::FinalNorm, -1);
  if (s.encoder()) {
    b.add("model.stack", Op{OpKind::Output, 0, {x}, {-1, -1}, {d.hidden}}, d.hidden);
    return b.take();
  }
  const int32_t embed = b.need(Role::Embed, -1);
  const int32_t head = s.embedding.tied ? embed : b.need(Role::LmHead, -1);
  int32_t head_bias = b.find(Role::LmHead, true, -1);  // Phi-2
  if (head_bias < 0) head_bias = b.find(Role::LogitsBias, false, -1);  // BART's final_logits_bias
  Op logits{OpKind::Logits, 0, {x}, {head, head_bias}, {d.vocab, d.hidden}, s.output.softcap};
  logits.scale = s.output.scale;
  b.add(s.output.softcap > 0 ? "output.softcap" : s.output.scale != 1.0 ? "output.scale" : "embedding.tied", logits,
        d.vocab, {b.handle(head, true), b.handle(head_bias)});
  return b.take();
}

Graph build_tower_graph(const Spec& s, const Manifest& manifest) {
  const Vision& v = s.vision;
  const Spec t = vision_tower(s);
  const auto refuse = [](const std::string& why) { throw TowerError(why); };
  if (!v.enabled) refuse("the spec has no [vision]");
  if (v.projector.kind == ProjectorKind::MergeMlp && v.projector.norm != NormKind::RMSNorm)
    refuse("the patch merger's norm is an RMS norm (Mistral3RMSNorm)");
  if (!v.extra_feature_layers.empty() && v.tiles == 0)
    refuse("extra feature layers beside the last are a tiled tower's (Llama 3.2 Vision)");
  if (v.extra_feature_layers.size() > 7) refuse("more than seven extra feature layers");
  if (v.tiles > 0 && v.layers_run() != v.dims.layers)
    refuse("a tiled tower's features are its last local layer's (feature_layer -1), with its global layers after");
  if (v.tiles > 0 && v.pre_norm && v.norm.kind != NormKind::LayerNorm)
    refuse("a tiled tower's pre-norm is a LayerNorm (MllamaVisionModel's layernorm_pre)");
  if (v.class_token && v.patch_bias)
    refuse("a class token beside a patch bias: the class row's input is zeros, which a bias would not keep");
  const int64_t unfolded = v.channels * v.patch * v.patch;
  Builder b(t, manifest);
  // The host's rows: an image's patches unfolded in the order of the
  // convolution's weight (channels, then the patch's rows and columns);
  // with a class token, row 0 is the class's, its values zeros. (The
  // lowering widens them to the weight's device rows, whole texels.)
  uint32_t x = b.add("vision.patch", Op{OpKind::Input, 0, {}, {-1, -1}, {unfolded}}, unfolded);
  x = b.matmul("vision.patch", Role::PatchEmbed, -1, x);
  // A tiled tower's pass: its tiles' rows (class, patches), then each
  // tile's padding rows (MllamaVisionModel pads a tile to a multiple of 8
  // rows); each row's token its image's aspect ratio id.
  const int64_t tile_rows = v.positions_count(), tile_pad = spec::tile_padding(tile_rows);
  const int64_t ratio_rows = v.aspect_ratios() + 1;
  if (v.tiles > 0) {
    const int64_t h = b.width(x);
    const int32_t pre = b.need(Role::PreTileEmbed, -1), pre_gate = b.need(Role::PreTileGate, -1);
    const int32_t cls = b.need(Role::ClassEmbed, -1), table = b.need(Role::PosEmbed, -1);
    const int32_t tile_table = b.need(Role::TilePosEmbed, -1), pos_gate = b.need(Role::PosGate, -1);
    Op op{OpKind::TileEmbed, 0, {x}, {pre, tile_table}, {h, v.tiles, tile_rows, tile_pad, ratio_rows}, 0, -1,
          typed::kTilePre};
    op.extra[0] = cls;
    op.extra[1] = pre_gate;
    op.extra[2] = table;
    op.extra[3] = pos_gate;
    x = b.add("vision.tiles", op, h,
              {b.handle(pre), b.handle(tile_table), b.handle(cls), b.handle(pre_gate), b.handle(table), b.handle(pos_gate)});
    if (v.pre_norm) {
      // Normed, its padding rows zeros after the norm.
      const int32_t g = b.need(Role::EmbedNorm, -1), shift = b.find(Role::EmbedNorm, true, -1);
      x = b.add("vision.pre_norm", Op{OpKind::LayerNorm, 0, {x}, {g, shift}, {h, 0, v.tile_keys()}, t.norm.eps},
                h, {b.handle(g), b.handle(shift)});
    }
  }
  // Learned positions; 2D RoPE turns q and k in each layer instead (each
  // row's IO token its patch's place in the grid).
  if (v.positions == VisionPositions::Learned && v.tiles == 0) {
    const int32_t table = b.need(Role::PosEmbed, -1);
    const int32_t cls = v.class_token ? b.need(Role::ClassEmbed, -1) : -1;
    const auto [rows, cols] = b.math_shape(table);
    Op op{OpKind::PosEmbed, 0, {x}, {table, -1}, {rows, cols}};
    op.extra[0] = cls;
    x = b.add("vision.positions", op, cols, {b.handle(table), "", b.handle(cls)});
  }
  if (v.pre_norm && v.tiles == 0) x = b.norm("vision.pre_norm", x, Role::EmbedNorm, -1);
  // The layers, keeping the hidden states a tiled tower sets beside its
  // last (extra_feature_layers: 0 the layers' input).
  // Each goes into its slot of the projector's input as it is taken.
  const std::vector<int64_t>& extra = v.extra_feature_layers;
  const int64_t slots = static_cast<int64_t>(extra.size());
  std::optional<uint32_t> stack;
  const auto stack_into = [&](uint32_t value, int64_t slot) {
    const int64_t h = b.width(value);
    Op op{OpKind::FeatureStack, 0, {stack.value_or(0), value}, {-1, -1}, {h, slots, slot}, 0, -1,
          stack ? typed::kStackInto : typed::kStackFirst};
    stack = b.add("vision.extra_feature_layers", op, h * (1 + slots));
  };
  for (int64_t layer = 0;; ++layer) {
    for (int64_t k = 0; k < slots; ++k)
      if (extra[static_cast<size_t>(k)] == layer) stack_into(x, k + 1);
    if (layer == v.layers_run()) break;
    b.block = static_cast<int32_t>(layer);
    x = block(b, t, x, layer, -1, typed::kBidirectional, -1);
  }
  b.block = -1;
  if (v.post_norm) x = b.norm("vision.post_norm", x, Role::FinalNorm, -1);
  if (v.tiles > 0) {
    // The tile embedding after the local layers, then the global layers
    // (numbered after the local ones, gated).
    const int64_t h = b.width(x);
    const int32_t post = b.need(Role::PostTileEmbed, -1), post_gate = b.need(Role::PostTileGate, -1);
    x = b.add("vision.tiles",
              Op{OpKind::TileEmbed, 0, {x}, {post, post_gate}, {h, v.tiles, tile_rows, tile_pad, ratio_rows}, 0, -1,
                 typed::kTilePost},
              h, {b.handle(post), b.handle(post_gate)});
    for (int64_t g = 0; g < v.global_layers; ++g) {
      const int64_t layer = v.dims.layers + g;
      b.block = static_cast<int32_t>(layer);
      x = block(b, t, x, layer, -1, typed::kBidirectional, -1);
    }
    b.block = -1;
  }
  if (stack) {
    stack_into(x, 0);
    x = *stack;
  }
  if (v.projector.kind == ProjectorKind::Linear) {
    x = b.matmul("vision.projector", Role::ProjIn, -1, x);
    b.add("vision.projector", Op{OpKind::Output, 0, {x}, {-1, -1}, {s.dims.hidden}}, s.dims.hidden);
    return b.take();
  }
  if (v.projector.kind == ProjectorKind::Pooled) {
    // Gemma 3's: the grid's mean in square blocks, normed, into the
    // decoder's width ([in, out], held transposed). The pooled rows come
    // first; the rows after them are zeros the projection passes through.
    const Projector& j = v.projector;
    const int32_t g = b.need(Role::ProjNorm, -1), shift = b.find(Role::ProjNorm, true, -1);
    const bool layer_norm = j.norm == NormKind::LayerNorm;
    const uint8_t variant = (layer_norm ? typed::kPoolLayerNorm : 0) | (j.norm_unit_offset ? typed::kPoolUnitOffset : 0);
    const int64_t width = b.width(x);
    x = b.add("vision.projector.tokens",
              Op{OpKind::PoolNorm, 0, {x}, {g, layer_norm ? shift : -1}, {width, v.grid(), v.grid() / j.pooled_side()},
                 j.eps, -1, variant},
              width, {b.handle(g), b.handle(layer_norm ? shift : -1)});
    x = b.matmul("vision.projector", Role::ProjIn, -1, x);
    b.add("vision.projector", Op{OpKind::Output, 0, {x}, {-1, -1}, {s.dims.hidden}}, s.dims.hidden);
    return b.take();
  }
  if (v.projector.kind == ProjectorKind::MergeMlp) {
    // Mistral 3's patch merger: each block of merge² rows (the host orders
    // an image's patches so), normed, side by side; through merging_layer.
    const int32_t g = b.need(Role::ProjNorm, -1);
    const int64_t width = b.width(x), merged = v.projector.merge * v.projector.merge;
    x = b.add("vision.projector.merge",
              Op{OpKind::MergeNorm, 0, {x}, {g, -1}, {width, merged}, v.projector.eps}, width * merged, {b.handle(g)});
    x = b.matmul("vision.projector.merge", Role::PatchMerge, -1, x);
  }
  // The projector: linear – φ – linear into the decoder's width.
  x = b.matmul("vision.projector", Role::ProjIn, -1, x);
  const int64_t inner = b.width(x);
  x = b.add("vision.projector.activation",
            Op{OpKind::Act, 0, {x}, {-1, -1}, {inner}, 0, -1, static_cast<uint8_t>(v.projector.activation)}, inner);
  x = b.matmul("vision.projector", Role::ProjOut, -1, x);
  b.add("vision.projector", Op{OpKind::Output, 0, {x}, {-1, -1}, {s.dims.hidden}}, s.dims.hidden);
  return b.take();
}

}  // namespace lathe::lower
