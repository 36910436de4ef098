// y[t][r] = epilogue(W[r] · x[t]) for a prompt chunk on a GPU (TOKENS 32
// or 64, ROWS 64 or 128): the tiled layout (matmul.glsl has the
// interface). A workgroup of 128 invocations owns ROWS weight rows × TOKENS
// tokens; each step of K (32·XT values) it stages the rows' weights
// (dequantized) and the tokens' x (normalized) in shared memory, and each
// invocation accumulates a block of ROWS/16 × TOKENS/8 outputs in registers
// from there: a weight value is read from memory once per TOKENS tokens, an
// x value once per ROWS rows. The next step's loads are issued before the
// current step's sums.
//
// Invocation (tr, tc) = (tid % 16, tid / 16) owns the rows 64m + 4tr + e
// (m < TM / 4, e < 4) and the tokens 32n + 4tc + e (n < TN / 4) of the
// tile: each K index costs it TM/4 + TN/4 16-byte shared loads for TM × TN
// sums, and consecutive invocations load consecutive vec4s.

#include "matmul_staged.glsl"

const uint TM = ROWS / 16u;
const uint TN = TOKENS / 8u;
const uint WS = ROWS / 4u + 1u;  // vec4s a K index (one of padding: stores spread over the banks)
const uint XS = TOKENS / 4u + 1u;

shared vec4 ws[BK * WS];  // ws[k * WS + r / 4][r % 4]: weight row r, value k of the step
#if GATED
shared vec4 ws2[BK * WS];
#endif
shared vec4 xs[BK * XS];  // xs[k * XS + t / 4][t % 4]

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint tr = tid % 16u, tc = tid / 16u;
  const uint row0 = gl_WorkGroupID.x * ROWS;
  const uint t0 = gl_WorkGroupID.y * TOKENS;
  const uint rows = tile_rows();
  if (t0 >= rows) return;  // the whole workgroup: an expert with fewer tokens

#if NORM
  token_stats(tid, t0, rows);
#endif
  stage_tasks(tid, row0, t0, rows);
  // Where each task's values go, in floats of ws and xs.
  uint wat[W_TASKS], xat[X_TASKS];
  [[unroll]] for (uint i = 0; i < W_TASKS; ++i) wat[i] = wpiece[i] * VALS * WS * 4u + wrow[i];
  [[unroll]] for (uint i = 0; i < X_TASKS; ++i) xat[i] = xq[i] * 4u * XS * 4u + xtoken[i];

  float acc[TM * TN];
#if GATED
  float acc2[TM * TN];
#endif
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) {
    acc[i] = 0.0;
#if GATED
    acc2[i] = 0.0;
#endif
  }

  fetch_step(0u);
  for (uint s = 0; s < STEPS; ++s) {
    [[unroll]] for (uint i = 0; i < W_TASKS; ++i) {
      if (!w_stored(tid, i)) continue;
      [[unroll]] for (uint e = 0; e < VALS; ++e) {
        const uint at = wat[i] + e * WS * 4u;
        ws[at / 4u][at % 4u] = wv[i * VALS + e];
#if GATED
        ws2[at / 4u][at % 4u] = wv2[i * VALS + e];
#endif
      }
    }
    [[unroll]] for (uint i = 0; i < X_TASKS; ++i) {
      if (!x_stored(tid, i)) continue;
      [[unroll]] for (uint e = 0; e < 4u; ++e) {
        const uint at = xat[i] + e * XS * 4u;
        xs[at / 4u][at % 4u] = xv[i][e];
      }
    }
    barrier();
    if (s + 1u < STEPS) fetch_step(s + 1u);
    for (uint k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#if GATED
      float a2[TM];
#endif
      [[unroll]] for (uint m = 0; m < TM / 4u; ++m) {
        const vec4 v = ws[k * WS + 16u * m + tr];
        a[4u * m] = v.x; a[4u * m + 1u] = v.y; a[4u * m + 2u] = v.z; a[4u * m + 3u] = v.w;
#if GATED
        const vec4 v2 = ws2[k * WS + 16u * m + tr];
        a2[4u * m] = v2.x; a2[4u * m + 1u] = v2.y; a2[4u * m + 2u] = v2.z; a2[4u * m + 3u] = v2.w;
#endif
      }
      [[unroll]] for (uint n = 0; n < TN / 4u; ++n) {
        const vec4 v = xs[k * XS + 8u * n + tc];
        b[4u * n] = v.x; b[4u * n + 1u] = v.y; b[4u * n + 2u] = v.z; b[4u * n + 3u] = v.w;
      }
      [[unroll]] for (uint i = 0; i < TM; ++i) {
        [[unroll]] for (uint j = 0; j < TN; ++j) {
          acc[i * TN + j] += a[i] * b[j];
#if GATED
          acc2[i * TN + j] += a2[i] * b[j];
#endif
        }
      }
    }
    barrier();
  }

  [[unroll]] for (uint i = 0; i < TM; ++i) {
    const uint row = row0 + 64u * (i / 4u) + 4u * tr + i % 4u;
    [[unroll]] for (uint j = 0; j < TN; ++j) {
      const uint t = t0 + 32u * (j / 4u) + 4u * tc + j % 4u;
      if (row >= pc.n || t >= rows) continue;
#if GATED
      store(row, y_row(t), acc[i * TN + j], acc2[i * TN + j]);
#else
      store(row, y_row(t), acc[i * TN + j], 0.0);
#endif
    }
  }
}
