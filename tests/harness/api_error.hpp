// What the server's request reader tests share: the ApiError a call throws.
#pragma once

#include "runtime/serve/openai.hpp"

namespace lathe::test {

// The ApiError `f` throws (status 0 when it throws none).
template <class F>
serve::ApiError error_of(F f) {
  try {
    f();
  } catch (const serve::ApiError& e) {
    return e;
  }
  return serve::ApiError(0, "no error");
}

}  // namespace lathe::test
