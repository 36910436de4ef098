// RMSNorm and LayerNorm over rows of N features: one subgroup-sized workgroup
// per token row, reductions with subgroupAdd (no shared memory, no barriers:
// both are expensive on lavapipe, see docs/lavapipe.md).
//
// Generated constants:
//   N            features per row
//   GROUP        features normed together: N, or (Mamba-2's gated norm) each
//                of N / GROUP consecutive groups on its own
//   EPS          the spec's eps
//   LAYER_NORM   1: (x - mean) / sqrt(var + eps) * g + b;  0: x / sqrt(mean(x²) + eps) * g
//   HAS_BIAS     1: add b (LayerNorm with a shift)
//   UNIT_OFFSET  1: the scale is (1 + g), added in fp32 (Gemma)
//   RESIDUAL     1: y += the normalized row (the norm of a branch's output,
//                before its residual add: sandwich and branch_output blocks)
//   POOLED       1: a pooled projector's norm (Gemma 3's): the rows are a
//                POOL_GRID × POOL_GRID grid of patches, row-major; row r <
//                (POOL_GRID / POOL)² normalizes the mean of the r-th block of
//                POOL × POOL patches (blocks row-major too), the rows after
//                those are written zeros
//   MERGED, MERGE  1, k: Mistral 3's patch merger (RMSNorm): out row r is rows r · MERGE …
//                r · MERGE + MERGE − 1, each normed on its own, side by side channel-major
//                (y[r][c · MERGE + k] = norm(x[r · MERGE + k])[c], unfold's order), a row of
//                N · MERGE; the rows past the pass's whole blocks are written zeros
//   ZEROED, ZERO_FROM  1, r: rows from r on are written zeros (a tiled tower's padding
//                rows after its pre-norm: MllamaVisionModel pads the normed rows)
//   HEAD_SCALE   1 (with GROUP < N): every group takes the one scale g[0 … GROUP) (a
//                cross-attention query's per-head q_norm, Llama 3.2 Vision)
//   ROW_MASK     1: a row whose IO extent says it sees no image (plan::kImageRowBit clear)
//                is written zeros (Llama 3.2 Vision: its cross-attention layer's MLP input,
//                so that the bias-free MLP adds nothing to it)
// Push constants (RowsPush): rows.
// Buffers: x [rows][N] f32, g [N] f32, b [N] f32, y [rows][N] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;  // = the device's subgroup size

layout(std430, binding = BINDING_x) readonly buffer X { float x[]; };
#if ROW_MASK
IO_BLOCK(BINDING_io)
#endif
layout(std430, binding = BINDING_scale) readonly buffer G { float g[]; };
layout(std430, binding = BINDING_shift) readonly buffer B { float b[]; };
#if RESIDUAL
layout(std430, binding = BINDING_y) buffer Y { float y[]; };
#else
layout(std430, binding = BINDING_y) writeonly buffer Y { float y[]; };
#endif

#if POOLED
const uint kSide = POOL_GRID / POOL;  // blocks a side of the grid

// Feature i of the row's block's mean: its patches summed in order, one division.
float in_value(uint row, uint i) {
  const uint first = (row / kSide) * POOL * POOL_GRID + (row % kSide) * POOL;
  float sum = 0.0;
  for (uint a = 0u; a < POOL; ++a)
    for (uint c = 0u; c < POOL; ++c) sum += x[(first + a * POOL_GRID + c) * N + i];
  return sum / float(POOL * POOL);
}
#else
float in_value(uint row, uint i) { return x[row * N + i]; }
#endif

#if MERGED
// Each row of a block normed into its place among the merged row's values.
void merge(uint row, uint lane, uint lanes) {
  const uint to = row * N * MERGE;
  if ((row + 1u) * MERGE > pc.rows) {
    for (uint i = lane; i < N * MERGE; i += lanes) y[to + i] = 0.0;
    return;
  }
  for (uint k = 0u; k < MERGE; ++k) {
    const uint base = (row * MERGE + k) * N;
    float squares = 0.0;
    for (uint i = lane; i < N; i += lanes) squares += x[base + i] * x[base + i];
    const float inv = inversesqrt(subgroupAdd(squares) / float(N) + EPS);
    for (uint i = lane; i < N; i += lanes) y[to + i * MERGE + k] = x[base + i] * inv * g[i];
  }
}
#endif

void main() {
  const uint row = gl_WorkGroupID.x;
  if (row >= pc.rows) return;
  const uint lane = gl_SubgroupInvocationID;
  const uint lanes = gl_SubgroupSize;
#if MERGED
  merge(row, lane, lanes);
#else
#if ROW_MASK
  if ((io.rows[row].extent & IMAGE_ROW_BIT) == 0u) {
    for (uint i = lane; i < N; i += lanes) y[row * N + i] = 0.0;
    return;
  }
#endif
#if ZEROED
  if (row >= ZERO_FROM) {
    for (uint i = lane; i < N; i += lanes) y[row * N + i] = 0.0;
    return;
  }
#endif
#if POOLED
  if (row >= kSide * kSide) {
    for (uint i = lane; i < N; i += lanes) y[row * N + i] = 0.0;
    return;
  }
#endif

  for (uint first = 0u; first < N; first += GROUP) {
    const uint base = row * N + first;
    float mean = 0.0;
#if LAYER_NORM
    float sum = 0.0;
    for (uint i = lane; i < GROUP; i += lanes) sum += in_value(row, first + i);
    mean = subgroupAdd(sum) / float(GROUP);
#endif
    float squares = 0.0;
    for (uint i = lane; i < GROUP; i += lanes) {
      const float centered = in_value(row, first + i) - mean;
      squares += centered * centered;
    }
    const float inv = inversesqrt(subgroupAdd(squares) / float(GROUP) + EPS);

    for (uint i = lane; i < GROUP; i += lanes) {
#if HEAD_SCALE
      const uint at = i;
#else
      const uint at = first + i;
#endif
#if UNIT_OFFSET
      const float scale = 1.0 + g[at];
#else
      const float scale = g[at];
#endif
      float value = (in_value(row, first + i) - mean) * inv * scale;
#if HAS_BIAS
      value += b[first + i];
#endif
#if RESIDUAL
      y[base + i] += value;
#else
      y[base + i] = value;
#endif
    }
  }
#endif
}
