// y[t][r] = epilogue(W[r] · x[t]) for a prompt chunk on a CPU device
// (TOKENS = 8): the broadcast layout (matmul.glsl has the interface). Each
// lane owns ROWS rows and computes them for 8 tokens; lane t loads token
// t's slice of x and subgroupBroadcast hands it to every lane, so x costs
// one load per subgroup, not one per lane. One subgroup-sized workgroup, no
// shared memory or barriers (both are expensive on lavapipe:
// docs/lavapipe.md).

#include "matmul.glsl"

// x of token t, broadcast from lane t (a constant index: cheap on lavapipe).
#define TAKE_X(t)                                                 \
  {                                                               \
    const vec4 a = subgroupBroadcast(mine0, t);                   \
    const vec4 b = subgroupBroadcast(mine1, t);                   \
    xs[t * 8 + 0] = a.x; xs[t * 8 + 1] = a.y; xs[t * 8 + 2] = a.z; \
    xs[t * 8 + 3] = a.w; xs[t * 8 + 4] = b.x; xs[t * 8 + 5] = b.y; \
    xs[t * 8 + 6] = b.z; xs[t * 8 + 7] = b.w;                     \
  }

// Block weights: the 16 values of token t's half unit, broadcast from lane t.
#define TAKE_X16(t)                                            \
  [[unroll]] for (uint q = 0; q < 4u; ++q) {                   \
    const vec4 a = subgroupBroadcast(mine[q], t);              \
    xs[t * 16 + q * 4 + 0] = a.x; xs[t * 16 + q * 4 + 1] = a.y; \
    xs[t * 16 + q * 4 + 2] = a.z; xs[t * 16 + q * 4 + 3] = a.w; \
  }

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint row0 = gl_WorkGroupID.x * ROWS * LANES;
  const uint t0 = gl_WorkGroupID.y * 8;
  const uint rows = tile_rows();
  if (t0 >= rows) return;  // the whole workgroup: an expert with fewer tokens
  // Lane's rows: row0 + r * LANES + lane.
  uint base[ROWS];
#if GATED
  uint base2[ROWS];
#endif
  float acc[ROWS * 8];
#if GATED
  float acc2[ROWS * 8];
#endif
  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    const uint row = expert_row0() + min(row0 + r * LANES + lane, pc.n - 1);
    base[r] = (pc.gate_row0 + row) * TPR;
#if GATED
    base2[r] = (pc.up_row0 + row) * TPR;
#endif
    [[unroll]] for (uint t = 0; t < 8; ++t) {
      acc[r * 8 + t] = 0.0;
#if GATED
      acc2[r * 8 + t] = 0.0;
#endif
    }
  }
  const bool loads = lane < 8 && t0 + lane < rows;
  const uint xrow = x_row(min(t0 + min(lane, 7u), rows - 1)) * (K / 4);
#if NORM
  // Lane t < 8 normalizes token t's values, so it alone needs their statistics.
  const vec2 stats = partial_stats(x_row(min(t0 + min(lane, 7u), rows - 1)), 0, 1, false);
#endif
#if QUANT
  // Block weights: a unit's two halves of 16 values in turn; lane t < 8
  // loads token t's 16 values of x, every lane takes them by broadcast.
  for (uint u = 0; u < UNITS; ++u) {
    [[unroll]] for (uint h = 0; h < 2u; ++h) {
      const uint k4 = (unit_lo(u) + h * HI_OFFSET) / 4u;
      vec4 mine[4];
      [[unroll]] for (uint q = 0; q < 4u; ++q) {
        mine[q] = loads ? x[xrow + k4 + q] : vec4(0.0);
#if NORM
        if (loads) mine[q] = normalized(mine[q], k4 + q, stats);
#endif
      }
      float xs[128];
      TAKE_X16(0) TAKE_X16(1) TAKE_X16(2) TAKE_X16(3) TAKE_X16(4) TAKE_X16(5) TAKE_X16(6) TAKE_X16(7)
      [[unroll]] for (uint r = 0; r < ROWS; ++r) {
        float w[16];
        dequant_half(W, base[r], u, h, w);
#if GATED
        float w2[16];
        dequant_half(W2, base2[r], u, h, w2);
#endif
        [[unroll]] for (uint t = 0; t < 8u; ++t) {
          float s = 0.0;
#if GATED
          float s2 = 0.0;
#endif
          [[unroll]] for (uint i = 0; i < 16u; ++i) {
            s += w[i] * xs[t * 16u + i];
#if GATED
            s2 += w2[i] * xs[t * 16u + i];
#endif
          }
          acc[r * 8 + t] += s;
#if GATED
          acc2[r * 8 + t] += s2;
#endif
        }
      }
    }
  }
#else
  for (uint j = 0; j < TPR; ++j) {
    // Lane t < 8 loads token t's VPT values (8 for 16-bit weights; f32
    // weights take the first 4 of two texels' worth, see below).
    vec4 mine0 = loads ? x[xrow + j * (VPT / 4)] : vec4(0.0);
#if WDTYPE == 0
    vec4 mine1 = vec4(0.0);
#else
    vec4 mine1 = loads ? x[xrow + j * (VPT / 4) + 1] : vec4(0.0);
#endif
#if NORM
    if (loads) {
      mine0 = normalized(mine0, j * (VPT / 4), stats);
#if WDTYPE != 0
      mine1 = normalized(mine1, j * (VPT / 4) + 1, stats);
#endif
    }
#endif
    float xs[64];
    TAKE_X(0) TAKE_X(1) TAKE_X(2) TAKE_X(3) TAKE_X(4) TAKE_X(5) TAKE_X(6) TAKE_X(7)
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
      float w[VPT];
      unpack_texel(texelFetch(W, int(base[r] + j)), w);
#if GATED
      float w2[VPT];
      unpack_texel(texelFetch(W2, int(base2[r] + j)), w2);
#endif
      [[unroll]] for (uint t = 0; t < 8; ++t) {
        float s = 0.0;
#if GATED
        float s2 = 0.0;
#endif
        [[unroll]] for (uint i = 0; i < VPT; ++i) {
          s += w[i] * xs[t * 8 + i];
#if GATED
          s2 += w2[i] * xs[t * 8 + i];
#endif
        }
        acc[r * 8 + t] += s;
#if GATED
        acc2[r * 8 + t] += s2;
#endif
      }
    }
  }
#endif
  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    const uint row = row0 + r * LANES + lane;
    [[unroll]] for (uint t = 0; t < 8; ++t) {
      if (row >= pc.n || t0 + t >= rows) continue;
#if GATED
      store(row, y_row(t0 + t), acc[r * 8 + t], acc2[r * 8 + t]);
#else
      store(row, y_row(t0 + t), acc[r * 8 + t], 0.0);
#endif
    }
  }
}
