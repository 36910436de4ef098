// Multi-head latent attention's two per-head maps through kv_b_proj, one
// workgroup per (head h, row t); kv_b [H·(NOPE + VD)][RANK] f32 holds each
// head's W_UK (NOPE rows) then its W_UV (VD rows). SPLIT: w is llama.cpp's
// half of it instead, k_b [H][RANK][NOPE] (each W_UK transposed) for the
// query, v_b [H][VD][RANK] (each W_UV) for the values.
//   QUERY 1: the absorbed query, y[t][h] = [W_UK[h]ᵀ · q_nope | q_pe] of
//            x[t][h] = [q_nope (NOPE) | q_pe (ROPE)]: lanes take the latent's
//            dims j, each summing down column j of W_UK[h] (consecutive lanes
//            read consecutive values of a row).
//            ROPE_ONLY: q_pe alone (latent attention's expanded form rotates
//            it there; mla_prefill reads q_nope from x itself).
//   QUERY 0: the head's values, y[t][h] = W_UV[h] · x[t][h][0 … RANK) of the
//            attention's output [latent part (RANK) | rotary part (ROPE)]:
//            lanes split each row of W_UV[h], one subgroupAdd a value.
// Generated constants: H, NOPE, ROPE, RANK, VD, QUERY, SPLIT, ROPE_ONLY.
// Specialization constant 0: the workgroup size (one subgroup).
// Push constants (MlaPush): rows, x's column offset and row stride. Buffers: x, w, y (kernels.hpp's MLA bindings).

#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(std430, binding = BINDING_x) readonly buffer X { float x[]; };
layout(std430, binding = BINDING_w) readonly buffer W { float w[]; };
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };

#if SPLIT
const uint HEAD_ROWS = VD;  // v_b's rows of one head: W_UV alone
const uint UV_ROW = 0u;     // W_UV's first row in them
#else
const uint HEAD_ROWS = NOPE + VD;  // kv_b's rows of one head
const uint UV_ROW = NOPE;
#endif

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  if (t >= pc.rows) return;
  const uint lane = gl_LocalInvocationID.x, lanes = gl_WorkGroupSize.x;
#if QUERY
  const uint q = pc.x_offset + t * pc.x_stride + h * (NOPE + ROPE), dst = (t * H + h) * (RANK + ROPE);
#if !ROPE_ONLY
  for (uint j = lane; j < RANK; j += lanes) {
    float s = 0.0;
#if SPLIT
    for (uint i = 0; i < NOPE; ++i) s += w[(h * RANK + j) * NOPE + i] * x[q + i];  // W_UK[h][i][j] at k_b[h][j][i]
#else
    for (uint i = 0; i < NOPE; ++i) s += w[(h * HEAD_ROWS + i) * RANK + j] * x[q + i];
#endif
    y[dst + j] = s;
  }
#endif
  for (uint j = lane; j < ROPE; j += lanes) y[dst + RANK + j] = x[q + NOPE + j];
#else
  const uint a = pc.x_offset + t * pc.x_stride + h * (RANK + ROPE), dst = (t * H + h) * VD;
  for (uint r = 0; r < VD; ++r) {
    const uint row = (h * HEAD_ROWS + UV_ROW + r) * RANK;
    float s = 0.0;
    for (uint c = lane; c < RANK; c += lanes) s += w[row + c] * x[a + c];
    s = subgroupAdd(s);
    if (lane == 0) y[dst + r] = s;
  }
#endif
}
