#include "runtime/serve/engine.hpp"

namespace lathe::serve {

int64_t SessionEngine::sequences() const { return session_.sequences(); }

int64_t SessionEngine::context() const { return session_.context(); }

int64_t SessionEngine::vocab() const { return session_.model().vocab; }

void SessionEngine::reset(int64_t sequence) { session_.reset(sequence); }

std::vector<float> SessionEngine::prefill(int64_t sequence, std::span<const int32_t> tokens) {
  // An encoder-decoder's prompt is its source (the scheduler hands it over whole).
  return session_.prompt(sequence, tokens);
}

std::vector<float> SessionEngine::decode(std::span<const Step> steps) { return session_.decode(steps); }

}  // namespace lathe::serve
