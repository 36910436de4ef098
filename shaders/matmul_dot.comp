// y[t][r] = epilogue(W[r] · x[t]) for decode and a batched decode step
// (TOKENS 1–7) of block weights, with integer dot products: llama.cpp's MMVQ.
// quantize.comp has written each input row into xq once for every matmul
// that reads it (8-bit blocks of 32 values with their d and s = d·Σq; the
// folded norm applied there: this kernel never applies NORM), and each
// weight unit's quants go to OpSDot 4 × 8 bits at a time as signed bytes,
// their offsets (q4_0's 8, q5_0's 16, q6_k's 32) taken off bytewise first,
// so that a half unit's Σ q_w·q_x is one exact integer per token; a
// weight dtype with a min (q4_1, q5_1, q4_k, q5_k) adds min · s of the
// block of x.
//
// The rows layout's work (matmul_rows.comp): a workgroup of GROUPS
// subgroups, each owning ROWS weight rows for TOKENS tokens; lane l takes
// units l, l + LANES, … of K (quant.glsl's units of 32 values, two halves
// of 16), XT of them unrolled a chunk; subgroupAdd reduces at the end. A
// token's sums are taken in the same order whatever TOKENS is, so a
// batched step gives every sequence the bits a decode of it alone gives.
//
// The dot product: glslang 12 has no GL_EXT_integer_dot_product, so
// GL_EXT_spirv_intrinsics declares SPV_KHR_integer_dot_product's OpSDot
// (4450) with the capabilities DotProduct (6019) and
// DotProductInput4x8BitPacked (6018), the numbers of SPIRV-Headers'
// spirv.core.grammar.json; SPIR-V 1.5 takes the instruction through the
// extension, so the module targets Vulkan 1.2 as every other. A device runs
// it with shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product or
// Vulkan 1.3) enabled.
//
// Buffers (beside matmul.glsl's): xq [rows][XQ_ROW_WORDS] words
// (core/kernels.hpp's LATHE_BIND_QUANTIZE: K / 4 words of signed bytes,
// then K / 32 pairs of f32 (d, s), a row padded to 16 bytes).

#extension GL_EXT_spirv_intrinsics : require

#include "matmul.glsl"

// xq through two views: its quants 16 bytes a load (a half unit's 16
// values), its (d, s) pairs 8 bytes a load; a row starts 16 bytes aligned.
layout(std430, binding = BINDING_xq) readonly buffer Xq { uvec4 xq[]; };
layout(std430, binding = BINDING_xq) readonly buffer XqPairs { uvec2 xq_pairs[]; };

spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(int a, int b, spirv_literal int fmt);  // fmt 0: PackedVectorFormat4x8Bit

// Σ over 16 values: the weights' signed bytes against x's.
int dot16(uvec4 w, uvec4 x) {
  return (sdot4x8(int(w.x), int(x.x), 0) + sdot4x8(int(w.y), int(x.y), 0)) +
         (sdot4x8(int(w.z), int(x.z), 0) + sdot4x8(int(w.w), int(x.w), 0));
}

const uint LOW = 0x0f0f0f0fu;  // the low nibble of each byte

// Each byte b of v (b < 128) minus c, as a signed byte: no borrow crosses a
// byte, its top bit set first.
uvec4 minus_bytes(uvec4 v, uint c) { return ((v | 0x80808080u) - c * 0x01010101u) ^ 0x80808080u; }

// q5_0/q5_1: bits 4w … 4w + 3 of `bits` (the fifth bits of a word's four
// values) to bit 4 of its four bytes.
uint fifth_bits(uint bits, uint w) {
  const uint b = bits >> (4u * w);
  return ((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25);
}

// Unit u of the weight row whose first texel is `row`: half h's 16 quants
// as signed bytes in value order (q[h]), its scale (scale[h]), and the
// factor of s, the sum of half h's block of x (min[h]; 0 without a min). A
// min covers a block of x once: a 32-value format's block is both halves
// of a unit (half 0 adds it), a K-quant's sub-block the same half of two
// units (u even adds it).
struct Unit {
  uvec4 q[2];
  vec2 scale, min;
};
Unit weight_unit(usamplerBuffer W, uint row, uint u) {
  Unit o;
  o.min = vec2(0.0);
#if WDTYPE == Q8_0
  o.q[0] = texelFetch(W, int(row + u * W_BODY));
  o.q[1] = texelFetch(W, int(row + u * W_BODY + 1u));
  o.scale = vec2(half_at(W, row + W_SCALE_AT, u));
#elif WDTYPE <= Q5_1
  const uvec4 t = texelFetch(W, int(row + u));
  o.q[0] = t & LOW;
  o.q[1] = (t >> 4) & LOW;
#if WDTYPE == Q5_0 || WDTYPE == Q5_1
  const uint qh = word_at(W, row + W_QH_AT, u);
  [[unroll]] for (uint w = 0; w < 4u; ++w) {
    o.q[0][w] |= fifth_bits(qh, w);
    o.q[1][w] |= fifth_bits(qh >> 16, w);
  }
#endif
#if WDTYPE == Q4_1 || WDTYPE == Q5_1
  const vec2 dm = unpackHalf2x16(word_at(W, row + W_SCALE_AT, u));
  o.scale = vec2(dm.x);
  o.min.x = dm.y;
#else
  const uint offset = WDTYPE == Q4_0 ? 8u : 16u;
  o.q[0] = minus_bytes(o.q[0], offset);
  o.q[1] = minus_bytes(o.q[1], offset);
  o.scale = vec2(half_at(W, row + W_SCALE_AT, u));
#endif
#elif WDTYPE == Q4_K || WDTYPE == Q5_K
  const KUnit k = k_unit(row, u, 0u);  // half 1: sub-block k.sb + 1, the same texels
  const uvec4 head = texelFetch(W, int(k.block));
  const vec2 lo = k_scale_min(head, k.sb), hi = k_scale_min(head, k.sb + 1u);
  const uvec4 t = texelFetch(W, int(k.qs));
  o.q[0] = t & LOW;
  o.q[1] = (t >> 4) & LOW;
#if WDTYPE == Q5_K
  const uvec4 qh = texelFetch(W, int(k.qh));
  o.q[0] |= ((qh >> k.sb) & 0x01010101u) << 4;
  o.q[1] |= ((qh >> (k.sb + 1u)) & 0x01010101u) << 4;
#endif
  o.scale = vec2(lo.x, hi.x);
  if (u % 2u == 0u) o.min = -vec2(lo.y, hi.y);
#elif WDTYPE == Q6_K
  const uint v = u % 8u, n = v / 4u, m = v % 4u;
  const uint block = row + (u / 8u) * W_BODY;
  const float d = half_at(W, row + W_SCALE_AT, u / 8u);
  const uvec4 scales = texelFetch(W, int(block + 12u));
  const uvec4 ql = texelFetch(W, int(block + 4u * n + m));
  const uvec4 qh = texelFetch(W, int(block + 8u + 2u * n + m % 2u));
  const uint shift = 2u * (m / 2u);  // half 1: 4 more
  o.q[0] = minus_bytes((ql & LOW) | (((qh >> shift) & 0x03030303u) << 4), 32u);
  o.q[1] = minus_bytes(((ql >> 4) & LOW) | (((qh >> (shift + 4u)) & 0x03030303u) << 4), 32u);
  o.scale = vec2(q6_scale(scales, d, 8u * n + m), q6_scale(scales, d, 8u * n + m + 4u));
#endif
  return o;
}

// Half h of a unit of one token's x: its 16 signed bytes, and (d, s) of
// their block of 32.
struct XHalf {
  uvec4 q;
  vec2 ds;
};
XHalf x_half(uint xrow, uint k0, bool live) {
  if (!live) return XHalf(uvec4(0u), vec2(0.0));
  return XHalf(xq[(xrow + k0 / 4u) / 4u], uintBitsToFloat(xq_pairs[(xrow + K / 4u) / 2u + k0 / 32u]));
}

// Σᵢ wᵢ·xᵢ over a unit, as the dequantized weights times the quantized x.
float unit_product(Unit w, XHalf a, XHalf b) {
  return (w.scale.x * (a.ds.x * float(dot16(w.q[0], a.q))) + w.min.x * a.ds.y) +
         (w.scale.y * (b.ds.x * float(dot16(w.q[1], b.q))) + w.min.y * b.ds.y);
}

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
  // Every loop over the tile is unrolled: acc must stay in registers.
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

  // Each token's row of xq, found once (an expert's through moe_route's list).
  uint xbase[TOKENS];
  [[unroll]] for (uint t = 0; t < TOKENS; ++t) xbase[t] = x_row(min(t0 + t, rows - 1)) * XQ_ROW_WORDS;

  for (uint c = 0; c < UNITS; c += LANES * XT) {
    [[unroll]] for (uint e = 0; e < XT; ++e) {
      const uint j = c + e * LANES + lane;
      const uint u = min(j, UNITS - 1);  // a unit past the row reads a valid one times x = 0
      const uint lo = unit_lo(u);
      XHalf xa[TOKENS], xb[TOKENS];
      [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
        const bool live = j < UNITS && t0 + t < rows;
        xa[t] = x_half(xbase[t], lo, live);
        xb[t] = x_half(xbase[t], lo + HI_OFFSET, live);
      }
      [[unroll]] for (uint r = 0; r < ROWS; ++r) {
        const Unit w = weight_unit(W, base[r], u);
#if GATED
        const Unit w2 = weight_unit(W2, base2[r], u);
#endif
        [[unroll]] for (uint t = 0; t < TOKENS; ++t) {
          acc[r * TOKENS + t] += unit_product(w, xa[t], xb[t]);
#if GATED
          acc2[r * TOKENS + t] += unit_product(w2, xa[t], xb[t]);
#endif
        }
      }
    }
  }

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
