// The norm before a projection, applied to x as a kernel reads it rather
// than dispatched on its own: the matmul layouts read x so, and quantize.comp
// (which normalizes x once for the dot layout's matmuls, which then never
// norm). The includer declares x (vec4 x[], [rows][K / 4]) and K first.
//
// Generated constants: NORM 0 none, 1 RMSNorm, 2 LayerNorm; NORM_EPS,
// NORM_BIAS (LayerNorm's shift), NORM_UNIT_OFFSET (the scale is 1 + g: Gemma).
// Buffers: norm_g, norm_b [K] f32.

#if NORM
layout(std430, binding = BINDING_norm_scale) readonly buffer NormG { vec4 norm_g[]; };
layout(std430, binding = BINDING_norm_shift) readonly buffer NormB { vec4 norm_b[]; };

// Mean and 1/sqrt(variance + eps) of input row `row` (the mean is 0 for
// RMSNorm), over the values this lane sees: K/4 vec4s from `first` in steps
// of `step`. Two passes over the row: the variance of centred values. Each
// pass loads STATS_LOADS vec4s before it adds them, in the order a plain loop
// would (the same bits): a lane's loads wait out one latency a group, not
// one each (an H200's quantize of a 4096-wide row took 2.6 µs longer with
// its norm when each load waited on the last, bench/README.md).
const uint STATS_LOADS = 8u;
// The vec4s i, i + step, … (STATS_LOADS of them) of the row from `base`,
// zeros past its n.
void stats_loads(uint base, uint i, uint step, uint n, out vec4 v[STATS_LOADS]) {
  [[unroll]] for (uint u = 0; u < STATS_LOADS; ++u) v[u] = i + u * step < n ? x[base + i + u * step] : vec4(0.0);
}
vec2 partial_stats(uint row, uint first, uint step, bool whole_subgroup) {
  const uint base = row * (K / 4), n = K / 4;
  vec4 v[STATS_LOADS];
  float mean = 0.0;
#if NORM == 2
  float sum = 0.0;
  for (uint i = first; i < n; i += STATS_LOADS * step) {
    stats_loads(base, i, step, n, v);
    [[unroll]] for (uint u = 0; u < STATS_LOADS; ++u)
      if (i + u * step < n) sum += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  mean = (whole_subgroup ? subgroupAdd(sum) : sum) / float(K);
#endif
  float squares = 0.0;
  for (uint i = first; i < n; i += STATS_LOADS * step) {
    stats_loads(base, i, step, n, v);
    [[unroll]] for (uint u = 0; u < STATS_LOADS; ++u) {
      if (i + u * step >= n) continue;
      const vec4 c = v[u] - mean;
      squares += dot(c, c);
    }
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
