// expect: route: the correction bias is not one per expert
// DeepSeek-V3-style routing of 8 experts handed a bias of the model's width
// (576) instead of one value per expert.
#include "model.hpp"

namespace m = lathe::models::smollm2_135m;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto logits = r.matmul(lathe::typed::Weight<8, 576>{0}, x);
  auto routing = r.route<8, 2>(logits, true, m::weights.final_norm);
  (void)routing;
}
