// A tiled tower's rows (Llama 3.2 Vision's MllamaVisionModel): the pass is
// TILES tiles of TILE_ROWS rows each (row 0 of a tile its class token's,
// then its patches row-major), then TILES × PAD padding rows (PAD those of
// tile 0, then tile 1's, …: MllamaVisionModel pads each tile's rows to a
// multiple of 8), so a row's tile and place follow from its index; each
// row's token is its image's aspect ratio id a (the tables' row). One
// subgroup-sized workgroup per row; lanes walk the row's texels.
//
// Generated constants:
//   D          the tower's width
//   WDTYPE     dtype of the tables (common.glsl)
//   TILES, TILE_ROWS, PAD  the pass's layout, as above
//   FORM       0 (before the layers): y = x + (row 0 of its tile: cls; else
//                tanh(gate) · table[a][tile]) + (1 − tanh(g)) · positions[i]
//                + tanh(g) · tile_positions[a][tile][i] (g = position_gate,
//                i the row's place in its tile); a padding row y = 0
//              1 (after the local layers): y = x + tanh(gate) · table[a][tile], every
//                row (a padding row's tile the one it pads)
//              2 (the projector's input): y = [x | states interleaved], y[h + e · STATES + k] =
//                state k's e (torch.stack(states, -1) flattened), written STACK_SLOT at a time:
//                slot 0 copies x into y's first D, slot k + 1 state k (bound as x)
//   STATES, STACK_SLOT  FORM 2's
// Push constants (RowsPush): rows.
// Buffers: core/kernels.hpp's LATHE_BIND_TILES.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_x) readonly buffer X { float x[]; };
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };
layout(binding = BINDING_table) uniform usamplerBuffer T;
layout(std430, binding = BINDING_gate) readonly buffer Gate { float gate[]; };
layout(std430, binding = BINDING_cls) readonly buffer C { float cls[]; };
layout(binding = BINDING_positions) uniform usamplerBuffer P;
layout(binding = BINDING_tile_positions) uniform usamplerBuffer TP;
layout(std430, binding = BINDING_position_gate) readonly buffer PositionGate { float position_gate[]; };

const uint TPR = W_TPR;  // texels per row of D values

void main() {
  const uint t = gl_WorkGroupID.x;
  if (t >= pc.rows) return;
  const uint lane = gl_LocalInvocationID.x, lanes = gl_WorkGroupSize.x;
#if FORM == 2
  const uint width = D * (1u + STATES);
  for (uint e = lane; e < D; e += lanes)
    y[t * width + (STACK_SLOT == 0u ? e : D + e * STATES + (STACK_SLOT - 1u))] = x[t * D + e];
#else
  // The row's tile and its place in it; the rows past the pass's layout
  // (a chunk padded to the device's row groups) are padding of the last.
  const uint content = TILES * TILE_ROWS;
  const bool padding = t >= content;
  const uint tile = padding ? min((t - content) / max(PAD, 1u), TILES - 1u) : t / TILE_ROWS;
  const uint i = padding ? 0u : t % TILE_ROWS;
  const uint ratio = io.rows[t].token;
  const uint tile_row = ratio * TILES + tile;  // the tile table's row of texels, in rows of D
  const float g = tanh(gate[0]);
#if FORM == 0
  if (padding) {
    for (uint e = lane; e < D; e += lanes) y[t * D + e] = 0.0;
    return;
  }
  const float pg = tanh(position_gate[0]);
  for (uint j = lane; j < TPR; j += lanes) {
    float tv[VPT], p[VPT], tp[VPT];
    unpack_texel(texelFetch(T, int(tile_row * TPR + j)), tv);
    unpack_texel(texelFetch(P, int(i * TPR + j)), p);
    unpack_texel(texelFetch(TP, int((tile_row * TILE_ROWS + i) * TPR + j)), tp);
    [[unroll]] for (uint v = 0; v < VPT; ++v) {
      const uint at = j * VPT + v;
      float value = x[t * D + at] + (i == 0u ? cls[at] : g * tv[v]);
      value += (1.0 - pg) * p[v] + pg * tp[v];
      y[t * D + at] = value;
    }
  }
#else
  for (uint j = lane; j < TPR; j += lanes) {
    float tv[VPT];
    unpack_texel(texelFetch(T, int(tile_row * TPR + j)), tv);
    [[unroll]] for (uint v = 0; v < VPT; ++v) y[t * D + j * VPT + v] = x[t * D + j * VPT + v] + g * tv[v];
  }
#endif
#endif
}
