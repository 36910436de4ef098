// y[t][r] = epilogue(W[r] · x[t]) for a prompt chunk on a GPU's matrix
// units: the coop layout, the tiled layout's work (matmul_staged.glsl: ROWS
// 64 or 128 weight rows × TOKENS 32 or 64 tokens a workgroup of 128
// invocations, each step of K staged in shared memory) with the products
// taken by cooperative matrices, 16 × 16 × 16, f16 × f16 → f32
// (GL_NV_cooperative_matrix; generator/emit/coop_khr.cpp rewrites the module
// for VK_KHR_cooperative_matrix). Weights and x are staged as f16: a
// product's inputs are rounded to 11 significant bits, its sums kept in f32.
//
// The tile's outputs are 16 × 16 blocks, (ROWS / 16) × (TOKENS / 16); its
// rows fall in SLOTS = 4 bands of MB = ROWS / 64 blocks of rows, a
// subgroup's band every token block of (MB · NB accumulators: 2 for
// 64 × 32, 8 for 128 × 64). Four subgroups of 32 lanes take a band each; a
// device with fewer subgroups a workgroup (64 lanes: 2) takes the bands in
// passes over K (staging each step again), one with more (16 lanes: 8)
// leaves the extra subgroups to load and stage only. Each accumulator goes
// through its band's slot of shared memory on its way out, so that every
// output passes through matmul.glsl's store() (every epilogue, experts too).
//
// Shared memory (plan::Tile::shared_bytes of the coop layout): ws (and ws2)
// ROWS × (BK + 8) f16, xs TOKENS × (BK + 8) f16, out 4 × 256 f32 (× 2
// gated), and the norm's tstats and partial.

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "matmul_staged.glsl"

const uint SLOTS = 4u;
const uint MB = ROWS / 64u;
const uint NB = TOKENS / 16u;
// f16 a row of a tile: a step's BK values and 8 of padding, so that each
// row starts 16 bytes aligned (cooperative loads need it) and rows fall on
// different banks.
const uint ST = BK + 8u;

shared float16_t ws[ROWS * ST];  // ws[r * ST + k]: weight row r of the tile, value k of the step
#if GATED
shared float16_t ws2[ROWS * ST];
#endif
shared float16_t xs[TOKENS * ST];  // xs[t * ST + k]: token t (B, column-major: K × TOKENS)
#if GATED
const uint OUTS = 2u;
#else
const uint OUTS = 1u;
#endif
shared float outs[SLOTS * OUTS * 256u];  // outs[(slot · OUTS + o) · 256 + 16r + t]: a block on its way out

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define HALVES fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row0 = gl_WorkGroupID.x * ROWS;
  const uint t0 = gl_WorkGroupID.y * TOKENS;
  const uint rows = tile_rows();
  if (t0 >= rows) return;  // the whole workgroup: an expert with fewer tokens

#if NORM
  token_stats(tid, t0, rows);
#endif
  stage_tasks(tid, row0, t0, rows);

  const uint passes = (SLOTS + gl_NumSubgroups - 1u) / gl_NumSubgroups;
  for (uint pass = 0; pass < passes; ++pass) {
    const uint slot = pass * gl_NumSubgroups + gl_SubgroupID;
    const bool computes = slot < SLOTS;
    ACC acc[MB * NB];
#if GATED
    ACC acc2[MB * NB];
#endif
    [[unroll]] for (uint i = 0; i < MB * NB; ++i) {
      acc[i] = ACC(0.0);
#if GATED
      acc2[i] = ACC(0.0);
#endif
    }

    fetch_step(0u);
    for (uint s = 0; s < STEPS; ++s) {
      [[unroll]] for (uint i = 0; i < W_TASKS; ++i) {
        if (!w_stored(tid, i)) continue;
        const uint at = wrow[i] * ST + wpiece[i] * VALS;
        [[unroll]] for (uint e = 0; e < VALS; ++e) {
          ws[at + e] = float16_t(wv[i * VALS + e]);
#if GATED
          ws2[at + e] = float16_t(wv2[i * VALS + e]);
#endif
        }
      }
      [[unroll]] for (uint i = 0; i < X_TASKS; ++i) {
        if (!x_stored(tid, i)) continue;
        const uint at = xtoken[i] * ST + 4u * xq[i];
        [[unroll]] for (uint e = 0; e < 4u; ++e) xs[at + e] = float16_t(xv[i][e]);
      }
      barrier();
      if (s + 1u < STEPS) fetch_step(s + 1u);
      if (computes) {
        [[unroll]] for (uint k = 0; k < BK; k += 16u) {
          HALVES b[NB];
          [[unroll]] for (uint j = 0; j < NB; ++j) coopMatLoadNV(b[j], xs, 16u * j * ST + k, ST, true);
          [[unroll]] for (uint m = 0; m < MB; ++m) {
            const uint at = 16u * (slot * MB + m) * ST + k;
            HALVES a;
            coopMatLoadNV(a, ws, at, ST, false);
            [[unroll]] for (uint j = 0; j < NB; ++j) acc[m * NB + j] = coopMatMulAddNV(a, b[j], acc[m * NB + j]);
#if GATED
            HALVES a2;
            coopMatLoadNV(a2, ws2, at, ST, false);
            [[unroll]] for (uint j = 0; j < NB; ++j) acc2[m * NB + j] = coopMatMulAddNV(a2, b[j], acc2[m * NB + j]);
#endif
          }
        }
      }
      barrier();
    }

    if (!computes) continue;
    // Each block through the slot's outs: rows 16r, tokens t, row-major.
    const uint out0 = slot * OUTS * 256u;
    [[unroll]] for (uint m = 0; m < MB; ++m) {
      [[unroll]] for (uint j = 0; j < NB; ++j) {
        coopMatStoreNV(acc[m * NB + j], outs, out0, 16u, false);
#if GATED
        coopMatStoreNV(acc2[m * NB + j], outs, out0 + 256u, 16u, false);
#endif
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
          const uint row = row0 + 16u * (slot * MB + m) + e / 16u;
          const uint t = t0 + 16u * j + e % 16u;
          if (row >= pc.n || t >= rows) continue;
#if GATED
          store(row, y_row(t), outs[out0 + e], outs[out0 + 256u + e]);
#else
          store(row, y_row(t), outs[out0 + e], 0.0);
#endif
        }
        subgroupBarrier();  // every lane's reads before the next block's store
      }
    }
  }
}
