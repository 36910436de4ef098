// A Mamba-2 layer's scan (the SSD layer of "Transformers are SSMs" as its
// recurrence; transformers' Mamba2Mixer.torch_forward, mamba_ssm's
// selective_state_update) over a pass's rows in order, each from its
// sequence's h `state` (zeros for a row at position 0: a new sequence),
// which it leaves at the sequence's last row in the pass (a sequence's rows
// are consecutive). Channel c of x belongs to head hd = c / (DI / H), which
// reads the B and C of its group g = hd / (H / G); per row t,
//   dt = clamp(softplus(dt_raw[t][hd] + dt_bias[hd]), DT_MIN, DT_MAX),
//   h[n] = exp(dt·A[hd])·h[n] + dt·B[t][g][n]·x[t][c],    A = -exp(A_log),
//   y[t][c] = (Σ_n C[t][g][n]·h[n] + D[hd]·x[t][c]) · silu(z[t][c]).
// The gated output's RMS norm per group is the next dispatch. A workgroup
// takes CPW consecutive channels, a lane a channel at a time, its N states
// in registers: no lane waits on another.
//
// Generated constants: DI (d_inner), N (d_state), H (heads), G (groups),
// XSTRIDE (in_proj's output width), DT_MIN, DT_CLAMP (an upper limit),
// DT_MAX, A_LOG (the buffer holds A_log; else A), CPW (channels a workgroup).
// Push constants (RowsPush): rows.
// Buffers: io (IoRow: sequence, position); u [rows][DI + 2·G·N] (x, then
//          each group's B, then each group's C); xz [rows][XSTRIDE] (z at 0,
//          dt_raw at XSTRIDE - H); dt_bias, a_log, d [H];
//          state [sequences][DI][N], read and written; y [rows][DI]; all f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_u) readonly buffer U { float u[]; };
layout(std430, binding = BINDING_xz) readonly buffer XZ { float xz[]; };
layout(std430, binding = BINDING_dt_bias) readonly buffer DTB { float dt_bias[]; };
layout(std430, binding = BINDING_a_log) readonly buffer A { float a_log[]; };
layout(std430, binding = BINDING_d) readonly buffer D { float d_skip[]; };
layout(std430, binding = BINDING_state) buffer S { float state[]; };
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };

const uint UW = DI + 2u * G * N;  // a row of u
const uint P = DI / H;            // channels a head

void main() {
  const uint first = gl_WorkGroupID.x * CPW, end = min(first + CPW, DI);
  for (uint c = first + gl_LocalInvocationID.x; c < end; c += gl_WorkGroupSize.x) {
    const uint hd = c / P, g = hd / (H / G);
    const uint b_at = DI + g * N, c_at = DI + G * N + g * N;
#if A_LOG
    const float a = -exp(a_log[hd]);
#else
    const float a = a_log[hd];  // A itself (llama.cpp's ssm_a)
#endif
    const float skip = d_skip[hd], bias = dt_bias[hd];
    float h[N];
    for (uint t = 0u; t < pc.rows; ++t) {
      const uint seq = io.rows[t].sequence;
      if (t == 0u || seq != io.rows[t - 1u].sequence) {  // the sequence's first row in the pass
        const bool fresh = io.rows[t].position == 0u;
        for (uint n = 0u; n < N; ++n) h[n] = fresh ? 0.0 : state[(seq * DI + c) * N + n];
      }
      const float raw = xz[t * XSTRIDE + XSTRIDE - H + hd] + bias;
      float dt = raw > 20.0 ? raw : log(1.0 + exp(raw));  // torch's softplus, threshold 20
      dt = max(dt, DT_MIN);
#if DT_CLAMP
      dt = min(dt, DT_MAX);
#endif
      const float decay = exp(dt * a);
      const float x = u[t * UW + c];
      const float dx = dt * x;
      float sum = 0.0;
      for (uint n = 0u; n < N; ++n) {
        h[n] = decay * h[n] + dx * u[t * UW + b_at + n];
        sum += u[t * UW + c_at + n] * h[n];
      }
      const float z = xz[t * XSTRIDE + c];
      y[t * DI + c] = (sum + skip * x) * (z / (1.0 + exp(-z)));
      if (t + 1u == pc.rows || io.rows[t + 1u].sequence != seq)  // its last row: keep h
        for (uint n = 0u; n < N; ++n) state[(seq * DI + c) * N + n] = h[n];
    }
  }
}
