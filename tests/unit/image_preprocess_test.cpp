// runtime/image/preprocess: PIL's resize to the byte, and the image
// processors' steps to the bit, against what PIL and numpy gave for the
// same inputs (tests/data/images/resize_goldens.txt, written by
// make_resize_goldens.py beside it); and preprocessor_config.json read as
// the checkpoints write it, or refused naming the key.
#include <doctest/doctest.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/image/preprocess.hpp"

using namespace lathe;
using namespace lathe::image;

namespace {

// The goldens' input: value(x, y, c) = (37x + 91y + 53c + 11 · (xy mod 17)) mod 256.
Image pattern(int64_t w, int64_t h) {
  Image im;
  im.width = w;
  im.height = h;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c)
        im.rgb.push_back(static_cast<uint8_t>((37 * x + 91 * y + 53 * c + 11 * ((x * y) % 17)) % 256));
  return im;
}

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<std::vector<std::string>> goldens() {
  std::ifstream in(LATHE_SOURCE_DIR "/tests/data/images/resize_goldens.txt");
  REQUIRE(in);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    rows.push_back(row);
  }
  return rows;
}

Preprocess config(const std::string& json) { return parse_preprocessor_config(json, "preprocessor_config.json"); }

}  // namespace

TEST_SUITE("image") {

TEST_CASE("resize: every PIL filter, down and up, equals PIL's bytes") {
  const std::map<std::string, Resample> filters = {{"nearest", Resample::Nearest}, {"lanczos", Resample::Lanczos},
                                                   {"bilinear", Resample::Bilinear}, {"bicubic", Resample::Bicubic},
                                                   {"box", Resample::Box},         {"hamming", Resample::Hamming}};
  int cases = 0;
  for (const auto& row : goldens()) {
    if (row[0] != "resize") continue;
    CAPTURE(row[1]);
    const int64_t wi = std::stoll(row[2]), hi = std::stoll(row[3]), wo = std::stoll(row[4]), ho = std::stoll(row[5]);
    CAPTURE(wi);
    CAPTURE(hi);
    CAPTURE(wo);
    CAPTURE(ho);
    const Image out = resize(pattern(wi, hi), wo, ho, filters.at(row[1]));
    CHECK(out.width == wo);
    CHECK(out.height == ho);
    CHECK(out.rgb == unhex(row[6]));
    ++cases;
  }
  CHECK(cases == 30);
}

TEST_CASE("CLIP's steps (shortest edge, bicubic, center crop with padding, rescale, normalize) equal numpy's floats") {
  const Preprocess p = config(R"({"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 12},
                                  "crop_size": {"height": 12, "width": 12}, "resample": 3,
                                  "rescale_factor": 0.00392156862745098, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                                  "image_std": [0.26862954, 0.26130258, 0.27577711]})");
  int cases = 0;
  for (const auto& row : goldens()) {
    if (row[0] != "clip") continue;
    Preprocess q = p;
    q.edge = std::stoll(row[3]);
    q.crop_height = q.crop_width = std::stoll(row[4]);
    const Pixels px = preprocess(pattern(std::stoll(row[1]), std::stoll(row[2])), q);
    CHECK(px.width == q.crop_width);
    CHECK(px.height == q.crop_height);
    const std::vector<uint8_t> bytes = unhex(row[5]);
    REQUIRE(bytes.size() == px.chw.size() * 4);
    std::vector<float> want(px.chw.size());
    std::memcpy(want.data(), bytes.data(), bytes.size());
    CHECK(px.chw == want);  // bit for bit
    ++cases;
  }
  CHECK(cases == 2);
}

TEST_CASE("Pixtral's transparent pixels go onto white as PIL's paste puts them") {
  int cases = 0;
  for (const auto& row : goldens()) {
    if (row[0] != "on_white") continue;
    const int64_t w = std::stoll(row[1]), h = std::stoll(row[2]);
    Image im = pattern(w, h);
    for (int64_t i = 0; i < w * h; ++i) im.alpha.push_back(static_cast<uint8_t>((i * 29) % 256));
    Preprocess p = config(R"({"image_processor_type": "PixtralImageProcessor", "size": {"longest_edge": 1024},
                              "do_rescale": false, "do_normalize": false})");
    const Pixels px = preprocess(im, p);  // no resize: sides of whole patches of 16
    const std::vector<uint8_t> want = unhex(row[3]);
    REQUIRE(px.width == ((w - 1) / 16 + 1) * 16);
    // The image's own pixels (the resize to whole patches is PIL's, checked above).
    const Pixels same = preprocess(im, [&] {
      Preprocess q = p;
      q.do_resize = false;
      return q;
    }());
    std::vector<uint8_t> got;
    for (int64_t i = 0; i < w * h; ++i)
      for (int64_t c = 0; c < 3; ++c) got.push_back(static_cast<uint8_t>(same.chw[static_cast<size_t>(c * w * h + i)]));
    CHECK(got == want);
    ++cases;
  }
  CHECK(cases == 2);
}

TEST_CASE("output sizes: shortest edge, fixed, longest edge in whole patches") {
  const Preprocess clip = config(R"({"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 336}})");
  CHECK(resized_size(clip, 640, 480) == std::array<int64_t, 2>{448, 336});
  CHECK(resized_size(clip, 480, 641) == std::array<int64_t, 2>{336, 448});  // int(336 · 641 / 480) = 448
  CHECK(clip.do_center_crop);
  CHECK(clip.crop_height == 224);  // the processor's default crop
  const Preprocess gemma = config(R"({"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 896, "width": 896},
                                      "resample": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]})");
  CHECK(resized_size(gemma, 640, 480) == std::array<int64_t, 2>{896, 896});
  CHECK(gemma.resample == Resample::Bilinear);
  CHECK_FALSE(gemma.do_center_crop);
  const Preprocess pixtral = config(R"({"image_processor_type": "PixtralImageProcessor", "size": {"longest_edge": 1024},
                                        "patch_size": {"height": 16, "width": 16}})");
  CHECK(pixtral.convert_alpha_on_white);
  // 2000 × 1000: ratio 1.953125, 1024 × 512; 300 × 200 is not scaled up, only rounded to patches.
  CHECK(resized_size(pixtral, 2000, 1000) == std::array<int64_t, 2>{1024, 512});
  CHECK(resized_size(pixtral, 300, 200) == std::array<int64_t, 2>{304, 208});
  CHECK(resized_size(pixtral, 1030, 7) == std::array<int64_t, 2>{1024, 16});
  const Preprocess old = config(R"({"image_processor_type": "CLIPImageProcessor", "size": 224, "crop_size": 224})");
  CHECK(old.rule == SizeRule::ShortestEdge);
  CHECK(old.crop_width == 224);
}

TEST_CASE("a preprocessor config out of range or not supported yet is refused naming the key") {
  const auto refused = [](const std::string& json, const std::string& what) {
    CAPTURE(json);
    try {
      config(json);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find("preprocessor_config.json: ") == 0, e.what());
      CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  refused("{", "not JSON");
  refused("[1]", "not a JSON object");
  refused(R"({"image_processor_type": "MllamaImageProcessor"})", "\"MllamaImageProcessor\" is not supported yet");
  refused(R"({"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 896, "width": 896}, "do_pan_and_scan": true})",
          "do_pan_and_scan");
  refused(R"({"image_processor_type": "CLIPImageProcessor"})", "size is missing");
  refused(R"({"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 0}})", "size.shortest_edge");
  refused(R"({"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 336}, "resample": 9})", "resample");
  refused(R"({"image_processor_type": "CLIPImageProcessor", "size": {"longest_edge": 336}})", "longest_edge");
  refused(R"({"image_processor_type": "SiglipImageProcessor", "size": {"height": 224, "width": 224},
              "image_std": [0.5, 0, 0.5]})", "image_std");
  refused(R"({"image_processor_type": "SiglipImageProcessor", "size": {"height": 224, "width": 224},
              "image_mean": [0.5, 0.5]})", "image_mean");
  refused(R"({"image_processor_type": "SiglipImageProcessor", "size": {"height": 224, "width": 224},
              "do_rescale": "yes"})", "do_rescale");
  CHECK_THROWS_AS(read_preprocessor_config("/nonexistent/preprocessor_config.json"), Error);
}

TEST_CASE("center crop: the middle, and zeros around an image smaller than the crop") {
  const Image im = pattern(5, 3);
  const Image middle = center_crop(im, 1, 3);
  CHECK(middle.rgb == std::vector<uint8_t>(im.rgb.begin() + (5 + 1) * 3, im.rgb.begin() + (5 + 4) * 3));
  const Image padded = center_crop(im, 6, 5);  // HF: 3 rows of padding, 2 before
  CHECK(padded.height == 6);
  for (int64_t x = 0; x < 5; ++x) {
    CHECK(padded.at(x, 0, 0) == 0);
    CHECK(padded.at(x, 2, 1) == im.at(x, 0, 1));
    CHECK(padded.at(x, 4, 2) == im.at(x, 2, 2));
    CHECK(padded.at(x, 5, 0) == 0);
  }
}

}  // TEST_SUITE
