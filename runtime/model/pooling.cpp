#include "runtime/model/pooling.hpp"

#include <cmath>
#include <string>

#include "runtime/error.hpp"

namespace lathe {

std::vector<float> pool(const ModelInfo& model, std::span<const float> states) {
  const size_t width = static_cast<size_t>(model.output_width);
  if (states.empty() || width == 0 || states.size() % width != 0)
    throw Error(ErrorKind::InvalidArgument, "pooling: " + std::to_string(states.size()) + " values are not whole rows of " +
                                                std::to_string(width));
  const size_t rows = states.size() / width;
  std::vector<double> sum(width, 0.0);
  const auto add = [&](size_t row, double weight) {
    for (size_t i = 0; i < width; ++i) sum[i] += weight * static_cast<double>(states[row * width + i]);
  };
  switch (model.pooling) {
    case Pooling::Cls: add(0, 1.0); break;
    case Pooling::Mean:
      for (size_t r = 0; r < rows; ++r) add(r, 1.0 / static_cast<double>(rows));
      break;
    case Pooling::Last:
    case Pooling::None: add(rows - 1, 1.0); break;
  }
  double norm = 1.0;
  if (model.pool_normalize) {
    double squares = 0;
    for (double v : sum) squares += v * v;
    // sentence-transformers' Normalize: x / max(‖x‖, 1e-12).
    norm = std::max(std::sqrt(squares), 1e-12);
  }
  std::vector<float> out(width);
  for (size_t i = 0; i < width; ++i) out[i] = static_cast<float>(sum[i] / norm);
  return out;
}

}  // namespace lathe
