// PNG (libpng) and JPEG (libjpeg-turbo) decoding from memory, to the pixels
// PIL's `Image.open(f).convert("RGB")` gives (image.hpp).
//
// Both libraries report an error by calling a handler of ours that must not
// return: it longjmps back to a setjmp. C++ allows that only where a throw
// and catch in its place would run no non-trivial destructor. So each
// libpng or libjpeg call that can fail runs inside a small `*_stage`
// function whose first statement is the setjmp and whose locals are all
// trivial; the jump lands there, skipping only the libraries' C frames and
// our callbacks (trivial locals too). What owns memory (the output, the row
// pointers, the guards that destroy the libraries' structs) lives in the
// caller, created before a stage and released on every path out, by return
// or by throw. After a jump a stage returns false, the library's message
// kept in a fixed buffer, and the caller throws lathe::Error outside any C
// frame. Nothing throws through the libraries.
#include "runtime/image/image.hpp"

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdint>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t without including them
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>  // after jpeglib.h: JWRN_JPEG_EOF
#include <png.h>

#include "runtime/error.hpp"

namespace lathe::image {
namespace {

// Far beyond any real encoder's (progressive JPEGs have about 10), and what
// bounds a hostile file's cost: each scan is a pass over every block.
// djpeg's -maxscans guards the same way.
constexpr int kMaxJpegScans = 1000;
// libpng reads an ancillary chunk whole (a compressed one inflated): all
// but tRNS (256 bytes at most of use) are skipped below; this bounds it.
constexpr png_alloc_size_t kMaxPngChunk = png_alloc_size_t{1} << 20;

void check_file_size(const std::string& name, uintmax_t size, const Limits& limits) {
  if (size > static_cast<uintmax_t>(limits.max_file_bytes))
    throw Error(ErrorKind::InvalidArgument, name + ": " + std::to_string(size) + " bytes, over the " +
                                                std::to_string(limits.max_file_bytes) + " bytes this build accepts");
}

// On the dimensions a header states, before anything is allocated for them.
void check_dimensions(const std::string& name, int64_t width, int64_t height, const Limits& limits) {
  const std::string size = std::to_string(width) + "×" + std::to_string(height) + " pixels";
  if (width < 1 || height < 1) throw Error(ErrorKind::BadFile, name + ": " + size + ", an empty image");
  if (width > limits.max_side || height > limits.max_side)
    throw Error(ErrorKind::InvalidArgument,
                name + ": " + size + ", over the " + std::to_string(limits.max_side) + " a side this build accepts");
  // Both sides are below 2^31 (the formats' own bound), so this cannot overflow.
  if (width * height > limits.max_pixels)
    throw Error(ErrorKind::InvalidArgument, name + ": " + size + ", over the " + std::to_string(limits.max_pixels) +
                                                " pixels this build accepts");
}

// ---- PNG ----

// The input and libpng's first error message: both its io and its error
// pointer.
struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t offset;
  char error[200];
};

[[noreturn]] void png_on_error(png_structp png, png_const_charp message) {
  auto* source = static_cast<PngSource*>(png_get_error_ptr(png));
  if (source->error[0] == '\0') std::snprintf(source->error, sizeof source->error, "%s", message);
  png_longjmp(png, 1);
}

// Warnings are what libpng recovers from (a bad CRC on an ancillary chunk,
// which is then dropped; data after the image): the pixels stand. Never
// printed.
void png_on_warning(png_structp, png_const_charp) {}

void png_on_read(png_structp png, png_bytep out, size_t length) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  // An error, never zeros: a truncated file is refused, not decoded in part.
  if (length > source->size - source->offset) png_error(png, "truncated");
  std::memcpy(out, source->data + source->offset, length);
  source->offset += length;
}

struct PngGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngGuard() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

// What a row holds once libpng's transforms are done, before ours.
enum class PngRows {
  Rgb,     // 8-bit RGB: done
  Rgba,    // 8-bit RGBA: the alpha split off here
  Index,   // one palette index a byte, expanded here (PIL's palette differs from libpng's)
  Gray16,  // 16-bit gray, big-endian, clipped here (PIL does not take its high byte)
};

bool png_header_stage(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  return true;
}

// No gamma and no background: PIL applies neither (it ignores gAMA, sRGB
// and iCCP, and leaves alpha to whoever composites), and png_set_gamma or
// png_set_alpha_mode would change the pixels.
bool png_transform_stage(png_structp png, png_infop info, PngRows rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (rows == PngRows::Index) {
    if (depth < 8) png_set_packing(png);  // 1, 2, 4-bit indices to a byte each, unscaled
  } else if (rows != PngRows::Gray16) {
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);  // scaled, as PIL's L;2, L;4
    if (depth == 16) png_set_strip_16(png);  // the high byte, as PIL's RGB;16B, LA;16B, RGBA;16B
    if (!(color & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);  // gray + alpha to RGBA
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return true;
}

// png_read_end reads on to IEND, so that a file cut anywhere is an error.
// Stricter than PIL, which decodes a PNG cut after its last row's data (in
// IDAT's zlib checksum, its CRC, or before IEND): a cut file is refused
// whatever it still holds.
bool png_pixels_stage(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, info);  // `info`: a tRNS after IDAT is kept too, PIL applies it
  return true;
}

[[noreturn]] void png_failed(const std::string& name, const PngSource& source) {
  throw Error(ErrorKind::BadFile, name + ": corrupt PNG (" + (source.error[0] ? source.error : "unknown error") + ")");
}

// The file's last tRNS, raw (libpng keeps it for us unparsed: its parser
// drops a tRNS longer than PLTE, or one after IDAT, which PIL takes).
std::optional<std::vector<uint8_t>> raw_trns(png_structp png, png_infop info) {
  png_unknown_chunkp chunks = nullptr;
  const int count = png_get_unknown_chunks(png, info, &chunks);
  std::optional<std::vector<uint8_t>> trns;
  for (int i = 0; i < count; ++i)
    if (std::memcmp(chunks[i].name, "tRNS", 4) == 0) trns.emplace(chunks[i].data, chunks[i].data + chunks[i].size);
  return trns;
}

Image decode_png(std::span<const uint8_t> bytes, const std::string& name, const Limits& limits) {
  PngSource source{bytes.data(), bytes.size(), 0, {}};
  PngGuard guard;
  guard.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, png_on_error, png_on_warning);
  if (guard.png) guard.info = png_create_info_struct(guard.png);
  if (!guard.info) throw Error(ErrorKind::OutOfMemory, name + ": libpng could not allocate its state");
  png_structp png = guard.png;
  png_infop info = guard.info;
  png_set_read_fn(png, &source, png_on_read);
  // The sides are checked below against `limits`, with a clearer message;
  // libpng's default (a million) would refuse some first as "corrupt".
  png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_set_chunk_malloc_max(png, kMaxPngChunk);
  // Every ancillary chunk but tRNS is skipped unread (its CRC checked):
  // none changes PIL's pixels, and each parser skipped is one a hostile
  // file cannot reach. tRNS is kept raw, read as PIL reads it (below).
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  static const png_byte kTrns[] = "tRNS";
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, kTrns, 1);
  // An index past PLTE is no error to PIL (it is gray, below): none here either.
  png_set_check_for_invalid_index(png, 0);

  if (!png_header_stage(png, info)) png_failed(name, source);
  const int64_t width = png_get_image_width(png, info);
  const int64_t height = png_get_image_height(png, info);
  check_dimensions(name, width, height, limits);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  // PIL 9.4 opens a 16-bit gray PNG as mode "I" (32-bit integers holding
  // the sample) and convert("RGB") clips each to 0..255: 0x00ff is 255,
  // 0x0100 and 0x1234 are 255 too, not 1 and 0x12. Every other 16-bit
  // type is read through an "...;16B" rawmode that keeps the high byte.
  PngRows kind = color & PNG_COLOR_MASK_ALPHA ? PngRows::Rgba : PngRows::Rgb;
  if (color == PNG_COLOR_TYPE_PALETTE) kind = PngRows::Index;
  if (color == PNG_COLOR_TYPE_GRAY && depth == 16) kind = PngRows::Gray16;
  if (!png_transform_stage(png, info, kind)) png_failed(name, source);
  const size_t w = static_cast<size_t>(width), h = static_cast<size_t>(height);
  const size_t pixel_bytes = kind == PngRows::Rgba ? 4 : kind == PngRows::Index ? 1 : kind == PngRows::Gray16 ? 2 : 3;
  if (png_get_rowbytes(png, info) != w * pixel_bytes)  // not the layout the transforms promise
    throw Error(ErrorKind::BadFile, name + ": corrupt PNG (unexpected row layout)");

  // Rows are read straight into the output, 3w bytes apart (4w for RGBA):
  // an index or a 16-bit gray sample is narrower than its RGB, so each row
  // is widened in place, back to front; RGBA is narrowed, front to back.
  const size_t stride = w * (kind == PngRows::Rgba ? 4 : 3);
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(stride * h);
  std::vector<png_bytep> rows(h);
  for (size_t y = 0; y < h; ++y) rows[y] = image.rgb.data() + y * stride;
  if (!png_pixels_stage(png, info, rows.data())) png_failed(name, source);
  const std::optional<std::vector<uint8_t>> found = raw_trns(png, info);
  const std::vector<uint8_t> trns = found.value_or(std::vector<uint8_t>{});
  // On gray or RGB, tRNS is a color key: 2 bytes or 6. PIL refuses less.
  const bool gray = color == PNG_COLOR_TYPE_GRAY;
  const bool keyed = found && (gray || color == PNG_COLOR_TYPE_RGB);
  if (keyed && trns.size() < (gray ? 2u : 6u))
    throw Error(ErrorKind::BadFile,
                name + ": corrupt PNG (tRNS: " + std::to_string(trns.size()) + " bytes, too short)");

  uint8_t* rgb = image.rgb.data();
  if (kind == PngRows::Index) {
    // PIL's palette has 256 entries, a gray ramp (i, i, i) past those PLTE
    // gives (libpng's are black there), and 256 alphas, 255 past tRNS's.
    uint8_t table[256 * 3], alphas[256];
    for (int i = 0; i < 256; ++i) table[3 * i] = table[3 * i + 1] = table[3 * i + 2] = static_cast<uint8_t>(i);
    png_colorp palette = nullptr;
    int entries = 0;
    if (png_get_PLTE(png, info, &palette, &entries) & PNG_INFO_PLTE)
      for (int i = 0; i < entries && i < 256; ++i) {
        table[3 * i] = palette[i].red;
        table[3 * i + 1] = palette[i].green;
        table[3 * i + 2] = palette[i].blue;
      }
    std::memset(alphas, 255, sizeof alphas);
    if (!trns.empty()) {
      std::memcpy(alphas, trns.data(), std::min<size_t>(trns.size(), 256));
      image.alpha.resize(w * h);
    }
    for (size_t y = 0; y < h; ++y)
      for (size_t x = w; x-- > 0;) {  // index x is read before 3x..3x+2 is written
        const uint8_t index = rows[y][x];
        if (!trns.empty()) image.alpha[y * w + x] = alphas[index];
        std::memcpy(rows[y] + 3 * x, table + 3 * index, 3);
      }
  } else if (kind == PngRows::Gray16) {
    for (png_bytep row : rows)
      for (size_t x = w; x-- > 0;) {
        const unsigned v = (unsigned{row[2 * x]} << 8) | row[2 * x + 1];
        row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = static_cast<uint8_t>(v > 255 ? 255 : v);
      }
  } else if (kind == PngRows::Rgba) {
    image.alpha.resize(w * h);
    for (size_t i = 0; i < w * h; ++i) {  // 3i < 4i: each byte is read before it is overwritten
      rgb[3 * i] = rgb[4 * i];
      rgb[3 * i + 1] = rgb[4 * i + 1];
      rgb[3 * i + 2] = rgb[4 * i + 2];
      image.alpha[i] = rgb[4 * i + 3];
    }
    image.rgb.resize(w * h * 3);  // its capacity stays 4wh: shrinking would copy it
  }
  // A tRNS color on gray, as PIL's convert("RGBA") applies it: the key's
  // low bytes against the decoded 8-bit pixel, so a 16-bit key is taken mod
  // 256, and a 1, 2 or 4-bit one unscaled against the scaled gray. (A tRNS
  // on gray + alpha or RGBA is ignored, as PIL does.) One on RGB is checked
  // but not kept: PIL opens the file as an RGB image, which the processors
  // that composite (Pixtral's convert_to_rgb) leave as it is.
  if (keyed && gray) {
    const uint8_t key[3] = {trns[1], trns[gray ? 1 : 3], trns[gray ? 1 : 5]};
    image.alpha.resize(w * h);
    for (size_t i = 0; i < w * h; ++i) image.alpha[i] = std::memcmp(rgb + 3 * i, key, 3) == 0 ? 0 : 255;
  }
  if (std::all_of(image.alpha.begin(), image.alpha.end(), [](uint8_t a) { return a == 255; })) {
    image.alpha.clear();  // every pixel opaque: as if the file had no transparency
    image.alpha.shrink_to_fit();
  }
  return image;
}

// ---- JPEG ----

// libjpeg's error manager first, so that cinfo->err is this struct too.
struct JpegErrors {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  if (errors->message[0] == '\0') (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (level -1) pass, as in PIL, except the end of the data: there
// jpeg_mem_src pads with an EOI and libjpeg would go on, filling the rest
// of the image with gray. PIL refuses a truncated JPEG; so does this.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_on_error(cinfo);
}

void jpeg_on_output(j_common_ptr) {}

void jpeg_on_progress(j_common_ptr cinfo) {
  if (cinfo->is_decompressor && reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxJpegScans) {
    auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(errors->message, sizeof errors->message, "more than %d scans", kMaxJpegScans);
    std::longjmp(errors->jump, 1);
  }
}

// Zero-filled, cinfo.mem is null until jpeg_create_decompress, and
// jpeg_destroy_decompress is then a no-op: safe on every path.
struct JpegGuard {
  jpeg_decompress_struct cinfo{};
  JpegErrors errors{};
  jpeg_progress_mgr progress{};
  ~JpegGuard() { jpeg_destroy_decompress(&cinfo); }
};

bool jpeg_header_stage(JpegGuard& j, const uint8_t* data, size_t size) {
  if (setjmp(j.errors.jump)) return false;
  jpeg_create_decompress(&j.cinfo);  // zeroes all but cinfo.err, so progress is set after
  j.cinfo.progress = &j.progress;
  jpeg_mem_src(&j.cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&j.cinfo, TRUE);
  return true;
}

// A progressive (multi-scan) image is read whole here, every scan under the
// progress monitor.
bool jpeg_start_stage(JpegGuard& j) {
  if (setjmp(j.errors.jump)) return false;
  jpeg_start_decompress(&j.cinfo);
  return true;
}

bool jpeg_rows_stage(JpegGuard& j, uint8_t* out, size_t stride) {
  if (setjmp(j.errors.jump)) return false;
  while (j.cinfo.output_scanline < j.cinfo.output_height) {
    JSAMPROW row = out + j.cinfo.output_scanline * stride;
    if (jpeg_read_scanlines(&j.cinfo, &row, 1) != 1) {  // a suspension, which a memory source never asks for
      std::snprintf(j.errors.message, sizeof j.errors.message, "no progress decoding a row");
      return false;
    }
  }
  jpeg_finish_decompress(&j.cinfo);  // reads on to EOI: a file cut after the last row is refused too
  return true;
}

[[noreturn]] void jpeg_failed(const std::string& name, const JpegGuard& j) {
  const char* why = j.errors.message[0] ? j.errors.message : "unknown error";
  throw Error(ErrorKind::BadFile, name + ": corrupt JPEG (" + why + ")");
}

// The defaults stay: JDCT_ISLOW and fancy upsampling are what PIL decodes
// with (on the same libjpeg-turbo), so the pixels are equal, not close.
Image decode_jpeg(std::span<const uint8_t> bytes, const std::string& name, const Limits& limits) {
  auto guard = std::make_unique<JpegGuard>();  // a few KB, off the stack
  JpegGuard& j = *guard;
  j.cinfo.err = jpeg_std_error(&j.errors.pub);
  j.errors.pub.error_exit = jpeg_on_error;
  j.errors.pub.emit_message = jpeg_on_message;
  j.errors.pub.output_message = jpeg_on_output;
  j.progress.progress_monitor = jpeg_on_progress;

  if (!jpeg_header_stage(j, bytes.data(), bytes.size())) jpeg_failed(name, j);
  if (j.cinfo.jpeg_color_space == JCS_CMYK || j.cinfo.jpeg_color_space == JCS_YCCK)
    throw Error(ErrorKind::BadFile, name + ": a CMYK JPEG; convert it to RGB first");
  check_dimensions(name, j.cinfo.image_width, j.cinfo.image_height, limits);
  j.cinfo.out_color_space = JCS_RGB;  // from YCbCr, RGB or gray (replicated, as PIL's L to RGB)

  if (!jpeg_start_stage(j)) jpeg_failed(name, j);
  if (j.cinfo.output_components != 3 || j.cinfo.output_width != j.cinfo.image_width ||
      j.cinfo.output_height != j.cinfo.image_height)
    throw Error(ErrorKind::BadFile, name + ": corrupt JPEG (unexpected output layout)");

  Image image;
  image.width = j.cinfo.output_width;
  image.height = j.cinfo.output_height;
  const size_t stride = static_cast<size_t>(image.width) * 3;
  image.rgb.resize(stride * static_cast<size_t>(image.height));
  if (!jpeg_rows_stage(j, image.rgb.data(), stride)) jpeg_failed(name, j);
  return image;
}

}  // namespace

Image decode(std::span<const uint8_t> bytes, const std::string& name, const Limits& limits) {
  check_file_size(name, bytes.size(), limits);
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return decode_png(bytes, name, limits);
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff)
    return decode_jpeg(bytes, name, limits);
  throw Error(ErrorKind::BadFile, name + ": not a PNG or JPEG image");
}

Image load(const std::filesystem::path& path, const Limits& limits) {
  const std::string name = path.string();
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec == std::errc::no_such_file_or_directory) throw Error(ErrorKind::NotFound, name + ": no such file");
  if (ec) throw Error(ErrorKind::Io, name + ": cannot be read (" + ec.message() + ")");
  check_file_size(name, size, limits);

  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(name.c_str(), "rb"), std::fclose);
  if (!file) {
    const int err = errno;
    if (err == ENOENT) throw Error(ErrorKind::NotFound, name + ": no such file");
    throw Error(ErrorKind::Io, name + ": cannot be read (" + std::strerror(err) + ")");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (std::fread(bytes.data(), 1, bytes.size(), file.get()) != bytes.size()) {
    const std::string why = std::ferror(file.get()) ? std::strerror(errno) : "it ended early";
    throw Error(ErrorKind::Io, name + ": read failed (" + why + ")");
  }
  return decode(bytes, name, limits);
}

}  // namespace lathe::image
