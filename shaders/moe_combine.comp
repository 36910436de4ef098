// The mixture of experts' output added to the residual stream:
// x[t] += Σ_j weight(t, j) · y[t][j], the weights moe_route wrote and y the
// experts' down projections of each of the token's TOPK slots; with a
// shared expert (Qwen2-MoE) also + g · shared[t], g = 1 or, gated,
// sigmoid(its gate logit). One subgroup-sized workgroup per token row.
//
// Generated constants: D (hidden width), E (experts), TOPK, SHARED (a shared
// expert added), SHARED_GATED (by its gate), GATE_STRIDE and GATE_OFFSET
// (the gate logit's place).
// Push constants (RowsPush): rows.
// Buffers: route (words: weights[rows·TOPK] as f32 bits at 2E + 1, moe_route.comp);
//          y [rows][TOPK·D] f32; x [rows][D] f32, added to; shared [rows][D]
//          f32; gate [rows][GATE_STRIDE] f32.

layout(local_size_x_id = 0) in;

layout(std430, binding = BINDING_route) readonly buffer R { uint route[]; };
layout(std430, binding = BINDING_y) readonly buffer Y { float y[]; };
layout(std430, binding = BINDING_x) buffer X { float x[]; };
#if SHARED
layout(std430, binding = BINDING_shared) readonly buffer S { float shared_out[]; };
#endif
#if SHARED_GATED
layout(std430, binding = BINDING_gate) readonly buffer G { float gate[]; };
#endif

void main() {
  const uint t = gl_WorkGroupID.x;
  if (t >= pc.rows) return;
  float w[TOPK];
  for (uint j = 0; j < TOPK; ++j) w[j] = uintBitsToFloat(route[2u * E + 1u + t * TOPK + j]);
#if SHARED_GATED
  const float g = 1.0 / (1.0 + exp(-gate[t * GATE_STRIDE + GATE_OFFSET]));
#else
  const float g = 1.0;
#endif
  for (uint i = gl_LocalInvocationID.x; i < D; i += gl_WorkGroupSize.x) {
    float sum = 0.0;
    for (uint j = 0; j < TOPK; ++j) sum += w[j] * y[(t * TOPK + j) * D + i];
#if SHARED
    sum += g * shared_out[t * D + i];
#endif
    x[t * D + i] += sum;
  }
}
