// RMSNorm and LayerNorm over rows of N features: one subgroup-sized workgroup
// per token row, reductions with subgroupAdd (no shared memory, no barriers:
// both are expensive on lavapipe, see docs/lavapipe.md).
//
// Generated constants:
//   N            features per row
//   GROUP        features normed together: N, or (Mamba-2's gated norm) each
//                of N / GROUP consecutive groups on its own
//   EPS          the spec's eps
//   LAYER_NORM   1: (x - mean) / sqrt(var + eps) * g + b;  0: x / sqrt(mean(x²) + eps) * g
//   HAS_BIAS     1: add b (LayerNorm with a shift)
//   UNIT_OFFSET  1: the scale is (1 + g), added in fp32 (Gemma)
//   RESIDUAL     1: y += the normalized row (the norm of a branch's output,
//                before its residual add: sandwich and branch_output blocks)
// Push constants (RowsPush): rows.
// Buffers: x [rows][N] f32, g [N] f32, b [N] f32, y [rows][N] f32.

layout(local_size_x_id = 0) in;  // = the device's subgroup size

layout(std430, binding = BINDING_x) readonly buffer X { float x[]; };
layout(std430, binding = BINDING_scale) readonly buffer G { float g[]; };
layout(std430, binding = BINDING_shift) readonly buffer B { float b[]; };
#if RESIDUAL
layout(std430, binding = BINDING_y) buffer Y { float y[]; };
#else
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };
#endif

void main() {
  const uint row = gl_WorkGroupID.x;
  if (row >= pc.rows) return;
  const uint lane = gl_SubgroupInvocationID;
  const uint lanes = gl_SubgroupSize;

  for (uint first = 0u; first < N; first += GROUP) {
    const uint base = row * N + first;
    float mean = 0.0;
#if LAYER_NORM
    float sum = 0.0;
    for (uint i = lane; i < GROUP; i += lanes) sum += x[base + i];
    mean = subgroupAdd(sum) / float(GROUP);
#endif
    float squares = 0.0;
    for (uint i = lane; i < GROUP; i += lanes) {
      const float centered = x[base + i] - mean;
      squares += centered * centered;
    }
    const float inv = inversesqrt(subgroupAdd(squares) / float(GROUP) + EPS);

    for (uint i = lane; i < GROUP; i += lanes) {
#if UNIT_OFFSET
      const float scale = 1.0 + g[first + i];
#else
      const float scale = g[first + i];
#endif
      float value = (x[base + i] - mean) * inv * scale;
#if HAS_BIAS
      value += b[first + i];
#endif
#if RESIDUAL
      y[base + i] += value;
#else
      y[base + i] = value;
#endif
    }
  }
}
