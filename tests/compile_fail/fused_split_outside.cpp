// expect: split: the slice lies outside the activation
// GPT-2's fused qkv split with v starting one head too far.
#include "model.hpp"

namespace m = lathe::models::gpt2;

void misuse() {
  lathe::typed::Recorder r;
  auto x = r.embed(m::weights.embed, 1.0);
  auto qkv = r.matmul(m::weights.qkv[0], x, m::weights.qkv_bias[0]);
  auto v = r.split<2 * m::hidden + m::head_dim, m::hidden>(qkv);
  (void)v;
}
