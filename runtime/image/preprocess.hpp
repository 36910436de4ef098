// An image made into a vision tower's input, as a checkpoint's
// preprocessor_config.json says: Hugging Face's image processors of the
// PIL kind (CLIPImageProcessor, SiglipImageProcessor, Gemma3ImageProcessor,
// PixtralImageProcessor, MllamaImageProcessor's tiles), step for step. Resizing is PIL's Image.resize,
// which those processors call, reproduced to the byte (its fixed-point
// separable filters); rescaling and normalizing are numpy's float32
// arithmetic in the same order. The processors' "fast" (torchvision)
// variants resize differently and are not what this follows.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
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
  Tiles,         // size {"height", "width"} is a square tile: fitted to the best canvas of up to
                 // max_tiles tiles (optimal_canvas, fit_to_canvas), then padded to it (Mllama)
};

struct Preprocess {
  std::string processor;  // image_processor_type, for messages
  bool convert_alpha_on_white = false;  // transparent pixels on white (Pixtral, Mllama), else alpha is dropped
  bool do_resize = true;
  SizeRule rule = SizeRule::Fixed;
  int64_t height = 0, width = 0;  // Fixed; Tiles: the tile
  int64_t edge = 0;               // ShortestEdge, LongestEdge
  int64_t patch_height = 0, patch_width = 0;  // LongestEdge: the patch the sides round up to
  int64_t max_tiles = 0;                      // Tiles: max_image_tiles
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
// supported yet (Gemma 3's pan and scan) and malformed JSON.
Preprocess read_preprocessor_config(const std::filesystem::path& path);
Preprocess parse_preprocessor_config(const std::string& json, const std::string& name);

// The (width, height) an image of `width` × `height` is resized to.
std::array<int64_t, 2> resized_size(const Preprocess& p, int64_t width, int64_t height);

// A preprocessed image's patches as a vision tower's input rows: `pixels`
// [channels][height][width] (preprocess's output) cut into patch × patch
// squares row by row, each unfolded in the order of the patch embedding's
// weight [hidden][channels][patch][patch]: [rows · cols][row_floats], each
// row's channels · patch² values then zeros up to row_floats (the tower's
// plan.input_row_floats: whole texels of the weight's rows; 0: no
// padding), after `lead` rows of zeros (a class token's row). Throws
// Error(InvalidArgument) for sides that are not whole patches, a size that
// does not match or rows narrower than a patch.
std::vector<float> unfold_patches(std::span<const float> pixels, int64_t channels, int64_t height, int64_t width,
                                  int64_t patch, int64_t lead = 0, int64_t row_floats = 0);

// Mllama's canvas, in tiles (what its processor calls an aspect ratio).
struct AspectRatio {
  int64_t rows = 0, cols = 0;
  friend bool operator==(const AspectRatio&, const AspectRatio&) = default;
};

// get_all_supported_aspect_ratios: every canvas of at most `max_tiles`
// tiles, rows 1, 2, … outer, columns inner. An aspect ratio's id is its
// index here plus 1.
std::vector<AspectRatio> supported_aspect_ratios(int64_t max_tiles);

// get_optimal_tiled_canvas for an image of `width` × `height` and square
// tiles of `tile`: of the supported canvases, each scaling the image by the
// lesser of its two ratios (canvas / image, in double), the one of the least
// scale of at least 1 (the least upscaling); where none is, the one of the
// greatest scale (the least downscaling); of several at that scale, the
// first of the least area. Throws lathe::Error for an empty image.
AspectRatio optimal_canvas(int64_t width, int64_t height, int64_t max_tiles, int64_t tile);

// get_image_size_fit_to_canvas: the (width, height) the image is resized to
// on `canvas`. Each side is first clamped to [tile, the canvas's side]; the
// side of the lesser ratio takes its clamped value and the other follows in
// proportion (floored), at most its own clamped value. A side within those
// bounds is kept: an image that fits is not scaled. A very thin image may
// get a side of 0, which preprocess() refuses (as PIL refuses it).
std::array<int64_t, 2> fit_to_canvas(int64_t width, int64_t height, AspectRatio canvas, int64_t tile);

// PIL's Image.resize(…, resample) of an RGB image (reducing_gap None).
Image resize(const Image& in, int64_t width, int64_t height, Resample resample);

// Hugging Face's center_crop: the middle `height` × `width`, with zeros
// where the image is smaller (placed as it places them).
Image center_crop(const Image& in, int64_t height, int64_t width);

// Hugging Face's pad as Mllama's processor calls it: the image at the top
// left of `height` × `width` (no smaller than it), zeros below and right.
Image pad(const Image& in, int64_t height, int64_t width);

// The tower's input: [3][height][width] f32, channels first.
struct Pixels {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<float> chw;
};

// Every step in order: alpha, resize, crop, pad, rescale, normalize. For
// SizeRule::Tiles the output is the whole canvas, padding included (its
// zeros rescaled and normalized as the image's pixels are, so −mean / std).
Pixels preprocess(const Image& image, const Preprocess& p);

// Mllama's input for one image: preprocess()'s canvas split into its tiles,
// and what the tower is told about them.
struct Tiles {
  int64_t rows = 0, cols = 0;   // the canvas, in tiles
  int64_t aspect_ratio_id = 0;  // aspect_ratio_ids: 1 + the canvas's index in supported_aspect_ratios
  // aspect_ratio_mask: max_tiles entries, 1 for each of the rows · cols real
  // tiles, then 0. The tower's pixel_values hold max_tiles tiles, zeros (not
  // normalized) past the real ones.
  std::vector<int64_t> aspect_ratio_mask;
  std::vector<Pixels> tiles;  // rows · cols, row by row (split_to_tiles's order), each [3][tile][tile]
};

// Every step of preprocess(), then split_to_tiles. Throws lathe::Error
// (InvalidArgument) for a processor that does not tile (not SizeRule::Tiles)
// and for an image too thin to resize.
Tiles preprocess_tiles(const Image& image, const Preprocess& p);

}  // namespace lathe::image
