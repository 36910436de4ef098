// Images in (runtime/image/): a PNG or JPEG file decoded to 8-bit RGB, then
// made into a vision tower's input as the checkpoint's preprocessor says
// (preprocess.hpp). No Vulkan: lathe_image is plain CPU code, and every
// bound on an untrusted file is checked before the pixels are decoded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace lathe::image {

// An 8-bit RGB image: rows top to bottom, pixels left to right, 3 bytes a
// pixel (R, G, B).
struct Image {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;  // height × width × 3
  // height × width, where the file has transparency (an alpha channel, a
  // palette's or gray's tRNS; PIL opens an RGB file with a tRNS color as
  // RGB, and so does this); empty where every pixel is opaque. `rgb` holds the stored
  // colors whatever the alpha: compositing, if any, is the preprocessor's.
  std::vector<uint8_t> alpha;

  uint8_t at(int64_t x, int64_t y, int channel) const {
    return rgb[static_cast<size_t>((y * width + x) * 3 + channel)];
  }
};

// What a decoder accepts, checked on the file's size and on the
// dimensions its header states, before any pixel is decoded.
struct Limits {
  int64_t max_file_bytes = int64_t{64} << 20;  // 64 MiB
  int64_t max_side = 16384;                    // pixels, either side
  int64_t max_pixels = int64_t{1} << 26;       // 67 M pixels: 201 MB of RGB
};

// A PNG or a JPEG, told by its signature, decoded as PIL's
// `Image.open(f).convert("RGB")` gives it (what Hugging Face's image
// processors start from): colors as stored, whatever their alpha (kept in
// Image::alpha as PIL's convert("RGBA") gives it, not composited); gray
// replicated to the three channels; a palette expanded, an index past PLTE
// gray (i, i, i) as in PIL; 16-bit samples their high byte, but 16-bit
// gray clipped to 255 (PIL reads it as mode "I"); no gamma applied; the
// JPEG decoded by libjpeg-turbo's default (islow) IDCT with fancy
// upsampling. `name` names the image in errors (its path, "image 2 of the
// request"). Throws lathe::Error (BadFile) naming it for another format, a
// truncated or corrupt file (cut anywhere, even past its last pixel, which
// PIL may take), a CMYK JPEG, or one over `limits` (InvalidArgument).
Image decode(std::span<const uint8_t> bytes, const std::string& name, const Limits& limits = {});

// The file at `path`, decoded; its size is checked before it is read.
// Throws lathe::Error (NotFound, Io) for a file that cannot be read.
Image load(const std::filesystem::path& path, const Limits& limits = {});

}  // namespace lathe::image
