// expect: cross_kv: k is not kv_heads × head_dim wide (the cache holds kv heads)
// An encoder-decoder's cross-attention keys taken from a query-wide
// projection: the cache holds kv_heads heads (the model's 9 query heads
// share 3).
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto q = r.matmul(m::weights.q[0], x);
  auto v = r.matmul(m::weights.v[0], x);
  r.cross_kv<m::kv_heads, m::head_dim>(q, v, 0);
}
