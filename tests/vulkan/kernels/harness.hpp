// What every kernel test shares (tests/vulkan/kernels/*_test.cpp, a file
// per kernel family): the grid of specs, the tolerances, random data, the
// device buffers and the Gpu that compiles and runs one kernel instance.
//
// Every kernel instance a supported spec needs, run on the device against a
// plain C++ computation in double (ggml's test-backend-ops, llm.c's dev/cuda
// files), at the shapes of models/*.toml and tests/specs/tiny/*.toml. The
// references here share no code with shaders/: they are the textbook
// definitions (HF transformers' modules), written out. Each check reports the
// normalized error ‖gpu − cpu‖₂ / ‖cpu‖₂ and holds it to a tolerance stated
// per kernel below; outputs are followed by guard words that must survive.
//
// Huge matrices are cut down through the push constant n (the weight rows
// used): K, the compile-time width, is what shapes the kernel, and llama-3-8b's
// 128256 × 4096 LM head at full size would take minutes on lavapipe.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <numeric>
#include <numbers>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "generator/emit/emit_cpp.hpp"
#include "runtime/reference/reference.hpp"
#include "generator/emit/emit_kernels.hpp"
#include "generator/emit/shader_compiler.hpp"
#include "generator/lower/model_plan.hpp"
#include "generator/spec/parse.hpp"
#include "core/kernels.hpp"
#include "runtime/vk/buffer.hpp"
#include "runtime/vk/descriptors.hpp"
#include "runtime/vk/device_features.hpp"
#include "runtime/vk/pipeline.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/quant.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using lathe::test::VulkanTest;
namespace fs = std::filesystem;

namespace lathe::kernel_tests {


// Tolerances on ‖gpu − cpu‖₂ / ‖cpu‖₂. The CPU copies of weights and caches
// are rounded to the dtype the device holds, so what is left is f32
// arithmetic, plus f16 rounding where a kernel writes an f16 cache.
constexpr double kEmbedTolerance = 1e-7;      // one f32 rounding of E + P; exact without positions
constexpr double kNormTolerance = 1e-5;       // LayerNorm of a row whose mean is 25× its spread: x − mean loses ~25 ulps
constexpr double kMatmulTolerance = 1e-5;     // f32 dot products, K ≤ 14336
// The coop layout's products take x and W rounded to f16 (unit roundoff u =
// 2^-11 each, so a product's relative error is under 2u) and sum in f32:
// over K terms of random sign the sum's RMS relative error is u·√(2/3) ≈
// 4e-4 whatever K, and a gated output multiplies two such sums (√2 of it).
// 3u leaves room for the activation's slope.
constexpr double kCoopTolerance = 3.0 / 2048;
// The dot layout against the product with x unquantized: what x's 8-bit
// blocks lose (up to d/2 = max|x|/254 a value, rms about 1/254 of x's for
// uniform x). Measured on lavapipe, the worst over the grid's instances of
// each dtype: q8_0 0.0100 (K = 64, gated: two products' errors over two
// blocks), q4_0 0.0067, q4_1 0.0075, q5_0 0.0073, q5_1 0.0068, q4_k 0.0069,
// q5_k 0.0077, q6_k 0.0069. Twice the worst.
constexpr double kDotTolerance = 2e-2;
constexpr double kRopeTolerance = 1e-5;       // f32 angles position · inv_freq and lavapipe's sin/cos, positions < 100
constexpr double kF16CacheTolerance = 1e-3;   // f16 keeps 11 bits: ≤ 2^-12 relative per element
constexpr double kAttentionTolerance = 1e-5;  // f32 online softmax over ≤ 100 keys
// Flash attention on matrix units: q (scaled) and, from an f32 cache, k and
// v rounded to f16 (u = 2^-11 each), P rounded to f16. A score's relative
// error is the coop layout's u·√(2/3) of sums of random sign, so a weight
// moves by that times the score (|s| ≤ 3 here: q in ±2, the cache's values
// in ±1, scaled by 1/√DH), plus u of P and u of v: about 4u. 6u leaves room;
// not yet run on a device with matrix units.
constexpr double kFlashCoopTolerance = 6.0 / 2048;
constexpr double kCopyTolerance = 1e-12;      // f32 copies (the V cache) are exact

// ---- The grid: every supported spec and the kernel instances it needs.

struct Model {
  spec::Spec spec;
  std::vector<emit::KernelInstance> kernels;
  // A vision tower's build (lower::tower_spec of this spec): what its
  // input rows and projector are.
  std::optional<spec::Spec> tower_of;
};

inline std::vector<fs::path> toml_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".toml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// LATHE_KERNEL_SPECS="tiny/quant-,tiny/qwen3-moe.toml": the grid narrowed to
// the spec files whose path holds one of these (a short GPU lease runs the
// new variants over every weight dtype without the whole grid's pipelines,
// bench/gpu/run); unset or empty, every spec.
inline const char* kernel_specs() {
  const char* selected = std::getenv("LATHE_KERNEL_SPECS");
  return selected != nullptr && *selected != '\0' ? selected : nullptr;
}

// Whether the grid is whole: the checks that it covers what the tests need
// (two MoE models, the expert slots) hold over the whole grid alone.
inline bool whole_grid() { return kernel_specs() == nullptr; }

inline bool kernel_spec_selected(const std::string& path) {
  if (whole_grid()) return true;
  std::istringstream items(kernel_specs());
  for (std::string item; std::getline(items, item, ',');)
    if (!item.empty() && path.find(item) != std::string::npos) return true;
  return false;
}

// models/*.toml that the runtime supports (the rest are refused by
// check_supported: MoE), then tests/specs/tiny/*.toml; LATHE_KERNEL_SPECS narrows them.
inline const std::vector<Model>& models() {
  static const std::vector<Model> all = [] {
    std::vector<Model> out;
    const fs::path root = test::source_dir(LATHE_SOURCE_DIR);
    for (const fs::path& dir : {root / "models", root / "tests" / "specs" / "tiny", root / "tests" / "specs" / "encoder",
                                root / "tests" / "specs" / "encdec"}) {
      for (const fs::path& file : toml_files(dir)) {
        if (!kernel_spec_selected(file.lexically_relative(root).generic_string())) continue;
        spec::Diagnostics diag(file.string());
        std::optional<spec::Spec> s = spec::parse_spec_file(file.string(), diag);
        REQUIRE_MESSAGE(s, diag.format());
        if (!emit::check_supported(*s, diag)) continue;
        // The instances its plan uses, and the standalone norm of its width:
        // pre-norm plans fold every norm into a matmul, but the lowering
        // dispatches it for a norm whose reader is no matmul.
        std::vector<emit::KernelInstance> instances = emit::kernel_instances(*s);
        instances.push_back(
            emit::kernel_instance(*s, lower::KernelKey{.family = kernels::Family::Norm, .width = s->dims.hidden}));
        out.push_back({*s, std::move(instances)});
      }
    }
    // The vision specs whose tower runs on the device: the tower's build (its
    // own spec's constants) and the decoder's, whose embedding splices.
    for (const fs::path& file : toml_files(root / "tests" / "specs" / "vision")) {
      if (!kernel_spec_selected(file.lexically_relative(root).generic_string())) continue;
      spec::Diagnostics diag(file.string());
      std::optional<spec::Spec> s = spec::parse_spec_file(file.string(), diag);
      REQUIRE_MESSAGE(s, diag.format());
      spec::Diagnostics tower_diag(file.string());
      if (!lower::plan_tower(*s, tower_diag)) continue;
      const spec::Spec tower = lower::tower_spec(*s);
      std::vector<emit::KernelInstance> instances = emit::tower_kernel_instances(*s);
      instances.push_back(
          emit::kernel_instance(tower, lower::KernelKey{.family = kernels::Family::Norm, .width = tower.dims.hidden}));
      out.push_back({tower, std::move(instances), *s});
      // (A decoder whose layers cross-attend to the image does not run yet.)
      spec::Diagnostics decoder_diag(file.string());
      if (emit::check_supported(*s, decoder_diag)) out.push_back({*s, emit::kernel_instances(*s)});
    }
    return out;
  }();
  return all;
}

// The generated constants of an instance: its `#define NAME VALUE` lines.
class Constants {
 public:
  explicit Constants(const emit::KernelInstance& k) {
    std::istringstream lines(k.source.constants);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::string directive, name, value;
      if (words >> directive >> name >> value && directive == "#define") values_[name] = value;
    }
  }
  uint32_t u(const std::string& name) const { return static_cast<uint32_t>(std::stoul(at(name))); }  // "576u"
  double f(const std::string& name) const { return std::stod(at(name)); }
  bool flag(const std::string& name) const { return u(name) != 0; }

 private:
  const std::string& at(const std::string& name) const {
    auto it = values_.find(name);
    REQUIRE_MESSAGE(it != values_.end(), "the instance defines no constant " << name);
    return it->second;
  }
  std::map<std::string, std::string> values_;
};

// A spec with attention layers (every one but a pure state-space model's).
inline bool has_attention(const spec::Spec& s) { return !s.ssm.enabled() || s.ssm.hybrid(); }

// Calls f(model, instance, constants) for every instance of one shaders/ file.
// Every spec has one (`decoders_only`: every decoder's; an encoder has no LM
// head and no argmax).
// `needs`, when given, says which specs have one (latent attention's mla.comp).
template <typename F>
inline void for_each_instance(const char* file, F&& f, bool decoders_only = false, bool (*needs)(const spec::Spec&) = nullptr) {
  size_t count = 0, expected = 0;
  for (const Model& m : models()) {
    if ((!decoders_only || !m.spec.encoder()) && (needs == nullptr || needs(m.spec))) ++expected;
    for (const emit::KernelInstance& k : m.kernels) {
      if (k.source.file != file) continue;
      const std::string& spec_name = m.spec.name;
      const std::string& instance = k.name;
      CAPTURE(spec_name);
      CAPTURE(instance);
      f(m, k, Constants(k));
      ++count;
    }
  }
  CHECK_MESSAGE(count >= expected, "every supported spec needs " << file);
}

// A matmul instance as a pass in `tile` runs it: the module of the tile's
// layout (emit::compile_kernels compiles the same one).
inline emit::KernelInstance matmul_in(const emit::KernelInstance& k, const plan::Tile& tile, DType dtype) {
  emit::KernelInstance out = k;
  out.source = emit::layout_source(k.source, emit::module_layout(tile.layout(), dtype));
  return out;
}

// ---- Numbers.

// ‖gpu − cpu‖₂ / ‖cpu‖₂ over the elements added; infinite once a GPU value is not finite.
class NormalizedError {
 public:
  void add(double gpu, double cpu) {
    if (!std::isfinite(gpu)) finite_ = false;
    diff_ += (gpu - cpu) * (gpu - cpu);
    norm_ += cpu * cpu;
  }
  double value() const {
    if (!finite_) return std::numeric_limits<double>::infinity();
    return norm_ > 0 ? std::sqrt(diff_ / norm_) : std::sqrt(diff_);
  }

 private:
  double diff_ = 0, norm_ = 0;
  bool finite_ = true;
};

// The largest error of a kernel family over the grid, reported at the end of its test case.
struct Worst {
  double error = 0;
  std::string where;
  void add(double e, const std::string& at) {
    if (e >= error) error = e, where = at;
  }
};

// One line per instance: "gpt2 matmul_768_f32_bias: decode 1.2e-07, prefill 13 rows 3.4e-07".
class Report {
 public:
  Report(const Model& m, const emit::KernelInstance& k, Worst& worst, std::string note = {})
      : at_(m.spec.name + " " + k.name), note_(std::move(note)), worst_(worst) {}
  ~Report() { MESSAGE(at_ << note_ << ":" << text_.str()); }
  // Checks `e` against `tolerance` and records it.
  void check(const std::string& what, double e, double tolerance) {
    CAPTURE(what);
    CHECK(e < tolerance);
    text_ << (first_ ? " " : ", ") << what << " " << e;
    first_ = false;
    worst_.add(e, at_ + " (" + what + ")");
  }

 private:
  std::string at_, note_;
  Worst& worst_;
  std::ostringstream text_;
  bool first_ = true;
};

inline void report_worst(const std::string& family, const Worst& w) {
  MESSAGE(family << ": worst normalized error " << w.error << " at " << w.where);
}

inline std::mt19937& rng() {
  static std::mt19937 generator(20240611);
  return generator;
}

inline std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = u(rng());
  return out;
}

inline uint32_t random_below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng()); }

inline DType weight_dtype(uint32_t wdtype) {  // common.glsl's WDTYPE: the DType's number
  if (wdtype > static_cast<uint32_t>(DType::Q6_K)) FAIL("WDTYPE " << wdtype << " is no dtype");
  return static_cast<DType>(wdtype);
}

// Whether `d` is a dtype the spec's matrices have: weights.dtype or one of
// [weights.dtypes].
inline bool spec_matrix_dtype(const spec::Spec& s, DType d) {
  if (d == s.weights.dtype) return true;
  for (const auto& [role, dtypes] : s.weights.role_dtypes)
    if (std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end()) return true;
  return false;
}

inline size_t dtype_bytes(DType d) { return weights::dtype_size(d); }

// `v` stored in `d` (little-endian bytes at `out`), and the value it holds then.
inline double store(DType d, float v, std::byte* out) {
  weights::store_element(d, v, out);
  return weights::load_element(d, out);
}

inline double load(DType d, const std::byte* in) { return weights::load_element(d, in); }

// The activations as HF transformers defines them (ACT2FN), in double.
inline double activate(spec::Activation a, double x) {
  switch (a) {
    case spec::Activation::SiLU: return x / (1 + std::exp(-x));
    case spec::Activation::GeluErf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));  // gelu
    case spec::Activation::GeluTanh:  // gelu_new
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case spec::Activation::ReLU: return std::max(x, 0.0);
    case spec::Activation::GeluQuick: return x / (1 + std::exp(-1.702 * x));  // quick_gelu
  }
  FAIL("no such activation");
  return 0;
}

// The ACT value that names activation `a` in an instance: its own ACT_<NAME>
// constant (common.glsl's activate() reads those names).
inline uint32_t act_constant(const Constants& c, spec::Activation a) {
  std::string name = "ACT_";
  for (char ch : spelling(a).key) name += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return c.u(name);
}

// ---- The device side.

constexpr VkBufferUsageFlags kStorage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
constexpr VkBufferUsageFlags kTexels = VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;

// Output buffers end in guard words that no kernel may write.
constexpr float kGuard = -7777.0f;
constexpr size_t kGuardWords = 64;

inline vk::Buffer make_buffer(vk::Device& device, size_t bytes, VkBufferUsageFlags usage = kStorage) {
  return vk::Buffer(device, std::max<size_t>(bytes, 16), usage, vk::MemoryUse::Device);
}

template <typename T>
inline vk::Buffer buffer_of(vk::Device& device, const std::vector<T>& data) {
  vk::Buffer b = make_buffer(device, data.size() * sizeof(T), kStorage | kTexels);
  vk::upload(device, b, data.data(), data.size() * sizeof(T));
  return b;
}

template <typename T>
inline std::vector<T> read_back(vk::Device& device, const vk::Buffer& b, size_t count) {
  std::vector<T> out(count);
  vk::download(device, b, out.data(), count * sizeof(T));
  return out;
}

// `values` followed by the guard words.
inline std::vector<float> guarded(std::vector<float> values) {
  values.insert(values.end(), kGuardWords, kGuard);
  return values;
}

inline void check_guard(const std::vector<float>& out, size_t used) {
  for (size_t i = used; i < out.size(); ++i) {
    if (out[i] != kGuard) {
      FAIL_CHECK("the kernel wrote past its output: element " << i << " (of " << used << ") holds " << out[i]);
      return;
    }
  }
}

inline vk::BufferBinding whole(const vk::Buffer& b) { return {b.handle(), 0, b.size()}; }

// A [rows][cols] matrix in a weight dtype, read by the kernels through an
// RGBA32UI texel view; row(r) is what the device holds, for the CPU.
// Rows never set stay unwritten (an embedding table needs only the rows of
// the tokens used, and llama-3-8b's is a gigabyte).
class Weights {
 public:
  // Rows as the device holds them (core/contract.hpp's device_row: a block
  // dtype's rows repacked into planes).
  Weights(vk::Device& device, DType dtype, int64_t rows, int64_t cols)
      : device_(device),
        dtype_(dtype),
        cols_(cols),
        row_bytes_(static_cast<size_t>(device_row(dtype, cols).texels) * 16),
        buffer_(make_buffer(device, static_cast<size_t>(rows) * row_bytes_, kTexels)),
        view_(device, buffer_.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, buffer_.size()) {
    REQUIRE((is_block_dtype(dtype) || (rows * cols * static_cast<int64_t>(dtype_bytes(dtype))) % 16 == 0));
  }

  // Fills rows [first, first + count) with random values (a block dtype:
  // ggml's reference quantization of them, and the CPU side its values).
  void fill(int64_t first, int64_t count) {
    const size_t width = static_cast<size_t>(cols_);
    if (is_block_dtype(dtype_)) {
      std::vector<float> v = random_floats(static_cast<size_t>(count) * width);
      const std::vector<std::byte> blocks = weights::quantize(dtype_, v);
      weights::dequantize(dtype_, blocks, v);
      for (int64_t r = 0; r < count; ++r)
        rows_[first + r].assign(v.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * width),
                                v.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r + 1) * width));
      const std::vector<std::byte> planes = weights::repack_blocks(dtype_, count, cols_, blocks);
      vk::upload(device_, buffer_, planes.data(), planes.size(), static_cast<VkDeviceSize>(first) * row_bytes_);
      return;
    }
    std::vector<std::byte> bytes(static_cast<size_t>(count) * width * dtype_bytes(dtype_));
    const std::vector<float> v = random_floats(static_cast<size_t>(count) * width);
    for (int64_t r = 0; r < count; ++r) {
      std::vector<double>& row = rows_[first + r];
      row.resize(width);
      for (size_t c = 0; c < width; ++c) {
        const size_t i = static_cast<size_t>(r) * width + c;
        row[c] = store(dtype_, v[i], &bytes[i * dtype_bytes(dtype_)]);
      }
    }
    vk::upload(device_, buffer_, bytes.data(), bytes.size(),
               static_cast<VkDeviceSize>(first) * width * dtype_bytes(dtype_));
  }

  const std::vector<double>& row(int64_t r) const { return rows_.at(r); }  // throws for a row never filled
  vk::TexelBinding binding() const { return {view_.handle()}; }
  // Rows [first, first + count) alone, as a plan::Part binds a row range of
  // a matrix too large to bind whole.
  vk::TexelBinding range(int64_t first, int64_t count) {
    ranges_.emplace_back(device_, buffer_.handle(), VK_FORMAT_R32G32B32A32_UINT, static_cast<VkDeviceSize>(first) * row_bytes_,
                         static_cast<VkDeviceSize>(count) * row_bytes_);
    return {ranges_.back().handle()};
  }

 private:
  vk::Device& device_;
  DType dtype_;
  int64_t cols_;
  size_t row_bytes_;
  vk::Buffer buffer_;
  vk::TexelView view_;
  std::deque<vk::TexelView> ranges_;
  std::map<int64_t, std::vector<double>> rows_;
};

// Compiles the instances it is asked for (once), creates their pipelines
// and runs single dispatches, waiting for each.
class Gpu {
 public:
  explicit Gpu(vk::Device& device)
      : device_(device), pipelines_(device, "-"), arena_(device), dummy_(make_buffer(device, 16, kStorage | kTexels)),
        dummy_view_(device, dummy_.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, 16) {}

  // Spec constants: 0 the workgroup size (`workgroup`, or the subgroup size
  // as the runtime sets it for every layout but matmul's tiled one), then
  // `extra` (matmul.comp's ROWS, TOKENS and XT).
  // `named`: the family's bindings by name (core/kernels.hpp), `push` its
  // push constants by name. `khr`: a coop-layout matmul's module rewritten
  // for KHR's cooperative matrices (the CoopKhr layout), as the generator
  // builds it.
  template <typename Named, typename Push>
  void run(const Model& m, const emit::KernelInstance& k, const Named& named, const Push& push, uint32_t groups_x,
           uint32_t groups_y = 1, std::vector<uint32_t> extra = {}, uint32_t groups_z = 1, uint32_t workgroup = 0,
           bool khr = false) {
    const auto bindings = named.array();
    REQUIRE(sizeof(Push) == k.push->size());
    // Instances of two specs may share a name ("argmax", "norm_64") with other constants, or be
    // the same kernel under two names (the same file and constants: many tiny specs share their
    // widths): keyed by the text, each kernel compiles and its pipelines are created once.
    const std::string text = k.source.file + (khr ? " (khr)\n" : "\n") + k.source.constants;
    auto it = compiled_.find(text);
    if (it == compiled_.end())
      it = compiled_
               .emplace(text, Compiled{m.spec.name + "/" + k.name + (khr ? "/khr" : ""),
                                       !khr ? emit::compile_kernel(k.source)
                                       : k.source.file == kernels::flash_file(kernels::Layout::CoopKhr)
                                           ? emit::compile_flash(k.source, kernels::Layout::CoopKhr)
                                           : emit::compile_layout(k.source, kernels::Layout::CoopKhr)})
               .first;
    const Compiled& code = it->second;
    vk::PipelineKey key;
    key.kernel = code.name;
    for (const vk::Binding& b : bindings)
      key.bindings.push_back(std::holds_alternative<vk::TexelBinding>(b) ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                                         : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
    key.spec_constants = {workgroup > 0 ? workgroup : device_.info().subgroup_size};
    key.spec_constants.insert(key.spec_constants.end(), extra.begin(), extra.end());
    key.push_size = sizeof(Push);
    const vk::Pipeline& p =
        pipelines_.get(vk::KernelCode{code.name, code.spirv.data(), code.spirv.size(), sizeof(Push)}, key);
    const VkDescriptorSet set = arena_.allocate(p);
    const std::vector<vk::Binding> list(bindings.begin(), bindings.end());
    vk::write_descriptors(device_, p, set, list);

    vk::OneShot once(device_);
    VkCommandBuffer cb = once.begin();
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Push), &push);
    vkCmdDispatch(cb, groups_x, groups_y, groups_z);
    VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         0, 1, &to_host, 0, nullptr, 0, nullptr);
    once.submit_and_wait();
  }

  // For bindings a variant does not read.
  vk::BufferBinding no_buffer() const { return whole(dummy_); }
  vk::TexelBinding no_texels() const { return {dummy_view_.handle()}; }

 private:
  vk::Device& device_;
  vk::Pipelines pipelines_;
  vk::DescriptorArena arena_;
  struct Compiled {
    std::string name;  // the first spec's: "tiny-gemma3/matmul_64_..."
    std::vector<uint32_t> spirv;
  };
  std::map<std::string, Compiled> compiled_;  // by kernel text; map nodes stay put: KernelCode::name points into one
  vk::Buffer dummy_;
  vk::TexelView dummy_view_;
};

// The session's IO block (plan::IoRow): a prompt's rows of sequence 0 from `position`,
// each with the prompt's end as its extent.
inline std::vector<uint32_t> io_words(uint32_t position, const std::vector<uint32_t>& tokens) {
  std::vector<uint32_t> io;
  const auto extent = position + static_cast<uint32_t>(tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) io.insert(io.end(), {tokens[t], 0u, position + static_cast<uint32_t>(t), extent});
  return io;
}

// Where q, k and v of token row t live: one buffer each, or GPT-2's fused qkv
// rows [q | k | v] (the runtime's Split views). Element i of head h of row t
// of q is at q_offset + t * q_stride + h * DH + i.
struct QkvViews {
  bool fused;
  uint32_t q_width, kv_width;
  push::AttentionPush push(uint32_t rows) const {
    if (fused) {
      const uint32_t w = q_width + 2 * kv_width;
      return {.rows = rows, .q_offset = 0, .q_stride = w, .k_offset = q_width, .k_stride = w,
              .v_offset = q_width + kv_width, .v_stride = w};
    }
    return {.rows = rows, .q_offset = 0, .q_stride = q_width, .k_offset = 0, .k_stride = kv_width, .v_offset = 0,
            .v_stride = kv_width};
  }
};

inline QkvViews qkv_layout(const spec::Spec& s) {
  return {s.weights.fused_qkv, static_cast<uint32_t>(s.dims.heads * s.dims.head_dim),
          static_cast<uint32_t>(s.dims.kv_heads * s.dims.head_dim)};
}

// The checks every attention-side kernel makes of its head constants.
inline void check_head_constants(const spec::Spec& s, const Constants& c) {
  CHECK(c.u("HQ") == s.dims.heads);
  CHECK(c.u("HKV") == s.dims.kv_heads);
  CHECK(c.u("DH") == s.dims.head_dim);
  CHECK(c.flag("CACHE_F16") == (s.cache.dtype == DType::F16));
}

// A KV cache of `positions` rows, [position][HKV][DH] in the cache dtype,
// filled with random values (what a kernel does not write must stay).
inline std::vector<std::byte> random_cache(const spec::Spec& s, uint32_t positions) {
  const size_t n = static_cast<size_t>(positions) * s.dims.kv_heads * s.dims.head_dim;
  const size_t size = dtype_bytes(s.cache.dtype);
  std::vector<std::byte> bytes(n * size);
  const std::vector<float> v = random_floats(n);
  for (size_t i = 0; i < n; ++i) store(s.cache.dtype, v[i], &bytes[i * size]);
  return bytes;
}

}  // namespace lathe::kernel_tests

using namespace lathe::kernel_tests;
