// expect: attention: k is not kv_heads × head_dim wide (the cache holds kv heads)
// Keys projected with the query weights: a KV cache indexed by query heads.
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto q = r.matmul(m::weights.q[0], x);
  auto k = r.matmul(m::weights.q[0], x);
  auto v = r.matmul(m::weights.v[0], x);
  auto a = r.attention<m::heads, m::kv_heads, m::head_dim>(q, k, v, 0, m::attention_scale);
  (void)a;
}
