// Flash attention of a prompt chunk on a GPU (attention_flash.glsl says
// how a workgroup walks its keys): the products by multiply-adds from
// shared memory. A tile's keys and values are staged as the cache's texels
// (kv.glsl), the lines' queries once as f32, scaled.
//
// S = Q · Kᵀ: an invocation takes 4 lines × 1 key a cell, reading a key
// texel once for the 4. P · V: an invocation keeps the output of LB lines ×
// one texel of dims (CVPT) in registers across the tiles (ROUNDS such
// cells), reading each value texel of the tile once for its LB lines.

#include "attention_flash.glsl"

shared vec4 queries[LINES * (DH / 4u)];  // queries[line · DH / 4 + d]: dims 4d … 4d + 3
shared uvec4 kstage[KEYS * CTPR];        // kstage[j · CTPR + c]: texel c of key base + j
shared uvec4 vstage[KEYS * CTPR];

// Output cells: LB lines × one texel of dims.
const uint LB = LINES * CTPR >= 4u * THREADS ? 4u : LINES * CTPR >= 2u * THREADS ? 2u : 1u;
const uint CELLS = LINES / LB * CTPR;
const uint ROUNDS = (CELLS + THREADS - 1u) / THREADS;
// Score cells: 4 lines × one key.
const uint SCORE_CELLS = LINES / 4u * KEYS;

void main() {
  const uint tid = gl_LocalInvocationIndex;
  if (first_row() >= pc.rows) return;  // the whole workgroup
#if RELATIVE
  load_relative(head0());
#endif
  for (uint i = tid; i < LINES * (DH / 4u); i += THREADS) queries[i] = query4(i / (DH / 4u), i % (DH / 4u));
  for (uvec2 seg = segment(first_row());; seg = segment(seg.y)) {
    const uint sequence = io.rows[seg.x].sequence;
    const uvec2 keys = segment_keys(seg);
    Line s;
    if (tid < LINES) s = start_line(tid, seg);
    float acc[ROUNDS * LB * CVPT];
    [[unroll]] for (uint i = 0; i < ROUNDS * LB * CVPT; ++i) acc[i] = 0.0;

    for (uint base = keys.x; base < keys.y; base += KEYS) {
      for (uint i = tid; i < KEYS * CTPR; i += THREADS) {
        const int at = cache_texel(sequence, min(base + i / CTPR, keys.y - 1u), i % CTPR);  // past the end: masked
        kstage[i] = texelFetch(KT, at);
        vstage[i] = texelFetch(VT, at);
      }
      barrier();
      for (uint cell = tid; cell < SCORE_CELLS; cell += THREADS) {
        const uint line0 = cell / KEYS * 4u, j = cell % KEYS;
        vec4 dot4 = vec4(0.0);
        for (uint c = 0; c < CTPR; ++c) {
          float k[CVPT];
          unpack_cache(kstage[j * CTPR + c], k);
          [[unroll]] for (uint e = 0; e < CVPT; e += 4u) {
            const vec4 k4 = vec4(k[e], k[e + 1u], k[e + 2u], k[e + 3u]);
            const uint d = (c * CVPT + e) / 4u;
            [[unroll]] for (uint l = 0; l < 4u; ++l) dot4[l] += dot(queries[(line0 + l) * (DH / 4u) + d], k4);
          }
        }
        [[unroll]] for (uint l = 0; l < 4u; ++l) scores[(line0 + l) * KEYS + j] = dot4[l];
      }
      barrier();
      if (tid < LINES) {
#define IN_PLACE(i, j, p) scores[(i) * KEYS + (j)] = (p)
        SOFTMAX_TILE(s, tid, base, IN_PLACE)
      }
      barrier();
      [[unroll]] for (uint r = 0; r < ROUNDS; ++r) {
        const uint cell = tid + r * THREADS;
        if (cell >= CELLS) break;
        const uint line0 = cell / CTPR * LB, c = cell % CTPR;
        [[unroll]] for (uint l = 0; l < LB; ++l) {
          const float cr = correction[line0 + l];
          [[unroll]] for (uint e = 0; e < CVPT; ++e) acc[(r * LB + l) * CVPT + e] *= cr;
        }
        for (uint j = 0; j < KEYS; ++j) {
          float v[CVPT];
          unpack_cache(vstage[j * CTPR + c], v);
          [[unroll]] for (uint l = 0; l < LB; ++l) {
            const float p = scores[(line0 + l) * KEYS + j];
            [[unroll]] for (uint e = 0; e < CVPT; ++e) acc[(r * LB + l) * CVPT + e] += p * v[e];
          }
        }
      }
      barrier();
    }

    if (tid < LINES) finish_line(tid, s, seg);
    barrier();
    [[unroll]] for (uint r = 0; r < ROUNDS; ++r) {
      const uint cell = tid + r * THREADS;
      if (cell >= CELLS) break;
      const uint line0 = cell / CTPR * LB, c = cell % CTPR;
      [[unroll]] for (uint l = 0; l < LB; ++l)
        [[unroll]] for (uint e = 0; e < CVPT; ++e) put_output(line0 + l, c * CVPT + e, acc[(r * LB + l) * CVPT + e], seg);
    }
    if (segment_done(seg)) break;
    barrier();  // the next run's lines reuse sums and the stages
  }
}
