// The control: the same API used correctly compiles, so the failures above
// fail for their stated reason and not for a missing include.
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

int main() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto h = r.rmsnorm(x, m::weights.attn_norm[0], m::norm_eps);
  auto q = r.matmul(m::weights.q[0], h);
  auto k = r.matmul(m::weights.k[0], h);
  auto v = r.matmul(m::weights.v[0], h);
  auto a = r.attention<m::heads, m::kv_heads, m::head_dim>(q, k, v, 0, m::attention_scale);
  x = r.add(x, r.matmul(m::weights.o[0], a));
  return static_cast<int>(m::schedule().ops.size() > 0 ? 0 : 1);
}
