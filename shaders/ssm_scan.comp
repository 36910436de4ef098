// A Mamba layer's selective scan (transformers' MambaMixer.slow_forward)
// over a pass's rows in order, each from its sequence's h `state` (zeros
// for a row at position 0: a new sequence), which it leaves at the
// sequence's last row in the pass (a sequence's rows are consecutive: a
// prompt chunk's, or one a sequence in a batched decode step): per channel c
// and row t, with dt = softplus(dt_bias[c] + Σ_r dt_w[c][r]·dbc[t][r]) (dt_proj on
// x_proj's first R columns, folded in here) and A = -exp(A_log[c]),
//   h[n] = exp(dt·A[n])·h[n] + dt·B[t][n]·u[t][c],
//   y[t][c] = (Σ_n C[t][n]·h[n] + D[c]·u[t][c]) · silu(z[t][c]).
// A workgroup takes CPW consecutive channels, its lanes a channel at a time
// each (lane l: channels l, l + WG, …), every state of it in registers: no
// lane waits on another.
//
// Generated constants: DI (d_inner), N (d_state), R (dt_rank), A_LOG (the
// buffer holds A_log; else A), CPW (channels a workgroup).
// Push constants (RowsPush): rows.
// Buffers: io (IoRow: sequence, position); u [rows][DI]; dbc [rows][R + 2·N] (dt's low rank
//          first, B at R, C at R + N); dt_w [DI][R]; dt_bias [DI]; xz [rows][2·DI] (z at DI);
//          a_log [DI][N]; d [DI];
//          state [sequences][DI][N], read and written; y [rows][DI]; all f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_u) readonly buffer U { float u[]; };
layout(std430, binding = BINDING_dbc) readonly buffer DBC { float dbc[]; };
layout(std430, binding = BINDING_dt_w) readonly buffer DTW { float dt_w[]; };
layout(std430, binding = BINDING_dt_bias) readonly buffer DTB { float dt_bias[]; };
layout(std430, binding = BINDING_xz) readonly buffer XZ { float xz[]; };
layout(std430, binding = BINDING_a_log) readonly buffer A { float a_log[]; };
layout(std430, binding = BINDING_d) readonly buffer D { float d_skip[]; };
layout(std430, binding = BINDING_state) buffer S { float state[]; };
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };

const uint ROW = R + 2u * N;

void main() {
  const uint first = gl_WorkGroupID.x * CPW, end = min(first + CPW, DI);
  for (uint c = first + gl_LocalInvocationID.x; c < end; c += gl_WorkGroupSize.x) {
    float h[N], a[N];
#if A_LOG
    for (uint n = 0u; n < N; ++n) a[n] = -exp(a_log[c * N + n]);
#else
    for (uint n = 0u; n < N; ++n) a[n] = a_log[c * N + n];  // A itself (llama.cpp's ssm_a)
#endif
    const float skip = d_skip[c];
    for (uint t = 0u; t < pc.rows; ++t) {
      const uint seq = io.rows[t].sequence;
      if (t == 0u || seq != io.rows[t - 1u].sequence) {  // the sequence's first row in the pass
        const bool fresh = io.rows[t].position == 0u;
        for (uint n = 0u; n < N; ++n) h[n] = fresh ? 0.0 : state[(seq * DI + c) * N + n];
      }
      float raw = dt_bias[c];
      for (uint r = 0u; r < R; ++r) raw += dt_w[c * R + r] * dbc[t * ROW + r];
      const float dt = raw > 20.0 ? raw : log(1.0 + exp(raw));  // torch's softplus, threshold 20
      const float x = u[t * DI + c];
      float sum = 0.0;
      for (uint n = 0u; n < N; ++n) {
        h[n] = exp(dt * a[n]) * h[n] + dt * dbc[t * ROW + R + n] * x;
        sum += dbc[t * ROW + R + N + n] * h[n];
      }
      const float z = xz[t * 2u * DI + DI + c];
      y[t * DI + c] = (sum + skip * x) * (z / (1.0 + exp(-z)));
      if (t + 1u == pc.rows || io.rows[t + 1u].sequence != seq)  // its last row: keep h
        for (uint n = 0u; n < N; ++n) state[(seq * DI + c) * N + n] = h[n];
    }
  }
}
