// The KV cache of one layer: [ring][HKV][DH] values, f16 packed in pairs
// into uints (no 16-bit storage feature needed) or f32 pairs. Pair p of
// position pos and KV head h is at (slot * HKV + h) * DH / 2 + p.
#if CACHE_F16
#define CACHE_PAIR uint
vec2 from_cache(uint v) { return unpackHalf2x16(v); }
uint to_cache(vec2 v) { return packHalf2x16(v); }
#else
#define CACHE_PAIR vec2
vec2 from_cache(vec2 v) { return v; }
vec2 to_cache(vec2 v) { return v; }
#endif

// A layer's cache is a ring of RING positions (specialization constant 1 of
// rope_kv, 2 of attention; the runtime sets it per layer): position p lives
// at slot p mod RING. RING is the context on a layer that sees every key, so
// nothing wraps there; a windowed layer's ring holds W + max_chunk − 1
// positions (docs/runtime.md). 0 (unset): no ring, one sequence. Each
// sequence of a session has a ring of its own, sequence s's after s − 1's.
uint cache_slot(uint sequence, uint position) { return RING == 0u ? position : sequence * RING + position % RING; }

uint cache_pair(uint sequence, uint position, uint kv_head, uint pair) {
  return (cache_slot(sequence, position) * HKV + kv_head) * (DH / 2) + pair;
}

// Attention reads the same memory through RGBA32UI texel views: one fetch
// is 16 bytes (8 f16 or 4 f32 values), several times fewer loads than pairs
// on lavapipe. Texel j of (position, kv_head) is at (cache_slot(sequence, position) * HKV + kv_head) * CTPR + j.
#if CACHE_F16
#define CVPT 8u
void unpack_cache(uvec4 t, out float v[CVPT]) {
  vec2 a = unpackHalf2x16(t.x), b = unpackHalf2x16(t.y), c = unpackHalf2x16(t.z), d = unpackHalf2x16(t.w);
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y; v[4] = c.x; v[5] = c.y; v[6] = d.x; v[7] = d.y;
}
#else
#define CVPT 4u
void unpack_cache(uvec4 t, out float v[CVPT]) {
  v[0] = uintBitsToFloat(t.x); v[1] = uintBitsToFloat(t.y); v[2] = uintBitsToFloat(t.z); v[3] = uintBitsToFloat(t.w);
}
#endif
const uint CTPR = DH / CVPT;  // cache texels per head row
