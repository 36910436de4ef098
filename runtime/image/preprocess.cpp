#include "runtime/image/preprocess.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/spec.hpp"
#include "runtime/error.hpp"
#include "runtime/text/tokenize/json_file.hpp"

namespace lathe::image {
namespace {

using nlohmann::json;

// PIL's filters, each with its support in input pixels at scale 1.
struct Filter {
  double (*weight)(double);
  double support;
};

double box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double bilinear(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming(double x) {
  x = std::abs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= M_PI;
  // PIL's constants are float literals, promoted: the same here.
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}
double bicubic(double x) {  // Keys' cubic convolution, a = −0.5
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}
double lanczos(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::Box: return {box, 0.5};
    case Resample::Bilinear: return {bilinear, 1.0};
    case Resample::Hamming: return {hamming, 1.0};
    case Resample::Bicubic: return {bicubic, 2.0};
    case Resample::Lanczos: return {lanczos, 3.0};
    case Resample::Nearest: break;
  }
  return {box, 0.5};
}

// Fixed point of the 8-bit passes: 22 fractional bits, leaving room for a
// sum over 255s with weights of either sign in a 32-bit int.
constexpr int kPrecisionBits = 32 - 8 - 2;

// One pass's weights: for each output index, its first input index and
// its weights (in fixed point), as PIL computes them, in double, then
// rounded half away from zero.
struct Coefficients {
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // [out][stride]
  size_t stride = 0;
};

Coefficients coefficients(int64_t in_size, int64_t out_size, const Filter& f) {
  const double scale = static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = f.support * filterscale;
  Coefficients c;
  c.stride = static_cast<size_t>(std::ceil(support)) * 2 + 1;
  c.weights.assign(static_cast<size_t>(out_size) * c.stride, 0);
  std::vector<double> k(c.stride);
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), static_cast<int>(in_size)) - xmin;
    double sum = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[static_cast<size_t>(x)] = f.weight((x + xmin - center + 0.5) * ss);
      sum += k[static_cast<size_t>(x)];
    }
    int32_t* w = &c.weights[static_cast<size_t>(xx) * c.stride];
    for (int x = 0; x < xmax; ++x) {
      const double v = sum != 0.0 ? k[static_cast<size_t>(x)] / sum : k[static_cast<size_t>(x)];
      w[x] = static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first.push_back(xmin);
    c.count.push_back(xmax);
  }
  return c;
}

uint8_t clip8(int32_t v) { return static_cast<uint8_t>(std::clamp(v >> kPrecisionBits, 0, 255)); }

// One pass along x (horizontal) or y, every channel.
Image pass(const Image& in, int64_t out_size, const Filter& f, bool horizontal) {
  const Coefficients c = coefficients(horizontal ? in.width : in.height, out_size, f);
  Image out;
  out.width = horizontal ? out_size : in.width;
  out.height = horizontal ? in.height : out_size;
  out.rgb.resize(static_cast<size_t>(out.width * out.height * 3));
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      const size_t o = static_cast<size_t>(horizontal ? x : y);
      const int32_t* w = &c.weights[o * c.stride];
      for (int ch = 0; ch < 3; ++ch) {
        int32_t sum = 1 << (kPrecisionBits - 1);
        for (int i = 0; i < c.count[o]; ++i) {
          const int64_t at = c.first[o] + i;
          sum += in.at(horizontal ? at : x, horizontal ? y : at, ch) * w[i];
        }
        out.rgb[static_cast<size_t>((y * out.width + x) * 3 + ch)] = clip8(sum);
      }
    }
  return out;
}

// PIL's NEAREST resize: an affine transform sampling each output pixel's
// center, truncated.
Image nearest(const Image& in, int64_t width, int64_t height) {
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width * height * 3));
  const double sx = static_cast<double>(in.width) / static_cast<double>(width);
  const double sy = static_cast<double>(in.height) / static_cast<double>(height);
  for (int64_t y = 0; y < height; ++y) {
    const int64_t iy = std::min(static_cast<int64_t>(sy * (static_cast<double>(y) + 0.5)), in.height - 1);
    for (int64_t x = 0; x < width; ++x) {
      const int64_t ix = std::min(static_cast<int64_t>(sx * (static_cast<double>(x) + 0.5)), in.width - 1);
      for (int ch = 0; ch < 3; ++ch) out.rgb[static_cast<size_t>((y * width + x) * 3 + ch)] = in.at(ix, iy, ch);
    }
  }
  return out;
}

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  throw Error(ErrorKind::BadFile, name + ": " + what);
}

int64_t positive(const json& v, const std::string& name, const std::string& key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 65536)
    bad(name, key + " must be an integer in [1, 65536], not " + v.dump());
  return v.get<int64_t>();
}

// A square's side, or {"height", "width"}: (height, width).
std::pair<int64_t, int64_t> sides(const json& v, const std::string& name, const std::string& key) {
  if (v.is_number()) return {positive(v, name, key), positive(v, name, key)};
  if (!v.is_object() || !v.contains("height") || !v.contains("width"))
    bad(name, key + " must be a number or hold height and width, not " + v.dump());
  return {positive(v["height"], name, key + ".height"), positive(v["width"], name, key + ".width")};
}

// A flag: absent, the processor's default; null, Python's None, which the
// processor tests for truth (Gemma 3's configs write do_pan_and_scan: null).
bool flag(const json& j, const char* key, bool fallback, const std::string& name) {
  if (!j.contains(key)) return fallback;
  if (j[key].is_null()) return false;
  if (!j[key].is_boolean()) bad(name, std::string(key) + " must be true or false, not " + j[key].dump());
  return j[key].get<bool>();
}

std::array<double, 3> triple(const json& j, const char* key, const std::array<double, 3>& fallback,
                             const std::string& name) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  if (v.is_number()) return {v.get<double>(), v.get<double>(), v.get<double>()};
  if (!v.is_array() || v.size() != 3 || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); }))
    bad(name, std::string(key) + " must be three numbers (R, G, B), not " + v.dump());
  return {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
}

// Mllama's keys: the processor refuses to run without its resize or its
// padding, and takes a square tile.
void read_tiles(const json& j, const std::string& name, Preprocess& p) {
  if (!p.do_resize) bad(name, "do_resize must be true: MllamaImageProcessor always resizes to its canvas");
  if (!flag(j, "do_pad", true, name)) bad(name, "do_pad must be true: MllamaImageProcessor always pads to its canvas");
  // Without the conversion the processor takes an RGB file's pixels as they
  // are and fails on others, a distinction lathe's decoded images do not keep.
  if (!flag(j, "do_convert_rgb", true, name))
    throw Error(ErrorKind::Unsupported, name + ": do_convert_rgb false is not supported (every image is converted)");
  if (!j.contains("size")) bad(name, "size is missing");
  const json& size = j["size"];
  if (!size.is_object() || !size.contains("height") || !size.contains("width"))
    bad(name, "size must hold height and width (MllamaImageProcessor's tile), not " + size.dump());
  p.rule = SizeRule::Tiles;
  p.height = positive(size["height"], name, "size.height");
  p.width = positive(size["width"], name, "size.width");
  if (p.height != p.width) bad(name, "size.height and size.width must be equal (a square tile), not " + size.dump());
  p.max_tiles = positive(j.value("max_image_tiles", json(4)), name, "max_image_tiles");
}

}  // namespace

Preprocess parse_preprocessor_config(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    bad(name, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) bad(name, "not a JSON object");
  Preprocess p;
  p.processor = j.value("image_processor_type", std::string());
  const std::string& kind = p.processor;
  const bool clip = kind == "CLIPImageProcessor", siglip = kind == "SiglipImageProcessor",
             gemma3 = kind == "Gemma3ImageProcessor", pixtral = kind == "PixtralImageProcessor",
             mllama = kind == "MllamaImageProcessor";
  if (!clip && !siglip && !gemma3 && !pixtral && !mllama)
    throw Error(ErrorKind::Unsupported, name + ": image_processor_type \"" + kind +
                                           "\" is not supported yet (CLIPImageProcessor, SiglipImageProcessor, "
                                           "Gemma3ImageProcessor, PixtralImageProcessor and "
                                           "MllamaImageProcessor are)");
  if (gemma3 && flag(j, "do_pan_and_scan", false, name))
    throw Error(ErrorKind::Unsupported, name + ": do_pan_and_scan (Gemma 3's crops of a large image) is not supported yet");
  // Pixtral pastes onto white, Mllama alpha-composites onto it: the same
  // bytes for every color and alpha (make_resize_goldens.py checks it).
  p.convert_alpha_on_white = pixtral || mllama;
  p.do_resize = flag(j, "do_resize", true, name);
  if (j.contains("resample")) {
    const json& r = j["resample"];
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > 5)
      bad(name, "resample must be one of PIL's filters 0-5, not " + r.dump());
    p.resample = static_cast<Resample>(r.get<int>());
  } else {
    p.resample = clip || pixtral ? Resample::Bicubic : Resample::Bilinear;
  }
  if (mllama) {
    read_tiles(j, name, p);
  } else if (p.do_resize) {
    if (!j.contains("size")) bad(name, "size is missing");
    const json& size = j["size"];
    if (size.is_number()) {  // an old config: CLIP's shortest edge, the others' square
      p.rule = clip ? SizeRule::ShortestEdge : SizeRule::Fixed;
      p.edge = p.height = p.width = positive(size, name, "size");
    } else if (size.is_object() && size.contains("shortest_edge")) {
      p.rule = SizeRule::ShortestEdge;
      p.edge = positive(size["shortest_edge"], name, "size.shortest_edge");
    } else if (size.is_object() && size.contains("longest_edge")) {
      p.rule = SizeRule::LongestEdge;
      p.edge = positive(size["longest_edge"], name, "size.longest_edge");
    } else if (size.is_object() && size.contains("height") && size.contains("width")) {
      p.rule = SizeRule::Fixed;
      p.height = positive(size["height"], name, "size.height");
      p.width = positive(size["width"], name, "size.width");
    } else {
      bad(name, "size must hold shortest_edge, longest_edge, or height and width, not " + size.dump());
    }
    if (p.rule == SizeRule::LongestEdge) {
      if (!pixtral) bad(name, "size.longest_edge is Pixtral's rule; " + kind + " does not take it");
      std::tie(p.patch_height, p.patch_width) = sides(j.value("patch_size", json(16)), name, "patch_size");
    }
  }
  p.do_center_crop = clip && flag(j, "do_center_crop", true, name);
  if (p.do_center_crop) {
    std::tie(p.crop_height, p.crop_width) = sides(j.value("crop_size", json(224)), name, "crop_size");
  }
  p.do_rescale = flag(j, "do_rescale", true, name);
  if (j.contains("rescale_factor")) {
    if (!j["rescale_factor"].is_number() || !(j["rescale_factor"].get<double>() > 0))
      bad(name, "rescale_factor must be a positive number, not " + j["rescale_factor"].dump());
    p.rescale_factor = j["rescale_factor"].get<double>();
  }
  p.do_normalize = flag(j, "do_normalize", true, name);
  // CLIP's and Pixtral's defaults are OpenAI CLIP's statistics; SigLIP's,
  // Gemma 3's and Mllama's are 0.5 (Llama 3.2 Vision's config names CLIP's).
  const std::array<double, 3> clip_mean{0.48145466, 0.4578275, 0.40821073}, clip_std{0.26862954, 0.26130258, 0.27577711};
  p.mean = triple(j, "image_mean", clip || pixtral ? clip_mean : p.mean, name);
  p.std = triple(j, "image_std", clip || pixtral ? clip_std : p.std, name);
  for (double s : p.std)
    if (!(s > 0)) bad(name, "image_std must be positive");
  return p;
}

Preprocess read_preprocessor_config(const std::filesystem::path& path) {
  return parse_preprocessor_config(text::detail::read_text_file(path), path.string());
}

std::array<int64_t, 2> resized_size(const Preprocess& p, int64_t width, int64_t height) {
  if (!p.do_resize) return {width, height};
  switch (p.rule) {
    case SizeRule::Fixed: return {p.width, p.height};
    case SizeRule::ShortestEdge: {
      // The shorter side to the edge, the longer int(edge · long / short), in double as Python divides.
      const int64_t short_side = std::min(width, height), long_side = std::max(width, height);
      const auto other = static_cast<int64_t>(static_cast<double>(p.edge) * static_cast<double>(long_side) /
                                              static_cast<double>(short_side));
      return width <= height ? std::array<int64_t, 2>{p.edge, other} : std::array<int64_t, 2>{other, p.edge};
    }
    case SizeRule::LongestEdge: {
      const double ratio = std::max(static_cast<double>(height) / static_cast<double>(p.edge),
                                    static_cast<double>(width) / static_cast<double>(p.edge));
      if (ratio > 1) {
        height = static_cast<int64_t>(std::floor(static_cast<double>(height) / ratio));
        width = static_cast<int64_t>(std::floor(static_cast<double>(width) / ratio));
      }
      // Whole patches: (side − 1) // patch + 1 of them, floored as Python
      // floors: a side scaled down to 0 stays 0 (and is refused).
      const auto whole = [](int64_t side, int64_t patch) { return side < 1 ? 0 : ((side - 1) / patch + 1) * patch; };
      return {whole(width, p.patch_width), whole(height, p.patch_height)};
    }
    case SizeRule::Tiles:
      return fit_to_canvas(width, height, optimal_canvas(width, height, p.max_tiles, p.height), p.height);
  }
  return {width, height};
}

std::vector<float> unfold_patches(std::span<const float> pixels, int64_t channels, int64_t height, int64_t width,
                                  int64_t patch, int64_t lead, int64_t row_floats) {
  if (channels < 1 || patch < 1 || height < patch || width < patch || height % patch != 0 || width % patch != 0 || lead < 0)
    throw Error(ErrorKind::InvalidArgument, "unfold_patches: " + std::to_string(height) + " × " + std::to_string(width) +
                                                " pixels are not whole patches of " + std::to_string(patch));
  if (static_cast<int64_t>(pixels.size()) != channels * height * width)
    throw Error(ErrorKind::InvalidArgument, "unfold_patches: " + std::to_string(pixels.size()) + " values for " +
                                                std::to_string(channels) + " channels of " + std::to_string(height) +
                                                " × " + std::to_string(width));
  const int64_t rows = height / patch, cols = width / patch, unfolded = channels * patch * patch;
  if (row_floats == 0) row_floats = unfolded;
  if (row_floats < unfolded)
    throw Error(ErrorKind::InvalidArgument, "unfold_patches: rows of " + std::to_string(row_floats) +
                                                " values hold no patch of " + std::to_string(unfolded));
  std::vector<float> out(static_cast<size_t>((lead + rows * cols) * row_floats), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      size_t i = static_cast<size_t>((lead + r * cols + c) * row_floats);
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t y = 0; y < patch; ++y)
          for (int64_t x = 0; x < patch; ++x)
            out[i++] = pixels[static_cast<size_t>((ch * height + r * patch + y) * width + c * patch + x)];
    }
  return out;
}

std::vector<AspectRatio> supported_aspect_ratios(int64_t max_tiles) {
  std::vector<AspectRatio> out;
  for (const auto& [rows, cols] : spec::tile_arrangements(max_tiles)) out.push_back({rows, cols});
  return out;
}

AspectRatio optimal_canvas(int64_t width, int64_t height, int64_t max_tiles, int64_t tile) {
  if (width < 1 || height < 1) throw Error(ErrorKind::InvalidArgument, "optimal_canvas: an empty image");
  const std::vector<AspectRatio> ratios = supported_aspect_ratios(max_tiles);
  // Each canvas's scale: the lesser of its ratios, numpy's float64 quotients.
  std::vector<double> scales;
  for (const AspectRatio& r : ratios) {
    const double scale_h = static_cast<double>(r.rows * tile) / static_cast<double>(height);
    const double scale_w = static_cast<double>(r.cols * tile) / static_cast<double>(width);
    scales.push_back(scale_w > scale_h ? scale_h : scale_w);
  }
  // The least upscaling (scale ≥ 1) if any, else the least downscaling.
  double least_up = std::numeric_limits<double>::infinity(), least_down = 0;
  for (const double s : scales) {
    if (s >= 1) least_up = std::min(least_up, s);
    else least_down = std::max(least_down, s);
  }
  const double selected = std::isinf(least_up) ? least_down : least_up;
  // Of the canvases at exactly that scale, the first of the least area.
  AspectRatio best;
  for (size_t i = 0; i < ratios.size(); ++i)
    if (scales[i] == selected && (best.rows == 0 || ratios[i].rows * ratios[i].cols < best.rows * best.cols))
      best = ratios[i];
  return best;
}

std::array<int64_t, 2> fit_to_canvas(int64_t width, int64_t height, AspectRatio canvas, int64_t tile) {
  const int64_t target_w = std::clamp(width, tile, canvas.cols * tile);
  const int64_t target_h = std::clamp(height, tile, canvas.rows * tile);
  const double scale_h = static_cast<double>(target_h) / static_cast<double>(height);
  const double scale_w = static_cast<double>(target_w) / static_cast<double>(width);
  const auto follow = [](int64_t side, double scale, int64_t bound) {  // min(floor(side · scale), bound)
    return std::min(static_cast<int64_t>(std::floor(static_cast<double>(side) * scale)), bound);
  };
  if (scale_w < scale_h) return {target_w, follow(height, scale_w, target_h)};
  return {follow(width, scale_h, target_w), target_h};
}

Image resize(const Image& in, int64_t width, int64_t height, Resample resample) {
  if (width < 1 || height < 1) throw Error(ErrorKind::InvalidArgument, "resize: an empty output size");
  if (resample == Resample::Nearest) return nearest(in, width, height);
  const Filter f = filter_of(resample);
  // As PIL: along x first, then y; a side whose size is kept is not resampled.
  Image out = width != in.width ? pass(in, width, f, true) : in;
  if (height != in.height) out = pass(out, height, f, false);
  out.alpha.clear();
  return out;
}

namespace {

// `height` × `width` whose pixel (x, y) is the image's (x + left, y + top),
// zeros where that is outside it.
Image place(const Image& in, int64_t height, int64_t width, int64_t top, int64_t left) {
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.assign(static_cast<size_t>(width * height * 3), 0);
  for (int64_t y = 0; y < height; ++y) {
    const int64_t sy = y + top;
    if (sy < 0 || sy >= in.height) continue;
    for (int64_t x = 0; x < width; ++x) {
      const int64_t sx = x + left;
      if (sx < 0 || sx >= in.width) continue;
      for (int ch = 0; ch < 3; ++ch) out.rgb[static_cast<size_t>((y * width + x) * 3 + ch)] = in.at(sx, sy, ch);
    }
  }
  return out;
}

}  // namespace

Image center_crop(const Image& in, int64_t height, int64_t width) {
  // Hugging Face's offsets: the crop starts at (in − out) // 2 (Python's
  // floor); where the image is smaller it is first padded with zeros, the
  // larger half of the padding before it (ceil). The source of output
  // index i is then max(0, offset + pad) + i − pad.
  const auto first = [](int64_t in_size, int64_t out_size) {
    const int64_t d = in_size - out_size;
    const int64_t offset = d >= 0 ? d / 2 : -((-d + 1) / 2);
    const int64_t pad = d < 0 ? (-d + 1) / 2 : 0;
    return std::max<int64_t>(0, offset + pad) - pad;
  };
  return place(in, height, width, first(in.height, height), first(in.width, width));
}

Image pad(const Image& in, int64_t height, int64_t width) {
  if (height < in.height || width < in.width) throw Error(ErrorKind::InvalidArgument, "pad: smaller than the image");
  return place(in, height, width, 0, 0);
}

Pixels preprocess(const Image& image, const Preprocess& p) {
  Image rgb = image;
  if (!rgb.alpha.empty() && p.convert_alpha_on_white) {
    // PIL's paste of the image onto white through its alpha: each channel
    // (255 · (255 − a) + c · a) / 255, rounded as PIL's DIV255 rounds.
    for (size_t i = 0; i < rgb.alpha.size(); ++i) {
      const int a = rgb.alpha[i];
      for (size_t ch = 0; ch < 3; ++ch) {
        const int t = 255 * (255 - a) + rgb.rgb[i * 3 + ch] * a + 128;
        rgb.rgb[i * 3 + ch] = static_cast<uint8_t>(((t >> 8) + t) >> 8);
      }
    }
  }
  rgb.alpha.clear();
  const auto [w, h] = resized_size(p, rgb.width, rgb.height);
  if (w < 1 || h < 1)
    throw Error(ErrorKind::InvalidArgument, p.processor + ": an image of " + std::to_string(rgb.width) + " × " +
                                                std::to_string(rgb.height) + " would be resized to " +
                                                std::to_string(w) + " × " + std::to_string(h));
  // Mllama's canvas follows from the image's own size, as its fit does.
  const AspectRatio canvas =
      p.rule == SizeRule::Tiles ? optimal_canvas(rgb.width, rgb.height, p.max_tiles, p.height) : AspectRatio{};
  if (w != rgb.width || h != rgb.height) rgb = resize(rgb, w, h, p.resample);
  if (p.do_center_crop) rgb = center_crop(rgb, p.crop_height, p.crop_width);
  // Padded as uint8 zeros before the rescale, as the processor pads.
  if (p.rule == SizeRule::Tiles) rgb = pad(rgb, canvas.rows * p.height, canvas.cols * p.width);
  Pixels out;
  out.width = rgb.width;
  out.height = rgb.height;
  const size_t plane = static_cast<size_t>(out.width * out.height);
  out.chw.resize(plane * 3);
  for (size_t ch = 0; ch < 3; ++ch) {
    // numpy's float32 arithmetic: the rescale in double, then f32; mean
    // and std as f32; one subtraction and one division, each rounded.
    const float mean = static_cast<float>(p.mean[ch]), std = static_cast<float>(p.std[ch]);
    for (size_t i = 0; i < plane; ++i) {
      const uint8_t v = rgb.rgb[i * 3 + ch];
      float x = p.do_rescale ? static_cast<float>(static_cast<double>(v) * p.rescale_factor) : static_cast<float>(v);
      if (p.do_normalize) x = (x - mean) / std;
      out.chw[ch * plane + i] = x;
    }
  }
  return out;
}

Tiles preprocess_tiles(const Image& image, const Preprocess& p) {
  if (p.rule != SizeRule::Tiles)
    throw Error(ErrorKind::InvalidArgument, p.processor + " does not split an image into tiles");
  const Pixels canvas = preprocess(image, p);
  Tiles t;
  const AspectRatio ratio = optimal_canvas(image.width, image.height, p.max_tiles, p.height);
  t.rows = ratio.rows;
  t.cols = ratio.cols;
  const std::vector<AspectRatio> ratios = supported_aspect_ratios(p.max_tiles);
  t.aspect_ratio_id = std::find(ratios.begin(), ratios.end(), ratio) - ratios.begin() + 1;
  t.aspect_ratio_mask.assign(static_cast<size_t>(p.max_tiles), 0);
  std::fill_n(t.aspect_ratio_mask.begin(), t.rows * t.cols, 1);
  // split_to_tiles: tile (r, c) holds rows r · tile… and columns c · tile… of every channel.
  const int64_t side = p.height;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c) {
      Pixels& tile = t.tiles.emplace_back();
      tile.width = tile.height = side;
      tile.chw.reserve(static_cast<size_t>(3 * side * side));
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t y = 0; y < side; ++y) {
          const auto row = canvas.chw.begin() + (ch * canvas.height + r * side + y) * canvas.width + c * side;
          tile.chw.insert(tile.chw.end(), row, row + side);
        }
    }
  return t;
}

}  // namespace lathe::image
