// ggml's block formats (runtime/weights/quant.hpp): for every type,
//   - dequantization of blocks the test packs itself, from levels and scales
//     it chose, checked against x = d·(q − offset) (+ m) computed here (the
//     test's own packing, by element index, not the library's);
//   - quantization of inputs whose reference bytes follow by hand (the
//     32-value formats), of a fixed input against hashes of the bytes ggml's
//     reference quantizers write (every type), and for the K-quants the
//     invariants of the reference's scale search: the largest sub-block
//     scale (and min) maps to 63 (q6_k: −128), and a block of exactly
//     representable values round-trips exactly;
//   - quantize → dequantize error on random data within stated bounds;
//   - sizes checked (Error(InvalidArgument)), GGUF write / read of every type.
#include "runtime/weights/quant.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::weights;

namespace {

constexpr DType kBlockTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                 DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};

void put_f16(std::vector<uint8_t>& b, size_t at, float x) {
  const uint16_t h = f32_to_f16(x);
  b[at] = static_cast<uint8_t>(h & 0xff);
  b[at + 1] = static_cast<uint8_t>(h >> 8);
}

std::vector<float> decode(DType dtype, const std::vector<uint8_t>& block) {
  std::vector<float> out(static_cast<size_t>(block_format(dtype).elements));
  dequantize(dtype, std::as_bytes(std::span(block)), out);
  return out;
}

std::vector<uint8_t> bytes_of(const std::vector<std::byte>& v) {
  std::vector<uint8_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size());
  return out;
}

// Levels 0..top, spread over n values by a fixed stride (every level appears).
std::vector<int> levels(int n, int top, int stride) {
  std::vector<int> q(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) q[static_cast<size_t>(i)] = (i * stride) % (top + 1);
  return q;
}

// A 32-value block: value i's low 4 bits in byte `at + i % 16` (low nibble
// for i < 16, high for i ≥ 16), its fifth bit at bit i of the u32 at `high`.
void pack32(std::vector<uint8_t>& b, size_t at, const std::vector<int>& q, int high = -1) {
  uint32_t h = 0;
  for (int i = 0; i < 32; ++i) {
    b[at + static_cast<size_t>(i % 16)] |= static_cast<uint8_t>((q[static_cast<size_t>(i)] & 15) << (i < 16 ? 0 : 4));
    h |= static_cast<uint32_t>((q[static_cast<size_t>(i)] >> 4) & 1) << i;
  }
  if (high >= 0)
    for (int k = 0; k < 4; ++k) b[static_cast<size_t>(high + k)] = static_cast<uint8_t>(h >> (8 * k));
}

// q4_k / q5_k scale bytes (12 at `at`): sub-block s < 4 keeps its scale in
// the low 6 bits of byte s and its min in byte s + 4; s ≥ 4 keeps the low
// 4 bits of scale | min << 4 in byte s + 4, and the top 2 bits of each in
// the top bits of bytes s - 4 (scale) and s (min).
void pack_k_scales(std::vector<uint8_t>& b, size_t at, const int* sc, const int* m) {
  for (int s = 0; s < 8; ++s) {
    if (s < 4) {
      b[at + s] |= static_cast<uint8_t>(sc[s]);
      b[at + s + 4] |= static_cast<uint8_t>(m[s]);
    } else {
      b[at + s + 4] = static_cast<uint8_t>((sc[s] & 15) | ((m[s] & 15) << 4));
      b[at + s - 4] |= static_cast<uint8_t>((sc[s] >> 4) << 6);
      b[at + s] |= static_cast<uint8_t>((m[s] >> 4) << 6);
    }
  }
}

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_SUITE("quant") {
  TEST_CASE("layouts: block sizes, bytes and ggml type ids") {
    CHECK(kSuperBlock == 256);
    const struct {
      DType d;
      int64_t elements, bytes;
      uint32_t ggml;
    } expected[] = {{DType::F32, 1, 4, 0},      {DType::F16, 1, 2, 1},      {DType::BF16, 1, 2, 30},
                    {DType::Q8_0, 32, 34, 8},   {DType::Q4_0, 32, 18, 2},   {DType::Q4_1, 32, 20, 3},
                    {DType::Q5_0, 32, 22, 6},   {DType::Q5_1, 32, 24, 7},   {DType::Q4_K, 256, 144, 12},
                    {DType::Q5_K, 256, 176, 13}, {DType::Q6_K, 256, 210, 14}};
    for (const auto& e : expected) {
      CAPTURE(dtype_name(e.d));
      CHECK(block_format(e.d).elements == e.elements);
      CHECK(block_format(e.d).bytes == e.bytes);
      CHECK(dtype_layout(e.d).ggml_type == e.ggml);
      CHECK(dtype_of_ggml_type(e.ggml) == e.d);
      CHECK(is_block_dtype(e.d) == (e.elements > 1));
    }
    CHECK(!dtype_of_ggml_type(10).has_value());  // Q2_K: not read
    // On the device: texel-aligned planes per row (bodies, q5 high bits, scales).
    CHECK(device_row(DType::Q4_K, 512).texels == 2 * 9);  // 144-byte blocks, whole texels
    CHECK(device_row(DType::Q5_K, 256).texels == 11);
    const DeviceRow q6 = device_row(DType::Q6_K, 768);  // 3 × 208 body bytes, then 3 f16 d in one texel
    CHECK(q6.texels == 3 * 13 + 1);
    CHECK(q6.scale_at == 3 * 13);
    const DeviceRow q5 = device_row(DType::Q5_0, 320);  // 10 blocks: 10 qs texels, 40 qh bytes, 20 d bytes
    CHECK(q5.qh_at == 10);
    CHECK(q5.scale_at == 13);
    CHECK(q5.texels == 15);
    CHECK(device_row(DType::F16, 64).texels == 8);
    CHECK(from_key<DType>("q4_k") == DType::Q4_K);
    CHECK(spelling(DType::Q6_K).enumerator == "Q6_K");
  }

  TEST_CASE("dequantize hand-packed 32-value blocks") {
    const float d = 0.375f, m = -1.25f;  // exact in f16
    SUBCASE("q8_0: x = d·q") {
      std::vector<uint8_t> b(34);
      put_f16(b, 0, d);
      for (int i = 0; i < 32; ++i) b[static_cast<size_t>(2 + i)] = static_cast<uint8_t>(static_cast<int8_t>(i * 8 - 128));
      const std::vector<float> x = decode(DType::Q8_0, b);
      for (int i = 0; i < 32; ++i) CHECK(x[static_cast<size_t>(i)] == d * static_cast<float>(i * 8 - 128));
    }
    SUBCASE("q4_0, q5_0: x = d·(q − 8 or 16); q4_1, q5_1: x = d·q + m") {
      // Where each format keeps its quants (and fifth bits, -1: none).
      const struct {
        DType t;
        int bits;
        bool has_min;
        size_t quants;
        int high;
      } formats[] = {{DType::Q4_0, 4, false, 2, -1},
                     {DType::Q4_1, 4, true, 4, -1},
                     {DType::Q5_0, 5, false, 6, 2},
                     {DType::Q5_1, 5, true, 8, 4}};
      for (const auto& f : formats) {
        CAPTURE(dtype_name(f.t));
        std::vector<uint8_t> b(static_cast<size_t>(block_format(f.t).bytes));
        put_f16(b, 0, d);
        if (f.has_min) put_f16(b, 2, m);
        const int top = (1 << f.bits) - 1;
        const std::vector<int> q = levels(32, top, f.bits == 4 ? 7 : 13);
        pack32(b, f.quants, q, f.high);
        const std::vector<float> x = decode(f.t, b);
        for (size_t i = 0; i < 32; ++i) {
          CAPTURE(i);
          if (f.has_min) CHECK(x[i] == d * static_cast<float>(q[i]) + m);
          else CHECK(x[i] == d * static_cast<float>(q[i] - (top + 1) / 2));
        }
      }
    }
  }

  TEST_CASE("dequantize hand-packed K-quant super-blocks") {
    const float d = 0.0625f, dmin = 0.03125f;
    const int sc[8] = {1, 63, 17, 32, 48, 5, 60, 33}, mn[8] = {0, 9, 63, 16, 31, 47, 2, 50};
    SUBCASE("q4_k and q5_k: x = d·sc·q − dmin·m per sub-block of 32") {
      for (const int bits : {4, 5}) {
        CAPTURE(bits);
        const DType dtype = bits == 4 ? DType::Q4_K : DType::Q5_K;
        std::vector<uint8_t> b(static_cast<size_t>(block_format(dtype).bytes));
        put_f16(b, 0, d);
        put_f16(b, 2, dmin);
        pack_k_scales(b, 4, sc, mn);
        const std::vector<int> q = levels(256, bits == 4 ? 15 : 31, 7);
        // Value i (sub-block s = i / 32, l = i % 32): low 4 bits in byte
        // 32·(s / 2) + l of the quants, low nibble for even s; q5_k's fifth
        // bit is bit s of byte l of the 32 high-bit bytes.
        const size_t quants = bits == 4 ? 16 : 48;
        for (size_t i = 0; i < 256; ++i) {
          const size_t s = i / 32, l = i % 32;
          b[quants + 32 * (s / 2) + l] |= static_cast<uint8_t>((q[i] & 15) << (s % 2 ? 4 : 0));
          if (bits == 5) b[16 + l] |= static_cast<uint8_t>(((q[i] >> 4) & 1) << s);
        }
        const std::vector<float> x = decode(dtype, b);
        for (size_t i = 0; i < 256; ++i) {
          const size_t s = i / 32;
          CAPTURE(i);
          CHECK(x[i] == d * static_cast<float>(sc[s]) * static_cast<float>(q[i]) - dmin * static_cast<float>(mn[s]));
        }
      }
    }
    SUBCASE("q6_k: x = d·sc·(q − 32) per sub-block of 16") {
      std::vector<uint8_t> b(210);
      put_f16(b, 208, d);
      for (int s = 0; s < 16; ++s) b[static_cast<size_t>(192 + s)] = static_cast<uint8_t>(static_cast<int8_t>(s * 17 - 128));
      const std::vector<int> q = levels(256, 63, 11);
      // Value i (half h = i / 128, j = i % 128, quarter k = j / 32, l = j % 32):
      // low 4 bits in byte 64h + l + 32·(k % 2), nibble k / 2; top 2 bits in
      // byte 128 + 32h + l at bit 2k.
      for (size_t i = 0; i < 256; ++i) {
        const size_t h = i / 128, j = i % 128, k = j / 32, l = j % 32;
        b[64 * h + l + 32 * (k % 2)] |= static_cast<uint8_t>((q[i] & 15) << (4 * (k / 2)));
        b[128 + 32 * h + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * k));
      }
      const std::vector<float> x = decode(DType::Q6_K, b);
      for (size_t i = 0; i < 256; ++i) {
        CAPTURE(i);
        const auto s = static_cast<float>(static_cast<int>(i / 16) * 17 - 128);
        CHECK(x[i] == d * s * static_cast<float>(q[i] - 32));
      }
    }
  }

  TEST_CASE("quantize: the reference's bytes for inputs worked by hand") {
    std::vector<float> x(32);
    SUBCASE("q8_0: d = absmax / 127, q = round(x / d)") {
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 16) / 16.0f;  // absmax 1 at i = 0
      const std::vector<uint8_t> b = bytes_of(quantize(DType::Q8_0, x));
      REQUIRE(b.size() == 34);
      CHECK((b[0] | b[1] << 8) == f32_to_f16(1.0f / 127.0f));
      for (int i = 0; i < 32; ++i)  // (i − 16) · 127 / 16, rounded half away from zero
        CHECK(static_cast<int8_t>(b[static_cast<size_t>(2 + i)]) ==
              static_cast<int>(std::round((i - 16) * 127.0 / 16.0)));
    }
    SUBCASE("q4_0: the largest magnitude (−8 here) sets d = −8 / −8 = 1") {
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 16 - 8);
      const std::vector<uint8_t> b = bytes_of(quantize(DType::Q4_0, x));
      REQUIRE(b.size() == 18);
      CHECK(b[0] == 0x00);
      CHECK(b[1] == 0x3c);  // f16 1.0
      for (int j = 0; j < 16; ++j) CHECK(b[static_cast<size_t>(2 + j)] == j * 0x11);  // q = x + 8 in both nibbles
    }
    SUBCASE("q4_0: a positive largest value gives a negative d") {
      x.assign(32, 0.0f);
      x[0] = 8;
      x[1] = -4;
      const std::vector<uint8_t> b = bytes_of(quantize(DType::Q4_0, x));
      CHECK((b[0] | b[1] << 8) == 0xbc00);  // d = 8 / −8 = −1
      CHECK(b[2] == 0x80);                  // x0 = 8: q = trunc(−8 + 8.5) = 0; x16 = 0: q = 8
      CHECK(b[3] == 0x8c);                  // x1 = −4: q = trunc(4 + 8.5) = 12
    }
    SUBCASE("q4_1: d = (max − min) / 15, m = min") {
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = 0.5f + 0.25f * static_cast<float>(i % 16);
      const std::vector<uint8_t> b = bytes_of(quantize(DType::Q4_1, x));
      REQUIRE(b.size() == 20);
      CHECK((b[0] | b[1] << 8) == 0x3400);  // 0.25
      CHECK((b[2] | b[3] << 8) == 0x3800);  // 0.5
      for (int j = 0; j < 16; ++j) CHECK(b[static_cast<size_t>(4 + j)] == j * 0x11);
    }
    SUBCASE("q5_0: d = −16 / −16 = 1, q = x + 16") {
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 16);
      const std::vector<uint8_t> b = bytes_of(quantize(DType::Q5_0, x));
      REQUIRE(b.size() == 22);
      CHECK((b[0] | b[1] << 8) == 0x3c00);
      // q = i: the fifth bit is set for i ≥ 16, so the u32 is 0xffff0000.
      CHECK(b[2] == 0x00);
      CHECK(b[3] == 0x00);
      CHECK(b[4] == 0xff);
      CHECK(b[5] == 0xff);
      for (int j = 0; j < 16; ++j) CHECK(b[static_cast<size_t>(6 + j)] == j * 0x11);
    }
    SUBCASE("q5_1: d = 62 / 31 = 2, m = −10") {
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(2 * i - 10);
      const std::vector<uint8_t> b = bytes_of(quantize(DType::Q5_1, x));
      REQUIRE(b.size() == 24);
      CHECK((b[0] | b[1] << 8) == 0x4000);  // 2
      CHECK((b[2] | b[3] << 8) == 0xc900);  // −10
      CHECK((b[4] | b[5] << 8 | b[6] << 16 | static_cast<uint32_t>(b[7]) << 24) == 0xffff0000u);
      for (int j = 0; j < 16; ++j) CHECK(b[static_cast<size_t>(8 + j)] == j * 0x11);
    }
    SUBCASE("all zeros: d = ±0; q4_0 and q5_0 store the middle level") {
      for (const DType t : kBlockTypes) {
        CAPTURE(dtype_name(t));
        const std::vector<float> zeros(static_cast<size_t>(block_format(t).elements), 0.0f);
        std::vector<uint8_t> expected(static_cast<size_t>(block_format(t).bytes), 0);
        // d = 0 / −8 = −0 (f16 0x8000), q = trunc(0 + 8.5) = 8 in both
        // nibbles; q5_0: d = −0, trunc(16.5) = 16, only its fifth bit set.
        if (t == DType::Q4_0 || t == DType::Q5_0) expected[1] = 0x80;
        if (t == DType::Q4_0) std::fill(expected.begin() + 2, expected.end(), uint8_t{0x88});
        if (t == DType::Q5_0) std::fill(expected.begin() + 2, expected.begin() + 6, uint8_t{0xff});
        CHECK(bytes_of(quantize(t, zeros)) == expected);
        CHECK(decode(t, expected) == zeros);
      }
    }
  }

  TEST_CASE("quantize: ggml's reference bytes for a fixed input") {
    // 16 super-blocks from a 32-bit LCG, scaled per block (1/64 to 1000), one
    // block with all-zero sub-blocks between others, one all non-negative.
    // The hashes are FNV-1a 64 of the bytes that ggml's quantize_row_*_ref
    // (ggml-quants.c, built without FMA contraction, as ggml-base is on
    // x86-64) writes for this input.
    const float scales[16] = {1, 0.015625f, 64, 0.5f, 3, 1, 0.001f, 1000, 1, 1, 0.25f, 7, 1, 2, 0.125f, 1};
    std::vector<float> x;
    uint32_t h = 12345;
    for (int b = 0; b < 16; ++b)
      for (int i = 0; i < 256; ++i) {
        h = h * 1664525u + 1013904223u;
        float v = static_cast<float>(static_cast<int>((h >> 8) % 20001) - 10000) / 10000.0f * scales[b];
        if (b == 5 && (i / 32) % 2 == 0) v = 0;
        if (b == 9 && v < 0) v = -v;
        x.push_back(v);
      }
    const std::pair<DType, uint64_t> expected[] = {
        {DType::Q8_0, 0x9bf2cef0417509c8}, {DType::Q4_0, 0x7459b1d2a1b0aca8}, {DType::Q4_1, 0xbaa3c62ea9d85c88},
        {DType::Q5_0, 0x883fda6c054c0866}, {DType::Q5_1, 0x3ca0f438db3b7425}, {DType::Q4_K, 0x49b873d28039ccb5},
        {DType::Q5_K, 0x969f3e6c8e137580}, {DType::Q6_K, 0xc1ae102cd37d1cfd}};
    for (const auto& [t, hash] : expected) {
      CAPTURE(dtype_name(t));
      uint64_t fnv = 0xcbf29ce484222325;
      for (const std::byte b : quantize(t, x)) fnv = (fnv ^ static_cast<uint8_t>(b)) * 0x100000001b3;
      CHECK(fnv == hash);
    }
  }

  TEST_CASE("K-quants: the scale search's invariants, and representable blocks round-trip exactly") {
    const std::vector<float> x = random_values(4 * 256, 7);
    SUBCASE("q4_k / q5_k: the largest sub-block scale and min map to 63") {
      for (const DType t : {DType::Q4_K, DType::Q5_K}) {
        CAPTURE(dtype_name(t));
        const std::vector<uint8_t> b = bytes_of(quantize(t, x));
        const size_t per = static_cast<size_t>(block_format(t).bytes);
        for (size_t blk = 0; blk < 4; ++blk) {
          const uint8_t* s = b.data() + blk * per + 4;
          int max_sc = 0, max_m = 0;
          for (int j = 0; j < 8; ++j) {  // the 6-bit fields, read as pack_k_scales writes them
            const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
            const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
            max_sc = std::max(max_sc, sc);
            max_m = std::max(max_m, m);
          }
          CHECK(max_sc == 63);
          CHECK(max_m == 63);  // every sub-block of uniform [−1, 1) data has a negative min
        }
      }
    }
    SUBCASE("q6_k: the largest-magnitude sub-block scale maps to −128") {
      const std::vector<uint8_t> b = bytes_of(quantize(DType::Q6_K, x));
      for (size_t blk = 0; blk < 4; ++blk) {
        int min_sc = 127;
        for (int s = 0; s < 16; ++s) min_sc = std::min(min_sc, static_cast<int>(static_cast<int8_t>(b[blk * 210 + 192 + s])));
        CHECK(min_sc == -128);
      }
    }
    SUBCASE("q4_k / q5_k: s·q with s = 63/64 and every level in each sub-block") {
      // The plain range fits exactly (error 0, which no stretched range
      // beats); d = s / 63 = 1/64 is exact in f16 and every scale is 63.
      for (const DType t : {DType::Q4_K, DType::Q5_K}) {
        CAPTURE(dtype_name(t));
        const int top = t == DType::Q4_K ? 15 : 31;
        std::vector<float> v(256);
        for (size_t i = 0; i < 256; ++i)
          v[i] = 63.0f / 64.0f * static_cast<float>((static_cast<int>(i) * (2 * static_cast<int>(i / 32) + 1)) % (top + 1));
        std::vector<float> back(256);
        dequantize(t, quantize(t, v), back);
        CHECK(back == v);
      }
    }
    SUBCASE("q6_k: l / 8 with −32 in each sub-block") {
      std::vector<float> v(256);
      for (size_t i = 0; i < 256; ++i) v[i] = static_cast<float>(i % 16 == 0 ? -32 : static_cast<int>(i * 7 % 64) - 32) / 8;
      std::vector<float> back(256);
      dequantize(DType::Q6_K, quantize(DType::Q6_K, v), back);
      CHECK(back == v);
    }
  }

  TEST_CASE("quantize → dequantize: error bounds on uniform data in −1 to 1") {
    // Normalized RMS error ‖x − x̂‖ / ‖x‖ and the largest |x − x̂|, about
    // half a step of each format for the RMS (q8_0: absmax / 127; q4_1,
    // q5_1: range / 15, / 31; q4_0, q5_0: absmax / 8, / 16), and up to a
    // whole step at the end the symmetric formats cannot reach (+absmax
    // when −absmax sets d: levels −8..7), with some room. Measured (seed 3):
    // q8_0 0.0038 / 0.0041, q4_0 0.064 / 0.122, q4_1 0.060 / 0.066,
    // q5_0 0.031 / 0.061, q5_1 0.029 / 0.032, q4_k 0.055 / 0.081,
    // q5_k 0.027 / 0.045, q6_k 0.013 / 0.017.
    const struct {
      DType t;
      double rms, max;
    } bounds[] = {{DType::Q8_0, 0.005, 0.005}, {DType::Q4_0, 0.075, 0.13},  {DType::Q4_1, 0.075, 0.075},
                  {DType::Q5_0, 0.04, 0.065},  {DType::Q5_1, 0.04, 0.04},   {DType::Q4_K, 0.07, 0.1},
                  {DType::Q5_K, 0.035, 0.055}, {DType::Q6_K, 0.017, 0.022}};
    const std::vector<float> x = random_values(16 * 256, 3);
    for (const auto& b : bounds) {
      CAPTURE(dtype_name(b.t));
      const std::vector<std::byte> q = quantize(b.t, x);
      CHECK(q.size() == x.size() / static_cast<size_t>(block_format(b.t).elements) * static_cast<size_t>(block_format(b.t).bytes));
      std::vector<float> back(x.size());
      dequantize(b.t, q, back);
      double err = 0, norm = 0, worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double e = static_cast<double>(back[i]) - x[i];
        err += e * e;
        norm += static_cast<double>(x[i]) * x[i];
        worst = std::max(worst, std::fabs(e));
      }
      MESSAGE(dtype_name(b.t) << ": rms " << std::sqrt(err / norm) << ", max " << worst);
      CHECK(std::sqrt(err / norm) <= b.rms);
      CHECK(worst <= b.max);
      // Quantizing what dequantization gave is stable for the 32-value
      // formats' absmax scales: the same bytes again.
      if (b.t == DType::Q8_0 || b.t == DType::Q4_0 || b.t == DType::Q5_0) CHECK(quantize(b.t, back) == q);
    }
  }

  TEST_CASE("sizes: whole blocks only, non-block dtypes refused") {
    for (const DType t : kBlockTypes) {
      CAPTURE(dtype_name(t));
      const auto n = static_cast<size_t>(block_format(t).elements), bytes = static_cast<size_t>(block_format(t).bytes);
      std::vector<float> values(2 * n);
      const std::vector<std::byte> q = quantize(t, values);
      CHECK(q.size() == 2 * bytes);
      CHECK(block_bytes(t, 2 * n) == 2 * bytes);
      CHECK_THROWS_AS(block_bytes(t, n + 1), Error);
      CHECK_THROWS_AS(quantize(t, std::span(values).first(n - 1)), Error);
      CHECK_THROWS_AS(dequantize(t, q, std::span(values).first(n)), Error);        // too many bytes
      CHECK_THROWS_AS(dequantize(t, std::span(q).first(bytes), values), Error);    // too few
      CHECK_THROWS_AS(dequantize(t, q, std::span(values).first(2 * n - 1)), Error);  // not whole blocks
      try {
        quantize(t, std::span(values).first(n + 1));
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::InvalidArgument);
        CHECK(std::string(e.what()).find("not whole blocks of " + std::to_string(n)) != std::string::npos);
      }
    }
    std::vector<float> values(32);
    CHECK_THROWS_AS(quantize(DType::F16, values), Error);
    CHECK_THROWS_AS(dequantize(DType::F32, std::as_bytes(std::span(values)), values), Error);
  }

  TEST_CASE("GGUF: every block type written and read back") {
    test::TempDir tmp("lathe-quant-test");
    const std::string path = tmp.file("q.gguf");
    const std::vector<float> values = random_values(2 * 512, 5);
    std::vector<GgufTensorToWrite> tensors;
    for (const DType t : kBlockTypes)
      tensors.push_back({std::string(dtype_name(t)), t, {2, 512}, encode_values(t, values)});
    write_gguf(path, {{"general.architecture", std::string("llama")}}, tensors);
    const GgufFile file(path);
    REQUIRE(file.tensors().size() == tensors.size());
    for (const GgufTensorToWrite& w : tensors) {
      CAPTURE(w.name);
      const TensorInfo* t = file.find(w.name);
      REQUIRE(t != nullptr);
      CHECK(t->dtype == w.dtype);
      CHECK(t->shape == w.shape);
      CHECK(t->bytes == static_cast<uint64_t>(1024 / block_format(w.dtype).elements * block_format(w.dtype).bytes));
      const std::span<const std::byte> d = file.data(*t);
      CHECK(std::vector<std::byte>(d.begin(), d.end()) == w.data);
      std::vector<float> from_file(values.size()), direct(values.size());
      dequantize(w.dtype, d, from_file);
      dequantize(w.dtype, quantize(w.dtype, values), direct);
      CHECK(from_file == direct);
    }
    // A row that is not whole blocks is refused on writing.
    CHECK_THROWS_AS(write_gguf(tmp.file("bad.gguf"), {}, {{"w", DType::Q4_K, {2, 128}, std::vector<std::byte>(144)}}),
                    Error);
  }
}
