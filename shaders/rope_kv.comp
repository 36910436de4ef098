// Rotary position embedding and the KV-cache append, in one pass, a row's
// heads spread over a column of workgroups (main): q is rotated in place; k is rotated and written to the K cache, v
// copied to the V cache, at the row's position in its sequence's cache (its
// slot in that sequence's ring, kv.glsl; the rotation uses the position itself).
//
// Generated constants:
//   HQ, HKV, DH   query heads, KV heads, head width
//   ROPE          0: no rotation (learned positions): the KV append alone
//   ROT           rotary width (≤ DH, even)
//   NEOX          1: pairs (i, i + ROT/2) (HF Llama rotate-half); 0: (2i, 2i + 1) (GPT-J, GGUF)
//   INV_FREQ      float[ROT/2]: theta^(-2i/ROT) with the spec's RoPE scaling (linear, llama3,
//                 yarn), computed by the generator in double
//   ROPE_SCALE    the factor on cos and sin (YaRN's attention factor; 1 otherwise)
//   NTK_DYNAMIC   1: dynamic NTK scaling (HF rope_type "dynamic"): a row whose call
//                 reaches L = max(extent, position + 1) > NTK_ORIGINAL positions
//                 turns with the base θ · (NTK_FACTOR · L / NTK_ORIGINAL − NTK_FACTOR + 1)^(ROT / (ROT − 2)),
//                 i.e. INV_FREQ[j] (θ's) times that ratio^(−2j / ROT)
//   ROPE_2D, ROPE_GRID  2D RoPE (a Pixtral tower's; 0: 1D): a row's token is its patch's
//                 row · ROPE_GRID + column; pairs j < ROT/4 turn by the row, the rest by
//                 the column (INV_FREQ ordered so by the generator)
//   ROT_OFF       the first rotated dim of each head (0; latent attention: its rotary part
//                 after the latent), the rotation on dims ROT_OFF … ROT_OFF + ROT − 1
//   QK_NORM       0: none; RMSNorm of q and k as they are read, 1: each head over DH
//                 (Qwen3, Gemma 3), 2: each projection whole (OLMo 2), 3: k's first LATENT
//                 values alone (latent attention's kv_a_layernorm; q is not normed), 4: k's
//                 heads alone, each over DH (an image's cross-attention keys, Llama 3.2 Vision)
//   LATENT        latent attention (its kv_lora_rank; 0: none): k = [latent | rotary key] is the
//                 one cached head, and the value too: nothing is written to the V cache
//   QK_EPS, QK_UNIT_OFFSET  its eps, and whether its scale is 1 + w (Gemma)
//   CACHE_F16     cache dtype (kv.glsl)
// Specialization constants: 0 the workgroup size; 1 RING, the positions the caches hold.
// Push constants (AttentionPush): rows, q/k/v offsets and row strides.
// Buffers: io; q [rows][…] f32 (read-write); k, v [rows][…] f32; kc, vc the caches.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_q) buffer Q { float q[]; };
layout(std430, binding = BINDING_k) readonly buffer K { float k[]; };
layout(std430, binding = BINDING_v) readonly buffer V { float v[]; };

layout(constant_id = 1) const uint RING = 0;
#include "kv.glsl"
layout(std430, binding = BINDING_k_cache) writeonly buffer KC { CACHE_PAIR kc[]; };
layout(std430, binding = BINDING_v_cache) writeonly buffer VC { CACHE_PAIR vc[]; };
layout(std430, binding = BINDING_q_norm) readonly buffer QN { float qn[]; };
layout(std430, binding = BINDING_k_norm) readonly buffer KN { float kn[]; };

// The values a whole-projection norm takes its sums over (QK_NORM 2: q's
// and k's rows; 3: k's latent).
#if QK_NORM == 3
const uint Q_GROUP = 0, K_GROUP = LATENT;
#else
const uint Q_GROUP = HQ * DH, K_GROUP = HKV * DH;
#endif
#define Q_NORMED (QK_NORM == 1 || QK_NORM == 2)

// 1/rms of the `width` values of a row at `base` of q (or of k), every lane
// getting the whole sum.
float inv_rms(bool of_q, uint base, uint width) {
  float sum = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < width; i += gl_WorkGroupSize.x) {
    const float x = of_q ? q[base + i] : k[base + i];
    sum += x * x;
  }
  return inversesqrt(subgroupAdd(sum) / float(width) + QK_EPS);
}

// The scale of dim d of head h: per head one vector for every head, whole
// projections one value per dim.
float scale_of(bool of_q, uint head, uint d) {
  const uint i = QK_NORM == 1 || QK_NORM == 3 || QK_NORM == 4 ? d : head * DH + d;
  const float w = of_q ? qn[i] : kn[i];
  return QK_UNIT_OFFSET != 0 ? 1.0 + w : w;
}

#if ROPE
// log2 of dynamic NTK's base ratio for row t (0: the base unscaled).
float ntk_log2(uint t) {
#if NTK_DYNAMIC
  const uint extent = max(io.rows[t].extent, io.rows[t].position + 1u);
  if (extent <= NTK_ORIGINAL) return 0.0;
  const float ratio = NTK_FACTOR * float(extent) / float(NTK_ORIGINAL) - (NTK_FACTOR - 1.0);
  return float(ROT) / float(ROT - 2u) * log2(ratio);
#else
  return 0.0;
#endif
}

// Pair j's inverse frequency under a base ratio of 2^g.
float inv_freq(uint j, float g) {
#if NTK_DYNAMIC
  return INV_FREQ[j] * exp2(-float(2u * j) / float(ROT) * g);
#else
  return INV_FREQ[j];
#endif
}

// Pair j's angle at row t (its position; 2D: its patch's row or column).
float angle_of(uint t, uint position, uint j, float g) {
#if ROPE_2D
  const uint cell = io.rows[t].token;
  return float(j < ROT / 4 ? cell / ROPE_GRID : cell % ROPE_GRID) * inv_freq(j, g);
#else
  return float(position) * inv_freq(j, g);
#endif
}

// The partner of dim d in its rotation pair, the frequency index, and the
// sign of the partner's term: rotated[d] = x[d]·cos + sign·x[partner]·sin.
void pairing(uint d, out uint partner, out uint freq, out float sign_) {
#if NEOX
  const uint half_ = ROT / 2;
  partner = d < half_ ? d + half_ : d - half_;
  freq = d < half_ ? d : d - half_;
  sign_ = d < half_ ? -1.0 : 1.0;
#else
  partner = d ^ 1u;
  freq = d / 2;
  sign_ = (d & 1u) == 0 ? -1.0 : 1.0;
#endif
}
#endif

// Dim d of head `head` of k as read: normed (times k_factor, its group's
// 1/rms) where a q/k norm covers it.
float k_value(uint kbase, uint head, uint d, float k_factor) {
  float x = k[kbase + d];
#if QK_NORM == 3
  if (d < LATENT) x *= k_factor * scale_of(false, head, d);
#elif QK_NORM
  x *= k_factor * scale_of(false, head, d);
#endif
  return x;
}

// A row's heads spread over the workgroups of its column (the row is
// gl_WorkGroupID.y): workgroup `part` of PARTS (gl_NumWorkGroups.x, the
// plan's) takes heads part, part + PARTS, … of q and of k, each head's norm
// (QK_NORM 1) its own. A norm over a whole projection (QK_NORM 2, 3) sums
// the row before any of it is rotated in place: the plan gives it one part.
void main() {
  const uint t = gl_WorkGroupID.y, part = gl_WorkGroupID.x, parts = gl_NumWorkGroups.x;
  if (t >= pc.rows) return;
  const uint position = io.rows[t].position, sequence = io.rows[t].sequence;
  const uint lane = gl_LocalInvocationID.x;
#if ROPE
  const float g = ntk_log2(t);
#endif
#if QK_NORM == 2 || QK_NORM == 3
  const float k_whole = inv_rms(false, pc.k_offset + t * pc.k_stride, K_GROUP);
#endif
#if QK_NORM == 2
  const float q_whole = inv_rms(true, pc.q_offset + t * pc.q_stride, Q_GROUP);
#endif

  for (uint head = part; head < HQ; head += parts) {
    const uint qbase = pc.q_offset + t * pc.q_stride + head * DH;
#if Q_NORMED
    // Every value of q is multiplied as it is read by 1/rms of its group and
    // its scale; the dims outside the rotary ones in place here (the
    // rotation below writes the others).
#if QK_NORM == 1
    const float q_factor = inv_rms(true, qbase, DH);
#else
    const float q_factor = q_whole;
#endif
    for (uint e = lane; e < DH - ROT; e += gl_WorkGroupSize.x) {
      const uint d = e < ROT_OFF ? e : e + ROT;
      q[qbase + d] *= q_factor * scale_of(true, head, d);
    }
#endif
#if ROPE
    // Each lane owns whole rotation pairs (d < partner), so no lane reads a
    // value another lane writes.
    for (uint j = lane; j < ROT / 2; j += gl_WorkGroupSize.x) {
#if NEOX
      const uint a = j, b = j + ROT / 2;
#else
      const uint a = 2 * j, b = 2 * j + 1;
#endif
      const float angle = angle_of(t, position, j, g);
      const float c = cos(angle) * ROPE_SCALE, s = sin(angle) * ROPE_SCALE;
      const uint base = qbase + ROT_OFF;
      float x0 = q[base + a], x1 = q[base + b];
#if Q_NORMED
      x0 *= q_factor * scale_of(true, head, ROT_OFF + a);
      x1 *= q_factor * scale_of(true, head, ROT_OFF + b);
#endif
      q[base + a] = x0 * c - x1 * s;
      q[base + b] = x1 * c + x0 * s;
    }
#endif
  }

  // k and v, a pair of dims per step.
  for (uint head = part; head < HKV; head += parts) {
    const uint kbase = pc.k_offset + t * pc.k_stride + head * DH;
#if QK_NORM == 1 || QK_NORM == 4
    const float k_factor = inv_rms(false, kbase, DH);
#elif QK_NORM
    const float k_factor = k_whole;
#else
    const float k_factor = 1.0;
#endif
    for (uint p = lane; p < DH / 2; p += gl_WorkGroupSize.x) {
      vec2 kv = vec2(k_value(kbase, head, 2 * p, k_factor), k_value(kbase, head, 2 * p + 1, k_factor));
#if ROPE
      for (uint e = 0; e < 2; ++e) {
        const uint d = 2 * p + e;
        if (d < ROT_OFF || d >= ROT_OFF + ROT) continue;
        uint partner, freq;
        float sign_;
        pairing(d - ROT_OFF, partner, freq, sign_);
        partner += ROT_OFF;
        const float angle = angle_of(t, position, freq, g);
        const float x = k_value(kbase, head, d, k_factor), y = k_value(kbase, head, partner, k_factor);
        kv[e] = (x * cos(angle) + sign_ * y * sin(angle)) * ROPE_SCALE;
      }
#endif
      const uint at = cache_pair(sequence, position, head, p);
      kc[at] = to_cache(kv);
#if QK_NORM != 3  // latent attention writes no V
      const uint vbase = pc.v_offset + t * pc.v_stride + head * DH;
      vc[at] = to_cache(vec2(v[vbase + 2 * p], v[vbase + 2 * p + 1]));
#endif
    }
  }
}
