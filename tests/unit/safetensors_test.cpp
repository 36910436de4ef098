// The weights layer: f16/bf16 conversions against an independent
// round-to-nearest-even check, safetensors written and read back byte for
// byte, the audit against a manifest, every malformed-header case, and a
// mutation test (under ASan it proves that no corrupt file reads outside the
// mapping).
#include "runtime/weights/safetensors.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "tests/harness/temp_files.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/mapped_file.hpp"

using namespace lathe;
using namespace lathe::weights;
using namespace std::string_literals;  // "…"s keeps embedded NULs

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("lathe-safetensors-test") {}
};
using test::read_file;
using test::write_file;

// A safetensors file by hand: [8: LE length][header][data_bytes zeros];
// `length` overrides the length field.
std::string raw(const std::string& header, size_t data_bytes = 0, std::optional<uint64_t> length = {}) {
  const uint64_t n = length.value_or(header.size());
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s + header + std::string(data_bytes, '\0');
}

// n deterministic, non-repeating-looking bytes.
std::vector<std::byte> some_bytes(size_t n, unsigned seed) {
  std::vector<std::byte> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((seed * 131 + i * 29 + (i >> 3)) & 0xff);
  return b;
}

// Opening `path` must throw Error(BadFile) whose message starts with the
// path and holds every fragment.
void expect_bad(const std::string& path, const std::vector<std::string>& fragments) {
  try {
    SafetensorsFile file(path);
    FAIL_CHECK("opened without an error");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_MESSAGE(e.kind() == ErrorKind::BadFile, message);
    CHECK_MESSAGE(message.starts_with(path + ": "), message);
    for (const std::string& f : fragments)
      CHECK_MESSAGE(message.find(f) != std::string::npos, message << " lacks " << f);
  }
}

// Magnitudes of f16 and bf16 patterns, decoded independently of dtype.cpp.
double f16_value(uint16_t m) {
  const int e = m >> 10, f = m & 0x3ff;
  return e == 0 ? std::ldexp(f, -24) : std::ldexp(1024 + f, e - 25);
}
double bf16_value(uint16_t m) {
  const int e = m >> 7, f = m & 0x7f;
  return e == 0 ? std::ldexp(f, -133) : std::ldexp(128 + f, e - 134);
}

// True when `h` is `x` correctly rounded: no neighbouring magnitude is
// nearer and a tie went to the even pattern. The infinity pattern `inf`
// stands for the value one step past the largest finite one (`past_max`:
// 2^16 for f16, 2^128 for bf16), which is how IEEE rounding defines overflow.
bool rounds_to_nearest(float x, uint16_t h, double (*value)(uint16_t), uint16_t inf, double past_max) {
  if (static_cast<bool>(h & 0x8000) != std::signbit(x)) return false;
  const int m = h & 0x7fff;
  if (m > inf) return false;  // a NaN
  auto at = [&](int k) { return k == inf ? past_max : value(static_cast<uint16_t>(k)); };
  const double ax = std::fabs(static_cast<double>(x)), d = std::fabs(ax - at(m));
  for (int k : {m - 1, m + 1}) {
    if (k < 0 || k > inf) continue;
    const double dk = std::fabs(ax - at(k));
    if (dk < d || (dk == d && (m & 1))) return false;
  }
  return true;
}

// Checks `to_half` on a stride through every positive and negative finite
// f32, and on every midpoint between neighbouring patterns and the f32
// values just either side of it: the ties and near-ties.
void check_rounding(uint16_t (*to_half)(float), double (*value)(uint16_t), uint16_t inf, double past_max) {
  size_t checked = 0, wrong = 0;
  float first_wrong = 0;
  auto check = [&](float x) {
    for (float y : {x, -x}) {
      ++checked;
      if (!rounds_to_nearest(y, to_half(y), value, inf, past_max) && wrong++ == 0) first_wrong = y;
    }
  };
  for (uint32_t bits = 0; bits < 0x7f800000; bits += 4099) check(std::bit_cast<float>(bits));
  for (int m = 0; m < inf; ++m) {
    const double next = m + 1 == inf ? past_max : value(static_cast<uint16_t>(m + 1));
    const auto mid = static_cast<float>((value(static_cast<uint16_t>(m)) + next) / 2);  // exact in f32
    check(mid);
    check(std::nextafter(mid, 0.0f));
    check(std::nextafter(mid, std::numeric_limits<float>::infinity()));
  }
  CHECK(checked > 600'000);
  CHECK_MESSAGE(wrong == 0, wrong << " of " << checked << " misrounded, first " << first_wrong);
}

}  // namespace

TEST_SUITE("dtype") {
  TEST_CASE("f16: every half round-trips through f32 bit for bit, NaN payloads included") {
    int wrong = 0;
    for (uint32_t h = 0; h <= 0xffff; ++h) {
      const float f = f16_to_f32(static_cast<uint16_t>(h));
      if (f32_to_f16(f) != h || std::isnan(f) != ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))) ++wrong;
      if ((h & 0x7fff) <= 0x7c00 && std::fabs(static_cast<double>(f)) != f16_value(h & 0x7fff) && !std::isinf(f))
        ++wrong;
    }
    CHECK(wrong == 0);
  }

  TEST_CASE("f16: overflow, ties to even, subnormals, zeros and NaN") {
    const struct {
      float x;
      uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.1f, 0x2e66},
        {65504.0f, 0x7bff},                        // the largest half
        {std::nextafter(65520.0f, 0.0f), 0x7bff},  // just below the overflow point
        {65520.0f, 0x7c00},                        // a tie, and 0x7bff is odd: inf
        {-65520.0f, 0xfc00},
        {1e10f, 0x7c00},
        {std::numeric_limits<float>::infinity(), 0x7c00},
        {-std::numeric_limits<float>::infinity(), 0xfc00},
        {1.0f + 0x1p-11f, 0x3c00},             // tie between 0x3c00 and 0x3c01: even
        {1.0f + 3 * 0x1p-11f, 0x3c02},         // tie between 0x3c01 and 0x3c02: even
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01},  // just above the tie
        {0x1p-24f, 0x0001},                    // the smallest subnormal
        {-0x1p-24f, 0x8001},
        {0x1p-25f, 0x0000},  // half of it: a tie, to zero
        {0x1p-25f + 0x1p-40f, 0x0001},
        {3 * 0x1p-25f, 0x0002},
        {1023 * 0x1p-24f, 0x03ff},      // the largest subnormal
        {0x1p-14f - 0x1p-25f, 0x0400},  // tie between 0x03ff and 0x0400: even
        {0x1p-14f, 0x0400},             // the smallest normal
        {0x1p-149f, 0x0000},            // f32 subnormals vanish, keeping the sign
        {-0x1p-149f, 0x8000},
    };
    for (const auto& c : cases) {
      CAPTURE(c.x);
      CHECK(f32_to_f16(c.x) == c.h);
    }
    CHECK(f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    CHECK(f16_to_f32(0x7bff) == 65504.0f);
    CHECK(f16_to_f32(0x3555) == 0.333251953125f);
    CHECK(std::isinf(f16_to_f32(0x7c00)));
    CHECK(std::signbit(f16_to_f32(0x8000)));
    // NaN stays NaN, sign kept, even with a payload only in bits f16 drops.
    CHECK(f32_to_f16(std::numeric_limits<float>::quiet_NaN()) == 0x7e00);
    CHECK(f32_to_f16(std::bit_cast<float>(0x7f800001u)) == 0x7e00);
    CHECK(f32_to_f16(std::bit_cast<float>(0xffa00000u)) == 0xfd00);
    CHECK(std::isnan(f16_to_f32(0x7c01)));
  }

  TEST_CASE("f16: every f32 rounds to the nearest half, ties to even") {
    check_rounding(f32_to_f16, f16_value, 0x7c00, 0x1p16);
  }

  TEST_CASE("bf16: every bfloat16 round-trips, values and ties to even") {
    int wrong = 0;
    for (uint32_t h = 0; h <= 0xffff; ++h)
      if (f32_to_bf16(bf16_to_f32(static_cast<uint16_t>(h))) != h) ++wrong;
    CHECK(wrong == 0);
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(f32_to_bf16(1.00390625f) == 0x3f80);  // 1 + 2^-8: tie between 0x3f80 and 0x3f81, even
    CHECK(f32_to_bf16(1.01171875f) == 0x3f82);  // 1 + 3 * 2^-8: tie, even upwards
    CHECK(f32_to_bf16(1.00390625f + 0x1p-20f) == 0x3f81);
    CHECK(f32_to_bf16(-2.0f) == 0xc000);
    CHECK(f32_to_bf16(0x1.fep127f) == 0x7f7f);  // the largest bfloat16
    CHECK(f32_to_bf16(std::bit_cast<float>(0x7f7f7fffu)) == 0x7f7f);
    CHECK(f32_to_bf16(std::bit_cast<float>(0x7f7f8000u)) == 0x7f80);  // tie at the top: inf
    CHECK(f32_to_bf16(0x1p-133f) == 0x0001);                          // the smallest subnormal
    CHECK(f32_to_bf16(-0.0f) == 0x8000);
    CHECK(f32_to_bf16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);  // NaN, not inf
    CHECK(f32_to_bf16(std::bit_cast<float>(0xff810000u)) == 0xff81);  // payload kept
    CHECK(bf16_to_f32(0x3f80) == 1.0f);
    CHECK(bf16_to_f32(0x4049) == 3.140625f);
  }

  TEST_CASE("bf16: every f32 rounds to the nearest bfloat16, ties to even") {
    check_rounding(f32_to_bf16, bf16_value, 0x7f80, 0x1p128);
  }

  TEST_CASE("dtype_size and convert between F32, F16 and BF16") {
    CHECK(dtype_size(DType::F32) == 4);
    CHECK(dtype_size(DType::F16) == 2);
    CHECK(dtype_size(DType::BF16) == 2);
    CHECK_THROWS_AS(dtype_size(DType::Q8_0), Error);

    const std::vector<float> values = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-3f, 3.0f};
    std::vector<std::byte> f32(values.size() * 4), f16(values.size() * 2), bf16(values.size() * 2),
        back(values.size() * 4);
    std::memcpy(f32.data(), values.data(), f32.size());
    convert(DType::F32, f32, DType::F16, f16);
    convert(DType::F16, f16, DType::BF16, bf16);
    convert(DType::F16, f16, DType::F32, back);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t h, b;
      float f;
      std::memcpy(&h, f16.data() + 2 * i, 2);
      std::memcpy(&b, bf16.data() + 2 * i, 2);
      std::memcpy(&f, back.data() + 4 * i, 4);
      CHECK(h == f32_to_f16(values[i]));
      CHECK(b == f32_to_bf16(f16_to_f32(h)));
      CHECK(f == f16_to_f32(h));
    }

    // Same dtype copies; unaligned spans are fine.
    std::vector<std::byte> shifted(f32.size() + 1);
    convert(DType::F32, f32, DType::F32, std::span(shifted).subspan(1));
    CHECK(std::memcmp(shifted.data() + 1, f32.data(), f32.size()) == 0);
    std::vector<std::byte> out16(f16.size() + 1);
    convert(DType::F32, std::span<const std::byte>(shifted).subspan(1), DType::F16, std::span(out16).subspan(1));
    CHECK(std::memcmp(out16.data() + 1, f16.data(), f16.size()) == 0);

    // Sizes that are not the same number of whole elements.
    auto kind_of = [](auto&& f) {
      try {
        f();
      } catch (const Error& e) {
        return e.kind();
      }
      return ErrorKind::Vulkan;  // "no error" for these checks
    };
    CHECK(kind_of([&] { convert(DType::F32, f32, DType::F16, std::span(f16).first(4)); }) ==
          ErrorKind::InvalidArgument);
    CHECK(kind_of([&] {
            convert(DType::F32, std::span<const std::byte>(f32).first(6), DType::F16, std::span(f16).first(3));
          }) == ErrorKind::InvalidArgument);
    CHECK(kind_of([&] { convert(DType::F16, f16, DType::F16, back); }) == ErrorKind::InvalidArgument);
  }
}

TEST_SUITE("safetensors") {
  TEST_CASE("MappedFile: bytes, empty files, missing files, directories, moves") {
    TempDir tmp;
    const std::string path = tmp.file("a.bin"), empty = tmp.file("empty.bin");
    write_file(path, "hello");
    write_file(empty, "");
    MappedFile a(path);
    REQUIRE(a.bytes().size() == 5);
    CHECK(std::memcmp(a.bytes().data(), "hello", 5) == 0);
    CHECK(a.path() == path);
    CHECK(MappedFile(empty).bytes().empty());

    MappedFile b(std::move(a));
    CHECK(b.bytes().size() == 5);
    CHECK(a.bytes().empty());  // a moved-from file maps nothing
    MappedFile c(empty);
    c = std::move(b);
    CHECK(c.bytes().size() == 5);
    CHECK(std::memcmp(c.bytes().data(), "hello", 5) == 0);

    try {
      MappedFile missing(tmp.file("missing.bin"));
      FAIL("mapped a missing file");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::NotFound);
      CHECK(std::string(e.what()).find("missing.bin") != std::string::npos);
    }
    try {
      MappedFile dir(tmp.dir.string());
      FAIL("mapped a directory");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Io);
      CHECK(std::string(e.what()).find(tmp.dir.string()) != std::string::npos);
    }
  }

  TEST_CASE("write then read back every dtype and shape, bytes exact") {
    TempDir tmp;
    const std::string path = tmp.file("model.safetensors");
    // Odd-sized tensors first, so later ones start unaligned: the reader must not care.
    std::vector<TensorToWrite> tensors = {
        {"scalar", DType::F32, {}, some_bytes(4, 1)},
        {"odd.f16", DType::F16, {5}, some_bytes(10, 2)},
        {"m.bf16", DType::BF16, {2, 3}, some_bytes(12, 3)},
        {"t.f32", DType::F32, {2, 3, 4}, some_bytes(96, 4)},
        {"empty", DType::F16, {0, 7}, {}},
        {"ones", DType::BF16, {1, 1, 1, 1, 1}, some_bytes(2, 5)},
        {"model.layers.0.mlp.down_proj.weight", DType::F16, {3, 2}, some_bytes(12, 6)},
    };
    const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\""}};
    write_safetensors(path, tensors, metadata);

    const std::string bytes = read_file(path);
    uint64_t header_size;
    std::memcpy(&header_size, bytes.data(), 8);
    CHECK(header_size % 8 == 0);
    uint64_t total = 0;
    for (const TensorToWrite& t : tensors) total += t.data.size();
    CHECK(bytes.size() == 8 + header_size + total);

    SafetensorsFile file(path);
    CHECK(file.path() == path);
    CHECK(file.metadata() == metadata);
    REQUIRE(file.tensors().size() == tensors.size());
    uint64_t offset = 8 + header_size;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorInfo& info = file.tensors()[i];  // header order is the order written
      CAPTURE(tensors[i].name);
      CHECK(info.name == tensors[i].name);
      CHECK(info.dtype == tensors[i].dtype);
      CHECK(info.shape == tensors[i].shape);
      CHECK(info.offset == offset);  // packed
      CHECK(info.bytes == tensors[i].data.size());
      const std::span<const std::byte> data = file.data(info);
      CHECK(std::vector<std::byte>(data.begin(), data.end()) == tensors[i].data);
      CHECK(file.find(info.name) == &info);
      offset += info.bytes;
    }
    CHECK(file.find("absent") == nullptr);
    CHECK(file.find("") == nullptr);

    // A TensorInfo that does not lie in this file is refused, not read.
    TensorInfo stranger = file.tensors()[0];
    stranger.offset = bytes.size();
    CHECK_THROWS_AS(file.data(stranger), Error);

    // No tensors and no metadata: "{}" padded to 8.
    write_safetensors(path, {});
    SafetensorsFile none(path);
    CHECK(none.tensors().empty());
    CHECK(none.metadata().empty());
    CHECK(read_file(path).size() == 16);
  }

  TEST_CASE("write_safetensors refuses bad tensors and unwritable paths") {
    TempDir tmp;
    const std::string path = tmp.file("w.safetensors");
    auto kind_of = [&](std::vector<TensorToWrite> tensors) {
      try {
        write_safetensors(path, tensors);
      } catch (const Error& e) {
        CHECK(std::string(e.what()).starts_with(path + ": "));
        return e.kind();
      }
      return ErrorKind::Vulkan;  // "no error" for these checks
    };
    CHECK(kind_of({{"a", DType::F32, {2}, some_bytes(4, 0)}}) == ErrorKind::InvalidArgument);
    CHECK(kind_of({{"a", DType::F32, {-1}, {}}}) == ErrorKind::InvalidArgument);
    CHECK(kind_of({{"a", DType::F32, {1LL << 32, 1LL << 32, 4}, {}}}) == ErrorKind::InvalidArgument);
    CHECK(kind_of({{"a", DType::Q8_0, {32}, some_bytes(34, 0)}}) == ErrorKind::InvalidArgument);
    CHECK(kind_of({{"a", DType::F16, {1}, some_bytes(2, 0)}, {"a", DType::F16, {1}, some_bytes(2, 0)}}) ==
          ErrorKind::InvalidArgument);
    CHECK(kind_of({{"__metadata__", DType::F16, {1}, some_bytes(2, 0)}}) == ErrorKind::InvalidArgument);
    CHECK(kind_of({{"bad\xff", DType::F16, {1}, some_bytes(2, 0)}}) == ErrorKind::InvalidArgument);
    CHECK_THROWS_AS(write_safetensors(tmp.file("no/such/dir/x.safetensors"), {}), Error);
  }

  TEST_CASE("audit finds missing, unexpected, wrong shape and wrong dtype at once, and honours ignore patterns") {
    TempDir tmp;
    const std::string path = tmp.file("audit.safetensors");
    write_safetensors(path, {
                                {"model.embed_tokens.weight", DType::F16, {8, 4}, some_bytes(64, 1)},
                                {"model.layers.3.self_attn.q_proj.weight", DType::F16, {4, 2}, some_bytes(16, 2)},
                                {"x", DType::BF16, {4}, some_bytes(8, 3)},
                                {"both", DType::F32, {3}, some_bytes(12, 4)},
                                {"lm_head.weight", DType::F16, {8, 4}, some_bytes(64, 5)},
                                {"h.0.attn.bias", DType::F32, {1}, some_bytes(4, 6)},
                                {"h.12.attn.bias", DType::F32, {1}, some_bytes(4, 7)},
                                {"h.x.attn.bias", DType::F32, {1}, some_bytes(4, 8)},  // not a layer number
                                {"h.1.attn.bias.extra", DType::F32, {1}, some_bytes(4, 9)},
                            });
    const ManifestEntry manifest[] = {
        {Role::Embed, false, -1, -1, "model.embed_tokens.weight", 2, {8, 4}, DType::F16},
        {Role::Q, false, 3, -1, "model.layers.3.self_attn.q_proj.weight", 2, {4, 4}, DType::F16},
        {Role::FinalNorm, false, -1, -1, "model.norm.weight", 1, {4, 1}, DType::F16},
        {Role::AttnNorm, false, 0, -1, "x", 1, {4, 1}, DType::F16},
        {Role::MlpNorm, false, 0, -1, "both", 1, {4, 1}, DType::F16},
    };
    const std::vector<std::string> ignore = {"h.{layer}.attn.bias"};
    const std::vector<std::string> problems = audit(SafetensorsFile(path), manifest, ignore);
    const std::vector<std::string> expected = {
        "model.layers.3.self_attn.q_proj.weight: shape [4, 4] expected, [4, 2] found",
        "model.norm.weight: missing",
        "x: dtype f16 expected, bf16 found",
        "both: shape [4] expected, [3] found",
        "both: dtype f16 expected, f32 found",
        "lm_head.weight: unexpected tensor (not in the manifest)",
        "h.x.attn.bias: unexpected tensor (not in the manifest)",
        "h.1.attn.bias.extra: unexpected tensor (not in the manifest)",
    };
    CHECK(problems.size() == 8);
    CHECK(problems == expected);
    // Without the pattern the two buffers are unexpected too.
    CHECK(audit(SafetensorsFile(path), manifest).size() == 10);
    const std::vector<std::string> any_layer = {"h.{layer}.attn.{layer}", "h.{layer}.attn.bias{layer}"};
    CHECK(audit(SafetensorsFile(path), manifest, any_layer).size() == 10);

    try {
      require_matches(SafetensorsFile(path), manifest, ignore);
      FAIL("no problems reported");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::BadFile);
      std::string message = path + ": 8 problems:";
      for (const std::string& p : expected) message += "\n  " + p;
      CHECK(std::string(e.what()) == message);
    }
    const ManifestEntry one_missing[] = {manifest[0], manifest[2]};
    const std::vector<std::string> everything_else = {"model.layers.{layer}.self_attn.q_proj.weight",
                                                      "x",
                                                      "both",
                                                      "lm_head.weight",
                                                      "h.{layer}.attn.bias",
                                                      "h.x.attn.bias",
                                                      "h.{layer}.attn.bias.extra"};
    try {
      require_matches(SafetensorsFile(path), one_missing, everything_else);
      FAIL("no problems reported");
    } catch (const Error& e) {
      CHECK(std::string(e.what()) == path + ": 1 problem:\n  model.norm.weight: missing");
    }
    const ManifestEntry matching[] = {manifest[0]};
    CHECK_NOTHROW(require_matches(SafetensorsFile(path), matching, everything_else));
  }

  TEST_CASE("every malformed header is Error(BadFile) naming the path and the tensor") {
    TempDir tmp;
    const std::string path = tmp.file("bad.safetensors");
    auto tensor = [](const std::string& fields) { return "{\"t\":{" + fields + "}}"; };
    const std::string dtype = "\"dtype\":\"F32\"", shape = "\"shape\":[2]", offsets = "\"data_offsets\":[0,8]";
    const std::string ok_but = dtype + "," + shape + "," + offsets + ",";  // then a field overriding one of them
    // "1,1,…,1", n ones
    auto ones = [](int n) {
      std::string s = "1";
      while (--n) s += ",1";
      return s;
    };
    const struct {
      std::string content;
      std::vector<std::string> fragments;
    } cases[] = {
        {"", {"0 bytes, too short"}},
        {"\x10\0\0\0\0"s, {"5 bytes, too short"}},
        {raw("{}", 0, 200'000'000), {"header length 200000000 exceeds the limit of 100 MB"}},
        {raw("{}", 0, ~0ull), {"exceeds the limit"}},
        {raw("{}", 10, 100), {"header length 100 reaches beyond the end of the file (20 bytes)"}},
        {raw("{}", 0, 3), {"beyond the end of the file"}},
        {raw(""), {"not valid JSON"}},
        {raw("{"), {"not valid JSON"}},
        {raw("not json"), {"not valid JSON"}},
        {raw("{} x"), {"not valid JSON"}},
        {raw("{}\0\0\0\0"s), {"header holds a NUL byte"}},  // nlohmann would stop there
        {raw("{\"t\":{\"dtype\":\"F\0\"}}"s), {"header holds a NUL byte"}},
        {raw("{\"t\xff\":{}}"), {"not valid JSON"}},
        {raw("[]"), {"header is not a JSON object"}},
        {raw("5"), {"header is not a JSON object"}},
        {raw("\"s\""), {"header is not a JSON object"}},
        {raw("{\"t\":5}"), {"t: the entry is not a JSON object"}},
        {raw("{\"t\":[1]}"), {"t: the entry is not a JSON object"}},
        {raw(tensor(shape + "," + offsets), 8), {"t: no dtype"}},
        {raw(tensor(dtype + "," + offsets), 8), {"t: no shape"}},
        {raw(tensor(dtype + "," + shape), 8), {"t: no data_offsets"}},
        {raw(tensor(ok_but + "\"dtype\":5"), 8), {"t: dtype is not a string"}},
        {raw(tensor(ok_but + "\"dtype\":[\"F32\"]"), 8), {"t: dtype is not a string"}},
        {raw(tensor(ok_but + "\"dtype\":{}"), 8), {"t: dtype is not a string"}},
        {raw(tensor(ok_but + "\"shape\":\"2\""), 8), {"t: shape is not an array"}},
        {raw(tensor(ok_but + "\"shape\":{\"a\":2}"), 8), {"t: shape is not an array"}},
        {raw(tensor(ok_but + "\"shape\":[1.5]"), 8), {"t: shape holds a value that is not an integer"}},
        {raw(tensor(ok_but + "\"shape\":[2.0]"), 8), {"t: shape holds a value that is not an integer"}},
        {raw(tensor(ok_but + "\"shape\":[\"2\"]"), 8), {"t: shape holds a value that is not an integer"}},
        {raw(tensor(ok_but + "\"shape\":[true]"), 8), {"t: shape holds a value that is not an integer"}},
        {raw(tensor(ok_but + "\"shape\":[null]"), 8), {"t: shape holds a value that is not an integer"}},
        {raw(tensor(ok_but + "\"shape\":[-2]"), 8), {"t: shape has a negative dimension"}},
        {raw(tensor(ok_but + "\"shape\":[[2]]"), 8), {"t: shape is nested too deeply"}},
        {raw(tensor(ok_but + "\"extra\":[{}]"), 8), {"t: extra is nested too deeply"}},
        {raw(tensor(ok_but + "\"shape\":[" + ones(65) + "]"), 8), {"t: shape has more than 64 dimensions"}},
        {raw(tensor(ok_but + "\"shape\":[9223372036854775808]"), 8), {"t: shape has a dimension above 2^63 - 1"}},
        {raw(tensor(ok_but + "\"shape\":[99999999999999999999]"), 8),
         {"t: shape holds a value that is not an integer"}},
        {raw(tensor(ok_but + "\"shape\":[4294967296,4294967296]"), 8),
         {"t: shape [4294967296, 4294967296] has more than 2^63 - 1 elements"}},
        {raw(tensor(ok_but + "\"data_offsets\":\"0,8\""), 8), {"t: data_offsets is not an array"}},
        {raw(tensor(ok_but + "\"data_offsets\":[0]"), 8), {"t: data_offsets is not [begin, end]"}},
        {raw(tensor(ok_but + "\"data_offsets\":[0,4,8]"), 8), {"t: data_offsets is not [begin, end]"}},
        {raw(tensor(ok_but + "\"data_offsets\":[-1,8]"), 8), {"t: data_offsets is not [begin, end]"}},
        {raw(tensor(ok_but + "\"data_offsets\":[0.0,8]"), 8), {"t: data_offsets is not [begin, end]"}},
        {raw(tensor(ok_but + "\"data_offsets\":[8,0]"), 8), {"t: data_offsets [8, 0] end before they begin"}},
        {raw(tensor(ok_but + "\"data_offsets\":[0,8]"), 4),
         {"t: data_offsets [0, 8] reach beyond the data section (4 bytes)"}},
        {raw(tensor(ok_but + "\"data_offsets\":[0,18446744073709551615]"), 8),
         {"t: data_offsets", "beyond the data section"}},
        {raw(tensor(ok_but + "\"data_offsets\":[0,4]"), 8),
         {"t: shape [2] is 2 elements of f32, but data_offsets [0, 4] hold 4 bytes"}},
        {raw(tensor(ok_but + "\"dtype\":\"F16\",\"data_offsets\":[0,5]"), 8), {"t: shape [2]", "hold 5 bytes"}},
        {raw(tensor(ok_but + "\"dtype\":\"I64\""), 16), {"t: dtype I64 is not supported (F32, F16, BF16)"}},
        {raw(tensor(ok_but + "\"dtype\":\"F8_E4M3\""), 8), {"t: dtype F8_E4M3 is not supported"}},
        {raw(tensor(ok_but + "\"dtype\":\"f32\""), 8), {"t: dtype f32 is not supported"}},
        {raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             12),
         {"a and b: data_offsets [0, 8] and [4, 12] overlap"}},
        {raw("{\"big\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
             "\"in\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
             "\"after_in\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[10,14]}}",
             16),
         {"big and in: data_offsets [0, 16] and [4, 8] overlap"}},
        {raw("{\"__metadata__\":5}"), {"__metadata__ is not an object of strings"}},
        {raw("{\"__metadata__\":[]}"), {"__metadata__ is not an object of strings"}},
        {raw("{\"__metadata__\":{\"k\":1}}"), {"__metadata__: the value of \"k\" is not a string"}},
        {raw("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}"), {"__metadata__: the value of \"k\" is not a string"}},
        {raw("{\"__metadata__\":{\"k\":[\"y\"]}}"), {"__metadata__: the value of \"k\" is not a string"}},
    };
    for (const auto& c : cases) {
      CAPTURE(c.content);
      write_file(path, c.content);
      expect_bad(path, c.fragments);
    }
  }

  TEST_CASE("tolerated: padding, unknown fields, empty tensors sharing an offset, repeated names") {
    TempDir tmp;
    const std::string path = tmp.file("ok.safetensors");
    write_file(
        path,
        raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"note\":[1,\"x\"],\"more\":{\"k\":0}},"
            "\"e1\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[4,4]},"
            "\"e2\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
            "\"r\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
            "\"r\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]},"
            "\"__metadata__\":{\"format\":\"pt\"}}   \n\t ",
            12));
    SafetensorsFile file(path);
    REQUIRE(file.tensors().size() == 4);
    const TensorInfo* r = file.find("r");
    REQUIRE(r != nullptr);
    CHECK(r->dtype == DType::F16);  // the last of a repeated name counts
    CHECK(r->bytes == 4);
    CHECK((file.find("e2")->shape == std::vector<int64_t>{3, 0}));
    CHECK(file.data(*file.find("e1")).empty());
    CHECK(file.metadata().at("format") == "pt");
  }

  TEST_CASE("mutated files open or throw lathe::Error, never anything else") {
    TempDir tmp;
    const std::string valid = tmp.file("valid.safetensors"), path = tmp.file("mutant.safetensors");
    write_safetensors(valid,
                      {{"model.embed_tokens.weight", DType::F16, {4, 3}, some_bytes(24, 1)},
                       {"model.norm.weight", DType::F32, {3}, some_bytes(12, 2)},
                       {"lm_head.weight", DType::BF16, {2, 2, 1}, some_bytes(8, 3)}},
                      {{"format", "pt"}});
    const std::string base = read_file(valid);
    uint64_t header_size;
    std::memcpy(&header_size, base.data(), 8);

    std::mt19937_64 rng(20240601);  // fixed: every run tries the same mutants
    auto below = [&](uint64_t n) { return n ? rng() % n : 0; };
    const std::string json_chars = "{}[]\",:-+.0123456789eE \\ntfu";
    int opened = 0, rejected = 0;
    for (int i = 0; i < 4000; ++i) {
      std::string m = base;
      const uint64_t header_end = 8 + header_size;
      switch (i % 5) {
        case 0:  // random bytes into the header
          for (uint64_t n = 1 + below(4); n--;) m[8 + below(header_size)] = static_cast<char>(rng());
          break;
        case 1:  // JSON punctuation and digits into the header
          for (uint64_t n = 1 + below(3); n--;) m[8 + below(header_size)] = json_chars[below(json_chars.size())];
          break;
        case 2:  // truncation
          m.resize(below(m.size()));
          break;
        case 3: {  // the length field
          uint64_t length;
          switch (below(3)) {
            case 0:
              length = header_size + below(33) - 16;
              break;
            case 1:
              length = below(m.size() + 16);
              break;
            default:
              length = rng();
              break;
          }
          std::memcpy(m.data(), &length, 8);
          break;
        }
        default: {  // insert or delete header bytes, the length field kept consistent
          const uint64_t at = 8 + below(header_size);
          if (rng() & 1)
            m.insert(at, 1 + below(4), json_chars[below(json_chars.size())]);
          else
            m.erase(at, std::min<uint64_t>(1 + below(4), header_end - at));
          const uint64_t length = header_size + m.size() - base.size();
          std::memcpy(m.data(), &length, 8);
        }
      }
      write_file(path, m);
      try {
        SafetensorsFile file(path);
        ++opened;
        // Every tensor lies inside the file; reading it all lets ASan see.
        unsigned sum = 0;
        for (const TensorInfo& t : file.tensors()) {
          REQUIRE(t.offset + t.bytes <= m.size());
          for (std::byte b : file.data(t)) sum += static_cast<unsigned>(b);
        }
        (void)sum;
      } catch (const Error& e) {
        ++rejected;
        if (e.kind() != ErrorKind::BadFile || !std::string(e.what()).starts_with(path + ": "))
          FAIL("mutant " << i << ": " << e.what());
      } catch (const std::exception& e) {
        FAIL("mutant " << i << " threw something other than lathe::Error: " << e.what());
      }
    }
    INFO(opened << " mutants opened, " << rejected << " rejected");
    CHECK(opened > 100);
    CHECK(rejected > 1000);
  }
}
