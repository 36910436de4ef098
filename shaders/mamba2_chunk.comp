// A Mamba-2 layer's scan over a prompt chunk in its chunked form (the SSD
// algorithm of "Transformers are SSMs", section 6; mamba_ssm's
// mamba_chunk_scan_combined): the same values as mamba2_scan's recurrence
// (its comment has the formulas), computed a chunk of Q rows at a time. Per
// head, with dt_t its clamped step, s_t = Σ_{k≤t} dt_k·A the log of the
// decay from the chunk's start to row t, and h the state entering the chunk:
//   y[t][c] = Σ_{j≤t} exp(s_t − s_j)·dt_j·(C_t·B_j)·x[j][c]     (in the chunk)
//           + exp(s_t)·Σ_n C_t[n]·h[c][n]                      (from before it)
//           + D·x[t][c],  then gated by silu(z[t][c]);
//   h[c][n] ← exp(s_last)·h[c][n] + Σ_j exp(s_last − s_j)·dt_j·x[j][c]·B_j[n].
// The rows of a chunk run side by side; only the chunks run in order, where
// the recurrence walks every row in turn a lane a channel. The rows are one
// sequence's consecutive positions (a prompt chunk's pass): its state is read
// at the start (zeros at position 0) and written back at the end.
//
// A workgroup takes one head's PB channels (workgroup w: head w / (P / PB),
// channels (w mod (P / PB))·PB …), their states h in shared memory, and the
// chunk's Q × Q matrix of exp(s_t − s_j)·dt_j·(C_t·B_j), which its channels
// share.
//
// Generated constants: as mamba2_scan's (DI, N, H, G, XSTRIDE, DT_MIN,
// DT_CLAMP, DT_MAX, A_LOG), Q (rows a chunk), PB (channels a workgroup; P / PB
// workgroups a head), THREADS (the workgroup size).
// Push constants (RowsPush): rows. Buffers: as mamba2_scan's.

#include "common.glsl"

layout(local_size_x = THREADS) in;

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

shared float hs[PB * N];  // the state of the workgroup's channels, [PB][N]
shared float gs[Q * Q];   // [t][j]: exp(s_t − s_j)·dt_j·(C_t·B_j) for j ≤ t, else 0
shared float cum[Q];      // s_t
shared float dts[Q];      // dt_t
shared float rest[Q];     // exp(s_last − s_j)·dt_j: row j's weight in the state at the chunk's end

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint hd = gl_WorkGroupID.x / (P / PB), c0 = hd * P + (gl_WorkGroupID.x % (P / PB)) * PB;
  const uint g = hd / (H / G), b_at = DI + g * N, c_at = DI + G * N + g * N;
#if A_LOG
  const float a = -exp(a_log[hd]);
#else
  const float a = a_log[hd];  // A itself (llama.cpp's ssm_a)
#endif
  const float skip = d_skip[hd], bias = dt_bias[hd];
  const uint seq = io.rows[0].sequence;
  const bool fresh = io.rows[0].position == 0u;
  for (uint e = lid; e < PB * N; e += THREADS) hs[e] = fresh ? 0.0 : state[(seq * DI + c0) * N + e];

  for (uint r0 = 0u; r0 < pc.rows; r0 += Q) {
    const uint len = min(Q, pc.rows - r0);
    if (lid < len) {
      const float raw = xz[(r0 + lid) * XSTRIDE + XSTRIDE - H + hd] + bias;
      float dt = raw > 20.0 ? raw : log(1.0 + exp(raw));  // torch's softplus, threshold 20
      dt = max(dt, DT_MIN);
#if DT_CLAMP
      dt = min(dt, DT_MAX);
#endif
      dts[lid] = dt;
      cum[lid] = dt * a;
    }
    barrier();
    if (lid == 0u)
      for (uint t = 1u; t < len; ++t) cum[t] += cum[t - 1u];
    barrier();
    const float last = cum[len - 1u];
    if (lid < len) rest[lid] = exp(last - cum[lid]) * dts[lid];
    // The chunk's rows seen from each other.
    for (uint e = lid; e < len * len; e += THREADS) {
      const uint t = e / len, j = e % len;
      float v = 0.0;
      if (j <= t) {
        float dot = 0.0;
        for (uint n = 0u; n < N; ++n) dot += u[(r0 + t) * UW + c_at + n] * u[(r0 + j) * UW + b_at + n];
        v = exp(cum[t] - cum[j]) * dts[j] * dot;
      }
      gs[t * Q + j] = v;
    }
    barrier();
    for (uint e = lid; e < len * PB; e += THREADS) {
      const uint t = e / PB, p = e % PB, c = c0 + p, row = r0 + t;
      float inner = 0.0;
      for (uint j = 0u; j <= t; ++j) inner += gs[t * Q + j] * u[(r0 + j) * UW + c];
      float before = 0.0;
      for (uint n = 0u; n < N; ++n) before += u[row * UW + c_at + n] * hs[p * N + n];
      const float x = u[row * UW + c], z = xz[row * XSTRIDE + c];
      y[row * DI + c] = (inner + exp(cum[t]) * before + skip * x) * (z / (1.0 + exp(-z)));
    }
    barrier();
    // The state at the chunk's end.
    const float decay = exp(last);
    for (uint e = lid; e < PB * N; e += THREADS) {
      const uint c = c0 + e / N, n = e % N;
      float h = decay * hs[e];
      for (uint j = 0u; j < len; ++j) h += rest[j] * u[(r0 + j) * UW + c] * u[(r0 + j) * UW + b_at + n];
      hs[e] = h;
    }
    barrier();
  }
  for (uint e = lid; e < PB * N; e += THREADS) state[(seq * DI + c0) * N + e] = hs[e];
}
