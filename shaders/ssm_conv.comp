// A Mamba layer's causal depthwise convolution (transformers' MambaMixer
// and Mamba2Mixer: Conv1d with groups = CH, DC taps, DC - 1 zeros of left padding at a
// sequence's start), then SiLU, over a pass's rows:
// u[t][c] = silu(bias[c] + Σ_k w[c][k] · x(p - (DC - 1) + k)[c]) for row t
// at position p of its sequence, x(q) that sequence's input at position q:
// a row of this pass, or before it, from the sequence's window `state` (its
// last DC - 1 inputs, oldest first), or 0 before position 0 (a row at
// position 0 starts a sequence: its window is not read). A sequence's rows
// in a pass are consecutive positions, in order (a prompt chunk: all rows;
// a batched decode step: one row each). Each sequence's window then moves on
// to its last DC - 1 inputs. A workgroup takes CPW consecutive channels, its
// lanes a channel at a time each, over every row: the lane that reads a
// channel's window is the one that moves it.
//
// Generated constants: CH (channels: Mamba's d_inner; Mamba-2's x, B and C),
// XOFF and XSTRIDE (where they start in a row of in_proj's output, and its
// width), DC (d_conv), CONV_BIAS, WINDOWED (DC > 1), CPW (channels a workgroup).
// Push constants (RowsPush): rows.
// Buffers: io (IoRow: sequence, position); xz [rows][XSTRIDE] f32 (the
//          input at XOFF); w [CH][DC] f32; bias [CH] f32; state
//          [sequences][CH][DC - 1] f32, read and written; u [rows][CH] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_xz) readonly buffer XZ { float xz[]; };
layout(std430, binding = BINDING_w) readonly buffer W { float w[]; };
#if CONV_BIAS
layout(std430, binding = BINDING_bias) readonly buffer B { float bias[]; };
#endif
layout(std430, binding = BINDING_state) buffer S { float state[]; };
layout(std430, binding = BINDING_u) writeonly buffer U { float u[]; };

const uint WINDOW = DC - 1u;

// x(p - back)[c] for row t at position p: a row of this pass, the window, or 0.
float input_before(uint t, uint c, uint back) {
  const uint p = io.rows[t].position;
  if (back > p) return 0.0;
  const uint seq = io.rows[t].sequence;
  uint same = 0u;  // rows of the sequence before t in this pass, up to `back`
  while (same < back && same < t && io.rows[t - same - 1u].sequence == seq) ++same;
  if (back <= same) return xz[(t - back) * XSTRIDE + XOFF + c];
  return state[(seq * CH + c) * WINDOW + WINDOW - (back - same)];
}

void main() {
  const uint first = gl_WorkGroupID.x * CPW, end = min(first + CPW, CH);
  for (uint c = first + gl_LocalInvocationID.x; c < end; c += gl_WorkGroupSize.x) {
    for (uint t = 0u; t < pc.rows; ++t) {
#if CONV_BIAS
      float sum = bias[c];
#else
      float sum = 0.0;
#endif
      for (uint k = 0u; k < DC; ++k) sum += w[c * DC + k] * input_before(t, c, WINDOW - k);
      u[t * CH + c] = sum / (1.0 + exp(-sum));
    }
#if WINDOWED
    // Each sequence's window moves on to its last inputs, after every read of it above.
    for (uint t = 0u; t < pc.rows; ++t) {
      const uint seq = io.rows[t].sequence;
      if (t + 1u < pc.rows && io.rows[t + 1u].sequence == seq) continue;
      float next[WINDOW];
      for (uint j = 0u; j < WINDOW; ++j) next[j] = input_before(t, c, WINDOW - 1u - j);
      for (uint j = 0u; j < WINDOW; ++j) state[(seq * CH + c) * WINDOW + j] = next[j];
    }
#endif
  }
}
