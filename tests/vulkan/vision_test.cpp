// End to end on the tiny random-weight vision models whose towers run on
// the device (tests/specs/vision/tiny-llava*.toml, the second's unfolded
// patches not whole texels; tiny-gemma3.toml: a pooled projector, tokens
// around each image, an image's rows seeing each other both ways;
// tiny-pixtral.toml: images of any whole-patch size, 2D RoPE, the patch
// merger, a row end after each row; one binary each): the tower's build
// (vision_info()) over an image's unfolded patches against the CPU
// reference's image features, and the decoder's prompt with those features
// spliced in place of the image's tokens against the reference's logits,
// then greedy steps. Validation on.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/image/image.hpp"
#include "runtime/image/preprocess.hpp"
#include "runtime/weights/safetensors.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

// The test image's size: the tower's square, or (variable sizes) 5 × 8
// patches: the widest, and an odd count of rows that the patch merger's
// blocks leave one row of.
struct Size {
  int64_t height, width;
};
Size image_size(const spec::Vision& v) {
  return v.longest_edge > 0 ? Size{5 * v.patch, v.longest_edge} : Size{v.image_size, v.image_size};
}

// An image as the processor writes it, [channels][height][width], values in ±1.
std::vector<float> random_pixels(const spec::Vision& v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const Size size = image_size(v);
  std::vector<float> out(static_cast<size_t>(v.channels * size.height * size.width));
  for (float& x : out) x = u(rng);
  return out;
}

// The tower's input rows of an image: a class token's row of zeros first,
// each row as wide as the tower's plan reads them, in the tower's order.
text::ImageInput tower_input(const spec::Vision& v, const std::vector<float>& pixels) {
  const Size size = image_size(v);
  return text::tower_input(*model_info().vision, pixels, size.height, size.width, vision_info()->plan.input_row_floats,
                           "random pixels");
}

// The checkpoint of both builds, as a LLaVA directory holds it: every
// tensor of the decoder's manifest and the whole tower's (its layers past
// the feature layer too), the decoder's under `decoder_prefix` (older
// LlavaForConditionalGeneration files write "language_model.").
std::string write_checkpoint(const std::string& decoder_prefix) {
  std::vector<weights::TensorToWrite> tensors;
  const auto add = [&](const spec::Manifest& m, const std::string& prefix) {
    for (const spec::TensorSpec& t : m.tensors) {
      const std::vector<float>& values = test_weights().tensors.at(t.name);
      tensors.push_back({prefix + t.name, t.dtype, t.shape, weights::encode_values(t.dtype, values)});
    }
  };
  add(spec::build_manifest(test_spec()), decoder_prefix);
  add(spec::build_vision_manifest(test_spec()), "");
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lathe-vision-test-" + std::to_string(decoder_prefix.size()) + ".safetensors"))
          .string();
  weights::write_safetensors(path, tensors);
  return path;
}

}  // namespace

TEST_SUITE("vision") {

TEST_CASE_FIXTURE(test::VulkanTest, "the tower's rows of an image match the CPU reference's features") {
  const ModelInfo* tower = vision_info();
  REQUIRE(tower != nullptr);
  const spec::Vision& v = test_spec().vision;
  REQUIRE(tower->encoder);
  REQUIRE(tower->output_width == model_info().hidden);
  // Whole texels of the patch embedding's f16 rows: 8 values each.
  REQUIRE(tower->plan.input_row_floats == (v.channels * v.patch * v.patch + 7) / 8 * 8);
  Session session(device, *tower);
  upload_all(session);
  const size_t H = static_cast<size_t>(model_info().hidden);
  const plan::VisionLink& link = *model_info().vision;
  reference::Reference ref(test_spec(), test_weights());
  for (uint32_t seed : {1u, 2u}) {
    CAPTURE(seed);
    const std::vector<float> pixels = random_pixels(v, seed);
    const text::ImageInput input = tower_input(v, pixels);
    const int64_t rows = static_cast<int64_t>(input.rows.size()) / tower->plan.input_row_floats;
    const std::vector<float> out = session.encode_rows(input.rows, rows, input.tokens);
    REQUIRE(out.size() == static_cast<size_t>(rows) * H);
    // The features: every row but the class token's (the pooled rows, the
    // rest zeros; the merged blocks).
    const auto first = out.begin() + static_cast<std::ptrdiff_t>(link.skip_rows * model_info().hidden);
    const std::vector<float> features(first, first + static_cast<std::ptrdiff_t>(input.grid.count() * model_info().hidden));
    if (v.projector.kind == spec::ProjectorKind::Pooled)
      for (auto it = first + static_cast<std::ptrdiff_t>(features.size()); it != out.end(); ++it) REQUIRE(*it == 0.0f);
    const Size size = image_size(v);
    const std::vector<float> expected = ref.image_features(pixels, size.height, size.width);
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
  const plan::VisionLink& link = *model_info().vision;
  const text::ImageInput input = tower_input(v, random_pixels(v, 3));
  const std::vector<float> image = text::image_features(tower_session, link, input).values;
  const size_t image_rows = image.size() / H;

  // Text, the image's rows (the image token each), text, the image again, text.
  const int32_t image_token = static_cast<int32_t>(v.tokens.image >= 0 ? v.tokens.image : v.tokens.marker);
  std::vector<int32_t> tokens = random_tokens(3, 7);
  std::vector<int64_t> at;
  std::vector<float> features;
  for (uint32_t seed : {8u, 9u}) {
    for (size_t i = 0; i < image_rows; ++i) {
      at.push_back(static_cast<int64_t>(tokens.size()));
      tokens.push_back(image_token);
    }
    features.insert(features.end(), image.begin(), image.end());
    for (int32_t t : random_tokens(seed - 6, seed)) tokens.push_back(t);
  }

  // Chunks smaller than the prompt, so that an image straddles two of them;
  // or, where an image's rows see each other both ways, the session's
  // chunks hold an image whole (it raises max_chunk to one image's rows and
  // ends a chunk before an image it would cut).
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
  check_greedy_steps(session, ref, 5, 3);

  // Refusals, before anything runs: rows out of order, features of another
  // size; part of an image whose rows see each other both ways.
  session.reset();
  CHECK_THROWS_AS(session.prefill(0, tokens, std::vector<int64_t>{4, 3}, std::vector<float>(2 * H)), Error);
  CHECK_THROWS_AS(session.prefill(0, tokens, at, std::vector<float>(H)), Error);
  if (link.two_way)
    CHECK_THROWS_WITH_AS(session.prefill(0, tokens, std::span(at).first(image_rows - 1),
                                         std::span(features).first((image_rows - 1) * H)),
                         doctest::Contains("a prefill holds whole images"), Error);
  CHECK(session.position() == 0);
}

// An image through its processor (the tower's square, as CLIP's resizes and
// normalizes), the tower and the prompt's marker: encode_image and
// splice_images give the decoder the reference's rows and logits.
TEST_CASE_FIXTURE(test::VulkanTest, "an image through its processor and the prompt's marker gives the reference's logits") {
  const ModelInfo* tower = vision_info();
  REQUIRE(tower != nullptr);
  REQUIRE(model_info().vision != nullptr);
  const plan::VisionLink& link = *model_info().vision;
  const spec::Vision& v = test_spec().vision;
  CHECK(link.image_size == std::max(v.image_size, v.longest_edge));
  CHECK(link.marker == v.tokens.marker);
  CHECK(link.features == v.image_features());
  // A 20 × 24 picture of a pattern, resized to the tower's square.
  image::Image picture;
  picture.width = 20;
  picture.height = 24;
  for (int64_t i = 0; i < picture.width * picture.height * 3; ++i) picture.rgb.push_back(static_cast<uint8_t>(i * 37 % 251));
  // (Variable sizes: Pixtral's processor keeps it, 24 × 20 pixels, 6 × 5
  // patches: 3 × 2 merged blocks and a column of patches no block takes.)
  image::Preprocess p;
  p.processor = "CLIPImageProcessor";
  p.height = p.width = v.image_size;
  if (link.variable) {
    p.processor = "PixtralImageProcessor";
    p.rule = image::SizeRule::LongestEdge;
    p.edge = v.longest_edge;
    p.patch_height = p.patch_width = v.patch;
  }
  Session tower_session(device, *tower);
  upload_all(tower_session);
  const text::ImageFeatures features = text::encode_image(tower_session, link, p, picture, "pattern.png");
  const image::Pixels pixels = image::preprocess(picture, p);
  if (link.variable) CHECK(features.grid == plan::ImageGrid{6 / link.merge, 5 / link.merge});
  reference::Reference ref(test_spec(), test_weights());
  const size_t H = static_cast<size_t>(model_info().hidden), V = static_cast<size_t>(model_info().vocab);
  CHECK(worst_row_error(features.values, ref.image_features(pixels.chw, pixels.height, pixels.width), H) <
        tolerance(tower_session));

  const std::vector<int32_t> ids = {3, 4, static_cast<int32_t>(link.marker), 5};
  const text::SplicedPrompt spliced = text::splice_images(link, ids, std::span(&features, 1), model_info().hidden);
  // The marker's expansion: each row of features, then its row end (the
  // last one's the end token).
  if (link.row_end >= 0) {
    std::vector<int32_t> want = {3, 4};
    for (int64_t r = 0; r < features.grid.rows; ++r) {
      want.insert(want.end(), static_cast<size_t>(features.grid.cols), static_cast<int32_t>(v.tokens.image >= 0 ? v.tokens.image : link.marker));
      want.push_back(static_cast<int32_t>(r + 1 == features.grid.rows && link.end >= 0 ? link.end : link.row_end));
    }
    want.push_back(5);
    CHECK(spliced.ids == want);
  }
  SessionOptions options;
  options.all_logits = true;
  Session session(device, model_info(), options);
  upload_all(session);
  const std::vector<float> logits = session.prefill(0, spliced.ids, spliced.at, spliced.features);
  CHECK(worst_row_error(logits, ref.forward(spliced.ids, spliced.at, spliced.features), V) < tolerance(session));
  // A picture the processor cannot give the tower's square: refused, naming it.
  image::Preprocess wrong = p;
  wrong.height = wrong.width = v.image_size + v.patch;
  wrong.patch_height = wrong.patch_width = v.patch - 1;  // (variable sizes: not whole patches)
  CHECK_THROWS_WITH_AS(text::encode_image(tower_session, link, wrong, picture, "pattern.png"),
                       doctest::Contains("pattern.png: the image processor"), Error);
}

TEST_CASE_FIXTURE(test::VulkanTest, "one checkpoint of both builds loads into each, each ignoring the other's tensors") {
  const ModelInfo* tower = vision_info();
  REQUIRE(tower != nullptr);
  const spec::Vision& v = test_spec().vision;
  const text::ImageInput input = tower_input(v, random_pixels(v, 4));
  const int64_t rows = static_cast<int64_t>(input.rows.size()) / tower->plan.input_row_floats;
  Session tower_direct(device, *tower), decoder_direct(device, model_info());
  upload_all(tower_direct);
  upload_all(decoder_direct);
  const std::vector<float> features = tower_direct.encode_rows(input.rows, rows, input.tokens);
  const std::vector<int32_t> tokens = random_tokens(9, 5);
  const std::vector<float> logits = decoder_direct.prefill(tokens);
  for (const std::string prefix : {"", "language_model."}) {
    CAPTURE(prefix);
    const std::string path = write_checkpoint(prefix);
    Session tower_loaded(device, *tower), decoder_loaded(device, model_info());
    tower_loaded.load(path);
    decoder_loaded.load(path);
    // Vectors reach the device as f32 either way; only their checkpoint rounding differs.
    const std::vector<float> f = tower_loaded.encode_rows(input.rows, rows, input.tokens);
    CHECK(normalized_error(f.data(), features.data(), f.size()) < 1e-2);
    const std::vector<float> l = decoder_loaded.prefill(tokens);
    CHECK(normalized_error(l.data(), logits.data(), l.size()) < 1e-2);
  }
}

}  // TEST_SUITE("vision")
