#include "runtime/weights/dtype.hpp"

#include <bit>
#include <cstring>
#include <string>

#include "runtime/error.hpp"

namespace lathe::weights {

uint16_t f32_to_f16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or NaN: keep the payload's top 10 bits,
    if (abs == 0x7f800000) return sign | 0x7c00;
    const auto payload = static_cast<uint16_t>((abs >> 13) & 0x3ff);
    return sign | 0x7c00 | (payload ? payload : 0x200);  // but never let a NaN become inf
  }
  const int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent >= 16) return sign | 0x7c00;
  // significand: 24 bits with the implicit 1 (meaningless for f32 subnormals,
  // which are far below f16's range and take the `shift > 24` path).
  const uint32_t significand = (abs & 0x7fffff) | 0x800000;
  // Drop `shift` bits: 13 for f16 normals, more for f16 subnormals (whose
  // exponent is fixed at -14).
  const int shift = exponent >= -14 ? 13 : -exponent - 1;
  if (shift > 24) return sign;  // below half the smallest subnormal 2^-24
  uint32_t h = significand >> shift;
  if (exponent >= -14) h = (static_cast<uint32_t>(exponent + 15) << 10) | (h & 0x3ff);
  const uint32_t rest = significand & ((1u << shift) - 1), half = 1u << (shift - 1);
  // A carry out of the mantissa bumps the exponent, as rounding must
  // (0x3ff subnormal → 0x400 normal, 0x7bff → 0x7c00 inf).
  if (rest > half || (rest == half && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: normalize, since every f16 subnormal is a normal f32.
  int e = -14;
  while (!(mantissa & 0x400)) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(e + 127) << 23) | ((mantissa & 0x3ff) << 13));
}

uint16_t f32_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7fffffff) > 0x7f800000) {
    const auto h = static_cast<uint16_t>(bits >> 16);
    return (h & 0x7f) ? h : static_cast<uint16_t>(h | 0x40);  // a payload only in the low bits would read as inf
  }
  // Round to nearest even; a carry into the exponent is the right result,
  // up to inf.
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    default:  // the block dtypes (quant.hpp)
      break;
  }
  throw Error(ErrorKind::InvalidArgument, std::string("dtype ") + std::string(dtype_name(dtype)) +
                                              " has no per-element size (it is stored in blocks)");
}

float load_element(DType dtype, const std::byte* p) {
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void store_element(DType dtype, float f, std::byte* p) {
  if (dtype == DType::F32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = dtype == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
  std::memcpy(p, &h, 2);
}

void convert(DType from, std::span<const std::byte> src, DType to, std::span<std::byte> dst) {
  const size_t from_size = dtype_size(from), to_size = dtype_size(to);
  const size_t n = src.size() / from_size;
  if (src.size() % from_size != 0 || dst.size() != n * to_size)
    throw Error(ErrorKind::InvalidArgument, "convert " + std::string(dtype_name(from)) + " → " +
                                                std::string(dtype_name(to)) + ": " + std::to_string(src.size()) +
                                                " source bytes and " + std::to_string(dst.size()) +
                                                " destination bytes are not the same number of elements");
  if (from == to) {
    if (n) std::memcpy(dst.data(), src.data(), src.size());
    return;
  }
  // F16 ↔ BF16 through f32 is exact: f32 holds every value of both.
  for (size_t i = 0; i < n; ++i)
    store_element(to, load_element(from, src.data() + i * from_size), dst.data() + i * to_size);
}

}  // namespace lathe::weights
