#include "runtime/generate/images.hpp"

#include <algorithm>
#include <utility>

#include "runtime/error.hpp"

namespace lathe::text {

namespace {

std::string sides(int64_t width, int64_t height) { return std::to_string(width) + " × " + std::to_string(height); }

// Why the tower does not take an image of height × width pixels ("": it does).
std::string size_refusal(const plan::VisionLink& link, int64_t height, int64_t width) {
  if (!link.variable)
    return height == link.image_size && width == link.image_size
               ? ""
               : "the vision tower takes " + std::to_string(link.image_size) + "²";
  const int64_t least = link.patch * link.merge;
  const bool fits = height <= link.image_size && width <= link.image_size && height % link.patch == 0 &&
                    width % link.patch == 0 && height >= least && width >= least;
  return fits ? ""
              : "the vision tower takes sides of whole patches of " + std::to_string(link.patch) + ", from " +
                    std::to_string(least) + " to " + std::to_string(link.image_size);
}

}  // namespace

ImageInput tower_input(const plan::VisionLink& link, std::span<const float> pixels, int64_t height, int64_t width,
                       int64_t row_floats, const std::string& name) {
  if (const std::string why = size_refusal(link, height, width); !why.empty())
    throw Error(ErrorKind::InvalidArgument, name + ": " + sides(width, height) + " pixels; " + why);
  std::vector<float> unfolded =
      image::unfold_patches(pixels, link.channels, height, width, link.patch, link.class_rows, row_floats);
  const int64_t rows = height / link.patch, cols = width / link.patch;
  ImageInput out;
  out.grid = link.grid_of(rows, cols);
  // The patches in the tower's order: row-major, or whole merge blocks
  // first, then the rest.
  std::vector<std::pair<int64_t, int64_t>> order;
  const int64_t m = link.merge;
  for (int64_t br = 0; br < rows / m; ++br)
    for (int64_t bc = 0; bc < cols / m; ++bc)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < m; ++j) order.push_back({br * m + i, bc * m + j});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (r >= rows / m * m || c >= cols / m * m) order.push_back({r, c});
  const size_t lead = static_cast<size_t>(link.class_rows * row_floats), width_floats = static_cast<size_t>(row_floats);
  if (m > 1) {
    out.rows.assign(unfolded.begin(), unfolded.begin() + static_cast<std::ptrdiff_t>(lead));
    out.rows.reserve(unfolded.size());
    for (const auto& [r, c] : order) {
      const auto from = unfolded.begin() + static_cast<std::ptrdiff_t>(lead + static_cast<size_t>(r * cols + c) * width_floats);
      out.rows.insert(out.rows.end(), from, from + static_cast<std::ptrdiff_t>(width_floats));
    }
  } else {
    out.rows = std::move(unfolded);
  }
  if (link.rope_2d) {  // (merge 1: `order` is row-major already)
    out.tokens.assign(static_cast<size_t>(link.class_rows), 0);
    for (const auto& [r, c] : order) out.tokens.push_back(static_cast<int32_t>(r * link.grid() + c));
  }
  return out;
}

ImageInput tiles_input(const plan::VisionLink& link, std::span<const image::Pixels> tiles, int64_t aspect_ratio_id,
                       int64_t row_floats, const std::string& name) {
  const int64_t count = static_cast<int64_t>(tiles.size());
  if (link.tiles == 0) throw Error(ErrorKind::InvalidArgument, name + ": the vision tower takes no tiles");
  if (count < 1 || count > link.tiles)
    throw Error(ErrorKind::InvalidArgument, name + ": " + std::to_string(count) + " tiles; the vision tower takes 1 to " +
                                                std::to_string(link.tiles));
  if (aspect_ratio_id < 1 || aspect_ratio_id > link.aspect_ratios)
    throw Error(ErrorKind::InvalidArgument, name + ": aspect ratio id " + std::to_string(aspect_ratio_id) +
                                                "; the vision tower's are 1 to " + std::to_string(link.aspect_ratios));
  ImageInput out;
  const size_t width = static_cast<size_t>(row_floats);
  out.rows.assign(static_cast<size_t>(link.tile_pass_rows()) * width, 0.0f);
  for (int64_t t = 0; t < count; ++t) {
    const image::Pixels& tile = tiles[static_cast<size_t>(t)];
    if (tile.height != link.image_size || tile.width != link.image_size)
      throw Error(ErrorKind::InvalidArgument, name + ": tile " + std::to_string(t) + " of " +
                                                  sides(tile.width, tile.height) + " pixels; the vision tower takes " +
                                                  std::to_string(link.image_size) + "²");
    // Its class row (zeros), then its patches.
    const std::vector<float> unfolded = image::unfold_patches(tile.chw, link.channels, tile.height, tile.width, link.patch,
                                                              link.class_rows, row_floats);
    std::copy(unfolded.begin(), unfolded.end(),
              out.rows.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t * link.tile_rows) * width));
  }
  out.tokens.assign(static_cast<size_t>(link.tile_pass_rows()), static_cast<int32_t>(aspect_ratio_id));
  out.grid = {1, link.tile_keys()};
  out.tiles = count;
  out.own = count * link.tile_rows;
  return out;
}

ImageInput image_input(const plan::VisionLink& link, const image::Preprocess& p, const image::Image& image,
                       int64_t row_floats, const std::string& name) {
  if (link.tiles > 0) {
    const image::Tiles t = image::preprocess_tiles(image, p);
    return tiles_input(link, t.tiles, t.aspect_ratio_id, row_floats, name);
  }
  const image::Pixels pixels = image::preprocess(image, p);
  if (const std::string why = size_refusal(link, pixels.height, pixels.width); !why.empty())
    throw Error(ErrorKind::InvalidArgument, name + ": the image processor (" + p.processor + ") gives " +
                                                sides(pixels.width, pixels.height) + " pixels; " + why +
                                                " (the checkpoint's preprocessor_config.json and its spec disagree)");
  return tower_input(link, pixels.chw, pixels.height, pixels.width, row_floats, name);
}

ImageFeatures image_features(Session& tower, const plan::VisionLink& link, const ImageInput& input) {
  const int64_t row_floats = tower.model().plan.input_row_floats;
  if (row_floats <= 0 || input.rows.size() % static_cast<size_t>(row_floats) != 0)
    throw Error(ErrorKind::InvalidArgument, std::to_string(input.rows.size()) + " input values are not rows of " +
                                                std::to_string(row_floats) + " (the tower's input)");
  const int64_t rows = static_cast<int64_t>(input.rows.size()) / row_floats;
  std::vector<float> out = tower.encode_rows(input.rows, rows, input.tokens, input.own);
  const size_t width = static_cast<size_t>(tower.model().output_width);
  const size_t skip = static_cast<size_t>(link.skip_rows) * width;
  const size_t features = static_cast<size_t>(input.grid.count()) * width;
  if (out.size() < skip + features)
    throw Error(ErrorKind::InvalidArgument, "the vision tower gave " + std::to_string(out.size() / width) + " rows for the " +
                                                std::to_string(link.skip_rows + input.grid.count()) + " an image reads");
  return {std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(skip),
                             out.begin() + static_cast<std::ptrdiff_t>(skip + features)),
          input.grid, input.tiles};
}

ImageFeatures encode_image(Session& tower, const plan::VisionLink& link, const image::Preprocess& p,
                           const image::Image& image, const std::string& name) {
  return image_features(tower, link, image_input(link, p, image, tower.model().plan.input_row_floats, name));
}

void cross_images(Session& session, const plan::VisionLink& link, int64_t sequence, std::span<const int32_t> ids,
                  std::span<const ImageFeatures> images) {
  if (const size_t markers = count_markers(link, ids); markers != images.size())
    throw Error(ErrorKind::InvalidArgument,
                "the prompt holds " + std::to_string(markers) + " image marker(s) (token " + std::to_string(link.marker) +
                    ") for " + std::to_string(images.size()) + " image(s): each image goes where a marker is");
  std::vector<float> features;
  std::vector<int64_t> tiles;
  for (const ImageFeatures& image : images) {
    features.insert(features.end(), image.values.begin(), image.values.end());
    tiles.push_back(image.tiles);
  }
  session.images(sequence, features, tiles);
}

size_t count_markers(const plan::VisionLink& link, std::span<const int32_t> ids) {
  size_t markers = 0;
  for (int32_t id : ids) markers += id == link.marker ? 1 : 0;
  return markers;
}

ExpandedPrompt expand_markers(const plan::VisionLink& link, std::span<const int32_t> ids,
                              std::span<const plan::ImageGrid> grids) {
  const size_t markers = count_markers(link, ids);
  if (markers != grids.size())
    throw Error(ErrorKind::InvalidArgument,
                "the prompt holds " + std::to_string(markers) + " image marker(s) (token " + std::to_string(link.marker) +
                    ") for " + std::to_string(grids.size()) + " image(s): each image goes where a marker is");
  const int32_t token = static_cast<int32_t>(link.image_token >= 0 ? link.image_token : link.marker);
  size_t added = 0;
  for (const plan::ImageGrid& g : grids) added += static_cast<size_t>(link.expanded_rows(g));
  ExpandedPrompt out;
  out.ids.reserve(ids.size() + added);
  out.starts.push_back(0);
  size_t image = 0;
  for (int32_t id : ids) {
    if (id != link.marker) {
      out.own.push_back(static_cast<int64_t>(out.ids.size()));
      out.ids.push_back(id);
      continue;
    }
    const plan::ImageGrid& g = grids[image++];
    out.ids.insert(out.ids.end(), link.prefix.begin(), link.prefix.end());
    for (int64_t r = 0; r < g.rows; ++r) {
      for (int64_t c = 0; c < g.cols; ++c) {
        out.at.push_back(static_cast<int64_t>(out.ids.size()));
        out.ids.push_back(token);
      }
      if (link.row_end >= 0)
        out.ids.push_back(static_cast<int32_t>(r + 1 == g.rows && link.end >= 0 ? link.end : link.row_end));
    }
    out.ids.insert(out.ids.end(), link.suffix.begin(), link.suffix.end());
    out.starts.push_back(out.at.size());
  }
  return out;
}

ExpandedPrompt expand_markers(const plan::VisionLink& link, std::span<const int32_t> ids, size_t images) {
  if (link.variable)
    throw Error(ErrorKind::InvalidArgument, "images of variable sizes expand by their grids (expand_markers with grids)");
  return expand_markers(link, ids, std::vector<plan::ImageGrid>(images, link.grid_of(0, 0)));
}

SplicedPrompt splice_images(const plan::VisionLink& link, std::span<const int32_t> ids,
                            std::span<const ImageFeatures> images, int64_t hidden) {
  std::vector<plan::ImageGrid> grids;
  for (const ImageFeatures& image : images) grids.push_back(image.grid);
  ExpandedPrompt expanded = expand_markers(link, ids, grids);
  const size_t width = static_cast<size_t>(hidden);
  SplicedPrompt out{std::move(expanded.ids), std::move(expanded.at), {}, std::move(expanded.own)};
  out.features.reserve(out.at.size() * width);
  for (size_t i = 0; i < images.size(); ++i) {
    const size_t rows = static_cast<size_t>(images[i].grid.count());
    if (images[i].values.size() != rows * width)
      throw Error(ErrorKind::InvalidArgument, "image " + std::to_string(i + 1) + ": " +
                                                  std::to_string(images[i].values.size()) + " feature values, not " +
                                                  std::to_string(rows) + " rows of " + std::to_string(width));
    out.features.insert(out.features.end(), images[i].values.begin(), images[i].values.end());
  }
  return out;
}

}  // namespace lathe::text
