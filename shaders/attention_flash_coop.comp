// Flash attention of a prompt chunk on a GPU's matrix units
// (attention_flash.glsl says how a workgroup walks its keys): S = Q · Kᵀ
// and P · V by cooperative matrices, 16 × 16 × 16, f16 × f16 → f32
// (GL_NV_cooperative_matrix; generator/emit/coop_khr.cpp rewrites the
// module for VK_KHR_cooperative_matrix), as matmul_coop.comp's products.
// Queries (scaled), keys and values are staged as f16, P is rounded to f16;
// scores, sums and the output stay f32.
//
// The output, LINES × DH f32, lives in shared memory: each tile scales its
// lines by their corrections, then adds P · V block by block (16 × 16, a
// subgroup's blocks round robin, so any number of subgroups a workgroup
// works). LINES and KEYS are multiples of 16 (plan::flash_tile), DH too.

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "attention_flash.glsl"

// f16 rows padded by 8 values: each row starts 16 bytes aligned
// (cooperative loads need it) and rows fall on different banks.
const uint QST = DH + 8u, PST = KEYS + 8u;
shared float16_t queries[LINES * QST];  // queries[line · QST + d]
shared float16_t kstage[KEYS * QST];    // kstage[j · QST + d]: key base + j (B of S, column-major: DH × KEYS)
shared float16_t vstage[KEYS * QST];    // vstage[j · QST + d] (B of P · V, row-major: KEYS × DH)
shared float16_t probs[LINES * PST];    // probs[line · PST + j]: P
shared float outs[LINES * DH];          // outs[line · DH + d]: the lines' unnormalized output

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define HALVES fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>

void main() {
  const uint tid = gl_LocalInvocationIndex;
  if (first_row() >= pc.rows) return;  // the whole workgroup
#if RELATIVE
  load_relative(head0());
#endif
  for (uint i = tid; i < LINES * (DH / 4u); i += THREADS) {
    const uint line = i / (DH / 4u), d = i % (DH / 4u);
    const vec4 v = query4(line, d);
    [[unroll]] for (uint e = 0; e < 4u; ++e) queries[line * QST + 4u * d + e] = float16_t(v[e]);
  }
  const uint subgroups = gl_NumSubgroups, sg = gl_SubgroupID;
  for (uvec2 seg = segment(first_row());; seg = segment(seg.y)) {
    const uint sequence = io.rows[seg.x].sequence;
    const uvec2 keys = segment_keys(seg);
    for (uint i = tid; i < LINES * DH; i += THREADS) outs[i] = 0.0;
    Line s;
    if (tid < LINES) s = start_line(tid, seg);

    for (uint base = keys.x; base < keys.y; base += KEYS) {
      for (uint i = tid; i < KEYS * CTPR; i += THREADS) {
        const uint j = i / CTPR, c = i % CTPR;
        const int at = cache_texel(sequence, min(base + j, keys.y - 1u), c);  // past the end: masked
        float k[CVPT], v[CVPT];
        unpack_cache(texelFetch(KT, at), k);
        unpack_cache(texelFetch(VT, at), v);
        [[unroll]] for (uint e = 0; e < CVPT; ++e) {
          kstage[j * QST + c * CVPT + e] = float16_t(k[e]);
          vstage[j * QST + c * CVPT + e] = float16_t(v[e]);
        }
      }
      barrier();
      // S, a 16 × 16 block of lines × keys a subgroup at a time.
      for (uint b = sg; b < (LINES / 16u) * (KEYS / 16u); b += subgroups) {
        const uint li = b / (KEYS / 16u), kj = b % (KEYS / 16u);
        ACC acc = ACC(0.0);
        [[unroll]] for (uint d = 0; d < DH; d += 16u) {
          HALVES a, bk;
          coopMatLoadNV(a, queries, 16u * li * QST + d, QST, false);
          coopMatLoadNV(bk, kstage, 16u * kj * QST + d, QST, true);
          acc = coopMatMulAddNV(a, bk, acc);
        }
        coopMatStoreNV(acc, scores, 16u * li * KEYS + 16u * kj, KEYS, false);
      }
      barrier();
      if (tid < LINES) {
#define TO_HALVES(i, j, p) probs[(i) * PST + (j)] = float16_t(p)
        SOFTMAX_TILE(s, tid, base, TO_HALVES)
      }
      barrier();
      for (uint i = tid; i < LINES * DH; i += THREADS) outs[i] *= correction[i / DH];
      barrier();
      // outs += P · V, a 16 × 16 block of lines × dims a subgroup at a time.
      for (uint b = sg; b < (LINES / 16u) * (DH / 16u); b += subgroups) {
        const uint li = b / (DH / 16u), dn = b % (DH / 16u);
        ACC acc;
        coopMatLoadNV(acc, outs, 16u * li * DH + 16u * dn, DH, false);
        for (uint j = 0; j < KEYS; j += 16u) {
          HALVES a, bv;
          coopMatLoadNV(a, probs, 16u * li * PST + j, PST, false);
          coopMatLoadNV(bv, vstage, j * QST + 16u * dn, QST, false);
          acc = coopMatMulAddNV(a, bv, acc);
        }
        coopMatStoreNV(acc, outs, 16u * li * DH + 16u * dn, DH, false);
      }
      barrier();
    }

    if (tid < LINES) finish_line(tid, s, seg);
    barrier();
    for (uint i = tid; i < LINES * DH; i += THREADS) put_output(i / DH, i % DH, outs[i], seg);
    if (segment_done(seg)) break;
    barrier();  // the next run's lines reuse outs, sums and the stages
  }
}
