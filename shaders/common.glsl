// Helpers shared by the kernels: weight unpacking, activations, the IO block.
//
// Weights are read through uniform texel buffers of RGBA32UI texels (about
// twice as fast as storage buffers on lavapipe, docs/lavapipe.md); one texel
// holds VPT values of the weight dtype WDTYPE (0: f32, 1: f16, 2: bf16), or
// (WDTYPE ≥ 3, QUANT) ggml's blocks as quant.glsl reads them.

#ifdef WDTYPE
#define QUANT (WDTYPE >= 3)
#if QUANT
#include "quant.glsl"
#define VPT 8u
#elif WDTYPE == 0
#define VPT 4u
#else
#define VPT 8u
#endif

// The VPT values of one texel, in order.
void unpack_texel(uvec4 t, out float v[VPT]) {
#if QUANT
  for (uint i = 0; i < VPT; ++i) v[i] = 0.0;  // unused: block weights go through dequant_half
#elif WDTYPE == 0
  v[0] = uintBitsToFloat(t.x); v[1] = uintBitsToFloat(t.y); v[2] = uintBitsToFloat(t.z); v[3] = uintBitsToFloat(t.w);
#elif WDTYPE == 1
  vec2 a = unpackHalf2x16(t.x), b = unpackHalf2x16(t.y), c = unpackHalf2x16(t.z), d = unpackHalf2x16(t.w);
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y; v[4] = c.x; v[5] = c.y; v[6] = d.x; v[7] = d.y;
#else
  // bf16: the high half of an f32.
  v[0] = uintBitsToFloat(t.x << 16); v[1] = uintBitsToFloat(t.x & 0xffff0000u);
  v[2] = uintBitsToFloat(t.y << 16); v[3] = uintBitsToFloat(t.y & 0xffff0000u);
  v[4] = uintBitsToFloat(t.z << 16); v[5] = uintBitsToFloat(t.z & 0xffff0000u);
  v[6] = uintBitsToFloat(t.w << 16); v[7] = uintBitsToFloat(t.w & 0xffff0000u);
#endif
}
#endif

// Activations: ACT_NONE and ACT_<name> for each activation of the table in
// core/contract.hpp, written by the generator before this file.

// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): GLSL has no erf.
float erf_approx(float x) {
  const float t = 1.0 / (1.0 + 0.3275911 * abs(x));
  const float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return sign(x) * y;
}

float activate(float x, int kind) {
  if (kind == ACT_SILU) return x / (1.0 + exp(-x));
  if (kind == ACT_GELU_ERF) return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752));
  if (kind == ACT_GELU_TANH) {
    // tanh of a clamped argument: exp overflow inside tanh would give NaN.
    const float u = clamp(0.79788456080286536 * (x + 0.044715 * x * x * x), -15.0, 15.0);
    return 0.5 * x * (1.0 + tanh(u));
  }
  if (kind == ACT_RELU) return max(x, 0.0);
  if (kind == ACT_GELU_QUICK) return x / (1.0 + exp(-1.702 * x));  // CLIP's quick_gelu: x·σ(1.702x)
  return x;
}

// Soft-capping c · tanh(x / c) (Gemma 2's attention scores and logits); the
// argument is clamped as in activate(): tanh(±15) is ±1 in f32 already.
float softcap(float x, float c) { return c * tanh(clamp(x / c, -15.0, 15.0)); }

// The session's host-visible IO buffer: for each token row of the pass, its
// token id, the sequence whose cache it extends and its position there
// (core/plan.hpp, plan::IoRow). A prefill chunk's rows are one sequence's
// consecutive positions; a batched decode step's rows are one token of each of
// several sequences. Kernels read them here rather than from push constants,
// so one recorded command buffer serves every step; argmax writes the next
// token into rows[0].token.
struct IoRow {
  uint token;
  uint sequence;
  uint position;
  uint extent;  // the sequence's positions after the call that brought the row (0: position + 1)
};
// A row's token with this bit set is spliced: its embedding is the host's
// row (plan::kSplicedToken).
#define SPLICED_TOKEN 0x80000000u
// An image cross-attention decoder's row (Llama 3.2 Vision): its extent is
// the image keys it sees, [first, end) of its sequence's cross cache, as
// first << 15 | end, with this bit set where it sees an image (plan::kImageRowBit);
// a row that sees none reads every key, its MLP input zeros.
#define IMAGE_ROW_BIT 0x80000000u
#define IMAGE_KEY_BITS 15u
#define IO_BLOCK(b) layout(std430, binding = b) buffer IO { IoRow rows[]; } io;
