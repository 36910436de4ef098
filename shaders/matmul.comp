// y[t][r] = epilogue(W[r] · x[t]): every linear layer, for decode (TOKENS = 1)
// and prefill (TOKENS > 1) alike.
//
// Three layouts, picked by the TOKENS specialization constant. The first
// two are one subgroup-sized workgroup and use neither shared memory nor
// barriers (notes/lavapipe.md: both are expensive there); all three read
// weights through texel buffers.
//   TOKENS < 8 (decode): the workgroup owns ROWS weight rows for TOKENS
//     tokens; lanes split K in chunks of LANES × XT texels, each lane keeping
//     its slice of x in registers for all ROWS rows; subgroupAdd reduces at
//     the end. Each token's sums are taken in the same order whatever TOKENS
//     is, so a batched decode step (one row per sequence, TOKENS > 1: each
//     weight texel read once for TOKENS sequences) gives every sequence the
//     bits a decode of it alone (TOKENS = 1) gives.
//   TOKENS = 8 (prefill): each lane owns ROWS rows and computes them for 8
//     tokens; lane t loads token t's slice of x and subgroupBroadcast hands
//     it to every lane, so x costs one load per subgroup, not one per lane.
//   TOKENS > 8 (tiled prefill, for GPUs): a workgroup of 128 invocations owns
//     ROWS weight rows × TOKENS tokens; each step of K (32·XT values) it
//     stages the rows' weights (dequantized) and the tokens' x (normalized)
//     in shared memory, and each invocation accumulates a block of
//     ROWS/16 × TOKENS/8 outputs in registers from there: a weight value is
//     read from memory once per TOKENS tokens, an x value once per ROWS
//     rows. The next step's loads are issued before the current step's sums.
//
// Generated constants:
//   K          input width (a multiple of VPT; of 32 or 256 for a block dtype)
//   WDTYPE     weight dtype (common.glsl); W_TPR texels per weight row, and
//              a block dtype's plane offsets (quant.glsl): dequantized as read,
//              f32 accumulation, in units of 32 values instead of texels
//   HAS_BIAS   add bias[r] (bias2[r] to the up half of a gated MLP)
//   GATED      y = φ(W·x + b) ⊙ (W2·x + b2): the gate and up projections in one pass
//   ACT        φ (common.glsl ACT_*); ACT_NONE for a plain projection
//   RESIDUAL   y += …: the residual add folded into the producing kernel
//   NORM       the norm before this projection, applied to x as it is read:
//              0 none, 1 RMSNorm, 2 LayerNorm (NORM_EPS, NORM_BIAS, NORM_UNIT_OFFSET)
//   SOFTCAPPED 1: y = c · tanh(y / c) with c = SOFTCAP (the LM head's output.softcap)
//   SCALED     1: W·x is multiplied by OUT_SCALE first (the LM head's output.scale: T5's tied head)
//   EXPERT_MODE 1: EXPERTS = E experts of a mixture (grid z: expert e), W and W2 E experts'
//              matrices of n rows stacked; the workgroup's token rows are the
//              slots moe_route listed for e, x read at the slot's token
//              (slot / TOPK) or, X_OF_SLOT, at the slot itself; y written at the slot
//              (W and W2 may hold a part of the experts, PART_EXPERTS from push
//              expert0: a mixture too large for one binding is several dispatches)
// Specialization constants: 0 the workgroup size (the subgroup size × GROUPS;
// 128 tiled), 1 ROWS, 2 TOKENS, 3 XT (tiled: units of 32 values of K a
// step), 4 GROUPS: subgroups a workgroup in decode, each its own ROWS rows
// (a GPU keeps more of them resident than one-subgroup workgroups).
// Push constants (MatmulPush): rows, n, x_row0, gate_row0, up_row0, col0, y_stride
// (a split matrix's row range writes its columns from col0 of a wider y).
// Buffers: W, W2 [N][K] texels; x [rows][K] f32; bias, bias2 [N] f32; y [rows][n] f32;
//          norm_g, norm_b [K] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 8;
layout(constant_id = 2) const uint TOKENS = 1;
layout(constant_id = 3) const uint XT = 2;  // texels per lane per chunk of K
layout(constant_id = 4) const uint GROUPS = 1;

layout(binding = BINDING_w) uniform usamplerBuffer W;
layout(binding = BINDING_w2) uniform usamplerBuffer W2;
layout(std430, binding = BINDING_x) readonly buffer X { vec4 x[]; };
layout(std430, binding = BINDING_bias) readonly buffer Bias { float bias[]; };
layout(std430, binding = BINDING_bias2) readonly buffer Bias2 { float bias2[]; };
layout(std430, binding = BINDING_y) buffer Y { float y[]; };
#if NORM
layout(std430, binding = BINDING_norm_scale) readonly buffer NormG { vec4 norm_g[]; };
layout(std430, binding = BINDING_norm_shift) readonly buffer NormB { vec4 norm_b[]; };
#endif

#if EXPERT_MODE
layout(std430, binding = BINDING_route) readonly buffer Route { uint route[]; };
#endif

const uint TPR = W_TPR;  // texels per weight row (K / VPT, or a block dtype's planes)
const uint UNITS = K / 32u;  // block dtypes: units of 32 values (quant.glsl)

// The token rows of this workgroup: the chunk's, or (EXPERTS) the slots
// routed to its expert, the z-th of the experts with tokens (none past
// them); the input row of tile row t, the output row it writes, and the
// expert's first weight row.
#if EXPERT_MODE
uint expert() { return gl_WorkGroupID.z < route[EXPERTS] ? route[EXPERTS + 1u + gl_WorkGroupID.z] : 0u; }
#endif
uint tile_rows() {
#if EXPERT_MODE
  // An expert outside this dispatch's part (experts expert0 … expert0 +
  // PART_EXPERTS − 1 in its binding) is another dispatch's.
  const uint e = expert();
  if (e < pc.expert0 || e >= pc.expert0 + PART_EXPERTS) return 0u;
  return gl_WorkGroupID.z < route[EXPERTS] ? route[e] : 0u;
#else
  return pc.rows;
#endif
}
uint y_row(uint t) {
#if EXPERT_MODE
  return route[2u * EXPERTS + 1u + pc.rows * TOPK + expert() * pc.rows + t];
#else
  return t;
#endif
}
uint x_row(uint t) {
#if EXPERT_MODE
  return X_OF_SLOT != 0 ? y_row(t) : y_row(t) / TOPK;
#else
  return pc.x_row0 + t;
#endif
}
uint expert_row0() {
#if EXPERT_MODE
  return (expert() - pc.expert0) * pc.n;
#else
  return 0u;
#endif
}
const uint LANES = gl_WorkGroupSize.x / GROUPS;  // a subgroup's

#if NORM
// Mean and 1/sqrt(variance + eps) of input row `row` (the mean is 0 for
// RMSNorm), over the values this lane sees: K/4 vec4s from `first` in steps
// of `step`. Two passes over the row: the variance of centred values.
vec2 partial_stats(uint row, uint first, uint step, bool whole_subgroup) {
  const uint base = row * (K / 4);
  float mean = 0.0;
#if NORM == 2
  float sum = 0.0;
  for (uint i = first; i < K / 4; i += step) {
    const vec4 v = x[base + i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  mean = (whole_subgroup ? subgroupAdd(sum) : sum) / float(K);
#endif
  float squares = 0.0;
  for (uint i = first; i < K / 4; i += step) {
    const vec4 v = x[base + i] - mean;
    squares += dot(v, v);
  }
  squares = whole_subgroup ? subgroupAdd(squares) : squares;
  return vec2(mean, inversesqrt(squares / float(K) + NORM_EPS));
}

// Values k4·4 … k4·4 + 3 of a row with statistics `stats`, normalized.
vec4 normalized(vec4 v, uint k4, vec2 stats) {
  vec4 g = norm_g[k4];
#if NORM_UNIT_OFFSET
  g += 1.0;
#endif
  v = (v - stats.x) * stats.y * g;
#if NORM_BIAS
  v += norm_b[k4];
#endif
  return v;
}
#endif

// The epilogue of output (row, token t of the chunk).
void store(uint row, uint t, float sum, float sum2) {
#if SCALED
  float value = sum * OUT_SCALE;
#else
  float value = sum;
#endif
#if HAS_BIAS
  value += bias[pc.col0 + pc.gate_row0 + row];
#endif
#if GATED
  float up = sum2;
#if HAS_BIAS
  up += bias2[pc.col0 + pc.up_row0 + row];
#endif
  value = activate(value, ACT) * up;
#else
  value = activate(value, ACT);
#endif
#if SOFTCAPPED
  value = softcap(value, SOFTCAP);
#endif
  const uint at = t * pc.y_stride + pc.col0 + row;
#if RESIDUAL
  y[at] += value;
#else
  y[at] = value;
#endif
}

void decode() {
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

void prefill() {
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

// ---- The tiled layout (TOKENS 32 or 64, ROWS 64 or 128). Invocation
// (tr, tc) = (tid % 16, tid / 16) owns the rows 64m + 4tr + e (m < TM / 4,
// e < 4) and the tokens 32n + 4tc + e (n < TN / 4) of the tile: each K
// index costs it TM/4 + TN/4 16-byte shared loads for TM × TN sums, and
// consecutive invocations load consecutive vec4s. The sizes below collapse
// to 1 for the other layouts, which never touch them.
const bool TILED = TOKENS > 8u;
const uint THREADS = 128u;  // plan::Tile::kTiledThreads
const uint BK = 32u * XT;
const uint TM = TILED ? ROWS / 16u : 4u;
const uint TN = TILED ? TOKENS / 8u : 4u;
const uint WS = TILED ? ROWS / 4u + 1u : 1u;  // vec4s a K index (one of padding: stores spread over the banks)
const uint XS = TILED ? TOKENS / 4u + 1u : 1u;
#if QUANT
#define VALS 16u  // a piece of a weight row: half a unit (dequant_half)
const uint STEPS = (UNITS + XT - 1u) / XT;
#else
#define VALS VPT  // a piece: one texel
const uint STEPS = (K + BK - 1u) / BK;
#endif
const uint PIECES = BK / VALS;  // pieces of a row a step
const uint W_TASKS = TILED ? (ROWS * PIECES + THREADS - 1u) / THREADS : 1u;
const uint X_TASKS = TILED ? (TOKENS * (BK / 4u) + THREADS - 1u) / THREADS : 1u;

shared vec4 ws[TILED ? BK * WS : 1u];  // ws[k * WS + r / 4][r % 4]: weight row r, value k of the step
#if GATED
shared vec4 ws2[TILED ? BK * WS : 1u];
#endif
shared vec4 xs[TILED ? BK * XS : 1u];  // xs[k * XS + t / 4][t % 4]
#if NORM
shared vec2 tstats[TILED ? TOKENS : 1u];     // each token's mean and 1/σ
shared float partial[TILED ? THREADS : 1u];  // their sums, THREADS / TOKENS a token
#endif

// Piece `piece` of step s of the weight row whose first texel is `base`:
// VALS values (zeros past K).
void fetch_piece(usamplerBuffer M, uint base, uint s, uint piece, out float v[VALS]) {
#if QUANT
  const uint u = s * XT + piece / 2u;
  if (u < UNITS) {
    dequant_half(M, base, u, piece % 2u, v);
    return;
  }
#else
  const uint j = s * (BK / VPT) + piece;
  if (j < TPR) {
    unpack_texel(texelFetch(M, int(base + j)), v);
    return;
  }
#endif
  [[unroll]] for (uint i = 0; i < VALS; ++i) v[i] = 0.0;
}

// The vec4 q of step s of the token row whose first vec4 is xb, normalized:
// values 4q … 4q + 3 of the step, in the order the weight pieces hold them
// (a block dtype's unit: its half 0's 16 values, then half 1's).
vec4 fetch_x(uint s, uint q, uint xb, bool live, vec2 st) {
#if QUANT
  const uint u = s * XT + q / 8u;
  const bool inside = u < UNITS;
  const uint k4 = (unit_lo(min(u, UNITS - 1u)) + ((q % 8u) / 4u) * HI_OFFSET) / 4u + q % 4u;
#else
  const uint k4 = s * (BK / 4u) + q;
  const bool inside = k4 < K / 4u;
#endif
  if (!live || !inside) return vec4(0.0);
#if NORM
  return normalized(x[xb + k4], k4, st);
#else
  return x[xb + k4];
#endif
}

void tiled() {
  const uint tid = gl_LocalInvocationID.x;
  const uint tr = tid % 16u, tc = tid / 16u;
  const uint row0 = gl_WorkGroupID.x * ROWS;
  const uint t0 = gl_WorkGroupID.y * TOKENS;
  const uint rows = tile_rows();
  if (t0 >= rows) return;  // the whole workgroup: an expert with fewer tokens

#if NORM
  // Each token's statistics, THREADS / TOKENS invocations a token, summed
  // through shared memory: the mean (LayerNorm), then the centred squares.
  {
    const uint P = THREADS / TOKENS, t = tid / P, p = tid % P;
    const uint xb = x_row(min(t0 + t, rows - 1u)) * (K / 4u);
    float mean = 0.0;
#if NORM == 2
    float sum = 0.0;
    for (uint i = p; i < K / 4u; i += P) {
      const vec4 v = x[xb + i];
      sum += (v.x + v.y) + (v.z + v.w);
    }
    partial[tid] = sum;
    barrier();
    if (p == 0u) {
      float total = 0.0;
      for (uint i = 0; i < P; ++i) total += partial[tid + i];
      tstats[t] = vec2(total / float(K), 0.0);
    }
    barrier();
    mean = tstats[t].x;
    barrier();  // every mean read before partial is written again
#endif
    float squares = 0.0;
    for (uint i = p; i < K / 4u; i += P) {
      const vec4 v = x[xb + i] - mean;
      squares += dot(v, v);
    }
    partial[tid] = squares;
    barrier();
    if (p == 0u) {
      float total = 0.0;
      for (uint i = 0; i < P; ++i) total += partial[tid + i];
      tstats[t] = vec2(mean, inversesqrt(total / float(K) + NORM_EPS));
    }
    barrier();
  }
#endif

  // The invocation's loads, the same every step: weight pieces (rows past
  // n repeat the last row; their sums are dropped) and vec4s of x. Tasks
  // past the tile repeat its last one and store nothing.
  uint wbase[W_TASKS], wpiece[W_TASKS], wat[W_TASKS];
#if GATED
  uint wbase2[W_TASKS];
#endif
  [[unroll]] for (uint i = 0; i < W_TASKS; ++i) {
    const uint task = min(tid + i * THREADS, ROWS * PIECES - 1u);
    const uint r = task / PIECES;
    wpiece[i] = task % PIECES;
    const uint row = expert_row0() + min(row0 + r, pc.n - 1u);
    wbase[i] = (pc.gate_row0 + row) * TPR;
#if GATED
    wbase2[i] = (pc.up_row0 + row) * TPR;
#endif
    wat[i] = wpiece[i] * VALS * WS * 4u + r;  // in floats
  }
  uint xbase[X_TASKS], xq[X_TASKS], xat[X_TASKS];
  bool xlive[X_TASKS];
  vec2 xstats[X_TASKS];
  [[unroll]] for (uint i = 0; i < X_TASKS; ++i) {
    const uint task = min(tid + i * THREADS, TOKENS * (BK / 4u) - 1u);
    const uint t = task / (BK / 4u);
    xq[i] = task % (BK / 4u);
    xlive[i] = t0 + t < rows;
    xbase[i] = x_row(min(t0 + t, rows - 1u)) * (K / 4u);
    xat[i] = xq[i] * 4u * XS * 4u + t;  // in floats
#if NORM
    xstats[i] = tstats[t];
#else
    xstats[i] = vec2(0.0);
#endif
  }

  float wv[W_TASKS * VALS];
#if GATED
  float wv2[W_TASKS * VALS];
#endif
  vec4 xv[X_TASKS];
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

  // Step s's loads, into registers.
#if GATED
#define FETCH_W2(i, s)                                                  \
  {                                                                     \
    float v[VALS];                                                      \
    fetch_piece(W2, wbase2[i], s, wpiece[i], v);                        \
    [[unroll]] for (uint e = 0; e < VALS; ++e) wv2[i * VALS + e] = v[e]; \
  }
#else
#define FETCH_W2(i, s)
#endif
#define FETCH(s)                                                       \
  [[unroll]] for (uint i = 0; i < W_TASKS; ++i) {                      \
    float v[VALS];                                                     \
    fetch_piece(W, wbase[i], s, wpiece[i], v);                         \
    [[unroll]] for (uint e = 0; e < VALS; ++e) wv[i * VALS + e] = v[e]; \
    FETCH_W2(i, s)                                                     \
  }                                                                    \
  [[unroll]] for (uint i = 0; i < X_TASKS; ++i) xv[i] = fetch_x(s, xq[i], xbase[i], xlive[i], xstats[i]);

  FETCH(0u)
  for (uint s = 0; s < STEPS; ++s) {
    [[unroll]] for (uint i = 0; i < W_TASKS; ++i) {
      if (tid + i * THREADS >= ROWS * PIECES) continue;
      [[unroll]] for (uint e = 0; e < VALS; ++e) {
        const uint at = wat[i] + e * WS * 4u;
        ws[at / 4u][at % 4u] = wv[i * VALS + e];
#if GATED
        ws2[at / 4u][at % 4u] = wv2[i * VALS + e];
#endif
      }
    }
    [[unroll]] for (uint i = 0; i < X_TASKS; ++i) {
      if (tid + i * THREADS >= TOKENS * (BK / 4u)) continue;
      [[unroll]] for (uint e = 0; e < 4u; ++e) {
        const uint at = xat[i] + e * XS * 4u;
        xs[at / 4u][at % 4u] = xv[i][e];
      }
    }
    barrier();
    if (s + 1u < STEPS) {
      FETCH(s + 1u)
    }
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

void main() {
  if (TILED) tiled();
  else if (TOKENS < 8) decode();
  else prefill();
}
