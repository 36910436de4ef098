// What every matmul kernel shares: y[t][r] = epilogue(W[r] · x[t]), every
// linear layer, for decode and prefill alike. Each layout of the product is a
// file of its own (core/plan.hpp's Layout), the generator compiling those its
// device classes run:
//   matmul_rows.comp       decode and batched decode (TOKENS < 8): a subgroup owns ROWS rows
//   matmul_broadcast.comp  a CPU device's prompt (TOKENS = 8): x broadcast from 8 lanes
//   matmul_tiled.comp      a GPU's prompt (TOKENS 32 or 64): tiles staged in shared memory
//   matmul_dot.comp        decode of block weights with integer dot products
//   matmul_coop.comp       a GPU's prompt on matrix units (cooperative matrices)
// This file holds their interface (bindings, specialization constants, push
// constants), the token rows of a workgroup (a chunk's, or an expert's
// through moe_route's lists), the norm folded into the read of x, and the
// epilogue that stores each output.
//
// Generated constants:
//   K          input width (a multiple of VPT; of 32 or 256 for a block dtype)
//   WDTYPE     weight dtype (common.glsl); W_TPR texels per weight row, and
//              a block dtype's plane offsets (quant.glsl)
//   HAS_BIAS   add bias[r] (bias2[r] to the up half of a gated MLP)
//   GATED      y = φ(W·x + b) ⊙ (W2·x + b2): the gate and up projections in one pass
//   ACT        φ (common.glsl ACT_*); ACT_NONE for a plain projection
//   RESIDUAL   y += …: the residual add folded into the producing kernel
//   RESIDUAL_GATED  (with RESIDUAL) y += tanh(gate[0]) · …: a gated residual (a tiled
//              tower's global layers)
//   NORM       the norm before this projection, applied to x as it is read:
//              0 none, 1 RMSNorm, 2 LayerNorm (NORM_EPS, NORM_BIAS, NORM_UNIT_OFFSET)
//   SOFTCAPPED 1: y = c · tanh(y / c) with c = SOFTCAP (the LM head's output.softcap)
//   SCALED     1: W·x is multiplied by OUT_SCALE first (the LM head's output.scale: T5's tied head)
//   EXPERT_MODE 1: EXPERTS = E experts of a mixture (grid z: expert e), W and W2 E experts'
//              matrices of n rows stacked; the workgroup's token rows are the
//              slots moe_route listed for e, x read at the slot's token
//              (slot / TOPK) or, X_OF_SLOT, at the slot itself; y written at the slot
//              (W and W2 may hold a part of the experts, PART_EXPERTS from push
//              expert0: a mixture too large for one binding is several dispatches)
// Specialization constants (plan::Tile): 0 the workgroup size, 1 ROWS,
// 2 TOKENS, 3 XT (texels, or units of 32 values of K, a lane or a step),
// 4 GROUPS (subgroups a workgroup, each its own ROWS rows: decode).
// Push constants (MatmulPush): rows, n, x_row0, gate_row0, up_row0, col0, y_stride
// (a split matrix's row range writes its columns from col0 of a wider y).
// Buffers: W, W2 [N][K] texels; x [rows][K] f32; bias, bias2 [N] f32; y [rows][n] f32;
//          norm_g, norm_b [K] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 8;
layout(constant_id = 2) const uint TOKENS = 1;
layout(constant_id = 3) const uint XT = 2;  // texels (units, block weights) a lane a chunk of K, or a step
layout(constant_id = 4) const uint GROUPS = 1;

layout(binding = BINDING_w) uniform usamplerBuffer W;
layout(binding = BINDING_w2) uniform usamplerBuffer W2;
layout(std430, binding = BINDING_x) readonly buffer X { vec4 x[]; };
layout(std430, binding = BINDING_bias) readonly buffer Bias { float bias[]; };
layout(std430, binding = BINDING_bias2) readonly buffer Bias2 { float bias2[]; };
layout(std430, binding = BINDING_y) buffer Y { float y[]; };

#if EXPERT_MODE
layout(std430, binding = BINDING_route) readonly buffer Route { uint route[]; };
#endif
#if RESIDUAL_GATED
layout(std430, binding = BINDING_gate) readonly buffer ResidualGate { float residual_gate[]; };
#endif

const uint TPR = W_TPR;  // texels per weight row (K / VPT, or a block dtype's planes)
const uint UNITS = K / 32u;  // block dtypes: units of 32 values (quant.glsl)

// The token rows of this workgroup: the chunk's, or (EXPERTS) the slots
// routed to its expert, the z-th of the experts with tokens (none past
// them); the input row of tile row t, the output row it writes, and the
// expert's first weight row.
#if EXPERT_MODE
uint expert() { return gl_WorkGroupID.z < route[EXPERTS] ? route[EXPERTS + 1u + gl_WorkGroupID.z] : 0u; }
#endif
uint tile_rows() {
#if EXPERT_MODE
  // An expert outside this dispatch's part (experts expert0 … expert0 +
  // PART_EXPERTS − 1 in its binding) is another dispatch's.
  const uint e = expert();
  if (e < pc.expert0 || e >= pc.expert0 + PART_EXPERTS) return 0u;
  return gl_WorkGroupID.z < route[EXPERTS] ? route[e] : 0u;
#else
  return pc.rows;
#endif
}
uint y_row(uint t) {
#if EXPERT_MODE
  return route[2u * EXPERTS + 1u + pc.rows * TOPK + expert() * pc.rows + t];
#else
  return t;
#endif
}
uint x_row(uint t) {
#if EXPERT_MODE
  return X_OF_SLOT != 0 ? y_row(t) : y_row(t) / TOPK;
#else
  return pc.x_row0 + t;
#endif
}
uint expert_row0() {
#if EXPERT_MODE
  return (expert() - pc.expert0) * pc.n;
#else
  return 0u;
#endif
}
const uint LANES = gl_WorkGroupSize.x / GROUPS;  // a subgroup's

#include "folded_norm.glsl"

// The epilogue of output (row, token t of the chunk).
void store(uint row, uint t, float sum, float sum2) {
#if SCALED
  float value = sum * OUT_SCALE;
#else
  float value = sum;
#endif
#if HAS_BIAS
  value += bias[pc.col0 + pc.gate_row0 + row];
#endif
#if GATED
  float up = sum2;
#if HAS_BIAS
  up += bias2[pc.col0 + pc.up_row0 + row];
#endif
  value = activate(value, ACT) * up;
#else
  value = activate(value, ACT);
#endif
#if SOFTCAPPED
  value = softcap(value, SOFTCAP);
#endif
  const uint at = t * pc.y_stride + pc.col0 + row;
#if RESIDUAL_GATED
  y[at] += tanh(residual_gate[0]) * value;
#elif RESIDUAL
  y[at] += value;
#else
  y[at] = value;
#endif
}

