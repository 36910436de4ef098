#include "runtime/serve/engine.hpp"

#include "runtime/error.hpp"
#include "runtime/generate/images.hpp"

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

std::vector<float> Engine::encode_image(const text::ImageInput&) {
  throw Error(ErrorKind::Unsupported, "this model takes no images");
}

std::vector<float> Engine::prefill_spliced(int64_t, std::span<const int32_t>, std::span<const int64_t>,
                                           std::span<const float>) {
  throw Error(ErrorKind::Unsupported, "this model takes no images");
}

int64_t Engine::rewind_floor(int64_t) const { throw Error(ErrorKind::Unsupported, "this engine reuses no cache"); }

void Engine::truncate(int64_t, int64_t) { throw Error(ErrorKind::Unsupported, "this engine reuses no cache"); }

void Engine::copy(int64_t, int64_t, int64_t) { throw Error(ErrorKind::Unsupported, "this engine reuses no cache"); }

std::vector<float> Engine::verify(std::span<const Step>) {
  throw Error(ErrorKind::Unsupported, "this engine verifies no proposals");
}

void Engine::cross_images(int64_t, std::span<const float>, std::span<const int64_t>) {
  throw Error(ErrorKind::Unsupported, "this model takes no images through cross-attention");
}

void SessionEngine::cross_images(int64_t sequence, std::span<const float> features, std::span<const int64_t> tiles) {
  session_.images(sequence, features, tiles);
}

std::vector<float> SessionEngine::encode_image(const text::ImageInput& input) {
  if (tower_ == nullptr || link_ == nullptr) return Engine::encode_image(input);
  return text::image_features(*tower_, *link_, input).values;
}

std::vector<float> SessionEngine::prefill_spliced(int64_t sequence, std::span<const int32_t> tokens,
                                                  std::span<const int64_t> at, std::span<const float> features) {
  return session_.prefill(sequence, tokens, at, features);
}

}  // namespace lathe::serve
