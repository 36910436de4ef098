// End to end on a tiny random-weight vision model whose tower runs on the
// device (tests/specs/vision/tiny-llava.toml): the tower's build
// (vision_info()) over an image's unfolded patches against the CPU
// reference's image features, and the decoder's prompt with those features
// spliced in place of the image's tokens against the reference's logits,
// then greedy steps. Validation on.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/image/preprocess.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

// An image as the processor writes it, [channels][side][side], values in ±1.
std::vector<float> random_pixels(const spec::Vision& v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(v.channels * v.image_size * v.image_size));
  for (float& x : out) x = u(rng);
  return out;
}

// The tower's input rows of an image: a class token's row of zeros first.
std::vector<float> tower_input(const spec::Vision& v, const std::vector<float>& pixels) {
  return image::unfold_patches(pixels, v.channels, v.image_size, v.image_size, v.patch, v.class_token ? 1 : 0);
}

}  // namespace

TEST_SUITE("vision") {

TEST_CASE_FIXTURE(test::VulkanTest, "the tower's rows of an image match the CPU reference's features") {
  const ModelInfo* tower = vision_info();
  REQUIRE(tower != nullptr);
  const spec::Vision& v = test_spec().vision;
  REQUIRE(tower->encoder);
  REQUIRE(tower->output_width == model_info().hidden);
  REQUIRE(tower->plan.input_row_floats == v.channels * v.patch * v.patch);
  Session session(device, *tower);
  upload_all(session);
  const size_t H = static_cast<size_t>(model_info().hidden);
  const size_t lead = v.class_token ? 1 : 0;
  reference::Reference ref(test_spec(), test_weights());
  for (uint32_t seed : {1u, 2u}) {
    CAPTURE(seed);
    const std::vector<float> pixels = random_pixels(v, seed);
    const std::vector<float> input = tower_input(v, pixels);
    const int64_t rows = static_cast<int64_t>(input.size()) / tower->plan.input_row_floats;
    const std::vector<float> out = session.encode_rows(input, rows);
    REQUIRE(out.size() == static_cast<size_t>(rows) * H);
    // The features: every row but the class token's.
    const std::vector<float> features(out.begin() + static_cast<std::ptrdiff_t>(lead * H), out.end());
    const std::vector<float> expected = ref.image_features(pixels, v.image_size, v.image_size);
    REQUIRE(features.size() == expected.size());
    const double worst = worst_row_error(features, expected, H);
    MESSAGE("image " << seed << ": worst row normalized error " << worst);
    CHECK(worst < tolerance(session));
  }
  // Refusals, before anything runs.
  CHECK_THROWS_AS(session.encode_rows(std::vector<float>(5, 0.0f), 1), Error);
  CHECK_THROWS_AS(session.encode_rows({}, 0), Error);
}

TEST_CASE_FIXTURE(test::VulkanTest, "a prompt with an image's features spliced gives the reference's logits, then steps") {
  const ModelInfo* tower = vision_info();
  REQUIRE(tower != nullptr);
  const spec::Vision& v = test_spec().vision;
  const size_t H = static_cast<size_t>(model_info().hidden), V = static_cast<size_t>(model_info().vocab);
  Session tower_session(device, *tower);
  upload_all(tower_session);
  const std::vector<float> input = tower_input(v, random_pixels(v, 3));
  const std::vector<float> out =
      tower_session.encode_rows(input, static_cast<int64_t>(input.size()) / tower->plan.input_row_floats);
  const size_t lead = v.class_token ? 1 : 0;
  const std::vector<float> features(out.begin() + static_cast<std::ptrdiff_t>(lead * H), out.end());
  const size_t image_rows = features.size() / H;

  // Text, the image's rows (the image token each), text.
  const int32_t image_token = static_cast<int32_t>(v.tokens.image >= 0 ? v.tokens.image : v.tokens.marker);
  std::vector<int32_t> tokens = random_tokens(3, 7);
  std::vector<int64_t> at;
  for (size_t i = 0; i < image_rows; ++i) {
    at.push_back(static_cast<int64_t>(tokens.size()));
    tokens.push_back(image_token);
  }
  for (int32_t t : random_tokens(4, 8)) tokens.push_back(t);

  // Chunks smaller than the prompt, so that the image straddles two of them.
  SessionOptions options;
  options.all_logits = true;
  options.max_chunk = 8;
  Session session(device, model_info(), options);
  upload_all(session);
  const std::vector<float> logits = session.prefill(0, tokens, at, features);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<float> expected = ref.forward(tokens, at, features);
  REQUIRE(logits.size() == tokens.size() * V);
  REQUIRE(expected.size() == logits.size());
  const double worst = worst_row_error(logits, expected, V);
  MESSAGE("spliced prompt of " << tokens.size() << " rows: worst row normalized error " << worst);
  CHECK(worst < tolerance(session));

  // Greedy steps after it read the image's keys from the cache.
  int32_t token = 5;
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    const std::vector<float> row = session.decode(token);
    const std::vector<float> want = ref.forward({token});
    REQUIRE(want.size() == V);
    CHECK(normalized_error(row.data(), want.data(), V) < tolerance(session));
    token = static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
  }

  // Refusals, before anything runs: rows out of order, features of another size.
  session.reset();
  CHECK_THROWS_AS(session.prefill(0, tokens, std::vector<int64_t>{4, 3}, std::vector<float>(2 * H)), Error);
  CHECK_THROWS_AS(session.prefill(0, tokens, at, std::vector<float>(H)), Error);
  CHECK(session.position() == 0);
}

}  // TEST_SUITE("vision")
