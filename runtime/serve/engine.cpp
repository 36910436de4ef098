#include "runtime/serve/engine.hpp"

#include <cassert>

namespace lathe::serve {

// Today's Session holds one sequence; the batched one (several KV-cache
// regions, decode over several) replaces these bodies.
int64_t SessionEngine::sequences() const { return 1; }

int64_t SessionEngine::context() const { return session_.context(); }

int64_t SessionEngine::vocab() const { return session_.model().vocab; }

void SessionEngine::reset(int64_t sequence) {
  assert(sequence == 0);
  (void)sequence;
  session_.reset();
}

std::vector<float> SessionEngine::prefill(int64_t sequence, std::span<const int32_t> tokens) {
  assert(sequence == 0);
  (void)sequence;
  return session_.prefill(tokens);
}

std::vector<float> SessionEngine::decode(std::span<const Step> steps) {
  assert(steps.size() == 1 && steps[0].sequence == 0);
  return session_.decode(steps[0].token);
}

}  // namespace lathe::serve
