// Embedding gather: y[t] = SCALE · E[token[t]] (+ P[position[t] + POS_OFFSET]) (+ Y[0]).
// One subgroup-sized workgroup per token row; lanes walk the row's texels.
//
// Generated constants:
//   D           embedding width
//   WDTYPE      dtype of the tables (common.glsl)
//   SCALE       embedding scale (Gemma: sqrt(hidden))
//   POSITIONS   1: add the learned position table P (GPT-2)
//   POS_OFFSET  row of position p is p + POS_OFFSET (OPT: 2)
//   TYPES       1: add row 0 of the token-type table Y (BERT's segment embeddings, one segment;
//               added after the position, as transformers' BertEmbeddings sums them)
//   ROWS        1: no table: y[t] = x[t] (+ P[position[t] + POS_OFFSET]) (+ C on the row of
//               position 0): a vision tower's input rows, and its patches' positions
//   CLASS       1 (with ROWS): add the class embedding C on the row of position 0 (CLIP)
//   SPLICE      1: a row whose token carries SPLICED_TOKEN is x[t] as it is (a decoder's image
//               features); the dispatch of the table's first token range writes it
// Push constants (EmbedPush): rows; token0, tokens: the rows of E bound (a
// table over the binding limit is split into token ranges, a dispatch each;
// a row whose token is outside is another dispatch's).
// Buffers: io (each row's token and position), E [tokens][D] texels, P [table][D] texels,
//          Y [types][D] texels (the tables share a dtype), y [rows][D] f32, x [rows][D] f32,
//          C [D] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(binding = BINDING_table) uniform usamplerBuffer E;
layout(binding = BINDING_positions) uniform usamplerBuffer P;
layout(binding = BINDING_types) uniform usamplerBuffer TY;
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };
layout(std430, binding = BINDING_x) readonly buffer X { float x[]; };
layout(std430, binding = BINDING_cls) readonly buffer C { float cls[]; };

const uint TPR = W_TPR;  // texels per row (D / VPT, or a block dtype's planes)

void main() {
  const uint t = gl_WorkGroupID.x;
  if (t >= pc.rows) return;
  const uint position = io.rows[t].position + POS_OFFSET;
#if ROWS
  // x's rows (+ positions) (+ the class embedding): the table's texel walk,
  // the values taken from x. (The lowering gives a position table here a
  // dtype of whole texels, never blocks.)
#if CLASS
  const bool class_row = io.rows[t].position == 0u;  // decided once per row
#endif
#if POSITIONS
  for (uint j = gl_LocalInvocationID.x; j < TPR; j += gl_WorkGroupSize.x) {
    float p[VPT];
    unpack_texel(texelFetch(P, int(position * TPR + j)), p);
    [[unroll]] for (uint i = 0; i < VPT; ++i) {
      const uint at = j * VPT + i;
      float value = x[t * D + at] + p[i];
#if CLASS
      if (class_row) value += cls[at];
#endif
      y[t * D + at] = value;
    }
  }
#else
  for (uint j = gl_LocalInvocationID.x; j < D; j += gl_WorkGroupSize.x) {
    float value = x[t * D + j];
#if CLASS
    if (class_row) value += cls[j];
#endif
    y[t * D + j] = value;
  }
#endif
  return;
#endif
#if SPLICE
  if ((io.rows[t].token & SPLICED_TOKEN) != 0u) {
    if (pc.token0 == 0u)
      for (uint j = gl_LocalInvocationID.x; j < D; j += gl_WorkGroupSize.x) y[t * D + j] = x[t * D + j];
    return;
  }
#endif
  const uint token = io.rows[t].token - pc.token0;  // its row of the range bound
  if (token >= pc.tokens) return;
#if QUANT
  // Block tables (the position table, when there is one, has the same dtype):
  // lanes walk the row's units of 32 values (quant.glsl).
  for (uint u = gl_LocalInvocationID.x; u < D / 32u; u += gl_WorkGroupSize.x) {
    [[unroll]] for (uint h = 0; h < 2u; ++h) {
      float e[16];
      dequant_half(E, token * TPR, u, h, e);
#if POSITIONS
      float p[16];
      dequant_half(P, position * TPR, u, h, p);
#endif
#if TYPES
      float ty[16];
      dequant_half(TY, 0u, u, h, ty);
#endif
      const uint at = t * D + unit_lo(u) + h * HI_OFFSET;
      [[unroll]] for (uint i = 0; i < 16u; ++i) {
        float value = SCALE * e[i];
#if POSITIONS
        value += p[i];
#endif
#if TYPES
        value += ty[i];
#endif
        y[at + i] = value;
      }
    }
  }
  return;
#endif
  for (uint j = gl_LocalInvocationID.x; j < TPR; j += gl_WorkGroupSize.x) {
    float e[VPT];
    unpack_texel(texelFetch(E, int(token * TPR + j)), e);
#if POSITIONS
    float p[VPT];
    unpack_texel(texelFetch(P, int(position * TPR + j)), p);
#endif
#if TYPES
    float ty[VPT];
    unpack_texel(texelFetch(TY, int(j)), ty);
#endif
    [[unroll]] for (uint i = 0; i < VPT; ++i) {
      float value = SCALE * e[i];
#if POSITIONS
      value += p[i];
#endif
#if TYPES
      value += ty[i];
#endif
      y[t * D + j * VPT + i] = value;
    }
  }
}
