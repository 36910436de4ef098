// expect: add: the residual and the branch have different widths
// The MLP's hidden activation added to the residual stream.
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto u = r.matmul(m::weights.up[0], x);
  x = r.add(x, u);
}
