// expect: rmsnorm: the scale vector's width does not match the activation width
// The layer's norm scale applied to the MLP's hidden activation.
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto u = r.matmul(m::weights.up[0], x);
  auto n = r.rmsnorm(u, m::weights.mlp_norm[0], m::norm_eps);
  (void)n;
}
