// A position in a spec file: every value of the IR remembers where it was
// written, so that any later stage can report an error there.
#pragma once

#include <cstdint>

namespace lathe::spec {

struct Loc {
  uint32_t line = 0;  // 1-based; 0 when unknown (then only the file is named)
  uint32_t column = 0;
};

}  // namespace lathe::spec
