// What the layouts that stage tiles in shared memory share (matmul_tiled.comp,
// matmul_coop.comp): a workgroup of THREADS invocations owns ROWS weight rows
// × TOKENS tokens, and each step of K (BK = 32·XT values) its invocations
// load the rows' weights, dequantized, and the tokens' x, normalized under
// NORM, into registers (fetch_step), which the kernel then writes into its
// own tiles. Each kernel issues the next step's loads before the current
// step's sums.
//
// A step's values of K, in the order both a weight row's pieces and x hold
// them: consecutive values of K (dense dtypes, a texel of VPT values a
// piece), or XT units of a block dtype, each its half 0's 16 values, then
// its half 1's (quant.glsl's unit_lo and HI_OFFSET: a piece is half a unit).

#include "matmul.glsl"

const uint THREADS = 128u;  // plan::Tile::kTiledThreads
const uint BK = 32u * XT;
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
// values 4q … 4q + 3 of the step, in the order the weight pieces hold them.
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

#if NORM
// Each token's statistics into tstats, THREADS / TOKENS invocations a token,
// summed through shared memory: the mean (LayerNorm), then the centred squares.
void token_stats(uint tid, uint t0, uint rows) {
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

// The invocation's loads, the same every step (set by stage_tasks): weight
// task i reads piece wpiece[i] of tile row wrow[i] (rows past n repeat the
// last row; their sums are dropped), x task i the vec4 xq[i] of tile token
// xtoken[i]. Tasks past the tile repeat its last one; w_stored and x_stored
// say which write their registers into the tiles. Invocation-private, not
// shared: each invocation's own registers.
uint wbase[W_TASKS], wpiece[W_TASKS], wrow[W_TASKS];
#if GATED
uint wbase2[W_TASKS];
#endif
uint xbase[X_TASKS], xq[X_TASKS], xtoken[X_TASKS];
bool xlive[X_TASKS];
vec2 xstats[X_TASKS];
// A step's loads (fetch_step): wv[i · VALS + e] value e of weight task i's
// piece (wv2: W2's), xv[i] x task i's vec4.
float wv[W_TASKS * VALS];
#if GATED
float wv2[W_TASKS * VALS];
#endif
vec4 xv[X_TASKS];

bool w_stored(uint tid, uint i) { return tid + i * THREADS < ROWS * PIECES; }
bool x_stored(uint tid, uint i) { return tid + i * THREADS < TOKENS * (BK / 4u); }

void stage_tasks(uint tid, uint row0, uint t0, uint rows) {
  [[unroll]] for (uint i = 0; i < W_TASKS; ++i) {
    const uint task = min(tid + i * THREADS, ROWS * PIECES - 1u);
    wrow[i] = task / PIECES;
    wpiece[i] = task % PIECES;
    const uint row = expert_row0() + min(row0 + wrow[i], pc.n - 1u);
    wbase[i] = (pc.gate_row0 + row) * TPR;
#if GATED
    wbase2[i] = (pc.up_row0 + row) * TPR;
#endif
  }
  [[unroll]] for (uint i = 0; i < X_TASKS; ++i) {
    const uint task = min(tid + i * THREADS, TOKENS * (BK / 4u) - 1u);
    const uint t = task / (BK / 4u);
    xtoken[i] = t;
    xq[i] = task % (BK / 4u);
    xlive[i] = t0 + t < rows;
    xbase[i] = x_row(min(t0 + t, rows - 1u)) * (K / 4u);
#if NORM
    xstats[i] = tstats[t];
#else
    xstats[i] = vec2(0.0);
#endif
  }
}

// Step s's loads, into registers.
void fetch_step(uint s) {
  [[unroll]] for (uint i = 0; i < W_TASKS; ++i) {
    float v[VALS];
    fetch_piece(W, wbase[i], s, wpiece[i], v);
    [[unroll]] for (uint e = 0; e < VALS; ++e) wv[i * VALS + e] = v[e];
#if GATED
    fetch_piece(W2, wbase2[i], s, wpiece[i], v);
    [[unroll]] for (uint e = 0; e < VALS; ++e) wv2[i * VALS + e] = v[e];
#endif
  }
  [[unroll]] for (uint i = 0; i < X_TASKS; ++i) xv[i] = fetch_x(s, xq[i], xbase[i], xlive[i], xstats[i]);
}
