// y[t][r] = epilogue(W[r] · x[t]): every linear layer, for decode (TOKENS = 1)
// and prefill (TOKENS > 1) alike.
//
// One subgroup-sized workgroup owns a block of ROWS weight rows and TOKENS
// token rows. K is walked in chunks of LANES texels: lane l loads its texel's
// slice of each token's x once per chunk and reuses it for all ROWS rows;
// partial sums are reduced with subgroupAdd at the end. No shared memory and
// no barriers (notes/lavapipe.md: both are expensive there), weights through
// texel buffers.
//
// Generated constants:
//   K          input width (a multiple of VPT)
//   WDTYPE     weight dtype (common.glsl)
//   HAS_BIAS   add bias[r] (bias2[r] to the up half of a gated MLP)
//   GATED      y = φ(W·x + b) ⊙ (W2·x + b2): the gate and up projections in one pass
//   ACT        φ (common.glsl ACT_*); ACT_NONE for a plain projection
//   RESIDUAL   y += …: the residual add folded into the producing kernel
// Specialization constants: 0 the workgroup (= subgroup) size, 1 ROWS, 2 TOKENS.
// Push constants (MatmulPush): rows, n, x_row0, gate_row0, up_row0.
// Buffers: W, W2 [N][K] texels; x [rows][K] f32; bias, bias2 [N] f32; y [rows][n] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 8;
layout(constant_id = 2) const uint TOKENS = 1;

layout(binding = 0) uniform usamplerBuffer W;
layout(binding = 1) uniform usamplerBuffer W2;
layout(std430, binding = 2) readonly buffer X { vec4 x[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(std430, binding = 4) readonly buffer Bias2 { float bias2[]; };
layout(std430, binding = 5) buffer Y { float y[]; };

const uint TPR = K / VPT;  // texels per weight row
const uint LANES = gl_WorkGroupSize.x;

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint row0 = gl_WorkGroupID.x * ROWS;
  const uint t0 = gl_WorkGroupID.y * TOKENS;

  float acc[ROWS * TOKENS];
#if GATED
  float acc2[ROWS * TOKENS];
#endif
  for (uint i = 0; i < ROWS * TOKENS; ++i) {
    acc[i] = 0.0;
#if GATED
    acc2[i] = 0.0;
#endif
  }

  for (uint c = 0; c < TPR; c += LANES) {
    const uint j = c + lane;  // this lane's texel of the chunk
    if (j >= TPR) continue;
    float xs[TOKENS * VPT];
    for (uint t = 0; t < TOKENS; ++t) {
      const bool live = t0 + t < pc.rows;
      const uint at = ((pc.x_row0 + t0 + t) * K + j * VPT) / 4;
      [[unroll]] for (uint h = 0; h < VPT / 4; ++h) {
        const vec4 v = live ? x[at + h] : vec4(0.0);
        xs[t * VPT + h * 4 + 0] = v.x;
        xs[t * VPT + h * 4 + 1] = v.y;
        xs[t * VPT + h * 4 + 2] = v.z;
        xs[t * VPT + h * 4 + 3] = v.w;
      }
    }
    for (uint r = 0; r < ROWS; ++r) {
      const uint row = row0 + r;
      if (row >= pc.n) break;
      float w[VPT];
      unpack_texel(texelFetch(W, int((pc.gate_row0 + row) * TPR + j)), w);
#if GATED
      float w2[VPT];
      unpack_texel(texelFetch(W2, int((pc.up_row0 + row) * TPR + j)), w2);
#endif
      for (uint t = 0; t < TOKENS; ++t) {
        float s = 0.0;
#if GATED
        float s2 = 0.0;
#endif
        [[unroll]] for (uint i = 0; i < VPT; ++i) {
          s += w[i] * xs[t * VPT + i];
#if GATED
          s2 += w2[i] * xs[t * VPT + i];
#endif
        }
        acc[r * TOKENS + t] += s;
#if GATED
        acc2[r * TOKENS + t] += s2;
#endif
      }
    }
  }

  for (uint r = 0; r < ROWS; ++r) {
    for (uint t = 0; t < TOKENS; ++t) {
      const uint i = r * TOKENS + t;
      const float sum = subgroupAdd(acc[i]);
#if GATED
      const float sum2 = subgroupAdd(acc2[i]);
#endif
      const uint row = row0 + r;
      if (lane != i % LANES || row >= pc.n || t0 + t >= pc.rows) continue;
      float value = sum;
#if HAS_BIAS
      value += bias[pc.gate_row0 + row];
#endif
#if GATED
      float up = sum2;
#if HAS_BIAS
      up += bias2[pc.up_row0 + row];
#endif
      value = activate(value, ACT) * up;
#else
      value = activate(value, ACT);
#endif
      const uint at = (t0 + t) * pc.n + row;
#if RESIDUAL
      y[at] += value;
#else
      y[at] = value;
#endif
    }
  }
}
