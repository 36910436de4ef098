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

#include "matmul.glsl"

const uint THREADS = 128u;  // plan::Tile::kTiledThreads
const uint BK = 32u * XT;
const uint TM = ROWS / 16u;
const uint TN = TOKENS / 8u;
const uint WS = ROWS / 4u + 1u;  // vec4s a K index (one of padding: stores spread over the banks)
const uint XS = TOKENS / 4u + 1u;
#if QUANT
#define VALS 16u  // a piece of a weight row: half a unit (dequant_half)
const uint STEPS = (UNITS + XT - 1u) / XT;
#else
#define VALS VPT  // a piece: one texel
const uint STEPS = (K + BK - 1u) / BK;
#endif
const uint PIECES = BK / VALS;  // pieces of a row a step
const uint W_TASKS = (ROWS * PIECES + THREADS - 1u) / THREADS;
const uint X_TASKS = (TOKENS * (BK / 4u) + THREADS - 1u) / THREADS;

shared vec4 ws[BK * WS];  // ws[k * WS + r / 4][r % 4]: weight row r, value k of the step
#if GATED
shared vec4 ws2[BK * WS];
#endif
shared vec4 xs[BK * XS];  // xs[k * XS + t / 4][t % 4]
#if NORM
shared vec2 tstats[TOKENS];     // each token's mean and 1/σ
shared float partial[THREADS];  // their sums, THREADS / TOKENS a token
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

void main() {
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
