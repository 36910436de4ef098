// x in 8-bit blocks for the dot layout's integer dot products
// (matmul_dot.comp), as llama.cpp's MMVQ quantizes a matmul's input to
// q8_1: each block of 32 consecutive values of a row gets d = max|x| / 127
// and q = x / d rounded half to even, and the block's sum s = d · Σq (the
// term a weight dtype with a min multiplies). The norm that the matmuls
// reading xq would have folded into their read of x is applied here, once
// per row instead of once per matmul.
//
// One subgroup a workgroup (constant 0); workgroup (p, r) takes blocks
// p · GROUP_BLOCKS … of row r (ROW_FACTOR rows r · ROW_FACTOR …: the expert
// down projection's input, TOPK slots a token row), lane l blocks
// l, l + LANES, … of those: a decode step's row spreads over K / 1024
// workgroups instead of one subgroup walking it (10.5 µs of an H200's 8B
// step for K = 4096, bench/README.md). Under a norm each workgroup takes
// its row's statistics over the whole row itself. d is max|x| times the
// constant 1/127 (a multiplication, correctly rounded everywhere, where
// GLSL's division may be 2.5 ulp off): the CPU side
// (runtime/weights/quant.cpp's quantize_xq) computes the same d bit for bit.
// 1/d is still a division, so a value within a few ulp of a rounding tie
// may round to the other neighbour than on the CPU.
//
// Generated constants: K (a multiple of 32), XQ_ROW_WORDS (a row of xq:
// kernels::xq_row_words(K)), GROUP_BLOCKS (kernels::kQuantizeGroupBlocks),
// ROW_FACTOR, and the norm's (folded_norm.glsl).
// Push constants (RowsPush): rows (grid y).
// Buffers: x [rows · ROW_FACTOR][K] f32; xq [rows · ROW_FACTOR][XQ_ROW_WORDS]:
//          K / 4 words of signed bytes (value k: byte k % 4 of word k / 4),
//          then K / 32 pairs of f32 (d, s), then padding to 16 bytes;
//          norm_g, norm_b [K] f32.

layout(local_size_x_id = 0) in;  // = the device's subgroup size

layout(std430, binding = BINDING_x) readonly buffer X { vec4 x[]; };
layout(std430, binding = BINDING_xq) writeonly buffer Xq { uvec4 xq[]; };
layout(std430, binding = BINDING_xq) writeonly buffer XqPairs { uvec2 xq_pairs[]; };

#include "folded_norm.glsl"

const uint LANES = gl_WorkGroupSize.x;
const uint BLOCKS = K / 32u;

void main() {
  if (gl_WorkGroupID.y >= pc.rows) return;
  const uint lane = gl_LocalInvocationID.x;
  const uint first = gl_WorkGroupID.x * GROUP_BLOCKS, end = min(first + GROUP_BLOCKS, BLOCKS);
  for (uint f = 0; f < ROW_FACTOR; ++f) {
    const uint row = gl_WorkGroupID.y * ROW_FACTOR + f;
#if NORM
    const vec2 stats = partial_stats(row, lane, LANES, true);
#endif
    for (uint b = first + lane; b < end; b += LANES) {
      vec4 v[8];
      float amax = 0.0;
      [[unroll]] for (uint i = 0; i < 8u; ++i) {
        const uint k4 = b * 8u + i;
#if NORM
        v[i] = normalized(x[row * (K / 4u) + k4], k4, stats);
#else
        v[i] = x[row * (K / 4u) + k4];
#endif
        const vec4 a = abs(v[i]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
      }
      const float d = amax * (1.0 / 127.0);
      const float id = d != 0.0 ? 1.0 / d : 0.0;
      int sum = 0;
      uint words[8];
      [[unroll]] for (uint i = 0; i < 8u; ++i) {
        const ivec4 q = ivec4(clamp(roundEven(v[i] * id), -127.0, 127.0));
        sum += (q.x + q.y) + (q.z + q.w);
        words[i] = uint(q.x & 0xff) | (uint(q.y & 0xff) << 8) | (uint(q.z & 0xff) << 16) | (uint(q.w) << 24);
      }
      // A row starts 16 bytes aligned (XQ_ROW_WORDS a multiple of 4), a
      // block's 8 words at 32-byte steps, its pair at 8-byte ones.
      const uint at = row * (XQ_ROW_WORDS / 4u) + b * 2u;
      xq[at] = uvec4(words[0], words[1], words[2], words[3]);
      xq[at + 1u] = uvec4(words[4], words[5], words[6], words[7]);
      xq_pairs[row * (XQ_ROW_WORDS / 2u) + K / 8u + b] = uvec2(floatBitsToUint(d), floatBitsToUint(d * float(sum)));
    }
  }
}
