// What the server's /v1/embeddings needs of an encoder on a device: the
// pooled vector of each input (runtime/model/pooling.hpp). Requests take
// turns on the one session; each runs its inputs in passes of as many as
// the session has sequences.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "runtime/model/session.hpp"

namespace lathe::serve {

class Embedder {
 public:
  // `session` must outlive the embedder and run an encoder.
  explicit Embedder(Session& session);
  int64_t width() const;  // values of a vector
  // One vector per input, in order. Throws Error(InvalidArgument) for an
  // input the session refuses (empty, too long, an id outside the vocabulary).
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs);

 private:
  Session& session_;
  std::mutex mutex_;
};

}  // namespace lathe::serve
