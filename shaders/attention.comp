// Causal attention of one query row over the KV cache: one subgroup-sized
// workgroup per (KV head, row) computes the G = HQ / HKV query heads that
// share the KV head (GT of them at a time where G > 8: a workgroup per GT),
// so each cached key and value is read once for all of them. Lanes split the head's dims in 16-byte texels of the cache (read
// through texel views, kv.glsl); keys go four at a time, each
// group costing one subgroupAdd of a vec4 per head for the scores and one
// online-softmax update (running max m, sum l) of the lane's slice of the
// output: nothing grows with the context but the loop.
//
// QROWS > 1 (a GPU's prompt chunk): a workgroup of QROWS subgroups takes
// QROWS consecutive rows of the chunk (one sequence's consecutive
// positions), a subgroup a row as above, and stages the keys and values of
// their joint range in shared memory BC keys at a time, so each cached key
// is read from memory once per QROWS rows, not once per row.
//
// Generated constants:
//   HQ, HKV, DH   query heads, KV heads, head width; query head h reads KV head h / G
//   G             HQ / HKV
//   GT            query heads a workgroup (a divisor of G, at most 8): the workgroups of a KV
//                 head take its G heads GT at a time (grid x: HQ / GT), so that latent
//                 attention's one cached head (G = all heads) keeps its state in registers
//   SCALE         score scale (1/sqrt(DH) unless the spec says otherwise)
//   SOFTCAPPED    1: a scaled score s becomes c · tanh(s / c), c = SOFTCAP (Gemma 2)
//   WINDOW        0: every earlier key; W: the query at position i sees keys j with 0 ≤ i − j < W
//   BIDIRECTIONAL 1: a row sees every key of its input, 0 … extent − 1 (an encoder; the whole
//                 input is in the cache before attention reads it: one pass, never chunked);
//                 with a WINDOW, the keys j with |i − j| ≤ WINDOW
//   CROSS         1 (with BIDIRECTIONAL): cross-attention of a decoder row over the encoder's output
//                 in the cache: the keys 0 … extent − 1, extent its sequence's source length
//   CROSS_IMAGES  1 (with CROSS): over an image's keys in the cache (Llama 3.2 Vision): the row's
//                 extent says which, [first, end) (common.glsl's IMAGE_KEY_BITS)
//   IMAGE_SPANS   1: causal, but a spliced row (an image's; its token the flag and its image's last
//                 position) sees the keys of its whole image too, the IMAGE_ROWS up to that last
//                 one, within a WINDOW or not (Gemma 3: the masks OR-ed); a chunk holds whole
//                 images (the runtime cuts none)
//   ALIBI         1: SLOPES[h] · (j − i) is added to head h's scaled score of key j (BLOOM, MPT;
//                 the same softmax as HF's slope · j: the shift is one per row)
//   RELATIVE      1: T5's bias rel_bias[REL_BUCKET[clamp(j − i, ±REL_MAX) + REL_MAX]][h] is added
//                 to head h's score of key j (the generator's bucket table)
//   CACHE_F16     cache dtype (kv.glsl)
// Specialization constants: 0 the workgroup size (the subgroup size × QROWS); 1 SPLITS: the
//   keys of a row are cut into SPLITS ranges, one workgroup each (grid z), so
//   that a long cache keeps many workgroups busy in decode; with SPLITS > 1
//   each writes its partial softmax (m, l, unnormalized output) to `part` and
//   attention_combine.comp merges them; 2 RING: the positions the layer's
//   cache holds (kv.glsl), position p at slot p mod RING; 3 QROWS: rows a
//   workgroup (grid y: ceil(rows / QROWS)).
// Push constants (AttentionPush): rows, q_offset, q_stride (k/v unused here).
// Buffers: io; q [rows][…] f32; kc, vc the caches; o [rows][HQ·DH] f32;
//          part [rows][HQ][SPLITS][DH + 2] f32; rel_bias [buckets][HQ] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_q) readonly buffer Q { float q[]; };

layout(constant_id = 1) const uint SPLITS = 1;
layout(constant_id = 2) const uint RING = 0;
layout(constant_id = 3) const uint QROWS = 1;
#include "kv.glsl"
layout(binding = BINDING_k_cache) uniform usamplerBuffer KT;  // [ring][HKV][CTPR] texels
layout(binding = BINDING_v_cache) uniform usamplerBuffer VT;
layout(std430, binding = BINDING_out) writeonly buffer O { float o[]; };
layout(std430, binding = BINDING_partials) writeonly buffer Part { float part[]; };
layout(std430, binding = BINDING_rel_bias) readonly buffer RelBias { float rel_bias[]; };

const uint LANES = gl_WorkGroupSize.x / QROWS;
const uint TPL = (CTPR + LANES - 1) / LANES;  // cache texels per lane: lane l owns texels l, l + LANES, …
const uint W = TPL * CVPT;                     // dims per lane
// Keys a staged block (QROWS > 1): 256 texels of keys and as many of values, 8 KiB.
const uint BC = CTPR >= 256u ? 1u : min(256u / CTPR, 16u);
shared uvec4 kstage[QROWS > 1u ? BC * CTPR : 1u];
shared uvec4 vstage[QROWS > 1u ? BC * CTPR : 1u];

// The lane's dims of (position, kv_head) of the K cache, or (values) the V
// cache: texel index j of each of its TPL texels.
void load(bool values, uint sequence, uint position, uint kv_head, uint lane, out float v[W]) {
  [[unroll]] for (uint i = 0; i < TPL; ++i) {
    const uint j = min(lane + i * LANES, CTPR - 1);  // lanes past the head repeat a texel; their q is 0
    const int at = int((cache_slot(sequence, position) * HKV + kv_head) * CTPR + j);
    float part[CVPT];
    unpack_cache(values ? texelFetch(VT, at) : texelFetch(KT, at), part);
    [[unroll]] for (uint e = 0; e < CVPT; ++e) v[i * CVPT + e] = part[e];
  }
}

// The same from a staged block: key `at` of it.
void load_staged(bool values, uint at, uint lane, out float v[W]) {
  [[unroll]] for (uint i = 0; i < TPL; ++i) {
    const uint j = at * CTPR + min(lane + i * LANES, CTPR - 1);
    float part[CVPT];
    unpack_cache(values ? vstage[j] : kstage[j], part);
    [[unroll]] for (uint e = 0; e < CVPT; ++e) v[i * CVPT + e] = part[e];
  }
}

bool owns(uint lane, uint d) { return lane + (d / CVPT) * LANES < CTPR; }  // dim slot d of the lane is in the head

#include "attention.glsl"

// Every loop over heads and dims is unrolled so that these stay in registers.
#define STATE float qv[GT * W], acc[GT * W], m[GT], l[GT]
// The online-softmax update of every head by 4 keys at pos … pos + 3, and by 1.
#define UPDATE4(pos, k0, k1, k2, k3, v0, v1, v2, v3)                                                                 \
  [[unroll]] for (uint g = 0; g < GT; ++g) {                                                                     \
    vec4 partial = vec4(0.0);                                                                                    \
    [[unroll]] for (uint d = 0; d < W; ++d) partial += qv[g * W + d] * vec4(k0[d], k1[d], k2[d], k3[d]);         \
    vec4 score = subgroupAdd(partial);                                                                           \
    score = adjust4(score, head0 + g, pos, qpos);                                                                \
    const float m_new = max(m[g], max(max(score.x, score.y), max(score.z, score.w)));                            \
    const float correction = exp(m[g] - m_new);                                                                  \
    const vec4 weight = exp(score - m_new);                                                                      \
    l[g] = l[g] * correction + (weight.x + weight.y) + (weight.z + weight.w);                                     \
    [[unroll]] for (uint d = 0; d < W; ++d)                                                                      \
      acc[g * W + d] = acc[g * W + d] * correction + dot(weight, vec4(v0[d], v1[d], v2[d], v3[d]));              \
    m[g] = m_new;                                                                                                \
  }
#define UPDATE1(pos, k0, v0)                                                                                     \
  [[unroll]] for (uint g = 0; g < GT; ++g) {                                                                     \
    float partial = 0.0;                                                                                         \
    [[unroll]] for (uint d = 0; d < W; ++d) partial += qv[g * W + d] * k0[d];                                    \
    const float score = adjust4(vec4(subgroupAdd(partial)), head0 + g, pos, qpos).x;                           \
    const float m_new = max(m[g], score);                                                                        \
    const float correction = exp(m[g] - m_new), weight = exp(score - m_new);                                     \
    l[g] = l[g] * correction + weight;                                                                           \
    [[unroll]] for (uint d = 0; d < W; ++d) acc[g * W + d] = acc[g * W + d] * correction + weight * v0[d];       \
    m[g] = m_new;                                                                                                \
  }

// The softmax over keys [from, to), four at a time, then the last 0–3;
// LOAD(values, pos, v) reads key (false) or value (true) `pos`.
#define ATTEND(from, to, LOAD)                                                 \
  {                                                                            \
    uint pos = from;                                                           \
    for (; pos + 4 <= to; pos += 4) {                                          \
      float k0[W], k1[W], k2[W], k3[W], v0[W], v1[W], v2[W], v3[W];            \
      LOAD(false, pos, k0);                                                    \
      LOAD(false, pos + 1, k1);                                                \
      LOAD(false, pos + 2, k2);                                                \
      LOAD(false, pos + 3, k3);                                                \
      LOAD(true, pos, v0);                                                     \
      LOAD(true, pos + 1, v1);                                                 \
      LOAD(true, pos + 2, v2);                                                 \
      LOAD(true, pos + 3, v3);                                                 \
      UPDATE4(pos, k0, k1, k2, k3, v0, v1, v2, v3)                             \
    }                                                                          \
    for (; pos < to; ++pos) {                                                  \
      float k0[W], v0[W];                                                      \
      LOAD(false, pos, k0);                                                    \
      LOAD(true, pos, v0);                                                     \
      UPDATE1(pos, k0, v0)                                                     \
    }                                                                          \
  }

// Row t's queries, scaled, and an empty softmax.
#define START(t)                                                                         \
  [[unroll]] for (uint g = 0; g < GT; ++g) {                                             \
    const uint qbase = pc.q_offset + (t) * pc.q_stride + (head0 + g) * DH;               \
    [[unroll]] for (uint d = 0; d < W; ++d) {                                            \
      const uint dim = (lane + (d / CVPT) * LANES) * CVPT + d % CVPT;                    \
      qv[g * W + d] = owns(lane, d) ? q[qbase + dim] * SCALE : 0.0;                      \
      acc[g * W + d] = 0.0;                                                              \
    }                                                                                    \
    m[g] = -1.0 / 0.0;                                                                   \
    l[g] = 0.0;                                                                          \
  }

// Row t's output (SPLITS = 1), or its key range's partial softmax.
#define FINISH(t)                                                                        \
  [[unroll]] for (uint g = 0; g < GT; ++g) {                                             \
    const uint obase = (t) * (HQ * DH) + (head0 + g) * DH;                               \
    [[unroll]] for (uint d = 0; d < W; ++d) {                                            \
      const uint dim = (lane + (d / CVPT) * LANES) * CVPT + d % CVPT;                    \
      if (!owns(lane, d)) continue;                                                      \
      if (SPLITS == 1) {                                                                 \
        o[obase + dim] = acc[g * W + d] / l[g];                                          \
      } else {                                                                           \
        const uint at = (((t) * HQ + head0 + g) * SPLITS + gl_WorkGroupID.z) * (DH + 2);   \
        part[at + 2 + dim] = acc[g * W + d];                                             \
        if (dim == 0) {                                                                  \
          part[at] = m[g]; /* -inf for an empty range: weighs nothing when merged */     \
          part[at + 1] = l[g];                                                           \
        }                                                                                \
      }                                                                                  \
    }                                                                                    \
  }

// QROWS rows a workgroup, keys and values staged BC at a time.
void staged() {
  const uint head0 = gl_WorkGroupID.x * GT, kv_head = head0 / G, t0 = gl_WorkGroupID.y * QROWS;
  if (t0 >= pc.rows) return;  // the whole workgroup
#if RELATIVE
  load_relative(head0);
#endif
  const uint lane = gl_SubgroupInvocationID, tid = gl_LocalInvocationIndex;
  const bool live = t0 + gl_SubgroupID < pc.rows;
  const uint t = min(t0 + gl_SubgroupID, pc.rows - 1u);
  const uint sequence = io.rows[t].sequence;  // the chunk's one sequence
  const uint qpos = io.rows[t].position;  // the row's own position (ALiBi, relative bias)
  const uvec2 mine = key_range(t);
  // The workgroup's keys.
  const uvec2 joint = joint_keys(t0, min(t0 + QROWS, pc.rows) - 1u);
  const uint lo = joint.x, hi = joint.y;
  STATE;
  START(t)
  for (uint base = lo; base < hi; base += BC) {
    for (uint i = tid; i < BC * CTPR; i += gl_WorkGroupSize.x) {
      const uint pos = min(base + i / CTPR, hi - 1u);
      const int at = int((cache_slot(sequence, pos) * HKV + kv_head) * CTPR + i % CTPR);
      kstage[i] = texelFetch(KT, at);
      vstage[i] = texelFetch(VT, at);
    }
    barrier();
    // This row's keys of the block: [from, to).
    const uint from = max(base, mine.x), to = live ? min(base + BC, mine.y) : from;
#define FROM_STAGE(values, p, v) load_staged(values, (p) - base, lane, v)
    ATTEND(from, to, FROM_STAGE)
    barrier();
  }
  if (live) {
    FINISH(t)
  }
}

void main() {
  if (QROWS > 1u) {
    staged();
    return;
  }
  const uint head0 = gl_WorkGroupID.x * GT, kv_head = head0 / G, t = gl_WorkGroupID.y;
  if (t >= pc.rows) return;
#if RELATIVE
  load_relative(head0);
#endif
  const uint lane = gl_LocalInvocationID.x;
  const uint sequence = io.rows[t].sequence;
  const uint qpos = io.rows[t].position;
  const uvec2 range = key_range(t);
  const uint first = range.x, keys = range.y;

  STATE;
  START(t)
#define FROM_CACHE(values, p, v) load(values, sequence, p, kv_head, lane, v)
  ATTEND(first, keys, FROM_CACHE)
  FINISH(t)
}
