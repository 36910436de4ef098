// expect: matmul: the weight's input width does not match the activation width
// A [576]-activation fed to down_proj, which maps 1536 features to 576.
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto y = r.matmul(m::weights.down[0], x);
  (void)y;
}
