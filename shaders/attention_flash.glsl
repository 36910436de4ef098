// What the two flash-attention kernels of a prompt chunk share
// (attention_flash.comp, its products by multiply-adds from shared memory;
// attention_flash_coop.comp, on matrix units): a workgroup of 128
// invocations takes QROWS consecutive rows of the chunk (one sequence's
// consecutive positions) for GT query heads of one KV head, LINES = QROWS ·
// GT query lines (line = row · GT + head), and walks the keys their rows
// see in tiles of KEYS, each tile's keys and values staged in shared memory
// once for every line. A tile's scores S = Q · Kᵀ (LINES × KEYS) go
// through shared memory, where one invocation a line masks and adjusts
// them (attention.glsl), updates the line's online softmax (running max m,
// sum l) and writes P = exp(S − m) and the correction exp(m_old − m) that
// scales the line's output before P · V is added to it. Nothing grows with
// the context but the loop; the device class plans QROWS and KEYS
// (plan::Flash) for the model's head width and cache dtype.
//
// Generated constants: attention.comp's (HQ, HKV, DH, G, GT, SCALE, …).
// Specialization constants: 0 the workgroup size (128), 1 SPLITS and 2 RING
//   as attention.comp's, 3 QROWS rows a workgroup (grid y: ceil(rows /
//   QROWS)), 4 KEYS keys a tile.
// Push constants (AttentionPush), buffers: attention.comp's.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_q) readonly buffer Q { float q[]; };

layout(constant_id = 1) const uint SPLITS = 1;
layout(constant_id = 2) const uint RING = 0;
layout(constant_id = 3) const uint QROWS = 8;
layout(constant_id = 4) const uint KEYS = 16;
#include "kv.glsl"
layout(binding = BINDING_k_cache) uniform usamplerBuffer KT;  // [ring][HKV][CTPR] texels
layout(binding = BINDING_v_cache) uniform usamplerBuffer VT;
layout(std430, binding = BINDING_out) writeonly buffer O { float o[]; };
layout(std430, binding = BINDING_partials) writeonly buffer Part { float part[]; };
layout(std430, binding = BINDING_rel_bias) readonly buffer RelBias { float rel_bias[]; };

#include "attention.glsl"

const uint LINES = QROWS * GT;
const uint THREADS = gl_WorkGroupSize.x;

shared float scores[LINES * KEYS];  // scores[line · KEYS + j]: key base + j of the tile
shared float correction[LINES];     // a line's exp(m_old − m_new) of the tile
shared float sums[LINES];           // a line's l, when the last tile is done

// The workgroup's place: its KV head's first query head, its first row.
uint head0() { return gl_WorkGroupID.x * GT; }
uint first_row() { return gl_WorkGroupID.y * QROWS; }
// Line i's row of the chunk (past pc.rows, or out of the run of rows
// being taken: a line that sees no key).
uint line_row(uint i) { return first_row() + i / GT; }
uint line_head(uint i) { return head0() + i % GT; }

// The workgroup's rows are one sequence's but where an encoder pass's
// inputs meet off a workgroup's edge (an input padded to the context, not
// to a multiple of QROWS): it takes its rows a run of one sequence at a
// time, [x, y), from row `from`, the first run's first.
uvec2 segment(uint from) {
  const uint end = min(first_row() + QROWS, pc.rows), sequence = io.rows[from].sequence;
  uint to = from + 1u;
  while (to < end && io.rows[to].sequence == sequence) ++to;
  return uvec2(from, to);
}
bool segment_done(uvec2 seg) { return seg.y >= min(first_row() + QROWS, pc.rows); }
// A run's keys (attention.glsl's joint_keys).
uvec2 segment_keys(uvec2 seg) { return joint_keys(seg.x, seg.y - 1u); }
bool in_segment(uint t, uvec2 seg) { return t >= seg.x && t < seg.y; }

// Line i's query, dims 4d … 4d + 3, scaled.
vec4 query4(uint i, uint d) {
  const uint t = min(line_row(i), pc.rows - 1u);  // a padding line reads a real row; it is masked
  const uint at = pc.q_offset + t * pc.q_stride + line_head(i) * DH + 4u * d;
  return vec4(q[at], q[at + 1u], q[at + 2u], q[at + 3u]) * SCALE;
}

// The cache texel j of key `pos` of the workgroup's KV head.
int cache_texel(uint sequence, uint pos, uint j) {
  return int((cache_slot(sequence, pos) * HKV + gl_WorkGroupID.x * GT / G) * CTPR + j);
}

// The softmax state of line i, kept by invocation i (i < LINES) across the
// tiles: its running max m and sum l, its keys [range.x, range.y), its
// head and position.
struct Line {
  float m, l;
  uvec2 range;
  uint head, qpos;
};

Line start_line(uint i, uvec2 seg) {
  Line s;
  s.m = -1.0 / 0.0;
  s.l = 0.0;
  const uint t = line_row(i);
  s.range = in_segment(t, seg) ? key_range(t) : uvec2(0u);
  s.head = line_head(i);
  s.qpos = io.rows[min(t, pc.rows - 1u)].position;
  return s;
}

// Line i's update by the tile of keys base … base + KEYS − 1, whose scores
// are in scores[]: masked, adjusted, exponentiated. PUT_P(i, j, p) stores
// P; the correction goes to correction[i].
#define SOFTMAX_TILE(s, i, base, PUT_P)                                                                     \
  {                                                                                                         \
    float top = -1.0 / 0.0;                                                                                 \
    for (uint j = 0; j < KEYS; j += 4u) {                                                                   \
      const uint pos = base + j;                                                                            \
      vec4 v = vec4(scores[i * KEYS + j], scores[i * KEYS + j + 1u], scores[i * KEYS + j + 2u],             \
                    scores[i * KEYS + j + 3u]);                                                             \
      v = adjust4(v, s.head, pos, s.qpos);                                                                  \
      const uvec4 p4 = uvec4(pos, pos + 1u, pos + 2u, pos + 3u);                                            \
      const bvec4 seen = bvec4(uvec4(greaterThanEqual(p4, uvec4(s.range.x))) & uvec4(lessThan(p4, uvec4(s.range.y)))); \
      v = mix(vec4(-1.0 / 0.0), v, seen);                                                                   \
      scores[i * KEYS + j] = v.x;                                                                           \
      scores[i * KEYS + j + 1u] = v.y;                                                                      \
      scores[i * KEYS + j + 2u] = v.z;                                                                      \
      scores[i * KEYS + j + 3u] = v.w;                                                                      \
      top = max(top, max(max(v.x, v.y), max(v.z, v.w)));                                                   \
    }                                                                                                       \
    const float m_new = max(s.m, top);                                                                      \
    /* no key seen yet: nothing to weigh (exp(−inf − −inf) would be NaN) */                                 \
    const bool none = m_new == -1.0 / 0.0;                                                                  \
    const float c = none ? 1.0 : exp(s.m - m_new);                                                          \
    float added = 0.0;                                                                                      \
    for (uint j = 0; j < KEYS; ++j) {                                                                       \
      const float p = none ? 0.0 : exp(scores[i * KEYS + j] - m_new);                                       \
      PUT_P(i, j, p);                                                                                       \
      added += p;                                                                                           \
    }                                                                                                       \
    s.l = s.l * c + added;                                                                                  \
    s.m = m_new;                                                                                            \
    correction[i] = c;                                                                                      \
  }

// Output dim d of line i, value acc (unnormalized): the row's output
// acc / l (SPLITS = 1), or its key range's partial softmax.
void put_output(uint i, uint d, float acc, uvec2 seg) {
  const uint t = line_row(i), h = line_head(i);
  if (!in_segment(t, seg)) return;
  if (SPLITS == 1u) {
    o[t * (HQ * DH) + h * DH + d] = acc / sums[i];
  } else {
    part[((t * HQ + h) * SPLITS + gl_WorkGroupID.z) * (DH + 2u) + 2u + d] = acc;
  }
}

// Line i's m and l beside its partial output (SPLITS > 1; m is −inf for an
// empty range, which weighs nothing when merged), and l for put_output.
void finish_line(uint i, Line s, uvec2 seg) {
  sums[i] = s.l;
  const uint t = line_row(i);
  if (SPLITS > 1u && in_segment(t, seg)) {
    const uint at = ((t * HQ + line_head(i)) * SPLITS + gl_WorkGroupID.z) * (DH + 2u);
    part[at] = s.m;
    part[at + 1u] = s.l;
  }
}
