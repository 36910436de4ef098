// runtime/image/preprocess: PIL's resize to the byte, and the image
// processors' steps to the bit, against what PIL and numpy gave for the
// same inputs (tests/data/images/resize_goldens.txt and mllama_goldens.txt,
// written by make_resize_goldens.py beside them); and
// preprocessor_config.json read as the checkpoints write it, or refused
// naming the key.
#include <doctest/doctest.h>

#include <algorithm>
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

std::vector<std::vector<std::string>> goldens(const std::string& file = "resize_goldens.txt") {
  std::ifstream in(LATHE_SOURCE_DIR "/tests/data/images/" + file);
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

std::vector<float> floats_of(const std::string& hex) {
  const std::vector<uint8_t> bytes = unhex(hex);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

// Llama 3.2 Vision's preprocessor_config.json, as the checkpoints ship it.
constexpr const char* kLlamaVision = R"({
  "do_convert_rgb": true, "do_normalize": true, "do_pad": true, "do_rescale": true, "do_resize": true,
  "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_processor_type": "MllamaImageProcessor",
  "image_std": [0.26862954, 0.26130258, 0.27577711], "max_image_tiles": 4, "resample": 2,
  "rescale_factor": 0.00392156862745098, "size": {"height": 560, "width": 560}})";

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
    const std::vector<float> want = floats_of(row[5]);
    REQUIRE(want.size() == px.chw.size());
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
  // The published config's nulls (Python's None): false, as the processor tests them.
  const Preprocess published = config(R"({"image_processor_type": "Gemma3ImageProcessor", "do_convert_rgb": null,
      "do_normalize": true, "do_pan_and_scan": null, "do_rescale": true, "do_resize": true, "image_mean": [0.5, 0.5, 0.5],
      "image_seq_length": 256, "image_std": [0.5, 0.5, 0.5], "pan_and_scan_max_num_crops": null,
      "pan_and_scan_min_crop_size": null, "pan_and_scan_min_ratio_to_activate": null, "processor_class": "Gemma3Processor",
      "resample": 2, "rescale_factor": 0.00392156862745098, "size": {"height": 896, "width": 896}})");
  CHECK(resized_size(published, 640, 480) == std::array<int64_t, 2>{896, 896});
  CHECK(published.do_rescale);
  CHECK(published.do_normalize);
  const Preprocess pixtral = config(R"({"image_processor_type": "PixtralImageProcessor", "size": {"longest_edge": 1024},
                                        "patch_size": {"height": 16, "width": 16}})");
  CHECK(pixtral.convert_alpha_on_white);
  // 2000 × 1000: ratio 1.953125, 1024 × 512; 300 × 200 is not scaled up, only rounded to patches.
  CHECK(resized_size(pixtral, 2000, 1000) == std::array<int64_t, 2>{1024, 512});
  CHECK(resized_size(pixtral, 300, 200) == std::array<int64_t, 2>{304, 208});
  CHECK(resized_size(pixtral, 1030, 7) == std::array<int64_t, 2>{1024, 16});
  // 3000 × 2: the short side scaled to int(2 / 2.93) = 0, which Python's
  // (0 − 1) // 16 + 1 keeps at 0 patches: such an image is refused.
  CHECK(resized_size(pixtral, 3000, 2) == std::array<int64_t, 2>{1024, 0});
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
  refused(R"({"image_processor_type": "Idefics3ImageProcessor"})", "\"Idefics3ImageProcessor\" is not supported yet");
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


TEST_CASE("Mllama's tiles (canvas, fit, resize, pad, rescale, normalize, split) equal numpy's floats") {
  int cases = 0;
  for (const auto& row : goldens("mllama_goldens.txt")) {
    if (row[0] != "mllama") continue;
    const int64_t w = std::stoll(row[1]), h = std::stoll(row[2]);
    CAPTURE(w);
    CAPTURE(h);
    const Preprocess p = config(R"({"image_processor_type": "MllamaImageProcessor", "size": {"height": )" + row[3] +
                                R"(, "width": )" + row[3] + R"(}, "max_image_tiles": )" + row[4] +
                                R"(, "resample": )" + row[5] + R"(, "rescale_factor": 0.00392156862745098,
                                  "image_mean": [0.48145466, 0.4578275, 0.40821073],
                                  "image_std": [0.26862954, 0.26130258, 0.27577711]})");
    CHECK(resized_size(p, w, h) == std::array<int64_t, 2>{std::stoll(row[10]), std::stoll(row[11])});
    const Tiles t = preprocess_tiles(pattern(w, h), p);
    CHECK(t.rows == std::stoll(row[6]));
    CHECK(t.cols == std::stoll(row[7]));
    CHECK(t.aspect_ratio_id == std::stoll(row[8]));
    std::string mask;
    for (const int64_t m : t.aspect_ratio_mask) mask += std::to_string(m);
    CHECK(mask == row[9]);
    REQUIRE(t.tiles.size() == static_cast<size_t>(t.rows * t.cols));
    std::vector<float> got;
    for (const Pixels& tile : t.tiles) {
      CHECK(tile.width == p.width);
      CHECK(tile.height == p.height);
      got.insert(got.end(), tile.chw.begin(), tile.chw.end());
    }
    CHECK(got == floats_of(row[12]));  // bit for bit, padding included
    // preprocess() gives the same canvas whole.
    const Pixels whole = preprocess(pattern(w, h), p);
    CHECK(whole.width == t.cols * p.width);
    CHECK(whole.height == t.rows * p.height);
    ++cases;
  }
  CHECK(cases == 6);
}

TEST_CASE("Mllama's canvas choice and fit equal the processor's for sides around a tile") {
  int cases = 0;
  for (const auto& row : goldens("mllama_goldens.txt")) {
    if (row[0] != "canvas") continue;
    const int64_t max_tiles = std::stoll(row[1]), tile = std::stoll(row[2]);
    CAPTURE(max_tiles);
    CAPTURE(tile);
    for (size_t i = 3; i < row.size(); ++i) {
      // width,height:rows,cols,new_width,new_height
      std::string entry = row[i];
      std::replace(entry.begin(), entry.end(), ',', ' ');
      std::replace(entry.begin(), entry.end(), ':', ' ');
      std::istringstream fields(entry);
      int64_t w = 0, h = 0, rows = 0, cols = 0, nw = 0, nh = 0;
      REQUIRE(static_cast<bool>(fields >> w >> h >> rows >> cols >> nw >> nh));
      CAPTURE(row[i]);
      const AspectRatio canvas = optimal_canvas(w, h, max_tiles, tile);
      CHECK(canvas == AspectRatio{rows, cols});
      CHECK(fit_to_canvas(w, h, canvas, tile) == std::array<int64_t, 2>{nw, nh});
      ++cases;
    }
  }
  CHECK(cases == 800);
}

TEST_CASE("Mllama's supported aspect ratios, ids and mask") {
  const std::vector<AspectRatio> four = {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {2, 1}, {2, 2}, {3, 1}, {4, 1}};
  CHECK(supported_aspect_ratios(4) == four);
  CHECK(supported_aspect_ratios(1) == std::vector<AspectRatio>{{1, 1}});
  CHECK(supported_aspect_ratios(6).size() == 14);
  // Llama 3.2 Vision's tiles of 560: a 1000 × 600 photo goes on 2 × 2 of
  // them (the least upscaling, 1.12) and keeps its size, as it fits; a
  // 300 × 200 one on a single tile (1.87, which 2 × 1 ties with a larger
  // area), scaled up until its width fills it.
  const Preprocess p = config(kLlamaVision);
  CHECK(optimal_canvas(1000, 600, 4, 560) == AspectRatio{2, 2});
  CHECK(resized_size(p, 1000, 600) == std::array<int64_t, 2>{1000, 600});
  CHECK(optimal_canvas(300, 200, 4, 560) == AspectRatio{1, 1});
  CHECK(resized_size(p, 300, 200) == std::array<int64_t, 2>{560, 373});
  // A 40 × 10 image on tiles of 16: a row of 3 (the least upscaling, 1.2),
  // kept at its size, padded below and to the right.
  Preprocess small = p;
  small.height = small.width = 16;
  const Tiles t = preprocess_tiles(pattern(40, 10), small);
  CHECK(t.rows == 1);
  CHECK(t.cols == 3);
  CHECK(t.aspect_ratio_id == 3);
  CHECK(t.aspect_ratio_mask == std::vector<int64_t>{1, 1, 1, 0});
  // The padding below the image: zeros, rescaled and normalized.
  CHECK(resized_size(small, 40, 10) == std::array<int64_t, 2>{40, 10});
  const float pad_red = (0.0f - static_cast<float>(p.mean[0])) / static_cast<float>(p.std[0]);
  CHECK(t.tiles[0].chw[15 * 16] == pad_red);
  CHECK(t.tiles[2].chw[0 * 16 + 10] == pad_red);  // right of the image's 40 columns
  CHECK(t.tiles[2].chw[0 * 16 + 7] != pad_red);
}

TEST_CASE("Mllama's config: its keys read, and what it cannot honour refused naming the key") {
  const Preprocess p = config(kLlamaVision);
  CHECK(p.rule == SizeRule::Tiles);
  CHECK(p.height == 560);
  CHECK(p.width == 560);
  CHECK(p.max_tiles == 4);
  CHECK(p.resample == Resample::Bilinear);
  CHECK(p.convert_alpha_on_white);  // alpha_composite onto white: the same bytes as Pixtral's paste
  CHECK_FALSE(p.do_center_crop);
  CHECK(p.mean[2] == 0.40821073);
  const Preprocess defaults =
      config(R"({"image_processor_type": "MllamaImageProcessor", "size": {"height": 224, "width": 224}})");
  CHECK(defaults.max_tiles == 4);
  CHECK(defaults.resample == Resample::Bilinear);
  CHECK(defaults.mean == std::array<double, 3>{0.5, 0.5, 0.5});
  CHECK(defaults.rescale_factor == 1.0 / 255.0);

  const auto refused = [](const std::string& json, const std::string& what) {
    CAPTURE(json);
    try {
      config(R"({"image_processor_type": "MllamaImageProcessor", )" + json + "}");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find("preprocessor_config.json: " + what) == 0, e.what());
    }
  };
  const std::string tile = R"("size": {"height": 560, "width": 560})";
  refused(R"("max_image_tiles": 4)", "size is missing");
  refused(tile + R"(, "do_pad": false)", "do_pad must be true");
  refused(tile + R"(, "do_resize": false)", "do_resize must be true");
  refused(tile + R"(, "do_convert_rgb": false)", "do_convert_rgb false is not supported");
  refused(tile + R"(, "do_convert_rgb": 1)", "do_convert_rgb must be true or false");
  refused(tile + R"(, "max_image_tiles": 0)", "max_image_tiles must be an integer");
  refused(tile + R"(, "max_image_tiles": "4")", "max_image_tiles must be an integer");
  refused(R"("size": {"height": 560, "width": 448})", "size.height and size.width must be equal");
  refused(R"("size": {"shortest_edge": 560})", "size must hold height and width");
  refused(R"("size": 560)", "size must hold height and width");
  refused(R"("size": {"height": 0, "width": 0})", "size.height must be");
  refused(tile + R"(, "image_std": [0.5, 0.5])", "image_std must be three numbers");
}

TEST_CASE("Mllama: an image too thin to resize, and tiles of a processor that does not tile, are refused") {
  Preprocess p = config(kLlamaVision);
  p.height = p.width = 16;
  CHECK(resized_size(p, 100, 1) == std::array<int64_t, 2>{64, 0});
  CHECK_THROWS_WITH_AS(preprocess_tiles(pattern(100, 1), p),
                       "MllamaImageProcessor: an image of 100 × 1 would be resized to 64 × 0", Error);
  CHECK_THROWS_AS(optimal_canvas(0, 5, 4, 16), Error);
  const Preprocess clip = config(R"({"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 336}})");
  CHECK_THROWS_AS(preprocess_tiles(pattern(4, 4), clip), Error);
}

TEST_CASE("pad: the image at the top left, zeros below and to the right") {
  const Image im = pattern(5, 3);
  const Image padded = pad(im, 4, 7);
  CHECK(padded.width == 7);
  CHECK(padded.height == 4);
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t x = 0; x < 7; ++x)
      for (int c = 0; c < 3; ++c) CHECK(padded.at(x, y, c) == (x < 5 && y < 3 ? im.at(x, y, c) : 0));
  CHECK_THROWS_AS(pad(im, 2, 7), Error);
}

// A tower's input rows: row r · cols + c is patch (r, c), its values
// channel by channel, each the patch's rows: the patch embedding's weight
// order, as a convolution of stride patch reads them.
TEST_CASE("unfold_patches: the patches row by row, each in the convolution's order, after the lead rows") {
  const int64_t C = 2, H = 4, W = 6, P = 2;
  std::vector<float> pixels(static_cast<size_t>(C * H * W));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i);
  const std::vector<float> rows = unfold_patches(pixels, C, H, W, P, 1);
  const int64_t unfolded = C * P * P;
  REQUIRE(rows.size() == static_cast<size_t>((1 + (H / P) * (W / P)) * unfolded));
  for (int64_t i = 0; i < unfolded; ++i) CHECK(rows[static_cast<size_t>(i)] == 0.0f);  // the class row
  for (int64_t r = 0; r < H / P; ++r)
    for (int64_t c = 0; c < W / P; ++c)
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t y = 0; y < P; ++y)
          for (int64_t x = 0; x < P; ++x) {
            const size_t at = static_cast<size_t>((1 + r * (W / P) + c) * unfolded + (ch * P + y) * P + x);
            CHECK(rows[at] == pixels[static_cast<size_t>((ch * H + r * P + y) * W + c * P + x)]);
          }
  // Rows padded with zeros to a tower's input width.
  const std::vector<float> padded = unfold_patches(pixels, C, H, W, P, 0, unfolded + 4);
  REQUIRE(padded.size() == static_cast<size_t>((H / P) * (W / P) * (unfolded + 4)));
  for (int64_t p = 0; p < (H / P) * (W / P); ++p)
    for (int64_t i = 0; i < unfolded + 4; ++i)
      CHECK(padded[static_cast<size_t>(p * (unfolded + 4) + i)] ==
            (i < unfolded ? rows[static_cast<size_t>((1 + p) * unfolded + i)] : 0.0f));
  CHECK_THROWS_AS(unfold_patches(pixels, C, H, W, P, 0, unfolded - 1), Error);  // narrower than a patch
  CHECK_THROWS_AS(unfold_patches(pixels, C, H, W, 4), Error);         // 6 is not whole patches of 4
  CHECK_THROWS_AS(unfold_patches(pixels, C, H, W + 2, P), Error);     // a size that does not match
}

}  // TEST_SUITE
