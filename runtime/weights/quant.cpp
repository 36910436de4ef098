#include "runtime/weights/quant.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "core/kernels.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::weights {

static_assert(std::endian::native == std::endian::little, "the blocks store their scales little-endian");

namespace {

// The arithmetic below follows ggml's reference code operation for
// operation, in f32 and in the same order: the scale searches compare
// errors that differ in their last bits, so a reordered sum or a fused
// multiply-add could pick another scale and write other bytes.

uint8_t byte_at(const std::byte* p, size_t i) { return static_cast<uint8_t>(p[i]); }

float load_f16(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Stores x as f16 and returns the value stored (what the decoder will see).
float store_f16(std::byte* p, float x) {
  const uint16_t h = f32_to_f16(x);
  std::memcpy(p, &h, 2);
  return f16_to_f32(h);
}

// Round to nearest, ties to even, as ggml's nearest_int: adding 1.5 · 2^23
// leaves the rounded integer in the low mantissa bits (exact for |x| < 2^22;
// defined, if meaningless, for anything else, NaN included).
int nearest_int(float x) {
  const float shifted = x + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x7fffff) - 0x400000;
}

// ggml's (int8_t)(v) for v it knows to be in range, kept in [lo, hi]: C's
// truncation toward zero, without its undefined behaviour for NaN or
// out-of-range values.
int truncate_to(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// The value of largest magnitude (the first of equals), signed.
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  return max;
}

// ---- 32-value blocks -------------------------------------------------------

constexpr int kQ = 32;  // values per block of the q*_0 / q*_1 formats

// Nibbles of 32 values: byte j holds value j (low) and value j + 16 (high);
// the fifth bits, if any, go to a little-endian u32 (bit j: value j).
void pack_nibbles(const int* q, std::byte* nibbles, std::byte* high_bits) {
  uint32_t high = 0;
  for (int j = 0; j < kQ / 2; ++j) {
    nibbles[j] = static_cast<std::byte>((q[j] & 0xF) | ((q[j + kQ / 2] & 0xF) << 4));
    high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    high |= static_cast<uint32_t>((q[j + kQ / 2] >> 4) & 1) << (j + kQ / 2);
  }
  if (high_bits) std::memcpy(high_bits, &high, 4);
}

void unpack_nibbles(const std::byte* nibbles, const std::byte* high_bits, int* q) {
  uint32_t high = 0;
  if (high_bits) std::memcpy(&high, high_bits, 4);
  for (int j = 0; j < kQ / 2; ++j) {
    q[j] = (byte_at(nibbles, j) & 0xF) | static_cast<int>(((high >> j) & 1) << 4);
    q[j + kQ / 2] = (byte_at(nibbles, j) >> 4) | static_cast<int>(((high >> (j + kQ / 2)) & 1) << 4);
  }
}

// q8_0: d = absmax / 127, q = round(x / d) (half away from zero).
void encode_q8_0(const float* x, std::byte* out) {
  float amax = 0;
  for (int i = 0; i < kQ; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  store_f16(out, d);  // q is computed from the f32 d, not the f16 one
  for (int i = 0; i < kQ; ++i) {
    const float q = std::round(x[i] * id);  // within ±127, but for a NaN input (stored as −128)
    const int level = q >= -128 && q <= 127 ? static_cast<int>(q) : q > 0 ? 127 : -128;
    out[2 + i] = static_cast<std::byte>(static_cast<int8_t>(level));
  }
}

void decode_q8_0(const std::byte* in, float* y) {
  const float d = load_f16(in);
  for (int i = 0; i < kQ; ++i) y[i] = static_cast<float>(static_cast<int8_t>(in[2 + i])) * d;
}

// q4_0 and q5_0: symmetric, the largest-magnitude value maps to the most
// negative level (−8 or −16), so its sign is kept exactly.
template <int kLevels>  // 16 or 32
void encode_symmetric(const float* x, std::byte* out) {
  constexpr int half = kLevels / 2;
  const float d = signed_absmax(x, kQ) / static_cast<float>(-half);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  store_f16(out, d);
  int q[kQ];
  for (int i = 0; i < kQ; ++i) q[i] = truncate_to(x[i] * id + (static_cast<float>(half) + 0.5f), 0, kLevels - 1);
  if constexpr (kLevels == 16) pack_nibbles(q, out + 2, nullptr);
  else pack_nibbles(q, out + 6, out + 2);
}

template <int kLevels>
void decode_symmetric(const std::byte* in, float* y) {
  const float d = load_f16(in);
  int q[kQ];
  if constexpr (kLevels == 16) unpack_nibbles(in + 2, nullptr, q);
  else unpack_nibbles(in + 6, in + 2, q);
  for (int i = 0; i < kQ; ++i) y[i] = static_cast<float>(q[i] - kLevels / 2) * d;
}

// q4_1 and q5_1: the block's range [min, max] split into kLevels - 1 steps.
template <int kLevels>
void encode_affine(const float* x, std::byte* out) {
  float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
  for (int i = 0; i < kQ; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
  }
  const float d = (max - min) / static_cast<float>(kLevels - 1);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  store_f16(out, d);
  store_f16(out + 2, min);  // q is computed from the f32 min, not the f16 one
  int q[kQ];
  for (int i = 0; i < kQ; ++i) q[i] = truncate_to((x[i] - min) * id + 0.5f, 0, kLevels - 1);
  if constexpr (kLevels == 16) pack_nibbles(q, out + 4, nullptr);
  else pack_nibbles(q, out + 8, out + 4);
}

template <int kLevels>
void decode_affine(const std::byte* in, float* y) {
  const float d = load_f16(in), m = load_f16(in + 2);
  int q[kQ];
  if constexpr (kLevels == 16) unpack_nibbles(in + 4, nullptr, q);
  else unpack_nibbles(in + 8, in + 4, q);
  for (int i = 0; i < kQ; ++i) y[i] = static_cast<float>(q[i]) * d + m;
}

// ---- K-quants: super-blocks of 256 -----------------------------------------

constexpr int kK = static_cast<int>(kSuperBlock);

// The best (scale, min) for n values on levels 0..nmax, as ggml's
// make_qkx2_quants: start from the plain range, then try nstep + 1 stretched
// ranges and keep the least-squares fit (weighted by w) with the smallest
// weighted error. The fitted min is kept at or below 0. Returns the scale;
// *neg_min is −min (≥ 0) and L the levels.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill_n(L, n, uint8_t{0});
    *neg_min = -min;
    return 0;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t trial[kQ];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * static_cast<float>(l);
      sum_l2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
      sum_xl += w[i] * static_cast<float>(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
      error += w[i] * (diff * diff);
    }
    if (error < best_error) {
      std::copy_n(trial, n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// The best symmetric scale for n values on levels −nmax..nmax−1, as ggml's
// make_qx_quants with x²-weighted least squares: the plain scale, then 18
// slightly stretched and shrunk ones, keeping the best fit. L holds the
// levels plus nmax; an all-zero group gets scale 0 and levels 0.
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill_n(L, n, int8_t{0});
    return 0;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  // Σ w·x·l and Σ w·l² with w = x², for the levels of `iscale`.
  auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(level(iscale, i));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  auto set_levels = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale, i));
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  sums(iscale, sumlx, suml2);
  set_levels(iscale);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      set_levels(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The 12 scale bytes of q4_k / q5_k: 8 sub-blocks' 6-bit scale and min.
// Sub-blocks 0-3 hold them in the low 6 bits of bytes 0-3 (scale) and 4-7
// (min); sub-blocks 4-7 hold their low 4 bits in bytes 8-11 (scale low,
// min high) and their top 2 bits in the top 2 bits of bytes 0-3 and 4-7.
void pack_scale_mins(const uint8_t* sc, const uint8_t* m, std::byte* out) {
  uint8_t b[12] = {};
  for (int j = 0; j < 4; ++j) {
    b[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    b[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
  std::memcpy(out, b, 12);
}

void unpack_scale_min(const std::byte* in, int j, int& sc, int& m) {
  if (j < 4) {
    sc = byte_at(in, j) & 63;
    m = byte_at(in, j + 4) & 63;
  } else {
    sc = (byte_at(in, j + 4) & 0xF) | ((byte_at(in, j - 4) >> 6) << 4);
    m = (byte_at(in, j + 4) >> 4) | ((byte_at(in, j) >> 6) << 4);
  }
}

// q4_k and q5_k: each sub-block of 32 gets a fitted (scale, min); the eight
// are quantized to 6 bits against the super-block's largest (d, dmin), and
// the values requantized against the scales as stored. Writes the header
// (d, dmin, scales) and returns the levels.
template <int kNmax>  // 15 or 31
void encode_scale_min_superblock(const float* x, std::byte* header, uint8_t* L) {
  // The reference's search parameters: q4_k tries 21 ranges from −1 by 0.1,
  // q5_k 16 from −0.5 by 0.1.
  constexpr float rmin = kNmax == 15 ? -1.0f : -0.5f;
  constexpr int nstep = kNmax == 15 ? 20 : 15;
  float scales[8], mins[8], weights[kQ];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + kQ * j;
    float sum_x2 = 0;
    for (int l = 0; l < kQ; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / kQ);
    for (int l = 0; l < kQ; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(kQ, kNmax, xs, weights, L + kQ * j, &mins[j], rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {  // the reference keeps the low byte, then caps it at 63
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  const float d = store_f16(header, max_scale / 63.0f);
  const float dmin = store_f16(header + 2, max_min / 63.0f);
  pack_scale_mins(ls, lm, header + 4);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    unpack_scale_min(header + 4, j, sc, m);
    const float ds = d * static_cast<float>(sc);
    if (ds == 0) continue;  // the fitted levels stay
    const float dm = dmin * static_cast<float>(m);
    for (int i = 0; i < kQ; ++i)
      L[kQ * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[kQ * j + i] + dm) / ds), 0, kNmax));
  }
}

// Values in runs of 64: run r's 32 bytes hold sub-block 2r in their low
// nibbles and 2r + 1 in their high ones.
void pack_k_nibbles(const uint8_t* L, std::byte* qs) {
  for (int r = 0; r < kK / 64; ++r)
    for (int l = 0; l < kQ; ++l)
      qs[kQ * r + l] = static_cast<std::byte>((L[64 * r + l] & 0xF) | ((L[64 * r + l + kQ] & 0xF) << 4));
}

void encode_q4_k(const float* x, std::byte* out) {
  uint8_t L[kK];
  encode_scale_min_superblock<15>(x, out, L);
  pack_k_nibbles(L, out + 16);
}

void encode_q5_k(const float* x, std::byte* out) {
  uint8_t L[kK];
  encode_scale_min_superblock<31>(x, out, L);
  // Fifth bits: bit 2r of byte l is value 64r + l's, bit 2r + 1 value 64r + 32 + l's.
  uint8_t high[kQ] = {};
  for (int r = 0; r < kK / 64; ++r)
    for (int l = 0; l < kQ; ++l) {
      high[l] |= static_cast<uint8_t>(((L[64 * r + l] >> 4) & 1) << (2 * r));
      high[l] |= static_cast<uint8_t>(((L[64 * r + l + kQ] >> 4) & 1) << (2 * r + 1));
    }
  std::memcpy(out + 16, high, kQ);
  pack_k_nibbles(L, out + 48);
}

// Decodes q4_k (high_bits null) or q5_k: x = d·sc·q − dmin·m per sub-block.
void decode_scale_min_superblock(const std::byte* in, const std::byte* high_bits, const std::byte* qs, float* y) {
  const float d = load_f16(in), dmin = load_f16(in + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    unpack_scale_min(in + 4, j, sc, m);
    const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(m);
    const int run = j / 2, shift = 4 * (j % 2);
    for (int l = 0; l < kQ; ++l) {
      int q = (byte_at(qs, kQ * run + l) >> shift) & 0xF;
      if (high_bits && (byte_at(high_bits, l) >> j) & 1) q += 16;
      y[kQ * j + l] = ds * static_cast<float>(q) - dm;
    }
  }
}

void decode_q4_k(const std::byte* in, float* y) { decode_scale_min_superblock(in, nullptr, in + 16, y); }
void decode_q5_k(const std::byte* in, float* y) { decode_scale_min_superblock(in, in + 16, in + 48, y); }

// q6_k: 16 sub-blocks of 16 with a fitted symmetric scale each, the scales
// quantized to int8 against the largest (which maps to −128), the values
// requantized to −32..31 against the scales as stored.
void encode_q6_k(const float* x, std::byte* out) {
  int8_t L[kK];
  float scales[16];
  float max_abs = 0, max_scale = 0;
  for (int b = 0; b < 16; ++b) {
    scales[b] = fit_symmetric_scale(16, 32, x + 16 * b, L + 16 * b);
    if (std::fabs(scales[b]) > max_abs) {
      max_abs = std::fabs(scales[b]);
      max_scale = scales[b];
    }
  }
  std::fill_n(out, block_format(DType::Q6_K).bytes, std::byte{0});
  if (max_abs < 1e-15f) return;  // all zero: d = 0 and every scale 0
  const float iscale = -128.0f / max_scale;
  const float d = store_f16(out + 208, 1 / iscale);
  for (int b = 0; b < 16; ++b) {
    const int sc = std::min(127, nearest_int(iscale * scales[b]));
    out[192 + b] = static_cast<std::byte>(static_cast<int8_t>(sc));
    const float ds = d * static_cast<float>(sc);
    if (ds == 0) continue;  // the fitted levels stay
    for (int i = 0; i < 16; ++i)
      L[16 * b + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * b + i] / ds), -32, 31) + 32);
  }
  // Per half of 128: low nibbles in 64 bytes (byte l: values l and l + 64 of
  // the half; byte 32 + l: l + 32 and l + 96), the top 2 bits in 32 bytes
  // (byte l: values l, l + 32, l + 64, l + 96 at bits 0, 2, 4, 6).
  for (int h = 0; h < 2; ++h) {
    const int8_t* q = L + 128 * h;
    std::byte* ql = out + 64 * h;
    std::byte* qh = out + 128 + 32 * h;
    for (int l = 0; l < kQ; ++l) {
      ql[l] = static_cast<std::byte>((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<std::byte>((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
      qh[l] = static_cast<std::byte>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) |
                                     ((q[l + 96] >> 4) << 6));
    }
  }
}

void decode_q6_k(const std::byte* in, float* y) {
  const float d = load_f16(in + 208);
  for (int h = 0; h < 2; ++h) {
    const std::byte* ql = in + 64 * h;
    const std::byte* qh = in + 128 + 32 * h;
    for (int k = 0; k < 4; ++k)  // quarter k of the half: values 32k + l
      for (int l = 0; l < kQ; ++l) {
        const int low = (byte_at(ql, l + 32 * (k % 2)) >> (4 * (k / 2))) & 0xF;
        const int high = (byte_at(qh, l) >> (2 * k)) & 3;
        const int v = 128 * h + 32 * k + l;
        const auto sc = static_cast<int8_t>(in[192 + v / 16]);
        y[v] = d * static_cast<float>(sc) * static_cast<float>((low | (high << 4)) - 32);
      }
  }
}

// ---- dispatch ---------------------------------------------------------------

struct Codec {
  void (*encode)(const float* x, std::byte* out);
  void (*decode)(const std::byte* in, float* y);
};

Codec codec(DType dtype) {
  switch (dtype) {
    case DType::Q8_0: return {encode_q8_0, decode_q8_0};
    case DType::Q4_0: return {encode_symmetric<16>, decode_symmetric<16>};
    case DType::Q5_0: return {encode_symmetric<32>, decode_symmetric<32>};
    case DType::Q4_1: return {encode_affine<16>, decode_affine<16>};
    case DType::Q5_1: return {encode_affine<32>, decode_affine<32>};
    case DType::Q4_K: return {encode_q4_k, decode_q4_k};
    case DType::Q5_K: return {encode_q5_k, decode_q5_k};
    case DType::Q6_K: return {encode_q6_k, decode_q6_k};
    case DType::F32: case DType::F16: case DType::BF16: break;
  }
  throw Error(ErrorKind::InvalidArgument, std::string(dtype_name(dtype)) + " is not a block dtype");
}

// Blocks in `values` values of dtype; Error(InvalidArgument) naming `what`
// unless they are whole blocks.
size_t whole_blocks(DType dtype, size_t values, const char* what) {
  const auto per_block = static_cast<size_t>(block_format(dtype).elements);
  if (values % per_block != 0)
    throw Error(ErrorKind::InvalidArgument, std::string(what) + " " + std::string(dtype_name(dtype)) + ": " +
                                                std::to_string(values) + " values are not whole blocks of " +
                                                std::to_string(per_block));
  return values / per_block;
}

}  // namespace

size_t block_bytes(DType dtype, size_t elements) {
  codec(dtype);  // a block dtype
  return whole_blocks(dtype, elements, "block_bytes") * static_cast<size_t>(block_format(dtype).bytes);
}

void dequantize(DType dtype, std::span<const std::byte> src, std::span<float> dst) {
  const Codec c = codec(dtype);
  const BlockFormat f = block_format(dtype);
  const size_t blocks = whole_blocks(dtype, dst.size(), "dequantize");
  if (src.size() != blocks * static_cast<size_t>(f.bytes))
    throw Error(ErrorKind::InvalidArgument, "dequantize " + std::string(dtype_name(dtype)) + ": " +
                                                std::to_string(src.size()) + " bytes for " + std::to_string(blocks) +
                                                " blocks of " + std::to_string(f.bytes) + " bytes");
  for (size_t b = 0; b < blocks; ++b)
    c.decode(src.data() + b * static_cast<size_t>(f.bytes), dst.data() + b * static_cast<size_t>(f.elements));
}

std::vector<std::byte> quantize(DType dtype, std::span<const float> src) {
  const Codec c = codec(dtype);
  const BlockFormat f = block_format(dtype);
  const size_t blocks = whole_blocks(dtype, src.size(), "quantize");
  std::vector<std::byte> out(blocks * static_cast<size_t>(f.bytes));
  for (size_t b = 0; b < blocks; ++b)
    c.encode(src.data() + b * static_cast<size_t>(f.elements), out.data() + b * static_cast<size_t>(f.bytes));
  return out;
}

void dequantize_q8_0(std::span<const std::byte> src, std::span<float> dst) { dequantize(DType::Q8_0, src, dst); }

std::vector<std::byte> quantize_q8_0(std::span<const float> src) { return quantize(DType::Q8_0, src); }

std::vector<uint32_t> quantize_xq(std::span<const float> x) {
  constexpr size_t kBlock = kernels::kXqBlock;
  if (x.size() % kBlock != 0)
    throw Error(ErrorKind::InvalidArgument, "quantize_xq: " + std::to_string(x.size()) + " values are not whole blocks of " +
                                                std::to_string(kBlock));
  const size_t k = x.size();
  std::vector<uint32_t> out(static_cast<size_t>(kernels::xq_row_words(static_cast<int64_t>(k))));
  for (size_t b = 0; b < k / kBlock; ++b) {
    const float* v = x.data() + b * kBlock;
    float amax = 0;
    for (size_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax * (1.0f / 127.0f);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int sum = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      const int q = std::clamp(nearest_int(v[i] * id), -127, 127);
      sum += q;
      out[(b * kBlock + i) / 4] |= static_cast<uint32_t>(q & 0xff) << (8 * (i % 4));
    }
    out[k / 4 + 2 * b] = std::bit_cast<uint32_t>(d);
    out[k / 4 + 2 * b + 1] = std::bit_cast<uint32_t>(d * static_cast<float>(sum));
  }
  return out;
}

float xq_value(std::span<const uint32_t> row, int64_t width, int64_t k) {
  if (static_cast<int64_t>(row.size()) != kernels::xq_row_words(width) || k < 0 || k >= width)
    throw Error(ErrorKind::InvalidArgument, "xq_value: value " + std::to_string(k) + " of a row of " +
                                                std::to_string(width) + " in " + std::to_string(row.size()) + " words");
  const auto q = static_cast<int8_t>(row[static_cast<size_t>(k / 4)] >> (8 * (k % 4)));
  return std::bit_cast<float>(row[static_cast<size_t>(width / 4 + 2 * (k / kernels::kXqBlock))]) * static_cast<float>(q);
}

// Rows of ggml blocks into device_row's planes: per row, every block's body,
// then every block's qh field, then every block's scale field, each plane
// padded to a 16-byte texel.
std::vector<std::byte> repack_blocks(DType d, int64_t rows, int64_t cols, std::span<const std::byte> data) {
  const DTypeLayout l = dtype_layout(d);
  const DeviceBlocks b = device_blocks(d);
  const DeviceRow r = device_row(d, cols);
  const size_t blocks = static_cast<size_t>(cols / l.elements), row_bytes = static_cast<size_t>(r.texels) * 16;
  std::vector<std::byte> out(static_cast<size_t>(rows) * row_bytes);
  const std::pair<BlockField, int64_t> planes[] = {{b.body, 0}, {b.qh, r.qh_at}, {b.scale, r.scale_at}};
  for (size_t row = 0; row < static_cast<size_t>(rows); ++row) {
    const std::byte* in = data.data() + row * blocks * static_cast<size_t>(l.bytes);
    std::byte* to = out.data() + row * row_bytes;
    for (const auto& [field, at] : planes) {
      const size_t n = static_cast<size_t>(field.bytes);
      for (size_t k = 0; k < blocks && n > 0; ++k)
        std::memcpy(to + static_cast<size_t>(at) * 16 + k * n, in + k * static_cast<size_t>(l.bytes) + static_cast<size_t>(field.offset), n);
    }
  }
  return out;
}

}  // namespace lathe::weights
