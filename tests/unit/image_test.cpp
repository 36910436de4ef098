// runtime/image/decode: every PNG color type and bit depth, interlaced or
// not, and baseline, progressive and gray JPEGs, decoded to the bytes PIL's
// `Image.open(f).convert("RGB")` gives, with the alpha (an alpha channel,
// tRNS) its convert("RGBA") gives; and every refusal (another format,
// a truncated or corrupt file, a CMYK JPEG, a header over the limits, the
// files of tests/data/images/bad/) a lathe::Error of its kind that names
// the image. PNGs and most JPEGs are encoded here with libpng's and
// libjpeg's write APIs; the JPEGs compared with PIL, and their goldens, are
// committed (tests/data/images/README.md).
#include "runtime/image/image.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t without including them
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <jpeglib.h>
#include <png.h>

#include "runtime/error.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::image;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

const fs::path kImages = fs::path(LATHE_SOURCE_DIR) / "tests" / "data" / "images";

// value(x, y, c) = (37x + 91y + 53c + 11 · (xy mod 17)) mod 256, as image_preprocess_test.cpp's.
uint8_t pattern(int64_t x, int64_t y, int64_t c) {
  return static_cast<uint8_t>((37 * x + 91 * y + 53 * c + 11 * ((x * y) % 17)) % 256);
}

Bytes file_bytes(const fs::path& path) {
  const std::string s = test::read_file(path.string());
  REQUIRE_MESSAGE(!s.empty(), path.string() << " is missing or empty");
  return {s.begin(), s.end()};
}

// ---- PNG encoding: libpng's write API, to memory ----

struct PngSpec {
  PngSpec(uint32_t w, uint32_t h, int bit_depth, int color_type, bool adam7 = false)
      : width(w), height(h), depth(bit_depth), color(color_type), interlaced(adam7) {}
  uint32_t width;
  uint32_t height;
  int depth;
  int color;
  bool interlaced;
  std::vector<png_color> palette;
  Bytes trns;                                // palette alphas
  const png_color_16* trns_color = nullptr;  // gray or RGB
  std::vector<Bytes> rows;                   // packed as the format says, 16-bit samples big-endian
};

[[noreturn]] void png_write_failed(png_structp png, png_const_charp) { png_longjmp(png, 1); }
void png_write_warning(png_structp, png_const_charp) {}
void png_append(png_structp png, png_bytep data, size_t size) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + size);
}
void png_no_flush(png_structp) {}

// The setjmp in a frame of its own with trivial locals, as in decode.cpp.
bool png_write_stage(png_structp png, png_infop info, const PngSpec& spec, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, spec.width, spec.height, spec.depth, spec.color,
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!spec.palette.empty()) png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
  if (!spec.trns.empty() || spec.trns_color)
    png_set_tRNS(png, info, spec.trns.empty() ? nullptr : spec.trns.data(), static_cast<int>(spec.trns.size()),
                 spec.trns_color);
  png_write_info(png, info);
  png_write_image(png, rows);  // interlaces by itself
  png_write_end(png, nullptr);
  return true;
}

Bytes encode_png(const PngSpec& spec) {
  REQUIRE(spec.rows.size() == spec.height);
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, png_write_failed, png_write_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  REQUIRE(info);
  png_set_write_fn(png, &out, png_append, png_no_flush);
  png_set_check_for_invalid_index(png, 0);  // indices past PLTE are written: decode() must take them
  std::vector<png_bytep> rows;
  for (const Bytes& row : spec.rows) rows.push_back(const_cast<png_bytep>(row.data()));
  const bool ok = png_write_stage(png, info, spec, rows.data());
  png_destroy_write_struct(&png, &info);
  REQUIRE(ok);
  return out;
}

// An 8-bit RGB or RGBA PNG of the pattern (alpha: the pattern's 4th channel).
PngSpec pattern_png(uint32_t width, uint32_t height, int color = PNG_COLOR_TYPE_RGB, bool interlaced = false) {
  PngSpec spec{width, height, 8, color, interlaced};
  const int channels = color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : 3;
  for (uint32_t y = 0; y < height; ++y) {
    Bytes row;
    for (uint32_t x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) row.push_back(pattern(x, y, c));
    spec.rows.push_back(row);
  }
  return spec;
}

Bytes pattern_rgb(int64_t width, int64_t height) {
  Bytes rgb;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) rgb.push_back(pattern(x, y, c));
  return rgb;
}

uint32_t crc32(const uint8_t* data, size_t size) {
  uint32_t crc = 0xffffffff;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

// `png` with IHDR's width and height replaced, its CRC made valid again.
Bytes with_ihdr_size(Bytes png, uint32_t width, uint32_t height) {
  put_be32(&png[16], width);
  put_be32(&png[20], height);
  put_be32(&png[29], crc32(&png[12], 17));  // over "IHDR" and its 13 bytes
  return png;
}

// `png` with a chunk inserted right after IHDR (before PLTE and IDAT).
Bytes with_chunk(const Bytes& png, const std::string& type, const Bytes& data) {
  Bytes chunk(4);
  put_be32(chunk.data(), static_cast<uint32_t>(data.size()));
  chunk.insert(chunk.end(), type.begin(), type.end());
  chunk.insert(chunk.end(), data.begin(), data.end());
  chunk.resize(chunk.size() + 4);
  put_be32(&chunk[chunk.size() - 4], crc32(&chunk[4], chunk.size() - 8));
  // The signature (8) and IHDR (25), the chunk, the rest. (Sized once and
  // copied into: GCC 12 at -O2 misreads a vector grown by insert here as
  // an out-of-bounds copy.)
  Bytes out(png.size() + chunk.size());
  std::copy(png.begin(), png.begin() + 33, out.begin());
  std::copy(chunk.begin(), chunk.end(), out.begin() + 33);
  std::copy(png.begin() + 33, png.end(), out.begin() + 33 + static_cast<std::ptrdiff_t>(chunk.size()));
  return out;
}

// ---- JPEG encoding: libjpeg's compress API, to memory ----

struct JpegEncodeErrors {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

[[noreturn]] void jpeg_encode_failed(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<JpegEncodeErrors*>(cinfo->err)->jump, 1);
}

struct JpegSpec {
  int width = 1;
  int height = 1;
  int components = 3;
  J_COLOR_SPACE space = JCS_RGB;
  bool progressive = false;
  Bytes pixels;  // height × width × components
};

bool jpeg_encode_stage(jpeg_compress_struct& c, JpegEncodeErrors& errors, const JpegSpec& spec, unsigned char** out,
                       unsigned long* size) {
  if (setjmp(errors.jump)) return false;
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, out, size);
  c.image_width = static_cast<JDIMENSION>(spec.width);
  c.image_height = static_cast<JDIMENSION>(spec.height);
  c.input_components = spec.components;
  c.in_color_space = spec.space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  if (spec.progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(spec.pixels.data()) +
                   static_cast<size_t>(c.next_scanline) * static_cast<size_t>(spec.width * spec.components);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  return true;
}

Bytes encode_jpeg(const JpegSpec& spec) {
  REQUIRE(spec.pixels.size() == static_cast<size_t>(spec.width * spec.height * spec.components));
  jpeg_compress_struct c{};
  JpegEncodeErrors errors{};
  c.err = jpeg_std_error(&errors.pub);
  errors.pub.error_exit = jpeg_encode_failed;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const bool ok = jpeg_encode_stage(c, errors, spec, &buffer, &size);
  Bytes out;
  if (ok) out.assign(buffer, buffer + size);
  jpeg_destroy_compress(&c);
  std::free(buffer);
  REQUIRE(ok);
  return out;
}

JpegSpec pattern_jpeg(int width, int height, int components, J_COLOR_SPACE space, bool progressive = false) {
  JpegSpec spec{width, height, components, space, progressive, {}};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < components; ++c) spec.pixels.push_back(pattern(x, y, c));
  return spec;
}

// ---- checks ----

// `alpha` empty: the image is opaque, Image::alpha must be empty too.
void check_pixels(const Image& image, int64_t width, int64_t height, const Bytes& rgb, const Bytes& alpha = {}) {
  CHECK(image.width == width);
  CHECK(image.height == height);
  REQUIRE(image.rgb.size() == static_cast<size_t>(width * height * 3));
  CHECK(image.rgb == rgb);
  CHECK(image.alpha == alpha);
}

// decode() refuses `bytes` with an Error of `kind` whose message starts
// with the name and holds `fragment`.
void check_refused(const Bytes& bytes, ErrorKind kind, const std::string& fragment, const Limits& limits = {},
                   const std::string& name = "image 2 of the request") {
  try {
    (void)decode(bytes, name, limits);
    FAIL_CHECK("decoded without an error (" << bytes.size() << " bytes)");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_MESSAGE(e.kind() == kind, message);
    CHECK_MESSAGE(message.starts_with(name + ": "), message);
    CHECK_MESSAGE(message.find(fragment) != std::string::npos, message << " lacks " << fragment);
  }
}

}  // namespace

TEST_CASE("image: 8-bit RGB and RGBA PNGs, the alpha kept apart, the colors as stored") {
  check_pixels(decode(encode_png(pattern_png(7, 5)), "rgb"), 7, 5, pattern_rgb(7, 5));
  Bytes alpha;  // the pattern's 4th channel
  for (int64_t y = 0; y < 5; ++y)
    for (int64_t x = 0; x < 7; ++x) alpha.push_back(pattern(x, y, 3));
  check_pixels(decode(encode_png(pattern_png(7, 5, PNG_COLOR_TYPE_RGB_ALPHA)), "rgba"), 7, 5, pattern_rgb(7, 5),
               alpha);
  // Alpha 0 keeps its color: nothing is composited.
  PngSpec transparent{2, 1, 8, PNG_COLOR_TYPE_RGB_ALPHA};
  transparent.rows = {{10, 20, 30, 0, 40, 50, 60, 128}};
  check_pixels(decode(encode_png(transparent), "alpha 0"), 2, 1, {10, 20, 30, 40, 50, 60}, {0, 128});
  // An alpha channel of 255 throughout is no transparency.
  PngSpec opaque{2, 1, 8, PNG_COLOR_TYPE_RGB_ALPHA};
  opaque.rows = {{10, 20, 30, 255, 40, 50, 60, 255}};
  check_pixels(decode(encode_png(opaque), "opaque"), 2, 1, {10, 20, 30, 40, 50, 60});
  // A tRNS color on RGB: PIL opens the file as RGB, so no alpha is kept.
  const png_color_16 key{0, 10, 20, 30, 0};
  PngSpec keyed{2, 1, 8, PNG_COLOR_TYPE_RGB};
  keyed.trns_color = &key;
  keyed.rows = {{10, 20, 30, 40, 50, 60}};
  check_pixels(decode(encode_png(keyed), "rgb tRNS"), 2, 1, {10, 20, 30, 40, 50, 60});
}

TEST_CASE("image: gray, gray + alpha and 1, 2, 4-bit gray PNGs are replicated to RGB, scaled as PIL scales") {
  PngSpec gray{3, 1, 8, PNG_COLOR_TYPE_GRAY};
  gray.rows = {{0, 77, 255}};
  check_pixels(decode(encode_png(gray), "gray"), 3, 1, {0, 0, 0, 77, 77, 77, 255, 255, 255});
  PngSpec gray_alpha{2, 1, 8, PNG_COLOR_TYPE_GRAY_ALPHA};
  gray_alpha.rows = {{77, 0, 200, 255}};
  check_pixels(decode(encode_png(gray_alpha), "gray alpha"), 2, 1, {77, 77, 77, 200, 200, 200}, {0, 255});

  PngSpec one{8, 1, 1, PNG_COLOR_TYPE_GRAY};
  one.rows = {{0b10110010}};
  check_pixels(decode(encode_png(one), "1-bit"), 8, 1,
               {255, 255, 255, 0, 0, 0, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 255, 255, 255, 0, 0, 0});
  PngSpec two{4, 1, 2, PNG_COLOR_TYPE_GRAY};
  two.rows = {{0b00011011}};
  check_pixels(decode(encode_png(two), "2-bit"), 4, 1, {0, 0, 0, 85, 85, 85, 170, 170, 170, 255, 255, 255});
  PngSpec four{3, 1, 4, PNG_COLOR_TYPE_GRAY};
  four.rows = {{0x0f, 0x70}};
  check_pixels(decode(encode_png(four), "4-bit"), 3, 1, {0, 0, 0, 255, 255, 255, 119, 119, 119});
}

TEST_CASE("image: a palette PNG: its RGB, tRNS its alpha, an index past PLTE is PIL's gray (i, i, i)") {
  // PIL 9.4 gave these bytes: its palette is a gray ramp past the entries
  // PLTE gives (libpng's is black there), its alphas 255 past tRNS's.
  PngSpec palette{5, 1, 8, PNG_COLOR_TYPE_PALETTE};
  palette.palette = {{10, 20, 30}, {40, 50, 60}, {70, 80, 90}};
  palette.trns = {0, 128};
  palette.rows = {{0, 1, 2, 3, 200}};
  check_pixels(decode(encode_png(palette), "palette"), 5, 1,
               {10, 20, 30, 40, 50, 60, 70, 80, 90, 3, 3, 3, 200, 200, 200}, {0, 128, 255, 255, 255});
  // A tRNS longer than PLTE (libpng's own parser would drop it): PIL gives
  // index 3, past PLTE, the 4th alpha.
  palette.trns.clear();
  check_pixels(decode(with_chunk(encode_png(palette), "tRNS", {1, 2, 3, 4, 5}), "long tRNS"), 5, 1,
               {10, 20, 30, 40, 50, 60, 70, 80, 90, 3, 3, 3, 200, 200, 200}, {1, 2, 3, 4, 255});
  PngSpec packed{4, 1, 2, PNG_COLOR_TYPE_PALETTE};  // 2-bit indices 3 2 1 0
  packed.palette = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  packed.rows = {{0b11100100}};
  check_pixels(decode(encode_png(packed), "2-bit palette"), 4, 1, {3, 3, 3, 7, 8, 9, 4, 5, 6, 1, 2, 3});
}

TEST_CASE("image: 16-bit PNGs: RGB and gray + alpha keep the high byte, gray clips to 255 (as PIL 9.4 gives)") {
  // PIL 9.4 (python3-pil, Debian 12) gave these bytes for the same samples.
  PngSpec rgb{3, 1, 16, PNG_COLOR_TYPE_RGB};
  // Samples (0x0000, 0x00ff, 0x0100), (0x1234, 0x8000, 0xffff), (0x7f80, 0x80ff, 0x0001).
  rgb.rows = {{0x00, 0x00, 0x00, 0xff, 0x01, 0x00, 0x12, 0x34, 0x80, 0x00, 0xff, 0xff,  //
               0x7f, 0x80, 0x80, 0xff, 0x00, 0x01}};
  check_pixels(decode(encode_png(rgb), "rgb16"), 3, 1, {0, 0, 1, 0x12, 0x80, 0xff, 0x7f, 0x80, 0});
  PngSpec gray_alpha{3, 1, 16, PNG_COLOR_TYPE_GRAY_ALPHA};
  gray_alpha.rows = {{0x12, 0x34, 0, 0, 0x00, 0xff, 0xff, 0xff, 0xff, 0x01, 0x80, 0x00}};
  check_pixels(decode(encode_png(gray_alpha), "gray alpha 16"), 3, 1, {0x12, 0x12, 0x12, 0, 0, 0, 0xff, 0xff, 0xff},
               {0, 0xff, 0x80});
  // PIL opens 16-bit gray as mode "I" and convert("RGB") clips: 0x0100 and
  // 0x1234 are 255, not their high bytes 1 and 0x12.
  PngSpec gray{8, 1, 16, PNG_COLOR_TYPE_GRAY};
  gray.rows = {{0x00, 0x00, 0x00, 0x01, 0x00, 0xfe, 0x00, 0xff, 0x01, 0x00, 0x12, 0x34, 0x80, 0x00, 0xff, 0xff}};
  Bytes clipped;
  for (const int v : {0, 1, 254, 255, 255, 255, 255, 255}) clipped.insert(clipped.end(), 3, static_cast<uint8_t>(v));
  check_pixels(decode(encode_png(gray), "gray16"), 8, 1, clipped);
}

TEST_CASE("image: a tRNS color key is applied as PIL's convert(\"RGBA\") applies it, quirks included") {
  // PIL 9.4 compares the key's low byte with the decoded 8-bit pixel: a
  // 2-bit key 1 matches nothing (the pixels are 0, 85, 170, 255), a key
  // of 85 matches the 2-bit sample 1; a 16-bit gray key of 256 matches the
  // sample 0, one of 255 every clipped sample. These alphas are PIL's.
  PngSpec two{4, 1, 2, PNG_COLOR_TYPE_GRAY};
  two.rows = {{0b00011011}};
  const Bytes two_rgb = {0, 0, 0, 85, 85, 85, 170, 170, 170, 255, 255, 255};
  check_pixels(decode(with_chunk(encode_png(two), "tRNS", {0, 0}), "key 0"), 4, 1, two_rgb, {0, 255, 255, 255});
  check_pixels(decode(with_chunk(encode_png(two), "tRNS", {0, 1}), "key 1"), 4, 1, two_rgb);
  check_pixels(decode(with_chunk(encode_png(two), "tRNS", {0, 85}), "key 85"), 4, 1, two_rgb, {255, 0, 255, 255});
  PngSpec gray16{5, 1, 16, PNG_COLOR_TYPE_GRAY};  // 0, 5, 255, 256, 0x1234
  gray16.rows = {{0x00, 0x00, 0x00, 0x05, 0x00, 0xff, 0x01, 0x00, 0x12, 0x34}};
  const Bytes gray16_rgb = {0, 0, 0, 5, 5, 5, 255, 255, 255, 255, 255, 255, 255, 255, 255};
  for (const auto& [key, alpha] : {std::pair<Bytes, Bytes>{{0, 5}, {255, 0, 255, 255, 255}},
                                   std::pair<Bytes, Bytes>{{0, 255}, {255, 255, 0, 0, 0}},
                                   std::pair<Bytes, Bytes>{{1, 0}, {0, 255, 255, 255, 255}}}) {
    CHECK(decode(with_chunk(encode_png(gray16), "tRNS", key), "gray16").rgb == gray16_rgb);
    CHECK(decode(with_chunk(encode_png(gray16), "tRNS", key), "gray16").alpha == alpha);
  }
  // A key too short for its color type: PIL refuses the file, so does decode().
  check_refused(with_chunk(encode_png(two), "tRNS", {0}), ErrorKind::BadFile, "corrupt PNG (tRNS: 1 bytes, too short)");
  check_refused(with_chunk(encode_png(pattern_png(2, 1)), "tRNS", {0, 1, 0, 2}), ErrorKind::BadFile, "tRNS");
  // A tRNS on RGBA is ignored, as PIL ignores it.
  PngSpec rgba{1, 1, 8, PNG_COLOR_TYPE_RGB_ALPHA};
  rgba.rows = {{1, 2, 3, 255}};
  check_pixels(decode(with_chunk(encode_png(rgba), "tRNS", {0, 1, 0, 2, 0, 3}), "rgba tRNS"), 1, 1, {1, 2, 3});
}

TEST_CASE("image: an interlaced PNG decodes as its progressive twin, for every kind of row") {
  struct Kind {
    int color, depth, bytes_per_pixel;
  };
  for (const Kind kind : {Kind{PNG_COLOR_TYPE_RGB, 8, 3}, Kind{PNG_COLOR_TYPE_RGB_ALPHA, 16, 8},
                          Kind{PNG_COLOR_TYPE_GRAY, 16, 2}, Kind{PNG_COLOR_TYPE_GRAY, 8, 1},
                          Kind{PNG_COLOR_TYPE_PALETTE, 8, 1}}) {
    CAPTURE(kind.color);
    CAPTURE(kind.depth);
    PngSpec spec{11, 9, kind.depth, kind.color};
    if (kind.color == PNG_COLOR_TYPE_PALETTE) {
      for (int i = 0; i < 200; ++i)
        spec.palette.push_back({pattern(i, 0, 0), pattern(i, 1, 1), pattern(i, 2, 2)});  // past it: PIL's gray
      for (int i = 0; i < 100; ++i) spec.trns.push_back(pattern(i, 3, 3));
    }
    for (uint32_t y = 0; y < spec.height; ++y) {
      Bytes row;
      for (uint32_t x = 0; x < spec.width; ++x)
        for (int c = 0; c < kind.bytes_per_pixel; ++c) row.push_back(pattern(x, y, c));
      spec.rows.push_back(row);
    }
    const Image plain = decode(encode_png(spec), "plain");
    spec.interlaced = true;
    const Bytes interlaced = encode_png(spec);
    REQUIRE((interlaced[28] == 1));  // IHDR's interlace method: Adam7
    check_pixels(decode(interlaced, "interlaced"), 11, 9, plain.rgb, plain.alpha);
    if (kind.color == PNG_COLOR_TYPE_RGB) CHECK(plain.rgb == pattern_rgb(11, 9));
    CHECK(plain.alpha.empty() == (kind.color == PNG_COLOR_TYPE_RGB || kind.color == PNG_COLOR_TYPE_GRAY));
  }
}

TEST_CASE("image: baseline, progressive and gray JPEGs decode to the bytes PIL decodes them to") {
  // tests/data/images/*.rgb: what PIL 9.4 (on libjpeg-turbo 2.1.5) gave
  // for the .jpg beside it (make_decode_files.py).
  struct Golden {
    std::string name;
    int64_t width, height;
  };
  for (const Golden& g : {Golden{"baseline", 16, 8}, Golden{"progressive", 13, 7}, Golden{"gray", 16, 8}}) {
    CAPTURE(g.name);
    const Bytes jpeg = file_bytes(kImages / (g.name + ".jpg"));
    check_pixels(decode(jpeg, g.name), g.width, g.height, file_bytes(kImages / (g.name + ".rgb")));
  }
  // libjpeg's own: a gray JPEG is replicated, a progressive one decodes as
  // its baseline twin (both lossy, so only near the input).
  const Image gray = decode(encode_jpeg(pattern_jpeg(9, 6, 1, JCS_GRAYSCALE)), "gray");
  REQUIRE(gray.rgb.size() == 9 * 6 * 3);
  for (size_t i = 0; i < gray.rgb.size(); i += 3)
    CHECK((gray.rgb[i] == gray.rgb[i + 1] && gray.rgb[i] == gray.rgb[i + 2]));
  const Image baseline = decode(encode_jpeg(pattern_jpeg(9, 6, 3, JCS_RGB)), "baseline");
  const Image progressive = decode(encode_jpeg(pattern_jpeg(9, 6, 3, JCS_RGB, true)), "progressive");
  CHECK(baseline.width == 9);
  CHECK(baseline.height == 6);
  CHECK(progressive.rgb == baseline.rgb);
}

TEST_CASE("image: anything but a PNG or a JPEG is refused, an empty input too") {
  const auto bytes = [](const std::string& s) { return Bytes(s.begin(), s.end()); };
  for (const std::string& s : {std::string(), std::string("GIF89a\x01\x00\x01\x00", 10), std::string("BM6\0\0\0", 6),
                               std::string("\x89PNG\r\n\x1a", 7), std::string("\xff\xd8", 2), std::string("hello")})
    check_refused(bytes(s), ErrorKind::BadFile, "not a PNG or JPEG image");
}

TEST_CASE("image: a PNG cut at any length, mid-IDAT included, is refused, never decoded in part") {
  const Bytes png = encode_png(pattern_png(6, 4));
  for (size_t n = 0; n < png.size(); ++n) {
    CAPTURE(n);
    check_refused(Bytes(png.begin(), png.begin() + static_cast<ptrdiff_t>(n)), ErrorKind::BadFile,
                  n < 8 ? "not a PNG" : "corrupt PNG");
  }
  // Mid-IDAT: the signature (8), IHDR (25), then IDAT's length and type (8).
  check_refused(Bytes(png.begin(), png.begin() + 8 + 25 + 8 + 10), ErrorKind::BadFile, "corrupt PNG (truncated)");
}

TEST_CASE("image: a JPEG cut at any length, its last EOI included, is refused") {
  for (const bool progressive : {false, true}) {
    const Bytes jpeg = encode_jpeg(pattern_jpeg(10, 7, 3, JCS_RGB, progressive));
    for (size_t n = 3; n < jpeg.size(); ++n) {
      CAPTURE(progressive);
      CAPTURE(n);
      check_refused(Bytes(jpeg.begin(), jpeg.begin() + static_cast<ptrdiff_t>(n)), ErrorKind::BadFile, "corrupt JPEG");
    }
  }
}

TEST_CASE("image: a bad CRC on a critical chunk is refused") {
  const Bytes png = encode_png(pattern_png(6, 4));
  Bytes bad_ihdr = png;
  bad_ihdr[29] ^= 1;  // IHDR's CRC
  check_refused(bad_ihdr, ErrorKind::BadFile, "CRC");
  // IDAT's CRC (its data, changed, would fail to inflate first).
  const size_t idat = 8 + 25;
  REQUIRE(std::string(png.begin() + idat + 4, png.begin() + idat + 8) == "IDAT");
  Bytes bad_idat = png;
  bad_idat[idat + 8 + (size_t{png[idat + 2]} << 8 | png[idat + 3])] ^= 0x80;
  check_refused(bad_idat, ErrorKind::BadFile, "IDAT: CRC error");
}

TEST_CASE("image: a header over the limits is refused before its pixels are allocated") {
  const Bytes png = encode_png(pattern_png(6, 4));
  const auto start = std::chrono::steady_clock::now();
  // 10^10 pixels: 30 GB of RGB, were it allocated.
  check_refused(with_ihdr_size(png, 100000, 100000), ErrorKind::InvalidArgument,
                "100000×100000 pixels, over the 16384 a side this build accepts");
  Limits wide;
  wide.max_side = 1 << 20;
  check_refused(with_ihdr_size(png, 100000, 100000), ErrorKind::InvalidArgument,
                "100000×100000 pixels, over the 67108864 pixels this build accepts", wide);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  check_refused(with_ihdr_size(png, 20000, 10), ErrorKind::InvalidArgument,
                "20000×10 pixels, over the 16384 a side this build accepts");
  // Small sides, too many pixels.
  Limits few;
  few.max_pixels = 23;
  check_refused(png, ErrorKind::InvalidArgument, "6×4 pixels, over the 23 pixels this build accepts", few);
  few.max_pixels = 24;
  CHECK(decode(png, "24 pixels", few).width == 6);
  // A JPEG's SOF0 claiming 65000 × 65000.
  Bytes jpeg = encode_jpeg(pattern_jpeg(8, 8, 3, JCS_RGB));
  size_t sof = 2;
  while (sof + 1 < jpeg.size() && !(jpeg[sof] == 0xff && jpeg[sof + 1] == 0xc0)) ++sof;
  REQUIRE(sof + 9 < jpeg.size());
  for (const size_t i : {sof + 5, sof + 7}) {  // height, width
    jpeg[i] = 0xfd;
    jpeg[i + 1] = 0xe8;
  }
  check_refused(jpeg, ErrorKind::InvalidArgument, "65000×65000 pixels, over the 16384 a side");
  // A zero side is the format's error, not a limit.
  check_refused(with_ihdr_size(png, 0, 4), ErrorKind::BadFile, "corrupt PNG");
}

TEST_CASE("image: a file over max_file_bytes is refused by its size, before its signature is read") {
  const Bytes png = encode_png(pattern_png(6, 4));
  Limits small;
  small.max_file_bytes = 40;
  check_refused(png, ErrorKind::InvalidArgument,
                std::to_string(png.size()) + " bytes, over the 40 bytes this build accepts", small);
  check_refused(Bytes(41, 0), ErrorKind::InvalidArgument, "41 bytes, over the 40", small);
  small.max_file_bytes = static_cast<int64_t>(png.size());
  CHECK(decode(png, "at the limit", small).height == 4);
}

TEST_CASE("image: a CMYK JPEG is refused, saying what to do") {
  check_refused(encode_jpeg(pattern_jpeg(8, 8, 4, JCS_CMYK)), ErrorKind::BadFile,
                "a CMYK JPEG; convert it to RGB first");
}

TEST_CASE("image: a JPEG of more than 1000 scans is refused, 1000 are decoded") {
  // A progressive gray JPEG whose first scan (DC, first pass) is repeated:
  // libjpeg warns of the progression and goes on, one more pass a copy.
  const Bytes jpeg = encode_jpeg(pattern_jpeg(8, 8, 1, JCS_GRAYSCALE, true));
  size_t sos = 2;
  while (!(jpeg[sos] == 0xff && jpeg[sos + 1] == 0xda)) {
    REQUIRE(sos + 3 < jpeg.size());
    sos += 2 + (size_t{jpeg[sos + 2]} << 8 | jpeg[sos + 3]);  // marker segments until the first SOS
  }
  size_t end = sos + 2 + (size_t{jpeg[sos + 2]} << 8 | jpeg[sos + 3]);
  while (!(jpeg[end] == 0xff && jpeg[end + 1] != 0 && (jpeg[end + 1] < 0xd0 || jpeg[end + 1] > 0xd7))) ++end;
  const auto scans = [&](int n) {
    const auto first = jpeg.begin() + static_cast<ptrdiff_t>(sos), last = jpeg.begin() + static_cast<ptrdiff_t>(end);
    Bytes out(jpeg.begin(), first);
    for (int i = 0; i < n; ++i) out.insert(out.end(), first, last);
    out.push_back(0xff);
    out.push_back(0xd9);
    return out;
  };
  CHECK(decode(scans(1000), "1000 scans").width == 8);
  check_refused(scans(1001), ErrorKind::BadFile, "corrupt JPEG (more than 1000 scans)");
}

TEST_CASE("image: load() reads a file as decode() does, a missing one is NotFound, a directory Io") {
  test::TempDir dir("lathe-image-test");
  const Bytes png = encode_png(pattern_png(5, 3));
  const std::string path = dir.file("pattern.png");
  test::write_file(path, std::string(png.begin(), png.end()));
  check_pixels(load(path), 5, 3, pattern_rgb(5, 3));

  const auto refused = [](const fs::path& p, ErrorKind kind, const std::string& fragment, const Limits& limits = {}) {
    try {
      (void)load(p, limits);
      FAIL_CHECK("loaded without an error");
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK_MESSAGE(e.kind() == kind, message);
      CHECK_MESSAGE(message.starts_with(p.string() + ": "), message);
      CHECK_MESSAGE(message.find(fragment) != std::string::npos, message << " lacks " << fragment);
    }
  };
  refused(dir.file("missing.png"), ErrorKind::NotFound, "no such file");
  refused(dir.dir, ErrorKind::Io, "cannot be read");
  Limits small;
  small.max_file_bytes = 10;
  refused(path, ErrorKind::InvalidArgument, "over the 10 bytes", small);
  test::write_file(path, std::string(png.begin(), png.begin() + 50));
  refused(path, ErrorKind::BadFile, "corrupt PNG (truncated)");
}

TEST_CASE("image: every file of tests/data/images/bad is refused, naming it") {
  int count = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(kImages / "bad")) {
    const std::string path = entry.path().string();
    CAPTURE(path);
    const Bytes bytes = file_bytes(entry.path());
    for (const bool from_file : {false, true}) {
      try {
        (void)(from_file ? load(path) : decode(bytes, path));
        FAIL_CHECK("decoded without an error");
      } catch (const Error& e) {
        CHECK_MESSAGE(std::string(e.what()).starts_with(path + ": "), e.what());
      }
    }
    ++count;
  }
  CHECK(count >= 8);
}
