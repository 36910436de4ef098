// expect: output: the final hidden states are not the model's hidden width
// An encoder's output taken from the MLP's hidden activation, not the stream.
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto u = r.matmul(m::weights.up[0], x);
  auto y = r.output<m::hidden>(u);
  (void)y;
}
