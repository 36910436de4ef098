// A prompt's image markers expanded into the rows a vision tower's features
// fill (runtime/generate/images.hpp), as a LLaVA processor expands them.
#include <doctest/doctest.h>

#include <vector>

#include "runtime/error.hpp"
#include "runtime/generate/images.hpp"

using namespace lathe;

TEST_SUITE("images") {

TEST_CASE("splice_images: each marker becomes an image's rows, in order, the features at those rows") {
  plan::VisionLink link;
  link.features = 3;
  link.marker = 9;
  const int64_t hidden = 2;
  const std::vector<text::ImageFeatures> images = {{{1, 1, 2, 2, 3, 3}, {1, 3}}, {{4, 4, 5, 5, 6, 6}, {1, 3}}};
  const std::vector<int32_t> ids = {1, 9, 2, 9, 3};
  const text::SplicedPrompt p = text::splice_images(link, ids, images, hidden);
  CHECK(p.ids == std::vector<int32_t>{1, 9, 9, 9, 2, 9, 9, 9, 3});  // the marker stands for each row (LLaVA)
  CHECK(p.at == std::vector<int64_t>{1, 2, 3, 5, 6, 7});
  CHECK(p.features == std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6});

  // A processor whose rows hold a token of their own.
  link.image_token = 7;
  CHECK(text::splice_images(link, std::vector<int32_t>{9}, std::span(images).first(1), hidden).ids ==
        std::vector<int32_t>{7, 7, 7});

  // A processor that writes tokens around each image (Gemma 3: "\n\n<start_of_image>",
  // its rows, "<end_of_image>\n\n"): the rows that take features are the image's alone.
  const std::vector<int32_t> prefix = {108, 9}, suffix = {11, 108};
  plan::VisionLink around = link;
  around.prefix = prefix;
  around.suffix = suffix;
  CHECK(around.expanded_rows() == 7);
  const text::SplicedPrompt g = text::splice_images(around, std::vector<int32_t>{1, 9, 2, 9}, images, hidden);
  CHECK(g.ids == std::vector<int32_t>{1, 108, 9, 7, 7, 7, 11, 108, 2, 108, 9, 7, 7, 7, 11, 108});
  CHECK(g.at == std::vector<int64_t>{3, 4, 5, 11, 12, 13});
  CHECK(g.own == std::vector<int64_t>{0, 8});  // the prompt's own tokens, not those around the images
  CHECK(g.features == p.features);

  // Markers and images not as many; features of another size.
  CHECK_THROWS_WITH_AS(text::splice_images(link, std::vector<int32_t>{1, 9}, images, hidden),
                       doctest::Contains("the prompt holds 1 image marker(s) (token 9) for 2 image(s)"), Error);
  CHECK_THROWS_WITH_AS(text::splice_images(link, std::vector<int32_t>{1, 2}, std::span(images).first(1), hidden),
                       doctest::Contains("holds 0 image marker(s)"), Error);
  const std::vector<text::ImageFeatures> short_one = {{{1, 2}, {1, 3}}};
  CHECK_THROWS_WITH_AS(text::splice_images(link, std::vector<int32_t>{9}, short_one, hidden),
                       doctest::Contains("image 1: 2 feature values, not 3 rows of 2"), Error);
}

TEST_CASE("expand_markers: images of their own sizes, a row end after each row of features, the last one the end") {
  // Pixtral's processor: [IMG] × cols then [IMG_BREAK] for each row, the
  // last [IMG_BREAK] an [IMG_END].
  plan::VisionLink link;
  link.variable = true;
  link.patch = 4;
  link.image_size = 32;
  link.merge = 2;
  link.marker = 10;
  link.row_end = 12;
  link.end = 13;
  CHECK(link.grid_of(5, 8) == plan::ImageGrid{2, 4});  // an odd row of patches merges into none
  CHECK(link.largest() == plan::ImageGrid{4, 4});
  CHECK(link.expanded_rows() == 16 + 4);
  const std::vector<plan::ImageGrid> grids = {{2, 3}, {1, 1}};
  const text::ExpandedPrompt e = text::expand_markers(link, std::vector<int32_t>{1, 10, 2, 10}, grids);
  CHECK(e.ids == std::vector<int32_t>{1, 10, 10, 10, 12, 10, 10, 10, 13, 2, 10, 13});
  CHECK(e.at == std::vector<int64_t>{1, 2, 3, 5, 6, 7, 10});
  CHECK(e.starts == std::vector<size_t>{0, 6, 7});
  CHECK(e.own == std::vector<int64_t>{0, 9});
  CHECK(link.expanded_rows(grids[0]) == 8);
  // Without an end token the last row keeps its row end (Pixtral in LLaVA
  // writes both); without a row end, the rows run on.
  link.end = -1;
  CHECK(text::expand_markers(link, std::vector<int32_t>{10}, std::span(grids).first(1)).ids ==
        std::vector<int32_t>{10, 10, 10, 12, 10, 10, 10, 12});
  link.row_end = -1;
  CHECK(text::expand_markers(link, std::vector<int32_t>{10}, std::span(grids).first(1)).ids ==
        std::vector<int32_t>{10, 10, 10, 10, 10, 10});
  // Variable sizes expand by each image's grid, never by a count.
  CHECK_THROWS_WITH_AS(text::expand_markers(link, std::vector<int32_t>{10}, size_t{1}),
                       doctest::Contains("expand by their grids"), Error);
}

}  // TEST_SUITE("images")
