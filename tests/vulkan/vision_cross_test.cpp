// End to end on the tiny random-weight Llama 3.2 Vision model
// (tests/specs/vision/tiny-mllama.toml): its tiled tower's build over an
// image's tiles against the CPU reference's tile features, and the
// decoder, whose layer 1 attends to the images through its cross-attention
// cache, over a prompt with image markers against the reference's logits,
// then greedy steps. Validation on.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/image/preprocess.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

// `tiles` tiles as the processor writes them, [channels][image_size]² each, values in ±1.
std::vector<image::Pixels> random_tiles(const spec::Vision& v, int64_t tiles, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<image::Pixels> out(static_cast<size_t>(tiles));
  for (image::Pixels& p : out) {
    p.width = p.height = v.image_size;
    p.chw.resize(static_cast<size_t>(v.channels * v.image_size * v.image_size));
    for (float& x : p.chw) x = u(rng);
  }
  return out;
}

std::vector<float> flat(const std::vector<image::Pixels>& tiles) {
  std::vector<float> out;
  for (const image::Pixels& p : tiles) out.insert(out.end(), p.chw.begin(), p.chw.end());
  return out;
}

// An image: its tiles and aspect ratio id (1 + its canvas's index among the
// tower's arrangements: 3 is 1 × 3 tiles, 6 is 2 × 2, 8 is 4 × 1).
struct TiledImage {
  int64_t tiles, aspect_ratio_id;
};

}  // namespace

TEST_SUITE("vision") {

TEST_CASE_FIXTURE(test::VulkanTest, "the tiled tower's rows of an image's tiles match the CPU reference's features") {
  const ModelInfo* tower = vision_info();
  REQUIRE(tower != nullptr);
  const spec::Vision& v = test_spec().vision;
  const plan::VisionLink& link = *model_info().vision;
  REQUIRE(link.cross);
  CHECK(link.tiles == v.tiles);
  CHECK(link.tile_rows == v.positions_count());
  CHECK(link.tile_pad == spec::tile_padding(v.positions_count()));
  CHECK(link.aspect_ratios == v.aspect_ratios());
  Session session(device, *tower);
  upload_all(session);
  reference::Reference ref(test_spec(), test_weights());
  const size_t H = static_cast<size_t>(model_info().hidden);
  for (const TiledImage image : {TiledImage{1, 1}, TiledImage{3, 3}, TiledImage{4, 6}, TiledImage{4, 8}}) {
    CAPTURE(image.tiles);
    CAPTURE(image.aspect_ratio_id);
    const std::vector<image::Pixels> tiles = random_tiles(v, image.tiles, static_cast<uint32_t>(image.aspect_ratio_id));
    const text::ImageInput input =
        text::tiles_input(link, tiles, image.aspect_ratio_id, tower->plan.input_row_floats, "random tiles");
    CHECK(input.own == image.tiles * link.tile_rows);
    const text::ImageFeatures features = text::image_features(session, link, input);
    CHECK(features.tiles == image.tiles);
    const std::vector<float> expected = ref.tile_features(flat(tiles), image.tiles, image.aspect_ratio_id);
    REQUIRE(features.values.size() == expected.size());
    REQUIRE(features.values.size() == static_cast<size_t>(link.tiles * link.tile_rows) * H);
    const double worst = worst_row_error(features.values, expected, H);
    MESSAGE(image.tiles << " tiles, aspect ratio " << image.aspect_ratio_id << ": worst row normalized error " << worst);
    CHECK(worst < tolerance(session));
  }
  // Refusals, before anything runs.
  const std::vector<image::Pixels> one = random_tiles(v, 1, 9);
  CHECK_THROWS_AS(text::tiles_input(link, one, 0, tower->plan.input_row_floats, "x"), Error);
  CHECK_THROWS_AS(text::tiles_input(link, random_tiles(v, 5, 9), 1, tower->plan.input_row_floats, "x"), Error);
  CHECK_THROWS_AS(session.encode_rows(std::vector<float>(static_cast<size_t>(tower->plan.input_row_floats), 0.0f), 1, {}, 2),
                  Error);
}

TEST_CASE_FIXTURE(test::VulkanTest, "a prompt's image markers read the images through the cross-attention layers, as the reference") {
  const spec::Vision& v = test_spec().vision;
  const plan::VisionLink& link = *model_info().vision;
  const size_t V = static_cast<size_t>(model_info().vocab);
  reference::Reference ref(test_spec(), test_weights());
  // Three images' features (the reference's tower: the decoder alone is
  // under test here): 3 of 1 × 3, 4 of 2 × 2, 1 tile.
  const std::vector<TiledImage> images = {{3, 3}, {4, 6}, {1, 1}};
  std::vector<float> features;
  std::vector<int64_t> tiles;
  for (const TiledImage& image : images) {
    const std::vector<float> f =
        ref.tile_features(flat(random_tiles(v, image.tiles, static_cast<uint32_t>(image.tiles + 20))), image.tiles,
                          image.aspect_ratio_id);
    features.insert(features.end(), f.begin(), f.end());
    tiles.push_back(image.tiles);
  }
  // Rows before any image (every key read, no MLP), an image, text, two
  // markers side by side (the second's rows read both), text.
  const int32_t marker = static_cast<int32_t>(link.marker);
  const std::vector<int32_t> tokens = {5, 17, marker, 7, marker, marker, 11, 13, 9, 4};

  // Chunks smaller than the prompt and than the image pass's rows.
  SessionOptions options;
  options.all_logits = true;
  options.max_chunk = 4;
  options.images = 3;
  Session session(device, model_info(), options);
  upload_all(session);
  session.images(0, features, tiles);
  const std::vector<float> logits = session.prefill(0, tokens);
  const std::vector<float> expected = ref.forward_images(tokens, features, tiles);
  REQUIRE(logits.size() == tokens.size() * V);
  REQUIRE(expected.size() == logits.size());
  const double worst = worst_row_error(logits, expected, V);
  MESSAGE("prompt of " << tokens.size() << " rows and 3 images: worst row normalized error " << worst);
  CHECK(worst < tolerance(session));

  // Greedy steps after it: each reads the last images' keys.
  check_greedy_steps(session, ref, 5, 3);

  // Refusals, before anything runs: images into a sequence that holds
  // tokens, more images than the session holds, features of another size,
  // a tile count the tower does not take, more markers than images.
  CHECK_THROWS_WITH_AS(session.images(0, features, tiles), doctest::Contains("holds tokens"), Error);
  session.reset();
  const std::vector<int64_t> four = {1, 1, 1, 1};
  CHECK_THROWS_WITH_AS(session.images(0, std::vector<float>(features.size() / 3 * 4), four),
                       doctest::Contains("SessionOptions::images"), Error);
  CHECK_THROWS_AS(session.images(0, std::span(features).first(10), tiles), Error);
  const std::vector<int64_t> five = {5, 1, 1};
  CHECK_THROWS_AS(session.images(0, features, five), Error);
  const std::vector<int64_t> first_only = {3};
  session.images(0, std::span(features).first(features.size() / 3), first_only);
  CHECK_THROWS_WITH_AS(session.prefill(0, tokens), doctest::Contains("3 image markers"), Error);
  CHECK(session.position() == 0);
}

}  // TEST_SUITE("vision")
