// Images into a prompt, on the host: a file through the checkpoint's image
// processor and the vision tower's build into its feature rows, and a
// prompt's image markers expanded into the rows those features fill
// (docs/images.md). The model executable's --image and the server's image
// parts use this.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "runtime/image/preprocess.hpp"
#include "runtime/model/session.hpp"

namespace lathe::text {

// One image as the vision tower takes it.
struct ImageInput {
  std::vector<float> rows;      // [patches][row_floats]: its patches unfolded, in the tower's order
  std::vector<int32_t> tokens;  // each row's IO token (2D RoPE: its patch's row · grid + column); empty: zeros
  plan::ImageGrid grid;         // the features it gives the decoder
  // A tiled tower's (Llama 3.2 Vision): the image's own tiles, and their
  // rows, which come first (Session::encode_rows's `own`). 0: not tiled.
  int64_t tiles = 0, own = 0;
  bool operator==(const ImageInput&) const = default;
};

// An image preprocessed ([channels][height][width], preprocess's output)
// as the tower's input rows, each `row_floats` wide (the tower's
// plan.input_row_floats): a class token's zero rows first; its patches
// row-major, or, where the link merges patches, block by block (each
// block's patches row-major, the blocks row-major, then the patches of an
// odd last row or column). Throws Error(InvalidArgument), naming `name`,
// for a size the tower does not take.
ImageInput tower_input(const plan::VisionLink& link, std::span<const float> pixels, int64_t height, int64_t width,
                       int64_t row_floats, const std::string& name);

// A tiled tower's image (Llama 3.2 Vision): `tiles` ([channels][image_size]²
// each, image::Tiles's order) of an image of aspect ratio id
// `aspect_ratio_id`, as the tower's pass: every tile's class row (zeros) and
// patches, the link's tiles past the image's zeros, then the padding rows
// (zeros); each row's token the aspect ratio id. Its grid is the link's
// tiles' rows, every tile's (the decoder's cross-attention keys of it).
// Throws Error(InvalidArgument), naming `name`, for tiles the tower does not take.
ImageInput tiles_input(const plan::VisionLink& link, std::span<const image::Pixels> tiles, int64_t aspect_ratio_id,
                       int64_t row_floats, const std::string& name);

// One image as the tower's input: `image` (decoded; image::load)
// preprocessed as `p` says, then tower_input. Throws Error(InvalidArgument)
// naming it when the processor gives a size the tower does not take.
ImageInput image_input(const plan::VisionLink& link, const image::Preprocess& p, const image::Image& image,
                       int64_t row_floats, const std::string& name);

// One image's rows for the decoder: values [grid.count()][hidden of the
// decoder], the grid they make.
struct ImageFeatures {
  std::vector<float> values;
  plan::ImageGrid grid;
  int64_t tiles = 0;  // a tiled tower's: the image's own tiles (Session::images)
};

// An image's input through `tower` (a session of vision_info()), the rows
// before the features dropped (a class token's), and those after them (a
// pooled projector's zeros, the merger's leftovers).
ImageFeatures image_features(Session& tower, const plan::VisionLink& link, const ImageInput& input);

// Both: a decoded image's features.
ImageFeatures encode_image(Session& tower, const plan::VisionLink& link, const image::Preprocess& p,
                           const image::Image& image, const std::string& name);

// The image markers (link.marker) among `ids`.
size_t count_markers(const plan::VisionLink& link, std::span<const int32_t> ids);

// `ids` with each marker expanded into the rows its image's features fill,
// as the checkpoint's processor expands it: link.prefix; each row of the
// image's grid, grid.cols tokens of link.image_token (the marker where −1)
// followed by link.row_end where there is one (the last row's replaced by
// link.end where there is one); link.suffix.
struct ExpandedPrompt {
  std::vector<int32_t> ids;
  // The rows that take features, increasing: image i's are
  // at[starts[i], starts[i + 1]).
  std::vector<int64_t> at;
  std::vector<size_t> starts;
  // The rows of the tokens `ids` held (all but the markers), increasing.
  std::vector<int64_t> own;
};
// Throws Error(InvalidArgument) when the markers are not as many as
// `grids`, saying both counts.
ExpandedPrompt expand_markers(const plan::VisionLink& link, std::span<const int32_t> ids,
                              std::span<const plan::ImageGrid> grids);
// … `images` of a fixed-size link (link.grid_of: each the same).
ExpandedPrompt expand_markers(const plan::VisionLink& link, std::span<const int32_t> ids, size_t images);

// A prompt whose image rows take features (Session::prefill with them).
struct SplicedPrompt {
  std::vector<int32_t> ids;
  std::vector<int64_t> at;      // the rows of ids that take features, increasing
  std::vector<float> features;  // [at.size()][hidden]
  std::vector<int64_t> own;     // the rows of the prompt's own tokens (ExpandedPrompt::own)
};

// expand_markers, each marker's rows taking the next of `images`. Throws
// Error(InvalidArgument) as it does, and for an image whose values are not
// its grid's rows of `hidden`.
SplicedPrompt splice_images(const plan::VisionLink& link, std::span<const int32_t> ids,
                            std::span<const ImageFeatures> images, int64_t hidden);

// An image cross-attention decoder (Llama 3.2 Vision, link.cross): the
// images' features into the sequence's cross-attention caches
// (Session::images), the prompt's markers staying where they are. Throws
// Error(InvalidArgument) when the prompt's markers are not as many as the
// images, saying both counts, before anything runs.
void cross_images(Session& session, const plan::VisionLink& link, int64_t sequence, std::span<const int32_t> ids,
                  std::span<const ImageFeatures> images);

}  // namespace lathe::text
