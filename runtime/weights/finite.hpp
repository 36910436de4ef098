// Every weight a finite number: a checkpoint holding a NaN or an infinity
// (a training run that diverged, a conversion that overflowed f16, a
// corrupted download) is refused when it is loaded, naming the tensor and
// the first bad value, rather than turning every logit into NaN later.
//
// The check reads each tensor's bytes once, as they are: the exponent bits
// of f32, f16 and bf16 values (all ones: NaN or ±inf), and for the block
// dtypes the f16 fields that multiply a whole block: the scale d, and the
// offset m (q4_1, q5_1) or the min scale dmin (q4_k, q5_k). A block's 4-,
// 5-, 6- and 8-bit codes are integers and always finite; a NaN scale
// poisons all of the block's values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/contract.hpp"

namespace lathe::weights {

struct NonFinite {
  uint64_t index;          // of the value (row-major); for a block field, of the block's first value
  float value;             // NaN, inf or -inf
  std::string_view field;  // "" for a value; for a block dtype its field: "d", "m" or "dmin"
  uint64_t block_values;   // 1 for a value; for a block field, the values of its block
};

// The first non-finite value of `data` (whole elements or blocks of
// `dtype`), in memory order; nullopt when every one is finite. Throws
// Error(InvalidArgument) when `data` is not a whole number of them.
std::optional<NonFinite> first_non_finite(DType dtype, std::span<const std::byte> data);

// "holds NaN at index 12345 (row 16, column 57)", or for a block's field
// "holds NaN in the scale d of the 32 values at index 4096 (row 16, columns
// 0–31)": the bad value placed in a tensor of `shape` (row-major; rank 1
// names only the index, rank 3 and up the full coordinates).
std::string describe(const NonFinite& bad, std::span<const int64_t> shape);

// Throws Error(BadFile, "<file>: tensor '<name>' holds NaN at index 12345
// (row 16, column 57): refusing to load (--no-check skips this check)") when
// `data` holds a non-finite value.
void check_finite(DType dtype, std::span<const std::byte> data, std::span<const int64_t> shape,
                  std::string_view file, std::string_view tensor);

}  // namespace lathe::weights
