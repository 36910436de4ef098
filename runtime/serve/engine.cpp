#include "runtime/serve/engine.hpp"

namespace lathe::serve {

int64_t SessionEngine::sequences() const { return session_.sequences(); }

int64_t SessionEngine::context() const { return session_.context(); }

int64_t SessionEngine::vocab() const { return session_.model().vocab; }

void SessionEngine::reset(int64_t sequence) { session_.reset(sequence); }

std::vector<float> SessionEngine::prefill(int64_t sequence, std::span<const int32_t> tokens) {
  // An encoder-decoder's prompt is its source (the scheduler hands it over
  // whole); the decoder starts from its start token.
  if (session_.model().encoder_decoder) {
    session_.source(sequence, tokens);
    return session_.prefill(sequence, std::vector<int32_t>{session_.model().decoder_start});
  }
  return session_.prefill(sequence, tokens);
}

std::vector<float> SessionEngine::decode(std::span<const Step> steps) { return session_.decode(steps); }

}  // namespace lathe::serve
