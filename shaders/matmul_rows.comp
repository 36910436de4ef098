// y[t][r] = epilogue(W[r] · x[t]) for decode (TOKENS = 1) and a batched
// decode step (TOKENS 2–7: one row per sequence): the rows layout
// (matmul.glsl has the interface). A workgroup of GROUPS subgroups, each
// owning ROWS weight rows for TOKENS tokens; lanes split K in chunks of
// LANES × XT texels, each lane keeping its slice of x in registers for all
// ROWS rows; subgroupAdd reduces at the end. No shared memory or barriers
// (both are expensive on lavapipe: docs/lavapipe.md). Each token's sums are taken in
// the same order whatever TOKENS is, so a batched decode step (each weight
// texel read once for TOKENS sequences) gives every sequence the bits a
// decode of it alone gives.

#include "matmul.glsl"

void main() {
  const uint lane = GROUPS == 1u ? gl_LocalInvocationID.x : gl_SubgroupInvocationID;
  const uint row0 = (gl_WorkGroupID.x * GROUPS + (GROUPS == 1u ? 0u : gl_SubgroupID)) * ROWS;
  const uint t0 = gl_WorkGroupID.y * TOKENS;
  const uint rows = tile_rows();
  if (t0 >= rows) return;  // the whole workgroup: an expert with fewer tokens

  float acc[ROWS * TOKENS];
#if GATED
  float acc2[ROWS * TOKENS];
#endif
  // Every loop over the tile is unrolled: acc must stay in registers, and a
  // dynamically indexed array goes to memory (2-3× slower on lavapipe).
  [[unroll]] for (uint i = 0; i < ROWS * TOKENS; ++i) {
    acc[i] = 0.0;
#if GATED
    acc2[i] = 0.0;
#endif
  }

  // Row bases: rows past n repeat the last row; their sums are dropped.
  uint base[ROWS];
#if GATED
  uint base2[ROWS];
#endif
  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    const uint row = expert_row0() + min(row0 + r, pc.n - 1);
    base[r] = (pc.gate_row0 + row) * TPR;
#if GATED
    base2[r] = (pc.up_row0 + row) * TPR;
#endif
  }

#if NORM
  vec2 stats[TOKENS];
  [[unroll]] for (uint t = 0; t < TOKENS; ++t)
    stats[t] = partial_stats(x_row(min(t0 + t, rows - 1)), lane, LANES, true);
#endif

  // Each token's input row, found once (an expert's through moe_route's list).
  uint xbase[TOKENS];
  [[unroll]] for (uint t = 0; t < TOKENS; ++t) xbase[t] = x_row(min(t0 + t, rows - 1)) * K;

#if QUANT
  // Block weights: lane l takes units l, l + LANES, …; its unit's 32 values
  // of x (both halves), scaled for dot_unit (quant.glsl), and their sums
  // stay in registers for all ROWS rows.
  for (uint c = 0; c < UNITS; c += LANES) {
    const uint u = min(c + lane, UNITS - 1);
    const bool inside = c + lane < UNITS;
    const uint lo = unit_lo(u);
    float xq[TOKENS * 32], xh[TOKENS * 32], sx[TOKENS * 2];
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
      const bool live = inside && t0 + t < rows;
      [[unroll]] for (uint h = 0; h < 2u; ++h) {
        float sum = 0.0;
        [[unroll]] for (uint q = 0; q < 4u; ++q) {
          const uint k4 = (lo + h * HI_OFFSET) / 4u + q;
#if NORM
          const vec4 v = live ? normalized(x[xbase[t] / 4u + k4], k4, stats[t]) : vec4(0.0);
#else
          const vec4 v = live ? x[xbase[t] / 4u + k4] : vec4(0.0);
#endif
          sum += (v.x + v.y) + (v.z + v.w);
          [[unroll]] for (uint e = 0; e < 4u; ++e) {
            const uint i = q * 4u + e, o = (t * 2u + h) * 16u + i;
            xq[o] = v[e] * x_for_quant(i, h);
            xh[o] = v[e] * x_for_high(i);
          }
        }
        sx[t * 2u + h] = sum;
      }
    }
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
      float a[32], b[32];
      [[unroll]] for (uint i = 0; i < 32u; ++i) {
        a[i] = xq[t * 32u + i];
        b[i] = xh[t * 32u + i];
      }
      const vec2 sums = vec2(sx[t * 2u], sx[t * 2u + 1u]);
      [[unroll]] for (uint r = 0; r < ROWS; ++r) {
        acc[r * TOKENS + t] += dot_unit(W, base[r], u, a, b, sums);
#if GATED
        acc2[r * TOKENS + t] += dot_unit(W2, base2[r], u, a, b, sums);
#endif
      }
    }
  }
#else
  // A chunk is LANES × XT texels; lane l holds texels l, l + LANES, … of it.
  for (uint c = 0; c < TPR; c += LANES * XT) {
    float xs[XT * TOKENS * VPT];
    uint js[XT];
    [[unroll]] for (uint e = 0; e < XT; ++e) {
      const uint j = c + e * LANES + lane;
      const bool inside = j < TPR;
      js[e] = min(j, TPR - 1);  // a texel past the row reads a valid one times x = 0
      [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
        const bool live = inside && t0 + t < rows;
        const uint at = (xbase[t] + js[e] * VPT) / 4;
        [[unroll]] for (uint h = 0; h < VPT / 4; ++h) {
#if NORM
          const vec4 v = live ? normalized(x[at + h], (js[e] * VPT) / 4 + h, stats[t]) : vec4(0.0);
#else
          const vec4 v = live ? x[at + h] : vec4(0.0);
#endif
          const uint o = (e * TOKENS + t) * VPT + h * 4;
          xs[o + 0] = v.x;
          xs[o + 1] = v.y;
          xs[o + 2] = v.z;
          xs[o + 3] = v.w;
        }
      }
    }
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
      [[unroll]] for (uint e = 0; e < XT; ++e) {
        float w[VPT];
        unpack_texel(texelFetch(W, int(base[r] + js[e])), w);
#if GATED
        float w2[VPT];
        unpack_texel(texelFetch(W2, int(base2[r] + js[e])), w2);
#endif
        [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
          float s = 0.0;
#if GATED
          float s2 = 0.0;
#endif
          [[unroll]] for (uint i = 0; i < VPT; ++i) {
            s += w[i] * xs[(e * TOKENS + t) * VPT + i];
#if GATED
            s2 += w2[i] * xs[(e * TOKENS + t) * VPT + i];
#endif
          }
          acc[r * TOKENS + t] += s;
#if GATED
          acc2[r * TOKENS + t] += s2;
#endif
        }
      }
    }
  }

#endif

  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
      const uint i = r * TOKENS + t;
      const float sum = subgroupAdd(acc[i]);
#if GATED
      const float sum2 = subgroupAdd(acc2[i]);
#endif
      const uint row = row0 + r;
      if (lane != i % LANES || row >= pc.n || t0 + t >= rows) continue;
#if GATED
      store(row, y_row(t0 + t), sum, sum2);
#else
      store(row, y_row(t0 + t), sum, 0.0);
#endif
    }
  }
}
