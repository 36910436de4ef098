// Multi-head latent attention's expanded form, over a prompt chunk of one
// sequence whose keys fit the expansion (plan::Form::Expanded); the cache
// holds the chunk's latents already (rope_kv appended them).
//   EXPAND 1: one workgroup per (head h, KB keys) of the sequence's keys
//     0 … first row's position + rows: e[j][h] = [W_UK[h] · c_j | W_UV[h] ·
//     c_j] of the cached latent c_j (kv_b's rows of the head, or k_b and
//     v_b with SPLIT): lanes split the latent, each weight read once for
//     the KB keys, one subgroupAdd a value.
//   EXPAND 0: one workgroup per (head h, row t): over the keys j ≤ the
//     row's position, softmax of SCALE · (q_nope · k_nope[j][h] + q_pe ·
//     k_pe[j]) weighing v[j][h] into out[t][h]: a block of keys a lane
//     each, a running max and sum, then lanes split the value dims. q_nope is
//     the query's own; q_pe is read where rope_kv rotated it, in the
//     absorbed query's rows (mla.comp's ROPE_ONLY wrote it there).
// The absorbed form reads the latent's RANK + ROPE values of every key for
// each query row and head; this reads NOPE + ROPE + VD of each, and expands
// each key once a chunk.
// Generated constants: HQ, HKV (1), DH (RANK + ROPE), CACHE_F16, H, NOPE, ROPE, RANK, VD, SPLIT, EXPAND, KB,
// SCALE, SOFTCAPPED, SOFTCAP.
// Specialization constants: 0 the workgroup size (one subgroup); 1 RING, the positions the cache holds.
// Push constants (MlaPrefillPush): rows, q's and r's column offsets and row strides.
// Buffers: io, q, r, k_cache, w, w2, e, out (kernels.hpp's MLA_PREFILL bindings).

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_q) readonly buffer Q { float q[]; };
layout(std430, binding = BINDING_r) readonly buffer R { float r[]; };
layout(constant_id = 1) const uint RING = 0;
#include "kv.glsl"
layout(std430, binding = BINDING_k_cache) readonly buffer KC { CACHE_PAIR kc[]; };
layout(std430, binding = BINDING_w) readonly buffer W { float w[]; };
layout(std430, binding = BINDING_w2) readonly buffer W2 { float w2[]; };
#if EXPAND
layout(std430, binding = BINDING_e) writeonly buffer E { float e[]; };
#else
layout(std430, binding = BINDING_e) readonly buffer E { float e[]; };
#endif
layout(std430, binding = BINDING_out) writeonly buffer OUT { float o[]; };

const uint EW = NOPE + VD;  // expanded floats of one key and head

#if EXPAND
shared float latent[KB * RANK];

void main() {
  const uint h = gl_WorkGroupID.x, j0 = gl_WorkGroupID.y * KB;
  const uint lane = gl_LocalInvocationID.x, lanes = gl_WorkGroupSize.x;
  const uint sequence = io.rows[0].sequence, keys = io.rows[0].position + pc.rows;
  for (uint k = 0; k < KB; ++k)
    for (uint p = lane; p < RANK / 2; p += lanes) {
      const vec2 c = j0 + k < keys ? from_cache(kc[cache_pair(sequence, j0 + k, 0, p)]) : vec2(0.0);
      latent[k * RANK + 2 * p] = c.x;
      latent[k * RANK + 2 * p + 1] = c.y;
    }
  barrier();
  // Each weight read once for the KB keys.
  for (uint i = 0; i < EW; ++i) {
    float s[KB];
    for (uint k = 0; k < KB; ++k) s[k] = 0.0;
    for (uint c = lane; c < RANK; c += lanes) {
#if SPLIT
      const float wv = i < NOPE ? w[(h * RANK + c) * NOPE + i] : w2[(h * VD + i - NOPE) * RANK + c];  // k_b[h][c][i], v_b
#else
      const float wv = w[(h * EW + i) * RANK + c];  // W_UK's NOPE rows, then W_UV's VD
#endif
      for (uint k = 0; k < KB; ++k) s[k] += wv * latent[k * RANK + c];
    }
    for (uint k = 0; k < KB; ++k) {
      const float sum = subgroupAdd(s[k]);
      if (lane == 0 && j0 + k < keys) e[((j0 + k) * H + h) * EW + i] = sum;
    }
  }
}

#else
shared float query[NOPE + ROPE];
shared float acc[VD];      // each lane its own dims
shared float prob[128];    // a block's weights, a key a lane (subgroups of at most 128 lanes)

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  if (t >= pc.rows) return;
  const uint lane = gl_LocalInvocationID.x, lanes = gl_WorkGroupSize.x;
  const uint sequence = io.rows[t].sequence, position = io.rows[t].position;
  const uint qb = pc.q_offset + t * pc.q_stride + h * (NOPE + ROPE);
  const uint rb = pc.r_offset + t * pc.r_stride + h * (RANK + ROPE) + RANK;
  for (uint i = lane; i < NOPE; i += lanes) query[i] = q[qb + i];
  for (uint i = lane; i < ROPE; i += lanes) query[NOPE + i] = r[rb + i];
  for (uint i = lane; i < VD; i += lanes) acc[i] = 0.0;
  barrier();
  // Keys a block of `lanes` at a time: each lane scores one, the block's
  // max and sum in two reductions; then each lane sums its value dims over
  // the block's keys.
  float m = -3.0e38, l = 0.0;
  for (uint j0 = 0; j0 <= position; j0 += lanes) {
    const uint j = j0 + lane;
    float s = -3.0e38;
    if (j <= position) {
      const uint kb = (j * H + h) * EW;
      float dot = 0.0;
      for (uint i = 0; i < NOPE; ++i) dot += query[i] * e[kb + i];
      for (uint p = 0; p < ROPE / 2; ++p) {
        const vec2 k = from_cache(kc[cache_pair(sequence, j, 0, RANK / 2 + p)]);
        dot += query[NOPE + 2 * p] * k.x + query[NOPE + 2 * p + 1] * k.y;
      }
      s = dot * SCALE;
#if SOFTCAPPED
      s = SOFTCAP * tanh(s / SOFTCAP);
#endif
    }
    const float m2 = max(m, subgroupMax(s)), kept = exp(m - m2);
    const float weight = j <= position ? exp(s - m2) : 0.0;
    l = l * kept + subgroupAdd(weight);
    prob[lane] = weight;
    barrier();
    const uint n = min(lanes, position + 1 - j0);
    for (uint i = lane; i < VD; i += lanes) {
      float a = acc[i] * kept;
      for (uint k = 0; k < n; ++k) a += prob[k] * e[((j0 + k) * H + h) * EW + NOPE + i];
      acc[i] = a;
    }
    m = m2;
    barrier();  // the block's weights read before the next block's are written
  }
  const uint dst = (t * H + h) * VD;
  for (uint i = lane; i < VD; i += lanes) o[dst + i] = acc[i] / l;
}
#endif
