#include "runtime/serve/embedder.hpp"

#include <algorithm>
#include <span>
#include <string>

#include "runtime/error.hpp"
#include "runtime/model/pooling.hpp"

namespace lathe::serve {

Embedder::Embedder(Session& session) : session_(session) {
  if (!session.model().encoder)
    throw Error(ErrorKind::InvalidArgument, std::string(session.model().name) + " is not an encoder: it has no embeddings");
}

int64_t Embedder::width() const { return session_.model().output_width; }

std::vector<std::vector<float>> Embedder::embed(const std::vector<std::vector<int32_t>>& inputs) {
  std::vector<std::vector<float>> out;
  out.reserve(inputs.size());
  const size_t batch = static_cast<size_t>(session_.sequences());
  std::lock_guard lock(mutex_);
  for (size_t first = 0; first < inputs.size(); first += batch) {
    const size_t n = std::min(batch, inputs.size() - first);
    const std::vector<std::vector<float>> states = session_.encode(std::span(inputs).subspan(first, n));
    for (const std::vector<float>& s : states) out.push_back(pool(session_.model(), s));
  }
  return out;
}

}  // namespace lathe::serve
