// Weights holding NaN or inf are refused on load (weights/finite.hpp): the
// scan of f32/f16/bf16 values and of block dtypes' scales, and the message
// of a checkpoint's tensor (safetensors and GGUF), naming file, tensor and
// the first bad value.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/finite.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/safetensors.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::weights;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// n smooth finite values, as a checkpoint holds them.
std::vector<float> values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f * std::sin(0.1f * static_cast<float>(i));
  return v;
}

std::vector<std::byte> bytes_of(DType dtype, const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * dtype_size(dtype));
  convert(DType::F32, std::as_bytes(std::span(v)), dtype, out);
  return out;
}

// Sets the f16 at byte `offset` of `data` to `value`.
void set_f16(std::vector<std::byte>& data, size_t offset, float value) {
  const uint16_t h = f32_to_f16(value);
  std::memcpy(&data[offset], &h, 2);
}

std::string error_of(const Checkpoint& checkpoint, const ManifestEntry& entry) {
  try {
    checkpoint.check_finite(entry);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadFile);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("finite") {

TEST_CASE("finite values pass, the first NaN or inf of f32, f16 and bf16 is found, in chunks and in the tail") {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(dtype));
    // 5000 values: whole chunks of the eight-byte scan (1024 f16/bf16 or
    // 512 f32 values), every lane of a word, and a tail.
    CHECK_FALSE(first_non_finite(dtype, bytes_of(dtype, values(5000))).has_value());
    for (size_t at : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{1500}, size_t{2049}, size_t{4095},
                      size_t{4999}})
      for (float bad : {kNaN, kInf, -kInf}) {
        CAPTURE(at);
        CAPTURE(bad);
        std::vector<float> v = values(5000);
        v[at] = bad;
        if (at < 4999) v[4999] = kNaN;  // a later one: the first is named
        const std::optional<NonFinite> found = first_non_finite(dtype, bytes_of(dtype, v));
        REQUIRE(found.has_value());
        CHECK(found->index == at);
        CHECK((std::isnan(bad) ? std::isnan(found->value) : found->value == bad));
        CHECK(found->field.empty());
        CHECK(found->block_values == 1);
      }
  }
  // f16's and bf16's largest finite values are finite, their infinities are not.
  CHECK_FALSE(first_non_finite(DType::F16, bytes_of(DType::F16, {65504.0f, -65504.0f})).has_value());
  CHECK(first_non_finite(DType::F16, bytes_of(DType::F16, {1.0f, 70000.0f}))->index == 1);  // overflows f16
  CHECK_FALSE(first_non_finite(DType::BF16, bytes_of(DType::BF16, {3e38f, -3e38f})).has_value());
  CHECK_THROWS_AS(first_non_finite(DType::F32, std::vector<std::byte>(6)), Error);
}

TEST_CASE("a block dtype's scales: d of q8_0 and q4_0, m of q4_1, dmin of q4_k, d of q6_k at the block's end") {
  struct Case {
    DType dtype;
    size_t offset;  // of the field in its block
    std::string_view field;
  };
  for (const Case& c : {Case{DType::Q8_0, 0, "d"}, Case{DType::Q4_0, 0, "d"}, Case{DType::Q4_1, 2, "m"},
                        Case{DType::Q5_1, 0, "d"}, Case{DType::Q4_K, 0, "d"}, Case{DType::Q5_K, 2, "dmin"},
                        Case{DType::Q6_K, 208, "d"}}) {
    CAPTURE(dtype_name(c.dtype));
    const BlockFormat f = block_format(c.dtype);
    std::vector<std::byte> data = encode_values(c.dtype, values(static_cast<size_t>(f.elements) * 4));
    CHECK_FALSE(first_non_finite(c.dtype, data).has_value());
    // The codes are integers: no byte pattern in them is a NaN.
    set_f16(data, 2 * static_cast<size_t>(f.bytes) + c.offset, kNaN);
    const std::optional<NonFinite> found = first_non_finite(c.dtype, data);
    REQUIRE(found.has_value());
    CHECK(std::isnan(found->value));
    CHECK(found->index == 2 * static_cast<uint64_t>(f.elements));
    CHECK(found->field == c.field);
    CHECK(found->block_values == static_cast<uint64_t>(f.elements));
    CHECK(describe(*found, std::vector<int64_t>{2, 2 * f.elements}) ==
          "holds NaN in the " +
              std::string(c.field == "d" ? "scale d" : c.field == "m" ? "offset m" : "min scale dmin") +
              " of the block of " + std::to_string(f.elements) + " values at index " + std::to_string(2 * f.elements) +
              " (row 1, columns 0–" + std::to_string(f.elements - 1) + ")");
  }
}

TEST_CASE("a safetensors checkpoint: the file, the tensor as the file names it, the index, its row and column") {
  test::TempDir dir("lathe-finite-test");
  const std::string path = dir.file("model.safetensors");
  std::vector<float> up = values(32 * 768), norm = values(768), embed = values(8 * 768);
  up[12345] = kNaN;  // row 16, column 57
  norm[5] = -kInf;
  write_safetensors(path, {{"model.layers.3.mlp.up_proj.weight", DType::BF16, {32, 768}, bytes_of(DType::BF16, up)},
                           {"model.norm.weight", DType::F32, {768}, bytes_of(DType::F32, norm)},
                           {"model.embed_tokens.weight", DType::F16, {8, 768}, bytes_of(DType::F16, embed)}});
  const ManifestEntry manifest[] = {
      {Role::Up, false, 3, -1, "model.layers.3.mlp.up_proj.weight", 2, {32, 768}, DType::BF16},
      {Role::FinalNorm, false, -1, -1, "model.norm.weight", 1, {768, 1}, DType::F32},
      {Role::Embed, false, -1, -1, "model.embed_tokens.weight", 2, {8, 768}, DType::F16},
  };
  const Checkpoint checkpoint(path);
  CHECK(error_of(checkpoint, manifest[0]) ==
        path + ": tensor 'model.layers.3.mlp.up_proj.weight' holds NaN at index 12345 (row 16, column 57): "
               "refusing to load (--no-check skips this check)");
  CHECK(error_of(checkpoint, manifest[1]) ==
        path + ": tensor 'model.norm.weight' holds -inf at index 5: refusing to load (--no-check skips this check)");
  CHECK(error_of(checkpoint, manifest[2]).empty());
}

TEST_CASE("a GGUF checkpoint: an f16 value and a q4_k block's scale, and a stacked tensor's slice") {
  test::TempDir dir("lathe-finite-test");
  const std::string path = dir.file("model.gguf");
  std::vector<float> q = values(4 * 64);
  q[70] = kInf;  // row 1, column 6
  std::vector<std::byte> up = encode_values(DType::Q4_K, values(4 * 512));
  set_f16(up, 5 * 144 + 2, kNaN);  // block 5 (row 2, values 256–511): its dmin
  std::vector<float> experts = values(3 * 2 * 32);
  experts[2 * 64 + 33] = kNaN;  // expert 2, row 1, column 1
  write_gguf(path, {{"general.architecture", "llama"}},
             {{"blk.0.attn_q.weight", DType::F16, {4, 64}, bytes_of(DType::F16, q)},
              {"blk.0.ffn_up.weight", DType::Q4_K, {4, 512}, up},
              {"blk.0.ffn_up_exps.weight", DType::F32, {3, 2, 32}, bytes_of(DType::F32, experts)}});
  ManifestEntry expert{Role::ExpertUp, false, 0, 2, "blk.0.ffn_up_exps.weight", 2, {2, 32}, DType::F32};
  expert.slice = 2;
  ManifestEntry expert0 = expert;
  expert0.slice = 0;
  expert0.expert = 0;
  const Checkpoint checkpoint(path);
  CHECK(error_of(checkpoint, {Role::Q, false, 0, -1, "blk.0.attn_q.weight", 2, {4, 64}, DType::F16}) ==
        path + ": tensor 'blk.0.attn_q.weight' holds inf at index 70 (row 1, column 6): refusing to load "
               "(--no-check skips this check)");
  CHECK(error_of(checkpoint, {Role::Up, false, 0, -1, "blk.0.ffn_up.weight", 2, {4, 512}, DType::Q4_K}) ==
        path + ": tensor 'blk.0.ffn_up.weight' holds NaN in the min scale dmin of the block of 256 values at index "
               "1280 (row 2, columns 256–511): refusing to load (--no-check skips this check)");
  CHECK(error_of(checkpoint, expert) ==
        path + ": tensor 'blk.0.ffn_up_exps.weight[2]' holds NaN at index 33 (row 1, column 1): refusing to load "
               "(--no-check skips this check)");
  CHECK(error_of(checkpoint, expert0).empty());
}

}  // TEST_SUITE
