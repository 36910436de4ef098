// An image made into a vision tower's input, as a checkpoint's
// preprocessor_config.json says: Hugging Face's image processors of the
// PIL kind (CLIPImageProcessor, SiglipImageProcessor, Gemma3ImageProcessor,
// PixtralImageProcessor), step for step. Resizing is PIL's Image.resize,
// which those processors call, reproduced to the byte (its fixed-point
// separable filters); rescaling and normalizing are numpy's float32
// arithmetic in the same order. The processors' "fast" (torchvision)
// variants resize differently and are not what this follows.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/image/image.hpp"

namespace lathe::image {

// PIL's resampling filters, numbered as PIL numbers them (and so
// preprocessor_config.json's "resample").
enum class Resample : uint8_t { Nearest = 0, Lanczos = 1, Bilinear = 2, Bicubic = 3, Box = 4, Hamming = 5 };

// How the output size follows from the image's.
enum class SizeRule : uint8_t {
  Fixed,         // size {"height", "width"}: exactly that
  ShortestEdge,  // size {"shortest_edge"}: the shorter side to it, the longer in proportion (truncated)
  LongestEdge,   // size {"longest_edge"}: scaled down (never up) until both sides fit, then each
                 // rounded up to a whole number of patches (Pixtral)
};

struct Preprocess {
  std::string processor;  // image_processor_type, for messages
  bool convert_alpha_on_white = false;  // transparent pixels on white (Pixtral), else alpha is dropped
  bool do_resize = true;
  SizeRule rule = SizeRule::Fixed;
  int64_t height = 0, width = 0;  // Fixed
  int64_t edge = 0;               // ShortestEdge, LongestEdge
  int64_t patch_height = 0, patch_width = 0;  // LongestEdge: the patch the sides round up to
  Resample resample = Resample::Bicubic;
  bool do_center_crop = false;
  int64_t crop_height = 0, crop_width = 0;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<double, 3> mean{0.5, 0.5, 0.5};
  std::array<double, 3> std{0.5, 0.5, 0.5};
};

// A checkpoint's preprocessor_config.json. Throws lathe::Error naming the
// file and key for a value out of range, a processor or option not
// supported yet (Mllama's tiles, Gemma 3's pan and scan) and malformed JSON.
Preprocess read_preprocessor_config(const std::filesystem::path& path);
Preprocess parse_preprocessor_config(const std::string& json, const std::string& name);

// The (width, height) an image of `width` × `height` is resized to.
std::array<int64_t, 2> resized_size(const Preprocess& p, int64_t width, int64_t height);

// PIL's Image.resize(…, resample) of an RGB image (reducing_gap None).
Image resize(const Image& in, int64_t width, int64_t height, Resample resample);

// Hugging Face's center_crop: the middle `height` × `width`, with zeros
// where the image is smaller (placed as it places them).
Image center_crop(const Image& in, int64_t height, int64_t width);

// The tower's input: [3][height][width] f32, channels first.
struct Pixels {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<float> chw;
};

// Every step in order: alpha, resize, crop, rescale, normalize.
Pixels preprocess(const Image& image, const Preprocess& p);

}  // namespace lathe::image
