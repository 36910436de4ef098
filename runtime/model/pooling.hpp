// An encoder's sentence embedding: its final hidden states pooled as the
// spec says (sentence-transformers' Pooling module: the CLS row, the mean of
// the rows or the last row), then divided by the L2 norm when it asks.
#pragma once

#include <span>
#include <vector>

#include "runtime/model/model_info.hpp"

namespace lathe {

// `states`: one input's rows, [T][hidden]. Pooling::None takes the last row
// (the state that has seen the whole input in a causal model, and one row of
// an encoder's). Throws Error(InvalidArgument) for no rows or a size that is
// not whole rows.
std::vector<float> pool(const ModelInfo& model, std::span<const float> states);

}  // namespace lathe
