// ggml's quantized block formats on the CPU: their layouts, dequantization
// bit for bit as ggml computes it, and quantization as ggml's reference
// quantizers (quantize_row_*_ref in ggml/src/ggml-quants.c: round to nearest,
// no importance matrix), so that a tensor lathe quantizes has the bytes
// `llama-quantize` without an imatrix would write for it.
//
// Every format splits a row into blocks, each holding its own scale(s):
//   q8_0  [f16 d][32 × int8 q]                       x = d·q
//   q4_0  [f16 d][16 bytes: 32 × 4 bits]             x = d·(q − 8)
//   q4_1  [f16 d][f16 m][16 bytes]                   x = d·q + m
//   q5_0  [f16 d][u32 high bits][16 bytes]           x = d·(q − 16)
//   q5_1  [f16 d][f16 m][u32 high bits][16 bytes]    x = d·q + m
// In the 32-value formats byte j holds value j in its low nibble and value
// j + 16 in its high one; bit j of the high bits is value j's fifth bit.
// The K-quants hold a super-block of kSuperBlock (256) values:
//   q4_k  [f16 d][f16 dmin][12 bytes: 8 × (6-bit scale, 6-bit min)][128 bytes]
//         x = d·sc·q − dmin·m per sub-block of 32
//   q5_k  as q4_k, with [32 bytes of fifth bits] before the 128 bytes
//   q6_k  [128 bytes low 4 bits][64 bytes high 2 bits][16 × int8 scale][f16 d]
//         x = d·sc·(q − 32) per sub-block of 16
// Values are little-endian; ggml's f16 conversions round to nearest even.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/contract.hpp"

namespace lathe::weights {

// `elements` values per block of `bytes` bytes; 1 and the element size for
// f32, f16 and bf16.
struct BlockFormat {
  int64_t elements;
  int64_t bytes;
};
constexpr BlockFormat block_format(DType dtype) {
  const DTypeLayout layout = dtype_layout(dtype);
  return {layout.elements, layout.bytes};
}

// Bytes of `elements` values of a block dtype; Error(InvalidArgument) unless
// `elements` is a whole number of blocks.
size_t block_bytes(DType dtype, size_t elements);

// Blocks of a block dtype → f32: dst.size() values from exactly their blocks
// in src. Error(InvalidArgument) for a dtype that is not a block dtype, a
// dst.size() that is not whole blocks, or src not exactly those blocks.
void dequantize(DType dtype, std::span<const std::byte> src, std::span<float> dst);

// f32 → blocks of a block dtype, as ggml's reference quantizer writes them.
// Error(InvalidArgument) for a dtype that is not a block dtype or a
// src.size() that is not whole blocks.
std::vector<std::byte> quantize(DType dtype, std::span<const float> src);

// The Q8_0 forms of the two, for the callers that predate the others.
void dequantize_q8_0(std::span<const std::byte> src, std::span<float> dst);
std::vector<std::byte> quantize_q8_0(std::span<const float> src);

// One row of x as shaders/quantize.comp writes it for the dot layout's
// integer dot products (core/kernels.hpp's LATHE_BIND_QUANTIZE has the
// layout): per block of kernels::kXqBlock values d = max|x| · (1/127) (the
// constant's f32, a correctly rounded multiplication, as the kernel does),
// q = x · (1/d) rounded half to even, s = d · Σq: kernels::xq_row_words(K)
// words. Error(InvalidArgument) unless x is whole blocks.
std::vector<uint32_t> quantize_xq(std::span<const float> x);
// Value k of a row of xq words of a K = width row (row.size() =
// xq_row_words(width)): d · q. Error(InvalidArgument) for another size or k.
float xq_value(std::span<const uint32_t> row, int64_t width, int64_t k);

// `rows` rows of `cols` values in ggml blocks, repacked into the planes of
// core/contract.hpp's device_row (what the kernels read): per row, every
// block's body, then its q5 high bits, then its scales, each plane padded to
// a 16-byte texel.
std::vector<std::byte> repack_blocks(DType dtype, int64_t rows, int64_t cols, std::span<const std::byte> src);

}  // namespace lathe::weights
