// The KV cache of one layer: [context][HKV][DH] values, f16 packed in pairs
// into uints (no 16-bit storage feature needed) or f32 pairs. Pair p of
// position pos and KV head h is at (pos * HKV + h) * DH / 2 + p.
#if CACHE_F16
#define CACHE_PAIR uint
vec2 from_cache(uint v) { return unpackHalf2x16(v); }
uint to_cache(vec2 v) { return packHalf2x16(v); }
#else
#define CACHE_PAIR vec2
vec2 from_cache(vec2 v) { return v; }
vec2 to_cache(vec2 v) { return v; }
#endif

uint cache_pair(uint position, uint kv_head, uint pair) { return (position * HKV + kv_head) * (DH / 2) + pair; }
