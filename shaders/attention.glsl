// What every attention kernel of a query row over the KV cache shares
// (attention.comp, attention_flash.comp, attention_flash_coop.comp): the
// keys a row sees, this workgroup's range of them (SPLITS ranges, grid z),
// and a score's adjustments (soft-cap, ALiBi, T5's relative bias). The
// including kernel declares io, rel_bias, SPLITS and the generated
// constants (attention.comp's header lists them) first.

// The keys row t sees end before this: its own position + 1 (causal), or
// its extent (bidirectional: its input's end, or for a tiled tower's row
// that is not its image's own, the image's own rows', which come first).
// IMAGE_SPANS: a spliced row's token holds
// its image's last position beside the flag (Gemma 3's image rows see
// each other both ways), the keys up to it seen too.
uint visible(uint t) {
#if CROSS_IMAGES
  return io.rows[t].extent & ((1u << IMAGE_KEY_BITS) - 1u);
#elif CROSS
  return io.rows[t].extent;
#elif BIDIRECTIONAL
  return io.rows[t].extent > 0u ? io.rows[t].extent : io.rows[t].position + 1u;
#elif IMAGE_SPANS
  const uint token = io.rows[t].token;
  return (token & SPLICED_TOKEN) != 0u ? max(io.rows[t].position, token & ~SPLICED_TOKEN) + 1u
                                       : io.rows[t].position + 1u;
#else
  return io.rows[t].position + 1;
#endif
}

// Causal: row t's sequence's positions lowest … the row's own (lowest = 0,
// or the window's first key i − WINDOW + 1), this workgroup's range of
// them: [x, y). Both ends grow with the row's position.
uvec2 key_range(uint t) {
#if CROSS_IMAGES
  // An image cross-attention row: the keys of its images (common.glsl).
  const uint all_keys = visible(t);
  const uint lowest = (io.rows[t].extent >> IMAGE_KEY_BITS) & ((1u << IMAGE_KEY_BITS) - 1u);
#elif BIDIRECTIONAL
  // A window W both ways (ModernBERT's local attention): |i − j| ≤ W.
  const uint i = io.rows[t].position;
  const uint all_keys = WINDOW > 0u ? min(visible(t), i + WINDOW + 1u) : visible(t);
  const uint lowest = WINDOW > 0u && i > WINDOW ? i - WINDOW : 0u;
#elif IMAGE_SPANS
  // The window reaches back from the row's own position; a spliced row
  // sees its image's first row (IMAGE_ROWS before its last) even past it.
  const uint all_keys = visible(t), own = io.rows[t].position + 1u;
  uint lowest = WINDOW > 0u && own > WINDOW ? own - WINDOW : 0u;
  if ((io.rows[t].token & SPLICED_TOKEN) != 0u) lowest = min(lowest, all_keys > IMAGE_ROWS ? all_keys - IMAGE_ROWS : 0u);
#else
  const uint all_keys = visible(t);
  const uint lowest = WINDOW > 0u && all_keys > WINDOW ? all_keys - WINDOW : 0u;
#endif
  const uint chunk = (all_keys - lowest + SPLITS - 1) / SPLITS;
  const uint first = min(lowest + gl_WorkGroupID.z * chunk, all_keys);
  return uvec2(first, min(first + chunk, all_keys));
}

// The keys of rows first … last together (a workgroup's, staged for all of
// them): from the first's first to the last's last, as both ends grow with
// the row; bidirectional rows' ends need not (a tiled tower's), so each is
// looked at.
uvec2 joint_keys(uint first, uint last) {
#if BIDIRECTIONAL
  uvec2 keys = key_range(first);
  for (uint t = first + 1u; t <= last; ++t) {
    const uvec2 r = key_range(t);
    keys = uvec2(min(keys.x, r.x), max(keys.y, r.y));
  }
  return keys;
#else
  return uvec2(key_range(first).x, key_range(last).y);
#endif
}

#if RELATIVE
// T5's bias of the workgroup's GT query heads by distance, −REL_MAX … REL_MAX:
// looked up once a workgroup (a constant array indexed at run time is
// copied into each invocation's memory where it is read; here it is read
// only to fill this table).
shared float rel_table[(2u * REL_MAX + 1u) * GT];
void load_relative(uint head0) {
  for (uint i = gl_LocalInvocationIndex; i < (2u * REL_MAX + 1u) * GT; i += gl_WorkGroupSize.x)
    rel_table[i] = rel_bias[REL_BUCKET[i / GT] * HQ + head0 + i % GT];
  barrier();
}
// The bias of query head h (one of the workgroup's) for key j seen from position i.
float relative(uint h, uint j, uint i) {
  const int r = clamp(int(j) - int(i), -int(REL_MAX), int(REL_MAX));
  return rel_table[uint(r + int(REL_MAX)) * GT + h % GT];
}
#endif

// Scores of keys pos … pos + 3 for query head h of the row at position
// qpos: soft-capped, ALiBi's slope · (j − i) or T5's relative bias added.
vec4 adjust4(vec4 score, uint h, uint pos, uint qpos) {
#if SOFTCAPPED
  score = vec4(softcap(score.x, SOFTCAP), softcap(score.y, SOFTCAP), softcap(score.z, SOFTCAP), softcap(score.w, SOFTCAP));
#endif
#if ALIBI
  score += SLOPES[h] * (vec4(float(pos), float(pos + 1), float(pos + 2), float(pos + 3)) - float(qpos));
#endif
#if RELATIVE
  score += vec4(relative(h, pos, qpos), relative(h, pos + 1, qpos), relative(h, pos + 2, qpos), relative(h, pos + 3, qpos));
#endif
  return score;
}

