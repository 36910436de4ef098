// Embedding gather: y[t] = SCALE · E[token[t]] (+ P[position[t] + POS_OFFSET]).
// One subgroup-sized workgroup per token row; lanes walk the row's texels.
//
// Generated constants:
//   D           embedding width
//   WDTYPE      dtype of the tables (common.glsl)
//   SCALE       embedding scale (Gemma: sqrt(hidden))
//   POSITIONS   1: add the learned position table P (GPT-2)
//   POS_OFFSET  row of position p is p + POS_OFFSET (OPT: 2)
// Push constants (RowsPush): rows.
// Buffers: io (each row's token and position), E [vocab][D] texels, P [table][D] texels, y [rows][D] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(binding = BINDING_table) uniform usamplerBuffer E;
layout(binding = BINDING_positions) uniform usamplerBuffer P;
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };

const uint TPR = D / VPT;  // texels per row

void main() {
  const uint t = gl_WorkGroupID.x;
  if (t >= pc.rows) return;
  const uint token = io.rows[t].token;
  const uint position = io.rows[t].position + POS_OFFSET;
  for (uint j = gl_LocalInvocationID.x; j < TPR; j += gl_WorkGroupSize.x) {
    float e[VPT];
    unpack_texel(texelFetch(E, int(token * TPR + j)), e);
#if POSITIONS
    float p[VPT];
    unpack_texel(texelFetch(P, int(position * TPR + j)), p);
#endif
    [[unroll]] for (uint i = 0; i < VPT; ++i) {
      float value = SCALE * e[i];
#if POSITIONS
      value += p[i];
#endif
      y[t * D + j * VPT + i] = value;
    }
  }
}
