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

// One image's rows for the decoder, [link.features][hidden of the decoder]:
// `image` (decoded; image::load) preprocessed as `p` says, its patches
// unfolded as the tower's plan reads them, through `tower` (a session of
// vision_info()), the rows before the features dropped. `name` is the
// image's, for messages. Throws Error(InvalidArgument) naming it when the
// processor does not give the tower's square.
std::vector<float> encode_image(Session& tower, const plan::VisionLink& link, const image::Preprocess& p,
                                const image::Image& image, const std::string& name);

// A prompt whose image rows take features (Session::prefill with them).
struct SplicedPrompt {
  std::vector<int32_t> ids;
  std::vector<int64_t> at;      // the rows of ids that take features, increasing
  std::vector<float> features;  // [at.size()][hidden]
};

// `ids` with each marker token (link.marker) replaced by the rows of the
// next of `images` (each [link.features][hidden]): link.features tokens of
// link.image_token (the marker where −1), as the checkpoint's processor
// expands it. Throws Error(InvalidArgument) when the markers and the images
// are not as many, saying both counts.
SplicedPrompt splice_images(const plan::VisionLink& link, std::span<const int32_t> ids,
                            std::span<const std::vector<float>> images, int64_t hidden);

}  // namespace lathe::text
