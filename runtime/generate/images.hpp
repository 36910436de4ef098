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

// One image as the tower's input rows, on the host: `image` (decoded;
// image::load) preprocessed as `p` says and its patches unfolded as the
// tower's plan reads them ([rows][row_floats]: the tower's
// plan.input_row_floats). `name` is the image's, for messages. Throws
// Error(InvalidArgument) naming it when the processor does not give the
// tower's square.
std::vector<float> image_input(const plan::VisionLink& link, const image::Preprocess& p, const image::Image& image,
                               int64_t row_floats, const std::string& name);

// One image's rows for the decoder, [link.features][hidden of the decoder]:
// its input (image_input) through `tower` (a session of vision_info()), the
// rows before the features dropped (a class token's), and those after them
// (a pooled projector's zeros).
std::vector<float> image_features(Session& tower, const plan::VisionLink& link, std::span<const float> input);

// Both: a decoded image's features.
std::vector<float> encode_image(Session& tower, const plan::VisionLink& link, const image::Preprocess& p,
                                const image::Image& image, const std::string& name);

// The image markers (link.marker) among `ids`.
size_t count_markers(const plan::VisionLink& link, std::span<const int32_t> ids);

// `ids` with each marker expanded into the rows an image's features fill:
// link.features tokens of link.image_token (the marker where −1), between
// link.prefix and link.suffix, as the checkpoint's processor expands it.
struct ExpandedPrompt {
  std::vector<int32_t> ids;
  // The rows that take features, increasing: marker i's are
  // at[i · link.features, (i + 1) · link.features).
  std::vector<int64_t> at;
};
// Throws Error(InvalidArgument) when the markers are not `images`, saying
// both counts.
ExpandedPrompt expand_markers(const plan::VisionLink& link, std::span<const int32_t> ids, size_t images);

// A prompt whose image rows take features (Session::prefill with them).
struct SplicedPrompt {
  std::vector<int32_t> ids;
  std::vector<int64_t> at;      // the rows of ids that take features, increasing
  std::vector<float> features;  // [at.size()][hidden]
};

// expand_markers, each marker's rows taking the next of `images` (each
// [link.features][hidden]). Throws Error(InvalidArgument) as it does, and
// for an image of another size.
SplicedPrompt splice_images(const plan::VisionLink& link, std::span<const int32_t> ids,
                            std::span<const std::vector<float>> images, int64_t hidden);

}  // namespace lathe::text
