// libFuzzer target for the image decoder (runtime/image/decode.cpp): any
// bytes in must either decode to an Image of at least one pixel, within the
// limits, whose rgb is exactly width × height × 3 bytes and whose alpha is
// empty or width × height bytes, not all 255, or throw lathe::Error naming
// the input. A crash, a sanitizer report, a hang, any
// other exception (one thrown through libpng or libjpeg included), or an
// image or error that breaks those promises is a finding.
//
// The limits are smaller than the defaults (a million pixels, 4096 a side)
// so that a header the fuzzer inflates costs milliseconds, not seconds.
// Seeds: tests/fuzz/corpus/image/ (tests/data/images/make_decode_files.py).
// libpng and libjpeg are the system's, not instrumented: libFuzzer steers by
// decode.cpp's branches, and ASan sees the libraries' memory through its
// interceptors only.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/image/image.hpp"

using lathe::fuzz::finding;

void lathe::fuzz::image(const uint8_t* data, size_t size) {
  lathe::image::Limits limits;
  limits.max_file_bytes = int64_t{1} << 20;
  limits.max_side = 4096;
  limits.max_pixels = int64_t{1} << 20;
  try {
    const lathe::image::Image im = lathe::image::decode(std::span<const uint8_t>(data, size), "input", limits);
    if (im.width < 1 || im.height < 1) finding("an image of no pixels");
    if (im.width > limits.max_side || im.height > limits.max_side) finding("a side over max_side");
    if (im.width * im.height > limits.max_pixels) finding("more pixels than max_pixels");
    if (im.rgb.size() != static_cast<size_t>(im.width * im.height * 3))
      finding("rgb is not width × height × 3 bytes");
    if (!im.alpha.empty() && im.alpha.size() != im.rgb.size() / 3) finding("alpha is not width × height bytes");
    if (!im.alpha.empty() && std::all_of(im.alpha.begin(), im.alpha.end(), [](uint8_t a) { return a == 255; }))
      finding("an alpha of 255 throughout (an opaque image's alpha is empty)");
    unsigned sum = 0;  // every byte readable (ASan)
    for (const uint8_t b : im.rgb) sum += b;
    for (const uint8_t b : im.alpha) sum += b;
    (void)sum;
  } catch (const lathe::Error& e) {
    if (!std::string_view(e.what()).starts_with("input: ")) finding("an error that does not name the image");
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::image)
