// GGUF: every dtype and metadata kind written and read back, the shape
// reversal, alignment, Q8_0 quantization, every malformed-header case, and a
// mutation test (under ASan it proves that no corrupt file reads outside the
// mapping).
#include "runtime/weights/gguf.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "tests/harness/temp_files.hpp"
#include "runtime/weights/dtype.hpp"

using namespace lathe;
using namespace lathe::weights;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("lathe-gguf-test") {}
};
using test::read_file;
using test::write_file;

std::vector<std::byte> some_bytes(size_t n, unsigned seed) {
  std::vector<std::byte> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((seed * 131 + i * 29 + (i >> 3)) & 0xff);
  return b;
}

void expect_bad(const std::string& path, const std::vector<std::string>& fragments) {
  try {
    GgufFile file(path);
    FAIL_CHECK("opened without an error");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_MESSAGE(e.kind() == ErrorKind::BadFile, message);
    CHECK_MESSAGE(message.starts_with(path + ": "), message);
    for (const std::string& f : fragments)
      CHECK_MESSAGE(message.find(f) != std::string::npos, message << " lacks " << f);
  }
}

// A GGUF file by hand, field by field.
struct Raw {
  std::string s;
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& str(const std::string& v) {
    u64(v.size());
    s += v;
    return *this;
  }
  Raw& bytes(const std::string& v) {
    s += v;
    return *this;
  }
  Raw& pad(size_t a = 32) {
    s.append((a - s.size() % a) % a, '\0');
    return *this;
  }
  Raw& zeros(size_t n) {
    s.append(n, '\0');
    return *this;
  }
  // A tensor info: name, ggml dims, type, offset.
  Raw& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  template <typename T>
  Raw& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
    return *this;
  }
};

// The file header: magic, version, counts.
Raw head(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  Raw r;
  r.bytes("GGUF").u32(version).u64(tensors).u64(kvs);
  return r;
}

// One f32 tensor "w" of ggml dims {n} at offset 0, after `r`'s kvs.
std::string one_f32(Raw r, uint64_t n = 4) {
  r.tensor("w", {n}, 0, 0).pad().zeros(n * 4);
  return r.s;
}

}  // namespace

TEST_SUITE("gguf") {
  TEST_CASE("every dtype round-trips, shapes reversed, tensors aligned") {
    TempDir tmp;
    const std::string path = tmp.file("m.gguf");
    std::vector<float> values(3 * 64);
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i) * 0.37f) * 3;
    const std::vector<std::byte> q8 = quantize_q8_0(values);
    const std::vector<GgufTensorToWrite> tensors = {
        {"f32", DType::F32, {3, 5}, some_bytes(60, 1)},
        {"f16", DType::F16, {7}, some_bytes(14, 2)},
        {"bf16", DType::BF16, {2, 1, 3, 2}, some_bytes(24, 3)},
        {"q8", DType::Q8_0, {3, 64}, q8},
    };
    write_gguf(path, {{"general.architecture", "llama"}}, tensors);
    GgufFile file(path);
    CHECK(file.version() == 3);
    CHECK(file.alignment() == 32);
    REQUIRE(file.tensors().size() == 4);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorInfo& t = file.tensors()[i];
      CAPTURE(t.name);
      CHECK(t.name == tensors[i].name);
      CHECK(t.dtype == tensors[i].dtype);
      CHECK(t.shape == tensors[i].shape);
      CHECK(t.offset % 32 == 0);
      CHECK(file.find(t.name) == &t);
      const std::span<const std::byte> d = file.data(t);
      CHECK(std::vector<std::byte>(d.begin(), d.end()) == tensors[i].data);
    }
    CHECK(file.find("nope") == nullptr);
    CHECK(file.find("q8")->bytes == 6 * 34);

    // On disk: [3, 64] row-major is ggml dims {64, 3}, type 8.
    const std::string bytes = read_file(path);
    Raw expected = head(4, 1);
    expected.str("general.architecture").u32(8).str("llama");
    expected.tensor("f32", {5, 3}, 0, 0).tensor("f16", {7}, 1, 64).tensor("bf16", {2, 3, 1, 2}, 30, 96);
    expected.tensor("q8", {64, 3}, 8, 128).pad();
    REQUIRE(bytes.size() >= expected.s.size());
    CHECK(bytes.substr(0, expected.s.size()) == expected.s);
    CHECK(bytes.size() == expected.s.size() + 128 + 224);  // 60→64, 14→32, 24→32, 204→224
    CHECK(file.find("f32")->offset == expected.s.size());

    // Q8_0: dequantized within d/2 (plus the f16 rounding of d, times |q| <= 127).
    std::vector<float> back(values.size());
    dequantize_q8_0(file.data(*file.find("q8")), back);
    for (size_t b = 0; b < values.size() / 32; ++b) {
      float amax = 0;
      for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(values[b * 32 + i]));
      const float d = amax / 127, d16 = f16_to_f32(f32_to_f16(d));
      for (size_t i = 0; i < 32; ++i) {
        const size_t k = b * 32 + i;
        CAPTURE(k);
        CHECK(std::fabs(back[k] - values[k]) <= d / 2 + 127 * std::fabs(d - d16) + 1e-6f);
      }
    }
  }

  TEST_CASE("Q8_0: multiples of d are exact, zeros stay zero, sizes checked") {
    std::vector<float> values(64);
    const float d = 0.0625f;  // exact in f16
    for (size_t i = 0; i < 32; ++i) values[i] = d * static_cast<float>(static_cast<int>(i * 8) - 127);
    values[31] = 127 * d;  // max |x| = 127·d, so the block's scale is exactly d
    // The second block stays all zeros: d = 0.
    const std::vector<std::byte> q = quantize_q8_0(values);
    REQUIRE(q.size() == 68);
    uint16_t h;
    std::memcpy(&h, q.data(), 2);
    CHECK(f16_to_f32(h) == d);
    CHECK(static_cast<int8_t>(q[2]) == -127);
    std::vector<float> back(64);
    dequantize_q8_0(q, back);
    CHECK(back == values);

    std::vector<float> small(31);
    CHECK_THROWS_AS(quantize_q8_0(small), Error);
    CHECK_THROWS_AS(dequantize_q8_0(q, std::span<float>(back).first(32)), Error);
    CHECK_THROWS_AS(dequantize_q8_0(q, std::span<float>(back).first(33)), Error);
  }

  TEST_CASE("metadata of every kind round-trips") {
    TempDir tmp;
    const std::string path = tmp.file("m.gguf");
    GgufArray nested{GgufType::Array, {GgufArray{GgufType::I32, {int32_t{1}, int32_t{-2}}}, GgufArray{GgufType::I32, {}}}};
    const std::map<std::string, GgufValue> metadata = {
        {"u8", uint8_t{200}},
        {"i8", int8_t{-100}},
        {"u16", uint16_t{60000}},
        {"i16", int16_t{-30000}},
        {"u32", uint32_t{4000000000u}},
        {"i32", int32_t{-2000000000}},
        {"f32", 1.5f},
        {"bool", true},
        {"string", "héllo"},
        {"u64", uint64_t{1} << 63},
        {"i64", int64_t{-5}},
        {"f64", 0.1},
        {"tokens", GgufValue::strings({"a", "", "<s>"})},
        {"empty", GgufValue::strings({})},
        {"scores", GgufArray{GgufType::F32, {0.5f, -1.0f}}},
        {"nested", nested},
        {"general.alignment", uint32_t{32}},
    };
    write_gguf(path, metadata, {{"w", DType::F32, {2}, some_bytes(8, 1)}});
    GgufFile file(path);
    CHECK(file.metadata().size() == metadata.size());
    for (const auto& entry : metadata) {
      const std::string& key = entry.first;
      CAPTURE(key);
      REQUIRE(file.metadata().contains(key));
      CHECK(file.metadata().find(key)->second == entry.second);
    }
    CHECK(file.string("string") == "héllo");
    CHECK(file.string("u8") == std::nullopt);
    CHECK(file.string("missing") == std::nullopt);
    CHECK(file.integer("u8") == 200);
    CHECK(file.integer("i16") == -30000);
    CHECK(file.integer("u32") == 4000000000);
    CHECK(file.integer("i64") == -5);
    CHECK(file.integer("u64") == std::nullopt);  // above 2^63 - 1
    CHECK(file.integer("bool") == std::nullopt);
    CHECK(file.integer("f32") == std::nullopt);
    CHECK(file.integer("string") == std::nullopt);
    CHECK(file.number("f32") == 1.5);
    CHECK(file.number("f64") == 0.1);
    CHECK(file.number("i32") == -2000000000.0);
    CHECK(file.number("tokens") == std::nullopt);
    CHECK(file.string_array("tokens") == std::vector<std::string>{"a", "", "<s>"});
    CHECK(file.string_array("empty") == std::vector<std::string>{});
    CHECK(file.string_array("scores") == std::nullopt);
    CHECK(file.string_array("string") == std::nullopt);
  }

  TEST_CASE("a hand-built file: default and custom alignment, data section after the padding") {
    TempDir tmp;
    const std::string path = tmp.file("a.gguf");
    // No alignment key: the data section starts at the next multiple of 32.
    write_file(path, one_f32(head(1, 0)));
    {
      GgufFile file(path);
      CHECK(file.tensors()[0].offset == 64);  // 24 header + 8+1 name + 4 + 8 + 4 + 8 = 57 → 64
      CHECK(file.tensors()[0].shape == std::vector<int64_t>{4});
    }
    // general.alignment 64: the data section and the offsets follow it.
    Raw r = head(2, 1);
    r.str("general.alignment").u32(4).u32(64);
    r.tensor("a", {4}, 0, 0).tensor("b", {4}, 0, 64).pad(64).zeros(64 + 16);
    write_file(path, r.s);
    GgufFile file(path);
    CHECK(file.alignment() == 64);
    CHECK(file.tensors()[0].offset % 64 == 0);
    CHECK(file.tensors()[1].offset == file.tensors()[0].offset + 64);
    // A file with no tensors needs no data section.
    write_file(path, head(0, 0).s);
    CHECK(GgufFile(path).tensors().empty());
  }

  TEST_CASE("the writer refuses bad tensors") {
    TempDir tmp;
    const std::string path = tmp.file("w.gguf");
    auto bad = [&](std::vector<GgufTensorToWrite> t, std::map<std::string, GgufValue> m = {}) {
      CHECK_THROWS_AS(write_gguf(path, m, t), Error);
    };
    bad({{"a", DType::F32, {2}, some_bytes(4, 1)}});
    bad({{"a", DType::F32, {}, some_bytes(4, 1)}});
    bad({{"a", DType::F32, {1, 1, 1, 1, 1}, some_bytes(4, 1)}});
    bad({{"a", DType::F32, {0}, {}}});
    bad({{"a", DType::Q8_0, {2, 16}, some_bytes(34, 1)}});
    bad({{"a", DType::F32, {1}, some_bytes(4, 1)}, {"a", DType::F32, {1}, some_bytes(4, 1)}});
    bad({}, {{"general.alignment", uint32_t{64}}});
    bad({}, {{"x", GgufArray{GgufType::String, {uint32_t{1}}}}});
  }

  TEST_CASE("malformed files: Error(BadFile) naming the path and the key or tensor") {
    TempDir tmp;
    const std::string path = tmp.file("bad.gguf");
    auto bad = [&](const std::string& content, const std::vector<std::string>& fragments) {
      write_file(path, content);
      expect_bad(path, fragments);
    };
    SUBCASE("magic, version, counts") {
      bad("", {"magic"});
      bad("GGU", {"magic"});
      bad("GGML" + head(0, 0).s.substr(4), {"magic"});
      bad("GGUF", {"version"});
      bad(head(0, 0, 2).s, {"version 2"});
      bad(head(0, 0, 1).s, {"version 1"});
      bad(head(0, 0, 0x03000000).s, {"big-endian"});
      bad(head(0, 0).s.substr(0, 12), {"tensor count"});
      bad(head(0, 0).s.substr(0, 20), {"metadata count"});
      bad(head(1'000'001, 0).s, {"tensor count 1000001"});
      bad(head(0, 1'000'001).s, {"metadata count 1000001"});
      bad(head(0, 1).s, {"metadata key 0"});
      bad(head(1, 0).s, {"tensor 0 name"});
    }
    SUBCASE("metadata") {
      bad(head(0, 1).str("k").s, {"\"k\"", "value type"});
      bad(head(0, 1).str("k").u32(13).s, {"\"k\"", "unknown value type 13"});
      bad(head(0, 1).str("k").u32(4).u8(1).s, {"\"k\"", "ends"});
      bad(head(0, 1).u64(uint64_t{1} << 31).s, {"metadata key 0", "exceeds the limit of 1 GiB"});
      bad(head(0, 1).u64(100).bytes("abc").s, {"metadata key 0", "beyond the end of the file"});
      bad(head(0, 1).str("k").u32(8).u64(1000).s, {"\"k\"", "beyond the end of the file"});
      bad(head(0, 1).str("k").u32(8).u64(~uint64_t{0}).s, {"\"k\"", "1 GiB"});
      bad(head(0, 1).str("k").u32(9).u32(4).u64(1'000'000).zeros(100).s, {"\"k\"", "cannot fit"});
      bad(head(0, 1).str("k").u32(9).u32(4).u64(~uint64_t{0}).s, {"\"k\"", "cannot fit"});
      bad(head(0, 1).str("k").u32(9).u32(14).u64(1).s, {"\"k\"", "unknown value type 14"});
      Raw deep = head(0, 1).str("deep").u32(9);
      for (int i = 0; i < 5; ++i) deep.u32(9).u64(1);
      deep.u32(4).u64(0);
      bad(deep.s, {"\"deep\"", "nested more than 4"});
      bad(head(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).s, {"\"k\"", "twice"});
      bad(one_f32(head(1, 1).str("general.alignment").u32(4).u32(48)), {"general.alignment", "power of two"});
      bad(one_f32(head(1, 1).str("general.alignment").u32(4).u32(0)), {"general.alignment", "power of two"});
      bad(one_f32(head(1, 1).str("general.alignment").u32(10).u64(32)), {"general.alignment", "u64, not a u32"});
    }
    SUBCASE("tensor infos") {
      bad(head(1, 0).tensor("w", {}, 0, 0).s, {"w: n_dims 0"});
      bad(head(1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).s, {"w: n_dims 5"});
      bad(head(1, 0).str("w").u32(2).u64(4).s, {"w: dims", "ends"});
      bad(head(1, 0).tensor("w", {4, 0}, 0, 0).pad().s, {"w: dimension 1 is 0"});
      bad(head(1, 0).tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0).pad().s, {"w:", "2^63 - 1"});
      bad(head(1, 0).tensor("w", {~uint64_t{0}}, 0, 0).pad().s, {"w:", "2^63 - 1"});
      bad(head(1, 0).tensor("w", {uint64_t{1} << 62}, 0, 0).pad().s, {"w:", "larger than the file"});
      bad(head(1, 0).tensor("w", {64}, 10, 0).pad().zeros(256).s, {"w: ggml type Q2_K is not supported"});
      bad(head(1, 0).tensor("w", {64}, 11, 0).pad().zeros(256).s, {"w:", "Q3_K", "(F32, F16, BF16, Q8_0, Q4_0"});
      bad(head(1, 0).tensor("w", {64}, 12, 0).pad().zeros(256).s, {"w: Q4_K needs the innermost dimension a multiple of 256"});
      bad(head(1, 0).tensor("w", {16, 2}, 2, 0).pad().zeros(256).s, {"w: Q4_0", "multiple of 32"});
      bad(head(1, 0).tensor("w", {256, 2}, 14, 0).pad().zeros(256).s, {"w:", "q6_k", "larger than the file"});
      bad(head(1, 0).tensor("w", {64}, 99, 0).pad().zeros(256).s, {"w:", "type 99"});
      bad(head(1, 0).tensor("w", {48, 2}, 8, 0).pad().zeros(256).s, {"w:", "multiple of 32"});
      bad(head(1, 0).tensor("w", {4}, 0, 8).pad().zeros(64).s, {"w: offset 8", "multiple of the alignment 32"});
      bad(head(1, 0).tensor("w", {4}, 0, 0).s, {"w:", "beyond the end of the file"});
      bad(head(1, 0).tensor("w", {4}, 0, 0).pad().zeros(15).s, {"w:", "beyond the end of the file"});
      bad(head(1, 0).tensor("w", {4}, 0, 32).pad().zeros(40).s, {"w:", "beyond the end of the file"});
      bad(head(1, 0).tensor("w", {4}, 0, ~uint64_t{0} - 31).pad().zeros(40).s, {"w:", "beyond the end"});
      bad(head(1, 0).tensor("w", {64, 2}, 8, 0).pad().zeros(135).s, {"w:", "beyond the end of the file"});
      bad(head(2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad().zeros(64).s, {"w: two tensors"});
      bad(head(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad().zeros(64).s, {"a and b", "overlap"});
      bad(head(2, 0).tensor("a", {4}, 0, 0).tensor("b", {4}, 0, 0).pad().zeros(64).s, {"overlap"});
    }
  }

  TEST_CASE("mutated files open or throw lathe::Error, never anything else") {
    TempDir tmp;
    const std::string valid = tmp.file("valid.gguf"), path = tmp.file("mutant.gguf");
    std::vector<float> values(64);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 20;
    write_gguf(valid,
               {{"general.architecture", "llama"},
                {"llama.block_count", uint32_t{2}},
                {"tokens", GgufValue::strings({"a", "bc"})},
                {"scores", GgufArray{GgufType::F32, {0.5f, 1.5f}}}},
               {{"token_embd.weight", DType::F16, {4, 3}, some_bytes(24, 1)},
                {"output_norm.weight", DType::F32, {3}, some_bytes(12, 2)},
                {"blk.0.attn_q.weight", DType::Q8_0, {2, 32}, quantize_q8_0(values)},
                {"x", DType::BF16, {2, 2, 1}, some_bytes(8, 3)}});
    const std::string base = read_file(valid);
    GgufFile original(valid);
    const uint64_t header_end = original.tensors()[0].offset;  // the data section

    std::mt19937_64 rng(20240601);  // fixed: every run tries the same mutants
    auto below = [&](uint64_t n) { return n ? rng() % n : 0; };
    const std::vector<uint64_t> interesting = {0, 1, 2, 3, 4, 5, 8, 9, 12, 30, 31, 32, 33, 64, 255, 0x7fffffff,
                                               0xffffffff, ~uint64_t{0}, uint64_t{1} << 63, uint64_t{1} << 31};
    int opened = 0, rejected = 0;
    for (int i = 0; i < 5000; ++i) {
      std::string m = base;
      switch (i % 5) {
        case 0:  // random bytes into the header
          for (uint64_t n = 1 + below(4); n--;) m[below(header_end)] = static_cast<char>(rng());
          break;
        case 1:  // one bit flipped in the header
          m[below(header_end)] ^= static_cast<char>(1 << below(8));
          break;
        case 2:  // truncation
          m.resize(below(m.size()));
          break;
        case 3: {  // an interesting u32 or u64 over a header field (any position)
          const uint64_t v = interesting[below(interesting.size())];
          const size_t width = rng() & 1 ? 8 : 4, at = below(header_end - width);
          std::memcpy(m.data() + at, &v, width);
          break;
        }
        default: {  // insert or delete header bytes
          const uint64_t at = below(header_end);
          if (rng() & 1)
            m.insert(at, 1 + below(8), static_cast<char>(rng()));
          else
            m.erase(at, std::min<uint64_t>(1 + below(8), header_end - at));
        }
      }
      write_file(path, m);
      try {
        GgufFile file(path);
        ++opened;
        unsigned sum = 0;
        for (const TensorInfo& t : file.tensors()) {
          REQUIRE(t.offset + t.bytes <= m.size());
          for (std::byte b : file.data(t)) sum += static_cast<unsigned>(b);
          if (t.dtype == DType::Q8_0) {
            std::vector<float> out(t.bytes / 34 * 32);
            dequantize_q8_0(file.data(t), out);
          }
        }
        for (const auto& [key, value] : file.metadata()) {
          (void)file.string(key);
          (void)file.integer(key);
          (void)file.number(key);
          (void)file.string_array(key);
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
