#include "runtime/weights/finite.hpp"

#include <cstring>

#include "runtime/error.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::weights {
namespace {

// The index of the first of `n` words whose `exponent` bits are all ones (a
// NaN or an infinity), or n. The bulk is read eight bytes at a time with
// every lane tested at once (SWAR: lane & exponent, plus the exponent's
// lowest bit, carries into the lane's sign bit only when the exponent is
// all ones), in fixed-length chunks with no branch, which the compiler
// vectorizes: a scan runs at memory speed (the 125M bench model's 248 MB of
// f16 in about 15 ms on the 2-core machine); only a chunk that holds a bad
// value is read again, word by word.
template <class Word, Word exponent>
size_t first_all_ones(const std::byte* data, size_t n) {
  constexpr size_t kLanes = 8 / sizeof(Word);
  constexpr uint64_t kMask = [] {
    uint64_t m = 0;
    for (size_t l = 0; l < kLanes; ++l) m |= uint64_t{exponent} << (l * 8 * sizeof(Word));
    return m;
  }();
  constexpr uint64_t kCarry = [] {  // each lane's exponent's lowest bit
    uint64_t c = 0;
    const Word low = static_cast<Word>(exponent & (~exponent + 1));
    for (size_t l = 0; l < kLanes; ++l) c |= uint64_t{low} << (l * 8 * sizeof(Word));
    return c;
  }();
  constexpr uint64_t kSign = kMask + kCarry;  // each lane's top bit: no lane carries into the next
  constexpr size_t kChunk = 256;  // words of eight bytes
  size_t i = 0;                   // in Words
  for (; i + kChunk * kLanes <= n; i += kChunk * kLanes) {
    uint64_t bad = 0;
    for (size_t j = 0; j < kChunk; ++j) {
      uint64_t w;
      std::memcpy(&w, data + i * sizeof(Word) + j * 8, 8);  // safetensors does not align tensors
      bad |= ((w & kMask) + kCarry) & kSign;
    }
    if (bad) break;
  }
  for (; i < n; ++i) {
    Word w;
    std::memcpy(&w, data + i * sizeof(Word), sizeof(Word));
    if ((w & exponent) == exponent) return i;
  }
  return n;
}

// The f16 fields of a block dtype that scale its values, by byte offset in
// the block (quant.hpp's layouts).
struct Field {
  size_t offset;
  std::string_view name;
};
struct Fields {
  Field fields[2];
  size_t count;
};
Fields scale_fields(DType dtype) {
  switch (dtype) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: return {{{0, "d"}, {}}, 1};
    case DType::Q4_1: case DType::Q5_1: return {{{0, "d"}, {2, "m"}}, 2};
    case DType::Q4_K: case DType::Q5_K: return {{{0, "d"}, {2, "dmin"}}, 2};
    case DType::Q6_K: return {{{208, "d"}, {}}, 1};  // after the 128 + 64 code bytes and 16 int8 scales
    case DType::F32: case DType::F16: case DType::BF16: break;
  }
  return {{}, 0};
}

std::string value_name(float v) { return v != v ? "NaN" : v > 0 ? "inf" : "-inf"; }

// "[2, 16, 57]": a flat index in a row-major shape.
std::string coordinates(uint64_t index, std::span<const int64_t> shape) {
  std::string out;
  for (size_t d = shape.size(); d-- > 0;) {
    const uint64_t extent = static_cast<uint64_t>(shape[d]);
    out = std::to_string(index % extent) + (out.empty() ? "" : ", ") + out;
    index /= extent;
  }
  return "[" + out + "]";
}

}  // namespace

std::optional<NonFinite> first_non_finite(DType dtype, std::span<const std::byte> data) {
  const DTypeLayout layout = dtype_layout(dtype);
  const size_t bytes = static_cast<size_t>(layout.bytes);
  if (data.size() % bytes != 0)
    throw Error(ErrorKind::InvalidArgument, std::to_string(data.size()) + " bytes are not whole " +
                                                std::string(dtype_name(dtype)) + " " +
                                                (is_block_dtype(dtype) ? "blocks" : "values"));
  const size_t n = data.size() / bytes;
  if (!is_block_dtype(dtype)) {
    size_t at = n;
    if (dtype == DType::F32) at = first_all_ones<uint32_t, 0x7f800000u>(data.data(), n);
    else if (dtype == DType::F16) at = first_all_ones<uint16_t, 0x7c00u>(data.data(), n);
    else at = first_all_ones<uint16_t, 0x7f80u>(data.data(), n);  // bf16
    if (at == n) return std::nullopt;
    return NonFinite{at, load_element(dtype, data.data() + at * bytes), "", 1};
  }
  // One block in 32 or 256 values: a strided read of its scales is cheap.
  const Fields f = scale_fields(dtype);
  for (size_t block = 0; block < n; ++block)
    for (size_t k = 0; k < f.count; ++k) {
      uint16_t h;
      std::memcpy(&h, data.data() + block * bytes + f.fields[k].offset, 2);
      if ((h & 0x7c00u) == 0x7c00u)
        return NonFinite{block * static_cast<uint64_t>(layout.elements), f16_to_f32(h), f.fields[k].name,
                         static_cast<uint64_t>(layout.elements)};
    }
  return std::nullopt;
}

std::string describe(const NonFinite& bad, std::span<const int64_t> shape) {
  std::string where;
  if (shape.size() == 2 && shape[1] > 0) {
    const uint64_t cols = static_cast<uint64_t>(shape[1]);
    const uint64_t row = bad.index / cols, column = bad.index % cols;
    where = " (row " + std::to_string(row) + ", " +
            (bad.block_values > 1 ? "columns " + std::to_string(column) + "–" +
                                        std::to_string(column + bad.block_values - 1)
                                  : "column " + std::to_string(column)) +
            ")";
  } else if (shape.size() > 2) {
    where = " (at " + coordinates(bad.index, shape) + ")";
  }
  const std::string at = "index " + std::to_string(bad.index) + where;
  if (bad.field.empty()) return "holds " + value_name(bad.value) + " at " + at;
  const std::string field = bad.field == "m" ? "offset m" : bad.field == "dmin" ? "min scale dmin" : "scale d";
  return "holds " + value_name(bad.value) + " in the " + field + " of the block of " +
         std::to_string(bad.block_values) + " values at " + at;
}

void check_finite(DType dtype, std::span<const std::byte> data, std::span<const int64_t> shape, std::string_view file,
                  std::string_view tensor) {
  const std::optional<NonFinite> bad = first_non_finite(dtype, data);
  if (!bad) return;
  throw Error(ErrorKind::BadFile, std::string(file) + ": tensor '" + std::string(tensor) + "' " +
                                      describe(*bad, shape) + ": refusing to load (--no-check skips this check)");
}

}  // namespace lathe::weights
