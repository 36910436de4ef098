// Weights in ggml's block formats (WDTYPE 3 … 10: q8_0, q4_0, q4_1, q5_0,
// q5_1, q4_k, q5_k, q6_k), dequantized as the kernels read them, with
// ggml's formulas value for value (runtime/weights/quant.cpp).
//
// A row lies as core/contract.hpp's device_row plans it (the upload repacks
// ggml's blocks so): the block bodies end to end from the row's first texel,
// W_BODY texels each (the quants; a K-quant's d, dmin and sub-block scales
// too), then the q5_0/q5_1 high-bit words from texel W_QH_AT, then the f16
// scales d (or d and m: q4_1, q5_1) from texel W_SCALE_AT (q6_k: one d per
// super-block). Only 32-bit reads and bit arithmetic: no 8/16-bit storage.
//
// The kernels walk a row in units of 32 values, each two runs of 16: the
// values unit_lo(u) + i (half 0) and unit_lo(u) + HI_OFFSET + i (half 1),
// which is how every format pairs a byte's low and high nibbles.
//
// Generated constants: WDTYPE, W_TPR, W_QH_AT, W_SCALE_AT, W_BODY.

#define Q8_0 3
#define Q4_0 4
#define Q4_1 5
#define Q5_0 6
#define Q5_1 7
#define Q4_K 8
#define Q5_K 9
#define Q6_K 10

#if WDTYPE == Q4_K || WDTYPE == Q5_K
const uint HI_OFFSET = 32u;  // a 64-value chunk: low nibbles, then high nibbles
#elif WDTYPE == Q6_K
const uint HI_OFFSET = 64u;  // a 128-value half: ql's low nibbles, then its high nibbles
#else
const uint HI_OFFSET = 16u;  // a 32-value block: qs[j] & 0xF is value j, qs[j] >> 4 value j + 16
#endif

// The first value of unit u's half 0, within the row.
uint unit_lo(uint u) {
#if WDTYPE == Q4_K || WDTYPE == Q5_K
  // Super-block s, chunk j of 64, its bytes 16·hh …: values 64j + 16hh + i, + 32.
  const uint v = u % 8u;
  return (u / 8u) * 256u + (v / 2u) * 64u + (v % 2u) * 16u;
#elif WDTYPE == Q6_K
  // Super-block s, half n of 128, ql texel m: values 128n + 16m + i, + 64.
  const uint v = u % 8u;
  return (u / 8u) * 256u + (v / 4u) * 128u + (v % 4u) * 16u;
#else
  return u * 32u;
#endif
}

uint byte_of(uvec4 t, uint k) { return (t[k >> 2u] >> ((k & 3u) * 8u)) & 0xffu; }
// The k-th 16-bit / 32-bit value of a plane starting at texel `at`.
float half_at(usamplerBuffer W, uint at, uint k) {
  return unpackHalf2x16(texelFetch(W, int(at + k / 8u))[(k / 2u) % 4u] >> ((k & 1u) * 16u)).x;
}
uint word_at(usamplerBuffer W, uint at, uint k) { return texelFetch(W, int(at + k / 4u))[k % 4u]; }

// A Q4_K/Q5_K sub-block's scale d·sc and min dmin·m (ggml's get_scale_min_k4
// of sub-block sb; the block's first texel: f16 d, f16 dmin, then 12 bytes
// of 6-bit scales and mins).
vec2 k_scale_min(uvec4 head, uint sb) {
  uint sc, mn;
  if (sb < 4u) {
    sc = byte_of(head, 4u + sb) & 63u;
    mn = byte_of(head, 8u + sb) & 63u;
  } else {
    sc = (byte_of(head, 8u + sb) & 0xfu) | ((byte_of(head, sb) >> 6) << 4);
    mn = (byte_of(head, 8u + sb) >> 4) | ((byte_of(head, 4u + sb) >> 6) << 4);
  }
  const vec2 dd = unpackHalf2x16(head.x);
  return vec2(dd.x * float(sc), dd.y * float(mn));
}

// Where half h of unit u of a Q4_K/Q5_K row lies: its super-block's first
// texel, the sub-block (2j + h for chunk j of 64 values), the texel of its
// quants (bytes 16·hh … of the chunk's 32) and of its fifth bits (Q5_K:
// qh[16·hh + i], bit sb).
struct KUnit {
  uint block, sb, qs, qh;
};
KUnit k_unit(uint row, uint u, uint h) {
  const uint v = u % 8u, j = v / 2u, hh = v % 2u;
  const uint block = row + (u / 8u) * W_BODY;
  return KUnit(block, 2u * j + h, block + (WDTYPE == Q4_K ? 1u : 3u) + 2u * j + hh, block + 1u + hh);
}

// Q6_K: d times int8 scale si of the 16 in `scales` (one per 16 values).
float q6_scale(uvec4 scales, float d, uint si) {
  return d * float(bitfieldExtract(int(scales[si / 4u]), int(8u * (si % 4u)), 8));
}

// Half h of unit u of the row whose first texel is `row`: 16 weights.
void dequant_half(usamplerBuffer W, uint row, uint u, uint h, out float w[16]) {
#if WDTYPE == Q8_0
  const float d = half_at(W, row + W_SCALE_AT, u);
  const uvec4 q = texelFetch(W, int(row + u * W_BODY + h));
  [[unroll]] for (uint i = 0; i < 16u; ++i) w[i] = float(bitfieldExtract(int(q[i / 4u]), int(8u * (i % 4u)), 8)) * d;
#elif WDTYPE <= Q5_1
  const uvec4 q = texelFetch(W, int(row + u));
#if WDTYPE == Q4_1 || WDTYPE == Q5_1
  const vec2 dm = unpackHalf2x16(word_at(W, row + W_SCALE_AT, u));
#else
  const vec2 dm = vec2(half_at(W, row + W_SCALE_AT, u), 0.0);
#endif
#if WDTYPE == Q5_0 || WDTYPE == Q5_1
  const uint qh = word_at(W, row + W_QH_AT, u) >> (16u * h);  // bit j: value j's fifth bit (j + 16: half 1)
#endif
  [[unroll]] for (uint i = 0; i < 16u; ++i) {
    uint v = (q[i / 4u] >> (8u * (i % 4u) + 4u * h)) & 0xfu;
#if WDTYPE == Q5_0 || WDTYPE == Q5_1
    v |= ((qh >> i) & 1u) << 4;
#endif
#if WDTYPE == Q4_0
    w[i] = float(int(v) - 8) * dm.x;
#elif WDTYPE == Q5_0
    w[i] = float(int(v) - 16) * dm.x;
#else
    w[i] = float(v) * dm.x + dm.y;
#endif
  }
#elif WDTYPE == Q4_K || WDTYPE == Q5_K
  const KUnit k = k_unit(row, u, h);
  const vec2 sm = k_scale_min(texelFetch(W, int(k.block)), k.sb);
  const float d1 = sm.x, m1 = sm.y;
  const uvec4 q = texelFetch(W, int(k.qs));
#if WDTYPE == Q5_K
  const uvec4 qh = texelFetch(W, int(k.qh));
#endif
  [[unroll]] for (uint i = 0; i < 16u; ++i) {
    uint x = (q[i / 4u] >> (8u * (i % 4u) + 4u * h)) & 0xfu;
#if WDTYPE == Q5_K
    x += ((qh[i / 4u] >> (8u * (i % 4u) + k.sb)) & 1u) << 4;
#endif
    w[i] = d1 * float(x) - m1;
  }
#elif WDTYPE == Q6_K
  const uint v = u % 8u, n = v / 4u, m = v % 4u;
  const uint block = row + (u / 8u) * W_BODY;
  const float d = half_at(W, row + W_SCALE_AT, u / 8u);
  const uvec4 ql = texelFetch(W, int(block + 4u * n + m));
  const uvec4 qh = texelFetch(W, int(block + 8u + 2u * n + m % 2u));
  const float dsc = q6_scale(texelFetch(W, int(block + 12u)), d, 8u * n + m + 4u * h);
  const uint shift = 2u * (m / 2u) + 4u * h;  // qh's 2-bit field of this run
  [[unroll]] for (uint i = 0; i < 16u; ++i) {
    const uint x = ((ql[i / 4u] >> (8u * (i % 4u) + 4u * h)) & 0xfu) | (((qh[i / 4u] >> (8u * (i % 4u) + shift)) & 3u) << 4);
    w[i] = dsc * float(int(x) - 32);
  }
#endif
}

// Decode's inner product, without dequantizing each weight: Σᵢ wᵢ·xᵢ over
// a half unit is scale · Σᵢ qᵢ·xᵢ + offset · Σᵢ xᵢ, and each qᵢ is read
// in place, masked but not shifted: (word & (0xf << p)) is qᵢ · 2^p exactly,
// so the lane's x values come pre-multiplied by 2^-p (xq, from x_for_quant)
// and a quant costs an and, a conversion and a multiply-add. The high bits
// of q5 and q6_k likewise (xh: x_for_high). Sums are reordered against
// dequant_half, so results agree to f32 rounding, not bit for bit.

// The factor of x at position i (0 … 15) of half h for its low bits, and for
// its high bits (the fifth bit of q5_*, the two top bits of q6_k: worth 16).
float x_for_quant(uint i, uint h) {
#if WDTYPE == Q8_0
  const uint p = 8u * (i % 4u), width = 8u;
#else
  const uint p = 8u * (i % 4u) + 4u * h, width = 4u;
#endif
  return exp2(-float(p + width > 31u ? 31u - width : p));  // quant_sum's shifted-down top field
}
float x_for_high(uint i) {
#if WDTYPE == Q5_0 || WDTYPE == Q5_1
  return 16.0 * exp2(-float(i % 16u));  // qh bit i of half 0, bit 16 + i of half 1, shifted down 16
#else
  return 16.0 * exp2(-float(8u * (i % 4u)));
#endif
}

// Σ over the 16 quants of texel q (half h's nibbles, or bytes for q8_0),
// against xq[at …]. A field that reaches bit 31 is shifted down first so
// that the masked word stays a non-negative int (signed conversion is one
// instruction on a CPU, unsigned several); x_for_quant knows.
float quant_sum(uvec4 q, uint h, float xq[32], uint at) {
  float s = 0.0;
  [[unroll]] for (uint i = 0; i < 16u; ++i) {
#if WDTYPE == Q8_0
    const uint p = 8u * (i % 4u), width = 8u;
#else
    const uint p = 8u * (i % 4u) + 4u * h, width = 4u;
#endif
    const uint down = p + width > 31u ? p + width - 31u : 0u;
    s += float(int((q[i / 4u] >> down) & (((1u << width) - 1u) << (p - down)))) * xq[at + i];
  }
  return s;
}

// Σ over 16 two-bit (q6_k) or one-bit (q5_k) fields, already shifted to
// bit 0 of each byte of t, against xh[at …].
float high_sum(uvec4 t, uint mask, float xh[32], uint at) {
  float s = 0.0;
  [[unroll]] for (uint i = 0; i < 16u; ++i) s += float(int(t[i / 4u] & (mask << (8u * (i % 4u))))) * xh[at + i];
  return s;
}

// Σᵢ wᵢ·xᵢ over unit u (both halves: one read of each texel they share),
// xq and xh as x_for_quant and x_for_high scale them, sx the halves' Σ x.
float dot_unit(usamplerBuffer W, uint row, uint u, float xq[32], float xh[32], vec2 sx) {
#if WDTYPE == Q8_0
  const float d = half_at(W, row + W_SCALE_AT, u);
  const uvec4 offset = uvec4(0x80808080u);  // int8 → offset binary: q + 128
  const float s = quant_sum(texelFetch(W, int(row + u * W_BODY)) ^ offset, 0u, xq, 0u) +
                  quant_sum(texelFetch(W, int(row + u * W_BODY + 1u)) ^ offset, 1u, xq, 16u);
  return d * (s - 128.0 * (sx.x + sx.y));
#elif WDTYPE <= Q5_1
  const uvec4 q = texelFetch(W, int(row + u));
  float s = quant_sum(q, 0u, xq, 0u) + quant_sum(q, 1u, xq, 16u);
#if WDTYPE == Q5_0 || WDTYPE == Q5_1
  const uint qh = word_at(W, row + W_QH_AT, u);
  [[unroll]] for (uint i = 0; i < 32u; ++i) s += float(int((qh >> (i & 16u)) & (1u << (i % 16u)))) * xh[i];
#endif
#if WDTYPE == Q4_1 || WDTYPE == Q5_1
  const vec2 dm = unpackHalf2x16(word_at(W, row + W_SCALE_AT, u));
  return dm.x * s + dm.y * (sx.x + sx.y);
#else
  const float d = half_at(W, row + W_SCALE_AT, u);
  return d * (s - (WDTYPE == Q4_0 ? 8.0 : 16.0) * (sx.x + sx.y));
#endif
#elif WDTYPE == Q4_K || WDTYPE == Q5_K
  const KUnit k = k_unit(row, u, 0u);  // half 1: sub-block k.sb + 1, the same texels
  const uvec4 head = texelFetch(W, int(k.block));
  const vec2 lo = k_scale_min(head, k.sb), hi = k_scale_min(head, k.sb + 1u);
  const uvec4 q = texelFetch(W, int(k.qs));
  float s0 = quant_sum(q, 0u, xq, 0u), s1 = quant_sum(q, 1u, xq, 16u);
#if WDTYPE == Q5_K
  const uvec4 qh = texelFetch(W, int(k.qh));
  s0 += high_sum(qh >> k.sb, 1u, xh, 0u);
  s1 += high_sum(qh >> (k.sb + 1u), 1u, xh, 16u);
#endif
  return lo.x * s0 - lo.y * sx.x + (hi.x * s1 - hi.y * sx.y);
#elif WDTYPE == Q6_K
  const uint v = u % 8u, n = v / 4u, m = v % 4u;
  const uint block = row + (u / 8u) * W_BODY;
  const float d = half_at(W, row + W_SCALE_AT, u / 8u);
  const uvec4 scales = texelFetch(W, int(block + 12u));
  const uvec4 ql = texelFetch(W, int(block + 4u * n + m));
  const uvec4 qh = texelFetch(W, int(block + 8u + 2u * n + m % 2u));
  const uint shift = 2u * (m / 2u);  // half 1: 4 more
  const float s0 = quant_sum(ql, 0u, xq, 0u) + high_sum(qh >> shift, 3u, xh, 0u);
  const float s1 = quant_sum(ql, 1u, xq, 16u) + high_sum(qh >> (shift + 4u), 3u, xh, 16u);
  return q6_scale(scales, d, 8u * n + m) * (s0 - 32.0 * sx.x) + q6_scale(scales, d, 8u * n + m + 4u) * (s1 - 32.0 * sx.y);
#endif
}
