#include "runtime/generate/images.hpp"

#include "runtime/error.hpp"

namespace lathe::text {

std::vector<float> image_input(const plan::VisionLink& link, const image::Preprocess& p, const image::Image& image,
                               int64_t row_floats, const std::string& name) {
  const image::Pixels pixels = image::preprocess(image, p);
  if (pixels.height != link.image_size || pixels.width != link.image_size)
    throw Error(ErrorKind::InvalidArgument,
                name + ": the image processor (" + p.processor + ") gives " + std::to_string(pixels.width) + " × " +
                    std::to_string(pixels.height) + " pixels; the vision tower takes " + std::to_string(link.image_size) +
                    "² (the checkpoint's preprocessor_config.json and its spec disagree)");
  return image::unfold_patches(pixels.chw, link.channels, pixels.height, pixels.width, link.patch, link.class_rows,
                               row_floats);
}

std::vector<float> image_features(Session& tower, const plan::VisionLink& link, std::span<const float> input) {
  const int64_t row_floats = tower.model().plan.input_row_floats;
  if (row_floats <= 0 || input.size() % static_cast<size_t>(row_floats) != 0)
    throw Error(ErrorKind::InvalidArgument, std::to_string(input.size()) + " input values are not rows of " +
                                                std::to_string(row_floats) + " (the tower's input)");
  const int64_t rows = static_cast<int64_t>(input.size()) / row_floats;
  std::vector<float> out = tower.encode_rows(input, rows);
  const size_t width = static_cast<size_t>(tower.model().output_width);
  const size_t skip = static_cast<size_t>(link.skip_rows) * width, features = static_cast<size_t>(link.features) * width;
  if (out.size() < skip + features)
    throw Error(ErrorKind::InvalidArgument, "the vision tower gave " + std::to_string(out.size() / width) + " rows for the " +
                                                std::to_string(link.skip_rows + link.features) + " an image reads");
  return std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(skip),
                            out.begin() + static_cast<std::ptrdiff_t>(skip + features));
}

std::vector<float> encode_image(Session& tower, const plan::VisionLink& link, const image::Preprocess& p,
                                const image::Image& image, const std::string& name) {
  return image_features(tower, link, image_input(link, p, image, tower.model().plan.input_row_floats, name));
}

size_t count_markers(const plan::VisionLink& link, std::span<const int32_t> ids) {
  size_t markers = 0;
  for (int32_t id : ids) markers += id == link.marker ? 1 : 0;
  return markers;
}

ExpandedPrompt expand_markers(const plan::VisionLink& link, std::span<const int32_t> ids, size_t images) {
  const size_t markers = count_markers(link, ids);
  if (markers != images)
    throw Error(ErrorKind::InvalidArgument,
                "the prompt holds " + std::to_string(markers) + " image marker(s) (token " + std::to_string(link.marker) +
                    ") for " + std::to_string(images) + " image(s): each image goes where a marker is");
  const int32_t token = static_cast<int32_t>(link.image_token >= 0 ? link.image_token : link.marker);
  ExpandedPrompt out;
  out.ids.reserve(ids.size() + markers * static_cast<size_t>(link.expanded_rows()));
  for (int32_t id : ids) {
    if (id != link.marker) {
      out.ids.push_back(id);
      continue;
    }
    out.ids.insert(out.ids.end(), link.prefix.begin(), link.prefix.end());
    for (int64_t r = 0; r < link.features; ++r) {
      out.at.push_back(static_cast<int64_t>(out.ids.size()));
      out.ids.push_back(token);
    }
    out.ids.insert(out.ids.end(), link.suffix.begin(), link.suffix.end());
  }
  return out;
}

SplicedPrompt splice_images(const plan::VisionLink& link, std::span<const int32_t> ids,
                            std::span<const std::vector<float>> images, int64_t hidden) {
  ExpandedPrompt expanded = expand_markers(link, ids, images.size());
  const size_t width = static_cast<size_t>(hidden), rows = static_cast<size_t>(link.features);
  SplicedPrompt out{std::move(expanded.ids), std::move(expanded.at), {}};
  out.features.reserve(images.size() * rows * width);
  for (size_t i = 0; i < images.size(); ++i) {
    if (images[i].size() != rows * width)
      throw Error(ErrorKind::InvalidArgument, "image " + std::to_string(i + 1) + ": " + std::to_string(images[i].size()) +
                                                  " feature values, not " + std::to_string(rows) + " rows of " +
                                                  std::to_string(width));
    out.features.insert(out.features.end(), images[i].begin(), images[i].end());
  }
  return out;
}

}  // namespace lathe::text
