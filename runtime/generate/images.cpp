#include "runtime/generate/images.hpp"

#include "runtime/error.hpp"

namespace lathe::text {

std::vector<float> encode_image(Session& tower, const plan::VisionLink& link, const image::Preprocess& p,
                                const image::Image& image, const std::string& name) {
  const image::Pixels pixels = image::preprocess(image, p);
  if (pixels.height != link.image_size || pixels.width != link.image_size)
    throw Error(ErrorKind::InvalidArgument,
                name + ": the image processor (" + p.processor + ") gives " + std::to_string(pixels.width) + " × " +
                    std::to_string(pixels.height) + " pixels; the vision tower takes " + std::to_string(link.image_size) +
                    "² (the checkpoint's preprocessor_config.json and its spec disagree)");
  const std::vector<float> input =
      image::unfold_patches(pixels.chw, link.channels, pixels.height, pixels.width, link.patch, link.class_rows,
                            tower.model().plan.input_row_floats);
  const int64_t rows = static_cast<int64_t>(input.size()) / tower.model().plan.input_row_floats;
  std::vector<float> out = tower.encode_rows(input, rows);
  const size_t width = static_cast<size_t>(tower.model().output_width);
  out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(link.skip_rows) * width));
  if (out.size() != static_cast<size_t>(link.features) * width)
    throw Error(ErrorKind::InvalidArgument, name + ": the vision tower gave " + std::to_string(out.size() / width) +
                                                " rows for the " + std::to_string(link.features) + " an image fills");
  return out;
}

SplicedPrompt splice_images(const plan::VisionLink& link, std::span<const int32_t> ids,
                            std::span<const std::vector<float>> images, int64_t hidden) {
  size_t markers = 0;
  for (int32_t id : ids) markers += id == link.marker ? 1 : 0;
  if (markers != images.size())
    throw Error(ErrorKind::InvalidArgument,
                "the prompt holds " + std::to_string(markers) + " image marker(s) (token " + std::to_string(link.marker) +
                    ") for " + std::to_string(images.size()) + " image(s): each image goes where a marker is");
  const size_t width = static_cast<size_t>(hidden), rows = static_cast<size_t>(link.features);
  const int32_t token = static_cast<int32_t>(link.image_token >= 0 ? link.image_token : link.marker);
  SplicedPrompt out;
  size_t next = 0;
  for (int32_t id : ids) {
    if (id != link.marker) {
      out.ids.push_back(id);
      continue;
    }
    const std::vector<float>& f = images[next++];
    if (f.size() != rows * width)
      throw Error(ErrorKind::InvalidArgument, "image " + std::to_string(next) + ": " + std::to_string(f.size()) +
                                                  " feature values, not " + std::to_string(rows) + " rows of " +
                                                  std::to_string(width));
    for (size_t r = 0; r < rows; ++r) {
      out.at.push_back(static_cast<int64_t>(out.ids.size()));
      out.ids.push_back(token);
    }
    out.features.insert(out.features.end(), f.begin(), f.end());
  }
  return out;
}

}  // namespace lathe::text
