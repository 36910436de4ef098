// The reference's images: each tiny tower and projector against numpy's
// computation of transformers' models (tests/data/vision/feature_goldens.txt,
// written by make_feature_goldens.py from the same weights and pixels), and
// a prompt pass whose rows take features.
#include <doctest/doctest.h>

#include <algorithm>
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

// make_feature_goldens.py's values: w(n, j) = 0.3 · sin(0.37 · j + 0.013 · s(n)).
reference::Weights golden_weights(const spec::Spec& s) {
  reference::Weights w = reference::random_weights(s, 7, 0.1f);  // the decoder's
  for (const spec::TensorSpec& t : spec::build_vision_manifest(s).tensors) {
    int64_t seed = 0;
    for (size_t i = 0; i < t.name.size(); ++i) seed += static_cast<int64_t>(i + 1) * static_cast<unsigned char>(t.name[i]);
    seed %= 1000;
    std::vector<float>& values = w.tensors[t.name];
    values.resize(static_cast<size_t>(t.elements()));
    for (size_t j = 0; j < values.size(); ++j)
      values[j] = static_cast<float>(0.3 * std::sin(0.37 * static_cast<double>(j) + 0.013 * static_cast<double>(seed)));
  }
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
