// The reference's images: each tiny tower and projector against numpy's
// computation of transformers' models (tests/data/vision/feature_goldens.txt,
// written by make_feature_goldens.py from the same weights and pixels), and
// a prompt pass whose rows take features.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/reference/reference.hpp"

using namespace lathe;
using reference::Reference;

namespace {

spec::Spec load(const std::string& name) {
  spec::Diagnostics diag(name);
  auto s = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR) + "/tests/specs/vision/" + name, diag);
  INFO(diag.format());
  REQUIRE(s);
  return *s;
}

// make_feature_goldens.py's values: w(n, j) = 0.3 · sin(0.37 · j + 0.013 · s(n)),
// of the tower's tensors (`decoder`: the decoder's too; else random).
reference::Weights golden_weights(const spec::Spec& s, bool decoder = false) {
  reference::Weights w = reference::random_weights(s, 7, 0.1f);
  const auto fill = [&](const spec::Manifest& manifest) {
    for (const spec::TensorSpec& t : manifest.tensors) {
      int64_t seed = 0;
      for (size_t i = 0; i < t.name.size(); ++i)
        seed += static_cast<int64_t>(i + 1) * static_cast<unsigned char>(t.name[i]);
      seed %= 1000;
      std::vector<float>& values = w.tensors[t.name];
      values.resize(static_cast<size_t>(t.elements()));
      for (size_t j = 0; j < values.size(); ++j)
        values[j] = static_cast<float>(0.3 * std::sin(0.37 * static_cast<double>(j) + 0.013 * static_cast<double>(seed)));
    }
  };
  fill(spec::build_vision_manifest(s));
  if (decoder) fill(spec::build_manifest(s));
  return w;
}

// p(c, y, x) = sin(0.1 · (c + 1) · y + 0.07 · x + 0.2 · c), [3][height][width].
std::vector<float> golden_pixels(int64_t height, int64_t width) {
  std::vector<float> p;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        p.push_back(static_cast<float>(std::sin(0.1 * static_cast<double>((c + 1) * y) + 0.07 * static_cast<double>(x) +
                                                0.2 * static_cast<double>(c))));
  return p;
}

// Mllama's image i: its first `tiles` tiles of 16², p(c, y, x) + 0.5 · t + 0.9 · i inside the sine.
std::vector<float> golden_tiles(int64_t image, int64_t tiles) {
  std::vector<float> p;
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 16; ++y)
        for (int64_t x = 0; x < 16; ++x)
          p.push_back(static_cast<float>(std::sin(0.1 * static_cast<double>((c + 1) * y) + 0.07 * static_cast<double>(x) +
                                                  0.2 * static_cast<double>(c) + 0.5 * static_cast<double>(t) +
                                                  0.9 * static_cast<double>(image))));
  return p;
}

struct Golden {
  int64_t height = 0, width = 0, rows = 0, cols = 0;
  std::vector<double> values;
};

Golden golden(const std::string& family) {
  std::ifstream in(std::string(LATHE_SOURCE_DIR) + "/tests/data/vision/feature_goldens.txt");
  REQUIRE(in);
  std::string line;
  std::getline(in, line);  // the comment
  while (std::getline(in, line)) {
    std::istringstream head(line);
    std::string name;
    Golden g;
    head >> name >> g.height >> g.width >> g.rows >> g.cols;
    for (int64_t r = 0; r < g.rows; ++r) {
      std::getline(in, line);
      std::istringstream row(line);
      double v = 0;
      while (row >> v) g.values.push_back(v);
    }
    if (name == family) return g;
  }
  FAIL("no golden for " << family);
  return {};
}

// The largest difference against the largest golden value.
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

}  // namespace

TEST_CASE("each tiny tower and projector gives numpy's features of transformers' models") {
  for (const auto& [family, file] : {std::pair{"llava", "tiny-llava.toml"}, std::pair{"gemma3", "tiny-gemma3.toml"},
                                     std::pair{"pixtral", "tiny-pixtral.toml"}}) {
    CAPTURE(family);
    const spec::Spec s = load(file);
    const reference::Weights w = golden_weights(s);
    const Reference ref(s, w);
    const Golden g = golden(family);
    CHECK(ref.image_rows(g.height, g.width) == g.rows);
    REQUIRE(g.cols == s.dims.hidden);
    const std::vector<float> features = ref.image_features(golden_pixels(g.height, g.width), g.height, g.width);
    // Float32 rounding of the outputs, and libm's last bits of sin.
    CHECK(relative_error(features, g.values) < 1e-6);
  }
}

TEST_CASE("a prompt pass with spliced rows: the text path's logits where nothing is spliced, the rows' own otherwise") {
  const spec::Spec s = load("tiny-llava.toml");
  const reference::Weights w = golden_weights(s);
  const std::vector<int32_t> tokens = {3, 200, 200, 200, 7, 9};
  Reference plain(s, w), spliced(s, w);
  const std::vector<float> want = plain.forward(tokens);
  const std::vector<float> none = spliced.forward(tokens, {}, {});
  CHECK(relative_error(none, std::vector<double>(want.begin(), want.end())) < 1e-12);
  // The token's own embedding spliced in: the same logits.
  const std::vector<float>& table = w.tensors.at("model.embed_tokens.weight");
  std::vector<float> rows;
  for (int i = 0; i < 3; ++i) rows.insert(rows.end(), table.begin() + 200 * 64, table.begin() + 201 * 64);
  spliced.reset();
  const std::vector<float> same = spliced.forward(tokens, {1, 2, 3}, rows);
  CHECK(relative_error(same, std::vector<double>(want.begin(), want.end())) < 1e-12);
  // Then decoding goes on from the spliced prompt's cache.
  CHECK(spliced.cache_len() == 6);
  const std::vector<float> next = plain.forward({11});
  CHECK(relative_error(spliced.forward({11}), std::vector<double>(next.begin(), next.end())) < 1e-12);
}

TEST_CASE("an image's rows attend to each other both ways under image_bidirectional, causally otherwise") {
  for (const char* file : {"tiny-gemma3.toml", "tiny-llava.toml"}) {
    CAPTURE(file);
    const spec::Spec s = load(file);
    const reference::Weights w = golden_weights(s);
    const int64_t hidden = s.dims.hidden, vocab = s.dims.vocab;
    const std::vector<int32_t> tokens = {3, 5, 5, 5, 7};
    std::vector<float> rows(static_cast<size_t>(3 * hidden));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(std::cos(0.3 * static_cast<double>(i)));
    Reference a(s, w), b(s, w);
    const std::vector<float> first = a.forward(tokens, {1, 2, 3}, rows);
    rows[static_cast<size_t>(2 * hidden)] += 1.0f;  // the image's last row changes
    const std::vector<float> second = b.forward(tokens, {1, 2, 3}, rows);
    // The image's first row sees its last only both ways; the text before never.
    const auto row_of = [&](const std::vector<float>& l, int64_t r) {
      return std::vector<float>(l.begin() + r * vocab, l.begin() + (r + 1) * vocab);
    };
    CHECK(row_of(first, 0) == row_of(second, 0));
    CHECK((row_of(first, 1) != row_of(second, 1)) == s.vision.image_bidirectional);
  }
}

TEST_CASE("the reference refuses images of another size, and features without rows") {
  const spec::Spec s = load("tiny-llava.toml");
  const reference::Weights w = golden_weights(s);
  const Reference ref(s, w);
  CHECK_THROWS_WITH_AS(ref.image_features(golden_pixels(16, 20), 16, 20),
                       "reference: an image of 16 × 20 pixels; the tower takes 16²", std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref.image_features(golden_pixels(16, 15), 16, 16),
                       "reference: 720 pixel values for 3 channels of 16 × 16", std::invalid_argument);
  const spec::Spec p = load("tiny-pixtral.toml");
  const reference::Weights pw = golden_weights(p);
  const Reference pixtral(p, pw);
  CHECK_THROWS_WITH_AS(pixtral.image_features(golden_pixels(36, 8), 36, 8),
                       "reference: an image of 36 × 8 pixels; the tower takes whole patches of 4 up to 32 a side",
                       std::invalid_argument);
  Reference text(s, w);
  CHECK_THROWS_WITH_AS(text.forward({1, 2}, {1}, {}), "reference: 0 feature values for 1 rows of 64", std::invalid_argument);
  CHECK_THROWS_WITH_AS(text.forward({1, 2}, {2}, std::vector<float>(64)),
                       "reference: spliced rows must be increasing indices into the tokens", std::invalid_argument);
}

// make_feature_goldens.py's Llama 3.2 Vision inputs: each image's real tiles
// and aspect ratio id, the prompt (marker 211) and the decoded tokens.
constexpr std::array<std::pair<int64_t, int64_t>, 3> kMllamaImages = {{{3, 3}, {4, 6}, {1, 1}}};
const std::vector<int32_t> kMllamaPrompt = {5, 17, 211, 7, 211, 211, 11, 13};

TEST_CASE("Llama 3.2 Vision: the tiled tower gives numpy's features, the cross-attention layers numpy's logits") {
  const spec::Spec s = load("tiny-mllama.toml");
  const reference::Weights w = golden_weights(s, true);
  Reference ref(s, w);
  const Golden features = golden("mllama-features");
  // 4 tiles of 4² patches and a class token.
  REQUIRE(features.rows == 4 * 17);
  const std::vector<float> first = ref.tile_features(golden_tiles(0, 3), 3, 3);
  CHECK(relative_error(first, features.values) < 1e-6);

  std::vector<float> all;
  std::vector<int64_t> tiles;
  for (size_t i = 0; i < kMllamaImages.size(); ++i) {
    const auto [n, ratio] = kMllamaImages[i];
    const std::vector<float> f = ref.tile_features(golden_tiles(static_cast<int64_t>(i), n), n, ratio);
    all.insert(all.end(), f.begin(), f.end());
    tiles.push_back(n);
  }
  std::vector<float> logits = ref.forward_images(kMllamaPrompt, all, tiles);
  // Decoding reads what the prompt's last row read.
  for (int32_t t : {3, 4}) {
    const std::vector<float> next = ref.forward({t});
    logits.insert(logits.end(), next.begin(), next.end());
  }
  const Golden want = golden("mllama-logits");
  REQUIRE(want.rows == 10);
  CHECK(relative_error(logits, want.values) < 1e-6);
}

TEST_CASE("Llama 3.2 Vision: which rows read which image, and a prompt without images") {
  const spec::Spec s = load("tiny-mllama.toml");
  const reference::Weights w = golden_weights(s);
  const int64_t hidden = s.dims.hidden, vocab = s.dims.vocab, per_image = 4 * 17;
  std::vector<float> features(static_cast<size_t>(3 * per_image * hidden));
  for (size_t i = 0; i < features.size(); ++i) features[i] = static_cast<float>(std::cos(0.3 * static_cast<double>(i)));
  const std::vector<int64_t> tiles = {3, 4, 1};
  const auto changed_rows = [&](size_t value) {
    Reference a(s, w), b(s, w);
    const std::vector<float> before = a.forward_images(kMllamaPrompt, features, tiles);
    std::vector<float> changed = features;
    changed[value] += 1.0f;
    const std::vector<float> after = b.forward_images(kMllamaPrompt, changed, tiles);
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < static_cast<int64_t>(kMllamaPrompt.size()); ++r)
      if (!std::equal(before.begin() + r * vocab, before.begin() + (r + 1) * vocab, after.begin() + r * vocab)) rows.push_back(r);
    return rows;
  };
  // Image 0 (its marker at 2, the next image's at 4): rows 2 and 3, and the
  // rows before every image, which read all.
  CHECK(changed_rows(0) == std::vector<int64_t>{0, 1, 2, 3});
  // Image 0's fourth tile is not its own: only the rows that read all see it.
  CHECK(changed_rows(static_cast<size_t>(3 * 17 * hidden)) == std::vector<int64_t>{0, 1});
  // Images 1 and 2, adjacent markers at 4 and 5: both to the end.
  CHECK(changed_rows(static_cast<size_t>(per_image * hidden)) == std::vector<int64_t>{0, 1, 4, 5, 6, 7});
  CHECK(changed_rows(static_cast<size_t>(2 * per_image * hidden)) == std::vector<int64_t>{0, 1, 5, 6, 7});

  // Without images the cross-attention layers are skipped, decoding too.
  Reference text(s, w), none(s, w);
  const std::vector<int32_t> plain = {5, 17, 7, 11};
  CHECK(text.forward(plain) == none.forward_images(plain, {}, {}));
  CHECK(text.forward({3}) == none.forward({3}));
}

TEST_CASE("Llama 3.2 Vision: the reference refuses tiles, markers and features that do not fit") {
  const spec::Spec s = load("tiny-mllama.toml");
  const reference::Weights w = golden_weights(s);
  Reference ref(s, w);
  CHECK_THROWS_WITH_AS(ref.tile_features(golden_tiles(0, 5), 5, 1), "reference: an image of 5 tiles; the tower takes 1 to 4",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref.tile_features(golden_tiles(0, 1), 1, 9), "reference: aspect ratio id 9; the tower's are 1 to 8",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref.tile_features(golden_tiles(0, 1), 2, 2),
                       "reference: 768 pixel values for 2 tiles of 3 × 16²", std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref.image_features(golden_pixels(16, 16), 16, 16),
                       "reference: a tiled tower's images go through tile_features()", std::invalid_argument);
  const std::vector<float> one(static_cast<size_t>(4 * 17 * s.dims.hidden));
  CHECK_THROWS_WITH_AS(ref.forward_images({5, 211, 211}, one, {1}), "reference: 2 image markers (token 211) for 1 images",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref.forward_images({5, 211}, std::vector<float>(64), {1}),
                       "reference: 64 feature values for 1 images of 68 rows of 64", std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref.forward_images({5, 219}, {}, {}), "reference: token 219 outside the vocabulary of 219",
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(ref.forward({5, 211}, {1}, std::vector<float>(64)),
                       "reference: a cross_attention [vision] reads its images through forward_images()",
                       std::invalid_argument);
  ref.forward({5});
  CHECK_THROWS_WITH_AS(ref.forward_images({211}, one, {1}),
                       "reference: images go in a sequence's first prompt (reset() first)", std::invalid_argument);
  const spec::Spec llava = load("tiny-llava.toml");
  const reference::Weights lw = golden_weights(llava);
  Reference splice(llava, lw);
  CHECK_THROWS_WITH_AS(splice.forward_images({5}, {}, {}),
                       "reference: forward_images() runs a cross_attention [vision] (Llama 3.2 Vision)",
                       std::invalid_argument);
}
