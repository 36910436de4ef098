// Element conversions between the checkpoint dtypes (F32, F16, BF16), bit
// exact and IEEE round-to-nearest-even, so a converted checkpoint matches
// what torch's .to(dtype) writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/contract.hpp"

namespace lathe::weights {

// Overflow (|x| >= 65520) gives inf, values below 2^-25 give a signed zero,
// subnormals round correctly; a NaN stays a NaN with its payload's top bits.
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);
// Overflow (|x| >= 0x1.ffp127) gives inf; a NaN stays a NaN.
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t h);

// Bytes per element of F32, F16 and BF16. Throws Error(InvalidArgument) for
// the block dtypes (Q8_0, Q4_K, …), stored in blocks, not elements.
size_t dtype_size(DType dtype);

// One element of an f32/f16/bf16 array (unaligned, little-endian bytes).
float load_element(DType dtype, const std::byte* p);
void store_element(DType dtype, float value, std::byte* p);

// Converts src (n elements of `from`) into dst (n elements of `to`); equal
// dtypes copy. Neither span need be aligned. Throws Error(InvalidArgument)
// when src is not a whole number of elements or dst is not n elements.
void convert(DType from, std::span<const std::byte> src, DType to, std::span<std::byte> dst);

}  // namespace lathe::weights
