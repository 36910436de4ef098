// Causal attention of one query row over the KV cache, for one head: one
// subgroup-sized workgroup per (head, row). Lanes split the head's dims in
// pairs; each key position costs one subgroupAdd for the score and an
// online-softmax update (running max m, sum l) of the lane's slice of the
// output, so nothing grows with the context but the loop.
//
// Generated constants:
//   HQ, HKV, DH   query heads, KV heads, head width; query head h reads KV head h / (HQ / HKV)
//   SCALE         score scale (1/sqrt(DH) unless the spec says otherwise)
//   CACHE_F16     cache dtype (kv.glsl)
// Push constants (AttentionPush): rows, q_offset, q_stride (k/v unused here).
// Buffers: io; q [rows][…] f32; kc, vc the caches; o [rows][HQ·DH] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(0)
layout(std430, binding = 1) readonly buffer Q { float q[]; };

#include "kv.glsl"
layout(std430, binding = 2) readonly buffer KC { CACHE_PAIR kc[]; };
layout(std430, binding = 3) readonly buffer VC { CACHE_PAIR vc[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };

const uint LANES = gl_WorkGroupSize.x;
const uint PAIRS = (DH / 2 + LANES - 1) / LANES;  // dim pairs per lane

void main() {
  const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  if (t >= pc.rows) return;
  const uint lane = gl_LocalInvocationID.x;
  const uint kv_head = head / (HQ / HKV);
  const uint keys = io.position + t + 1;  // causal: positions 0 … position + t

  vec2 qv[PAIRS], acc[PAIRS];
  const uint qbase = pc.q_offset + t * pc.q_stride + head * DH;
  for (uint i = 0; i < PAIRS; ++i) {
    const uint p = lane + i * LANES;
    qv[i] = p < DH / 2 ? vec2(q[qbase + 2 * p], q[qbase + 2 * p + 1]) * SCALE : vec2(0.0);
    acc[i] = vec2(0.0);
  }
  float m = -1.0 / 0.0, l = 0.0;
  for (uint pos = 0; pos < keys; ++pos) {
    float partial = 0.0;
    for (uint i = 0; i < PAIRS; ++i) {
      const uint p = lane + i * LANES;
      if (p < DH / 2) partial += dot(qv[i], from_cache(kc[cache_pair(pos, kv_head, p)]));
    }
    const float score = subgroupAdd(partial);
    const float m_new = max(m, score);
    const float correction = exp(m - m_new), weight = exp(score - m_new);
    l = l * correction + weight;
    for (uint i = 0; i < PAIRS; ++i) {
      const uint p = lane + i * LANES;
      const vec2 value = p < DH / 2 ? from_cache(vc[cache_pair(pos, kv_head, p)]) : vec2(0.0);
      acc[i] = acc[i] * correction + weight * value;
    }
    m = m_new;
  }
  const uint obase = t * (HQ * DH) + head * DH;
  for (uint i = 0; i < PAIRS; ++i) {
    const uint p = lane + i * LANES;
    if (p < DH / 2) {
      o[obase + 2 * p] = acc[i].x / l;
      o[obase + 2 * p + 1] = acc[i].y / l;
    }
  }
}
