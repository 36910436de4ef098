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

namespace {

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
};

std::vector<fs::path> toml_files(const fs::path& dir) {
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
const char* kernel_specs() {
  const char* selected = std::getenv("LATHE_KERNEL_SPECS");
  return selected != nullptr && *selected != '\0' ? selected : nullptr;
}

// Whether the grid is whole: the checks that it covers what the tests need
// (two MoE models, the expert slots) hold over the whole grid alone.
bool whole_grid() { return kernel_specs() == nullptr; }

bool kernel_spec_selected(const std::string& path) {
  if (whole_grid()) return true;
  std::istringstream items(kernel_specs());
  for (std::string item; std::getline(items, item, ',');)
    if (!item.empty() && path.find(item) != std::string::npos) return true;
  return false;
}

// models/*.toml that the runtime supports (the rest are refused by
// check_supported: MoE), then tests/specs/tiny/*.toml; LATHE_KERNEL_SPECS narrows them.
const std::vector<Model>& models() {
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
bool has_attention(const spec::Spec& s) { return !s.ssm.enabled() || s.ssm.hybrid(); }

// Calls f(model, instance, constants) for every instance of one shaders/ file.
// Every spec has one (`decoders_only`: every decoder's; an encoder has no LM
// head and no argmax).
// `needs`, when given, says which specs have one (latent attention's mla.comp).
template <typename F>
void for_each_instance(const char* file, F&& f, bool decoders_only = false, bool (*needs)(const spec::Spec&) = nullptr) {
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
emit::KernelInstance matmul_in(const emit::KernelInstance& k, const plan::Tile& tile, DType dtype) {
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

void report_worst(const std::string& family, const Worst& w) {
  MESSAGE(family << ": worst normalized error " << w.error << " at " << w.where);
}

std::mt19937& rng() {
  static std::mt19937 generator(20240611);
  return generator;
}

std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = u(rng());
  return out;
}

uint32_t random_below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng()); }

DType weight_dtype(uint32_t wdtype) {  // common.glsl's WDTYPE: the DType's number
  if (wdtype > static_cast<uint32_t>(DType::Q6_K)) FAIL("WDTYPE " << wdtype << " is no dtype");
  return static_cast<DType>(wdtype);
}

// Whether `d` is a dtype the spec's matrices have: weights.dtype or one of
// [weights.dtypes].
bool spec_matrix_dtype(const spec::Spec& s, DType d) {
  if (d == s.weights.dtype) return true;
  for (const auto& [role, dtypes] : s.weights.role_dtypes)
    if (std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end()) return true;
  return false;
}

size_t dtype_bytes(DType d) { return weights::dtype_size(d); }

// `v` stored in `d` (little-endian bytes at `out`), and the value it holds then.
double store(DType d, float v, std::byte* out) {
  weights::store_element(d, v, out);
  return weights::load_element(d, out);
}

double load(DType d, const std::byte* in) { return weights::load_element(d, in); }

// The activations as HF transformers defines them (ACT2FN), in double.
double activate(spec::Activation a, double x) {
  switch (a) {
    case spec::Activation::SiLU: return x / (1 + std::exp(-x));
    case spec::Activation::GeluErf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));  // gelu
    case spec::Activation::GeluTanh:  // gelu_new
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case spec::Activation::ReLU: return std::max(x, 0.0);
  }
  FAIL("no such activation");
  return 0;
}

// The ACT value that names activation `a` in an instance: its own ACT_<NAME>
// constant (common.glsl's activate() reads those names).
uint32_t act_constant(const Constants& c, spec::Activation a) {
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

vk::Buffer make_buffer(vk::Device& device, size_t bytes, VkBufferUsageFlags usage = kStorage) {
  return vk::Buffer(device, std::max<size_t>(bytes, 16), usage, vk::MemoryUse::Device);
}

template <typename T>
vk::Buffer buffer_of(vk::Device& device, const std::vector<T>& data) {
  vk::Buffer b = make_buffer(device, data.size() * sizeof(T), kStorage | kTexels);
  vk::upload(device, b, data.data(), data.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> read_back(vk::Device& device, const vk::Buffer& b, size_t count) {
  std::vector<T> out(count);
  vk::download(device, b, out.data(), count * sizeof(T));
  return out;
}

// `values` followed by the guard words.
std::vector<float> guarded(std::vector<float> values) {
  values.insert(values.end(), kGuardWords, kGuard);
  return values;
}

void check_guard(const std::vector<float>& out, size_t used) {
  for (size_t i = used; i < out.size(); ++i) {
    if (out[i] != kGuard) {
      FAIL_CHECK("the kernel wrote past its output: element " << i << " (of " << used << ") holds " << out[i]);
      return;
    }
  }
}

vk::BufferBinding whole(const vk::Buffer& b) { return {b.handle(), 0, b.size()}; }

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
std::vector<uint32_t> io_words(uint32_t position, const std::vector<uint32_t>& tokens) {
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

QkvViews qkv_layout(const spec::Spec& s) {
  return {s.weights.fused_qkv, static_cast<uint32_t>(s.dims.heads * s.dims.head_dim),
          static_cast<uint32_t>(s.dims.kv_heads * s.dims.head_dim)};
}

// The checks every attention-side kernel makes of its head constants.
void check_head_constants(const spec::Spec& s, const Constants& c) {
  CHECK(c.u("HQ") == s.dims.heads);
  CHECK(c.u("HKV") == s.dims.kv_heads);
  CHECK(c.u("DH") == s.dims.head_dim);
  CHECK(c.flag("CACHE_F16") == (s.cache.dtype == DType::F16));
}

// A KV cache of `positions` rows, [position][HKV][DH] in the cache dtype,
// filled with random values (what a kernel does not write must stay).
std::vector<std::byte> random_cache(const spec::Spec& s, uint32_t positions) {
  const size_t n = static_cast<size_t>(positions) * s.dims.kv_heads * s.dims.head_dim;
  const size_t size = dtype_bytes(s.cache.dtype);
  std::vector<std::byte> bytes(n * size);
  const std::vector<float> v = random_floats(n);
  for (size_t i = 0; i < n; ++i) store(s.cache.dtype, v[i], &bytes[i * size]);
  return bytes;
}

}  // namespace

TEST_SUITE("kernels") {

TEST_CASE_FIXTURE(VulkanTest, "the grid holds the shipped specs the runtime supports and the tiny ones") {
  if (!whole_grid()) {
    MESSAGE("LATHE_KERNEL_SPECS narrows the grid: its completeness is not checked");
    return;
  }
  std::set<std::string> names;
  for (const Model& m : models()) names.insert(m.spec.name);
  for (const char* expected : {"smollm2-135m", "gpt2", "qwen2.5-0.5b", "tinyllama-1.1b", "llama-3-8b", "llama-3.2-1b",
                               "qwen3-0.6b", "tiny-llama3-rope", "tiny-yarn-rope", "tiny-qwen3", "tiny-qk-norm-whole",
                               "tiny-gpt2", "mistral-7b-v0.1", "tiny-llama-swa", "tiny-llama-swa-alternating",
                               "tiny-llama-gqa", "tiny-qwen2-mqa", "tiny-fused-interleaved", "tiny-llama-gqa-gguf",
                               "tiny-llama-q8", "tiny-gpt2-gguf", "gemma-2-2b", "olmo-2-1b", "phi-3-mini-4k", "gemma-3-1b",
                               "tiny-gemma2", "tiny-gemma3", "tiny-olmo2", "tiny-phi3", "tiny-neox", "tiny-phi2",
                               "tiny-gptj", "tiny-bloom", "tiny-falcon", "tiny-post-norm", "tiny-mixtral", "tiny-mpt",
                               "tiny-moe-dense-layers", "tiny-deepseek-moe", "tiny-deepseek-mla", "tiny-deepseek-mla-lite", "mixtral-8x7b", "tiny-bert", "tiny-rope-encoder", "tiny-t5", "tiny-bart"}) {
    CAPTURE(expected);
    CHECK(names.count(expected) == 1);
  }
  std::string list;
  for (const std::string& n : names) list += " " + n;
  MESSAGE(names.size() << " specs:" << list);
}

// y[t] = SCALE · E[token[t]] (+ P[position + t + offset]): the rows of
// HF's wte (and wpe) for the ids, incl. 0 and vocab − 1.
TEST_CASE_FIXTURE(VulkanTest, "embed: the table rows of the tokens, plus learned positions") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("embed.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    const uint32_t d = c.u("D");
    const DType dtype = weight_dtype(c.u("WDTYPE"));
    const bool positions = c.flag("POSITIONS");
    const bool types = c.flag("TYPES");  // BERT: row 0 of the token-type table added
    CHECK(types == (s.embedding.token_types > 0));
    CHECK(d == s.dims.hidden);
    CHECK(spec_matrix_dtype(s, dtype));
    CHECK(positions == (s.position.kind == spec::PositionKind::Learned));
    CHECK(c.f("SCALE") == s.embedding.scale);
    CHECK(c.u("POS_OFFSET") == s.position.offset);

    const uint32_t vocab = static_cast<uint32_t>(s.dims.vocab);
    const std::vector<uint32_t> tokens = {0, vocab - 1, random_below(vocab), random_below(vocab), 0, random_below(vocab)};
    const uint32_t rows = static_cast<uint32_t>(tokens.size());
    Weights table(device, dtype, vocab, d);
    for (uint32_t t : std::set<uint32_t>(tokens.begin(), tokens.end())) table.fill(t, 1);
    const int64_t table_rows = positions ? s.position.table_size : 0;
    std::optional<Weights> position_table;
    if (positions) position_table.emplace(device, dtype, table_rows, d);
    std::optional<Weights> type_table;
    if (types) {
      type_table.emplace(device, dtype, s.embedding.token_types, d);
      type_table->fill(0, 1);
    }

    Report report(m, k, worst);
    // A small position, and the chunk that ends at the table's last row.
    std::vector<uint32_t> starts = {3};
    if (positions) starts.push_back(static_cast<uint32_t>(table_rows - s.position.offset - rows));
    // Token ranges: the whole table, and rows 16.. bound alone (a plan::Part
    // of a table too large to bind whole), which leaves the rows of tokens
    // below 16 to another dispatch.
    for (uint32_t position : starts)
      for (uint32_t token0 : {0u, 16u}) {
        CAPTURE(position);
        CAPTURE(token0);
        if (positions) position_table->fill(position + s.position.offset, rows);
        vk::Buffer io = buffer_of(device, io_words(position, tokens));
        vk::Buffer y = buffer_of(device, guarded(std::vector<float>(size_t{rows} * d, kGuard)));
        gpu.run(m, k,
                kernels::EmbedBindings<vk::Binding>{
                    .io = whole(io),
                    .table = token0 > 0 ? table.range(token0, vocab - token0) : table.binding(),
                    .positions = positions ? vk::Binding(position_table->binding()) : gpu.no_texels(),
                    .types = types ? vk::Binding(type_table->binding()) : gpu.no_texels(),
                    .y = whole(y)},
                push::EmbedPush{.rows = rows, .token0 = token0, .tokens = vocab - token0}, rows);
        const std::vector<float> out = read_back<float>(device, y, size_t{rows} * d + kGuardWords);
        NormalizedError e;
        for (uint32_t t = 0; t < rows; ++t) {
          if (tokens[t] < token0) {  // another range's row: untouched
            for (uint32_t i = 0; i < d; ++i)
              if (std::memcmp(&out[size_t{t} * d + i], &kGuard, sizeof(float)) != 0) FAIL("row " << t << " written");
            continue;
          }
          const std::vector<double>& row = table.row(tokens[t]);
          for (uint32_t i = 0; i < d; ++i) {
            double expected = s.embedding.scale * row[i];
            if (positions) expected += position_table->row(position + t + s.position.offset)[i];
            if (types) expected += type_table->row(0)[i];
            e.add(out[size_t{t} * d + i], expected);
          }
        }
        check_guard(out, size_t{rows} * d);
        report.check("position " + std::to_string(position) + ", tokens from " + std::to_string(token0), e.value(),
                     kEmbedTolerance);
      }
  });
  report_worst("embed", worst);
}

// RMSNorm (Llama: x / sqrt(mean(x²) + eps) · g) and LayerNorm with a bias
// (GPT-2: (x − mean) / sqrt(var + eps) · g + b), over rows with different
// means and scales.
TEST_CASE_FIXTURE(VulkanTest, "norm: RMSNorm and LayerNorm rows") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("norm.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    const uint32_t n = c.u("N"), group = c.u("GROUP");
    // Mamba-2's gated norm: a plain RMSNorm of each group of d_inner / groups.
    const bool grouped = group != n;
    const bool layer_norm = !grouped && s.norm.kind == spec::NormKind::LayerNorm;
    const bool bias = !grouped && s.norm.bias, unit_offset = !grouped && s.norm.unit_offset;
    if (grouped) CHECK((n == s.ssm.d_inner && group == s.ssm.d_inner / s.ssm.groups));
    else CHECK(n == s.dims.hidden);
    CHECK(c.flag("LAYER_NORM") == layer_norm);
    CHECK(c.flag("HAS_BIAS") == bias);
    CHECK(c.flag("UNIT_OFFSET") == unit_offset);
    CHECK(c.f("EPS") == doctest::Approx(s.norm.eps).epsilon(1e-8));
    // y += N(x): the norm of a branch's output, added to the residual stream y.
    const bool residual = c.flag("RESIDUAL");
    CHECK((k.name == "norm_" + std::to_string(n) + "_residual") == residual);
    if (grouped) CHECK(k.name == "norm_" + std::to_string(n) + "_group" + std::to_string(group));
    if (residual)
      CHECK((s.norm.placement == spec::NormPlacement::Sandwich || s.norm.placement == spec::NormPlacement::BranchOutput));

    constexpr uint32_t rows = 5;
    const float means[rows] = {0.0f, 3.0f, -1.5f, 0.25f, 10.0f};
    const float scales[rows] = {1.0f, 0.5f, 4.0f, 0.01f, 2.0f};
    std::vector<float> x = random_floats(size_t{rows} * n);
    for (uint32_t t = 0; t < rows; ++t)
      for (uint32_t i = 0; i < n; ++i) x[size_t{t} * n + i] = means[t] + scales[t] * x[size_t{t} * n + i];
    const std::vector<float> g = random_floats(n, 0.5f, 1.5f), b = random_floats(n);
    vk::Buffer xb = buffer_of(device, x), gb = buffer_of(device, g), bb = buffer_of(device, b);
    const std::vector<float> y0 = residual ? random_floats(size_t{rows} * n) : std::vector<float>(size_t{rows} * n, kGuard);
    vk::Buffer y = buffer_of(device, guarded(y0));
    gpu.run(m, k,
            kernels::NormBindings<vk::Binding>{
                .x = whole(xb), .scale = whole(gb), .shift = bias ? whole(bb) : gpu.no_buffer(), .y = whole(y)},
            push::RowsPush{.rows = rows}, rows);
    const std::vector<float> out = read_back<float>(device, y, size_t{rows} * n + kGuardWords);

    NormalizedError e;
    for (uint32_t t = 0; t < rows; ++t)
      for (uint32_t first = 0; first < n; first += group) {  // each group on its own (one: the row)
        const float* row = &x[size_t{t} * n + first];
        double mean = 0;
        if (layer_norm) {
          for (uint32_t i = 0; i < group; ++i) mean += row[i];
          mean /= group;
        }
        double squares = 0;
        for (uint32_t i = 0; i < group; ++i) squares += (row[i] - mean) * (row[i] - mean);
        const double inv = 1 / std::sqrt(squares / group + s.norm.eps);
        for (uint32_t i = 0; i < group; ++i) {
          double expected = (row[i] - mean) * inv * (unit_offset ? 1.0 + g[first + i] : double(g[first + i]));
          if (bias) expected += b[first + i];
          if (residual) expected += y0[size_t{t} * n + first + i];
          e.add(out[size_t{t} * n + first + i], expected);
        }
      }
    check_guard(out, size_t{rows} * n);
    Report(m, k, worst).check(std::to_string(rows) + " rows" + (residual ? ", added to y" : ""), e.value(), kNormTolerance);
  });
  report_worst("norm", worst);
}

// x in the dot layout's 8-bit blocks (shaders/quantize.comp), for every
// quantize the block-dtype matmuls need (each one's K and norm; the expert
// down projection's input a token row's TOPK slots a workgroup: ROW_FACTOR,
// run for every spec's expert down projection, no spec's being blocks yet),
// against runtime/weights/quant.cpp's quantize_xq of the CPU's normalized x:
// the same d (without a norm: the same bits), the same q but for values
// within a hair of a rounding tie (the kernel's 1/d is a division, up to
// 2.5 ulp off in Vulkan; a folded norm's f32 arithmetic moves x too), each
// value within d/2 of d·q, and s = d·Σq of the kernel's own q.
TEST_CASE_FIXTURE(VulkanTest, "quantize: x in 8-bit blocks with their scale and sum, normalized first") {
  Gpu gpu(device);
  std::set<std::tuple<std::string, uint32_t, bool, bool>> done;  // spec, K, norm, slots
  uint32_t largest_factor = 0;
  int64_t most_groups = 0;  // a row over several workgroups (K > 32 · kQuantizeGroupBlocks)
  size_t ties = 0, values = 0;
  for_each_instance("matmul_rows.comp", [&](const Model& m, const emit::KernelInstance&, const Constants& mc) {
    const spec::Spec& s = m.spec;
    const uint32_t K = mc.u("K");
    const bool norm = mc.u("NORM") != 0, slots = mc.flag("X_OF_SLOT");
    // No spec has block experts yet: every expert down projection's input
    // stands in for one (its rows the slots).
    if (!is_block_dtype(weight_dtype(mc.u("WDTYPE"))) && !slots) return;
    if (K % kernels::kXqBlock != 0) return;  // rows no block dtype can hold (a tiny spec's experts)
    if (!done.insert({s.name, K, norm, slots}).second) return;
    const emit::KernelInstance k = emit::kernel_instance(
        s, lower::KernelKey{.family = kernels::Family::Quantize, .width = K,
                            .epilogue = {.norm = norm, .experts = static_cast<uint8_t>(slots ? 2 : 0)}});
    const Constants c(k);
    const std::string& instance = k.name;
    CAPTURE(instance);
    CAPTURE(slots);
    CHECK(c.u("K") == K);
    CHECK(c.u("XQ_ROW_WORDS") == kernels::xq_row_words(K));
    CHECK(c.u("NORM") == mc.u("NORM"));
    const uint32_t factor = c.u("ROW_FACTOR");
    CHECK(factor == (slots ? static_cast<uint32_t>(s.moe.top_k) : 1u));
    largest_factor = std::max(largest_factor, factor);
    most_groups = std::max(most_groups, kernels::quantize_groups(K));

    // Rows of different magnitudes; the first holds small integers times
    // 2^-3 (every q exact: x·(1/d) lands on no tie), and a block of zeros.
    constexpr uint32_t kGroups = 3;
    const uint32_t rows = kGroups * factor, words = c.u("XQ_ROW_WORDS");
    std::vector<float> x = random_floats(size_t{rows} * K);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t i = 0; i < K; ++i) x[size_t{r} * K + i] *= std::array{1.0f, 0.01f, 40.0f}[r % 3];
    for (uint32_t i = 0; i < K; ++i) x[i] = i % 32 == 0 ? 15.875f : static_cast<float>(static_cast<int>(random_below(255)) - 127) * 0.125f;
    std::fill_n(x.begin() + K / 2, 32, 0.0f);
    const std::vector<float> norm_g = random_floats(K, 0.5f, 1.5f), norm_b = random_floats(K);
    std::vector<float> xn = x;  // what the kernel quantizes: x, normalized in double under a norm
    if (norm) {
      for (uint32_t r = 0; r < rows; ++r) {
        float* row = &xn[size_t{r} * K];
        double mean = 0, squares = 0;
        if (s.norm.kind == spec::NormKind::LayerNorm) mean = std::accumulate(row, row + K, 0.0) / K;
        for (uint32_t i = 0; i < K; ++i) squares += (row[i] - mean) * (row[i] - mean);
        const double inv = 1 / std::sqrt(squares / K + s.norm.eps);
        for (uint32_t i = 0; i < K; ++i)
          row[i] = static_cast<float>((row[i] - mean) * inv * (s.norm.unit_offset ? 1.0 + norm_g[i] : double(norm_g[i])) +
                                      (s.norm.bias ? double(norm_b[i]) : 0.0));
      }
    }
    vk::Buffer xb = buffer_of(device, x), gb = buffer_of(device, norm_g), bb = buffer_of(device, norm_b);
    vk::Buffer xqb = buffer_of(device, guarded(std::vector<float>(size_t{rows} * words, kGuard)));
    gpu.run(m, k,
            kernels::QuantizeBindings<vk::Binding>{.x = whole(xb), .xq = whole(xqb),
                                                   .norm_scale = norm ? whole(gb) : gpu.no_buffer(),
                                                   .norm_shift = norm && s.norm.bias ? whole(bb) : gpu.no_buffer()},
            push::RowsPush{.rows = kGroups}, static_cast<uint32_t>(kernels::quantize_groups(K)), kGroups);
    const std::vector<float> out = read_back<float>(device, xqb, size_t{rows} * words + kGuardWords);
    check_guard(out, size_t{rows} * words);

    // A tie within `margin` of x·(1/d) on the CPU: the kernel may round to
    // either side (its norm's f32 values are the CPU's to ~1e-6 relative).
    const double margin = norm ? 1e-3 : 1e-4;
    size_t mismatches = 0;
    for (uint32_t r = 0; r < rows; ++r) {
      const std::span<const float> row(&xn[size_t{r} * K], K);
      const std::vector<uint32_t> cpu = weights::quantize_xq(row);
      std::vector<uint32_t> gpu_row(words);
      std::memcpy(gpu_row.data(), &out[size_t{r} * words], words * sizeof(uint32_t));
      for (uint32_t b = 0; b < K / 32; ++b) {
        const float d = std::bit_cast<float>(gpu_row[K / 4 + 2 * b]), d_cpu = std::bit_cast<float>(cpu[K / 4 + 2 * b]);
        if (norm) CHECK(std::fabs(d - d_cpu) <= 1e-5 * d_cpu);
        else CHECK(std::bit_cast<uint32_t>(d) == std::bit_cast<uint32_t>(d_cpu));
        int sum = 0;
        for (uint32_t i = b * 32; i < b * 32 + 32; ++i) {
          const auto q = static_cast<int8_t>(gpu_row[i / 4] >> (8 * (i % 4)));
          const auto q_cpu = static_cast<int8_t>(cpu[i / 4] >> (8 * (i % 4)));
          sum += q;
          ++values;
          CHECK(std::fabs(double(d) * q - row[i]) <= 0.5 * d * (1 + margin) + 1e-30);
          if (q == q_cpu) continue;
          const double t = double(row[i]) / double(d_cpu), tie = std::floor(t) + 0.5;
          if (std::abs(q - q_cpu) == 1 && std::fabs(t - tie) < margin) ++ties;
          else if (++mismatches < 5) FAIL_CHECK("row " << r << " value " << i << ": q " << int(q) << ", the CPU's " << int(q_cpu) << " (x/d " << t << ")");
        }
        CHECK(std::bit_cast<uint32_t>(gpu_row[K / 4 + 2 * b + 1]) == std::bit_cast<uint32_t>(d * static_cast<float>(sum)));
      }
    }
    CHECK(mismatches == 0);
    MESSAGE(s.name << " " << instance << (slots ? std::string(" (slots)") : std::string()) << ": " << rows << " rows quantized");
  });
  if (whole_grid()) {
    CHECK(largest_factor > 1);  // the expert down projection's slots ran
    CHECK(most_groups > 2);     // and rows over several workgroups, the last one partial or not
  }
  CHECK(ties * 1000 <= values);
  MESSAGE("quantize: " << values << " values, " << ties << " rounded to the other side of a tie than on the CPU");
}

// y[t][r] = epilogue(W[r] · x[t]), each epilogue the specs use: plain, bias,
// residual (y += …, y starting nonzero), activation, gated φ(W·x + b) ⊙
// (W2·x + b2), and a fused gate_up tensor (W2 = W, halves at gate_row0 and
// up_row0). Tiles as the session dispatches them: 16 × 1 for decode (16 × 4
// for a batched decode step, whose rows must hold the bits of each alone), 8 × 8
// for prefill, tiled 64 × 32 (the gpu class's) and wider, over 13 token rows
// (not a multiple of 8) and n weight rows (not a multiple of 8 either).
// Block weights run every decode and batched case in the dot layout too
// (matmul_dot.comp, after quantize.comp): against the product with the x
// it read, the quantized x (kMatmulTolerance), and against the exact
// product, to kDotTolerance (the quantization of x; reported per dtype).
TEST_CASE_FIXTURE(VulkanTest, "matmul: every epilogue, decode and prefill tiles") {
  Gpu gpu(device);
  Worst worst;
  // The coop layouts run where the device has their cooperative matrices
  // (lavapipe has neither: spirv-val and check_coop_khr prove them there,
  // tests/unit/shader_test.cpp).
  const plan::DeviceFeatures features = vk::device_features(device.info());
  std::vector<std::pair<plan::Variant, std::string>> coop;
  if (features.coop_nv) coop.push_back({plan::Variant::Coop, "coop (NV)"});
  else MESSAGE("coop layout not run: " << device.info().name << " has no VK_NV_cooperative_matrix 16×16×16 f16 → f32");
  if (features.coop_khr) coop.push_back({plan::Variant::CoopKhr, "coop (KHR)"});
  else MESSAGE("coop-khr layout not run: " << device.info().name << " has no VK_KHR_cooperative_matrix 16×16×16 f16 → f32");
  std::map<DType, Worst> dot_exact;  // the dot layout against the exact product, by weight dtype
  std::set<std::tuple<uint32_t, bool, uint32_t, bool>> wide_tiles_run;  // dtype, gated, norm, bias: the wider tiles ran
  for_each_instance("matmul_rows.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    const spec::Dims& d = s.dims;
    const uint32_t K = c.u("K");
    const DType dtype = weight_dtype(c.u("WDTYPE"));
    if (c.flag("EXPERT_MODE")) return;  // the expert matmuls: the MoE test case
    const bool bias = c.flag("HAS_BIAS"), gated = c.flag("GATED"), residual = c.flag("RESIDUAL");
    const uint32_t act = c.u("ACT");
    const uint32_t norm = c.u("NORM");  // the model's norm folded into the read of x: 0 none, 1 RMS, 2 Layer
    const bool norm_bias = c.flag("NORM_BIAS");
    if (norm != 0) {
      CHECK(norm == (s.norm.kind == spec::NormKind::RMSNorm ? 1u : 2u));
      CHECK(norm_bias == s.norm.bias);
    }
    // f32: a one-row linear stored as a vector (GGUF's shared-expert gate, vectors in f32).
    const bool vector_gate = s.moe.shared_expert_gate && s.weights.preset == "gguf" && dtype == DType::F32;
    CHECK((spec_matrix_dtype(s, dtype) || vector_gate));
    // (Latent attention's: q_b_proj reads the query latent, o_proj the heads' values.)
    CHECK((K == d.hidden || K == d.heads * d.head_dim || K == d.intermediate ||
           K == s.moe.shared_experts * s.moe.shared_intermediate || (s.ssm.enabled() && K == s.ssm.d_inner) ||
           (s.mla.enabled && (K == s.mla.q_lora_rank || K == d.heads * s.mla.v_head_dim))));
    CHECK(c.u("ACT_NONE") == 0);
    if (gated || act != 0) CHECK(act == act_constant(c, s.mlp.activation));
    CHECK(gated == (s.mlp.gated && K == d.hidden && act != 0));
    // c · tanh(y / c) on the LM head's logits only (Gemma 2's final_logit_softcapping).
    const double softcap = c.f("SOFTCAP");
    CHECK((softcap > 0) == (k.name.find("_softcap") != std::string::npos));
    if (softcap > 0) CHECK(softcap == doctest::Approx(s.output.softcap).epsilon(1e-8));
    // The LM head's output.scale (T5's tied head), W·x times it before the bias.
    const double out_scale = c.flag("SCALED") ? c.f("OUT_SCALE") : 1.0;
    CHECK(c.flag("SCALED") == (k.name.find("_scaled") != std::string::npos));
    if (c.flag("SCALED")) CHECK(out_scale == doctest::Approx(s.output.scale).epsilon(1e-8));

    // The widest output this instance computes in the model: the MLP's
    // intermediate, the hidden width of a residual projection, else q/k/v
    // or the LM head.
    const int64_t qkv = s.weights.fused_qkv ? (d.heads + 2 * d.kv_heads) * d.head_dim : d.heads * d.head_dim;
    int64_t full = gated || act != 0 ? d.intermediate : residual ? d.hidden : bias ? qkv : std::max(qkv, d.vocab);
    if (s.ssm.enabled()) full = std::max(full, s.ssm.in_width());  // a state-space mixer's in_proj (with its bias)
    // About 2^21 multiply-adds per token row; n not a multiple of either tile's 8 or 16 rows.
    uint32_t n = static_cast<uint32_t>(std::min<int64_t>(full, std::max<int64_t>(45, (int64_t{1} << 21) / K)));
    if (n % 8 == 0) n -= 3;

    // W: [2n][K] so that it can stand for a fused gate_up tensor; W2 [n][K].
    constexpr uint32_t kRows = 13;
    Weights w(device, dtype, gated ? 2 * n : n, K), w2(device, dtype, n, K);
    w.fill(0, gated ? 2 * n : n);
    if (gated) w2.fill(0, n);
    const std::vector<float> bias_values = random_floats(2 * n), bias2_values = random_floats(n);
    const std::vector<float> x = random_floats(size_t{kRows} * K);
    const std::vector<float> y0 = random_floats(size_t{kRows} * n);  // the residual stream
    vk::Buffer xb = buffer_of(device, x), bb = buffer_of(device, bias_values), bb2 = buffer_of(device, bias2_values);
    // With a folded norm the kernel sees norm(x): the CPU side normalizes x first.
    const std::vector<float> norm_g = random_floats(K, 0.5f, 1.5f), norm_b = random_floats(K);
    vk::Buffer gb = buffer_of(device, norm_g), nbb = buffer_of(device, norm_b);
    std::vector<double> xn(x.begin(), x.end());
    if (norm != 0) {
      for (uint32_t t = 0; t < kRows; ++t) {
        double* row = &xn[size_t{t} * K];
        double mean = 0, squares = 0;
        if (norm == 2) mean = std::accumulate(row, row + K, 0.0) / K;
        for (uint32_t i = 0; i < K; ++i) squares += (row[i] - mean) * (row[i] - mean);
        const double inv = 1 / std::sqrt(squares / K + s.norm.eps);
        for (uint32_t i = 0; i < K; ++i)
          row[i] = (row[i] - mean) * inv * (s.norm.unit_offset ? 1.0 + norm_g[i] : double(norm_g[i])) +
                   (norm_bias ? double(norm_b[i]) : 0.0);
      }
    }

    struct Case {
      std::string what;
      uint32_t tile_rows, tokens;  // spec constants 1 and 2
      uint32_t rows, x_row0;
      bool fused;  // W2 = W, bias2 = bias
      uint32_t gate_row0, up_row0;
      uint32_t col0 = 0;  // > 0: W's (and W2's) rows from col0 bound alone, into y's columns from col0 (plan::Part)
      uint32_t texels = 2;  // spec constant 3
      uint32_t groups = 1;  // spec constant 4: subgroups a workgroup (decode)
      plan::Variant variant = plan::Variant::Plain;  // Dot: the rows layout on integer dot products; Coop, CoopKhr: the tiled tile on matrix units
      plan::Tile tile() const { return {tile_rows, tokens, texels, groups, variant}; }
      bool dot() const { return tile().layout() == kernels::Layout::Dot; }
    };
    const Case batched = {"batched decode of 13 rows (16 × 4)", 16, 4, kRows, 0, false, 0, 0};
    std::vector<Case> cases = {{"decode", 16, 1, 1, 0, false, 0, 0},
                               {"prefill 13 rows", 8, 8, kRows, 0, false, 0, 0},
                               {"decode of row 12 (x_row0)", 16, 1, 1, kRows - 1, false, 0, 0},
                               batched};
    // One layout suffices here: both store through one epilogue (the model
    // test of tiny-split-rows runs both layouts over row ranges).
    cases.push_back({"a row range: rows 16.. of W into columns 16.. of y", 16, 1, 1, 0, false, 0, 0, 16});
    // The gpu class's decode: a row a subgroup, 4 subgroups a workgroup; and
    // a batched step in 4 subgroups of 2 rows × 4 tokens.
    cases.push_back({"decode, 4 subgroups of a row (the gpu class's)", 1, 1, 1, 0, false, 0, 0, 0, 2, 4});
    cases.push_back({"batched decode of 13 rows in 4 subgroups of 2 × 4", 2, 4, kRows, 0, false, 0, 0, 0, 2, 4});
    // The tiled layout (the gpu class's prompts): its tile; over a row
    // range the widest lavapipe's 32 KiB of shared memory hold (8 × 8 sums
    // an invocation; 4 × 8 gated); 64 values of K a step.
    cases.push_back({"tiled prefill 13 rows (64 × 32, the gpu class's)", 64, 32, kRows, 0, false, 0, 0, 0, 1});
    // The wider tiles cost lavapipe seconds each: once per weight dtype and
    // epilogue kind (their loads and sums do not depend on the widths).
    if (wide_tiles_run.insert({c.u("WDTYPE"), gated, norm, bias}).second) {
      cases.push_back({"tiled prefill of a row range (" + std::string(gated ? "64" : "128") + " × 64)", gated ? 64u : 128u,
                       64, kRows, 0, false, 0, 0, 16, 1});
      if (!gated) cases.push_back({"tiled prefill, 64 values of K a step (64 × 32 × 2)", 64, 32, kRows, 0, false, 0, 0, 0, 2});
    }
    // The coop layouts: the gpu-coop classes' tile, a row range of the
    // widest tile, 64 values of K a step, and a fused gate_up.
    for (const auto& [variant, what] : coop) {
      cases.push_back({what + " prefill 13 rows (64 × 32)", 64, 32, kRows, 0, false, 0, 0, 0, 1, 1, variant});
      cases.push_back({what + " prefill of a row range (" + std::string(gated ? "64" : "128") + " × 64 × 2)", gated ? 64u : 128u,
                       64, kRows, 0, false, 0, 0, 16, 2, 1, variant});
      if (gated) cases.push_back({what + " fused gate_up prefill", 64, 32, kRows, 0, true, 0, n, 0, 1, 1, variant});
    }
    if (gated) {
      cases.push_back({"fused gate_up prefill", 8, 8, kRows, 0, true, 0, n});
      cases.push_back({"fused up_gate decode of row 5", 16, 1, 1, 5, true, n, 0});
      cases.push_back({"fused gate_up tiled prefill", 64, 32, kRows, 0, true, 0, n, 0, 1});
    }
    const bool blocks = is_block_dtype(dtype);
    if (blocks) {
      for (size_t i = 0, plain = cases.size(); i < plain; ++i) {
        if (cases[i].tokens >= plan::Tile::kPrefillTokens) continue;
        Case dot = cases[i];
        dot.what += " (dot)";
        dot.variant = plan::Variant::Dot;
        cases.push_back(dot);
      }
    }

    // The dot layout's input: x quantized (normalized first) by quantize.comp
    // as the lowering dispatches it, and the values it holds, for the CPU.
    const uint32_t xq_words = static_cast<uint32_t>(kernels::xq_row_words(K));
    vk::Buffer xqb = make_buffer(device, size_t{kRows} * xq_words * 4);
    std::vector<double> xqd;
    if (blocks) {
      const emit::KernelInstance q = emit::kernel_instance(
          s, lower::KernelKey{.family = kernels::Family::Quantize, .width = K, .epilogue = {.norm = norm != 0}});
      gpu.run(m, q,
              kernels::QuantizeBindings<vk::Binding>{.x = whole(xb), .xq = whole(xqb),
                                                     .norm_scale = norm != 0 ? whole(gb) : gpu.no_buffer(),
                                                     .norm_shift = norm_bias ? whole(nbb) : gpu.no_buffer()},
              push::RowsPush{.rows = kRows}, static_cast<uint32_t>(kernels::quantize_groups(K)), kRows);
      const std::vector<uint32_t> words = read_back<uint32_t>(device, xqb, size_t{kRows} * xq_words);
      for (uint32_t t = 0; t < kRows; ++t)
        for (uint32_t i = 0; i < K; ++i)
          xqd.push_back(weights::xq_value(std::span(&words[size_t{t} * xq_words], xq_words), K, i));
    }

    // Runs a case on y's initial rows (the residual stream, else guards); y's words after.
    const uint32_t lanes = device.info().subgroup_size;
    auto run = [&](const Case& cs, const float* residual_rows) {
      std::vector<float> initial(size_t{cs.rows} * n, kGuard);
      if (residual) std::copy_n(residual_rows, initial.size(), initial.begin());
      vk::Buffer y = buffer_of(device, guarded(initial));
      Weights& second = cs.fused ? w : w2;
      const vk::Buffer& second_bias = cs.fused ? bb : bb2;
      const uint32_t computed = n - cs.col0;
      gpu.run(m, matmul_in(k, cs.tile(), dtype),
              kernels::MatmulBindings<vk::Binding>{
                  .w = cs.col0 > 0 ? w.range(cs.col0, computed) : w.binding(),
                  .w2 = !gated      ? gpu.no_texels()
                        : cs.col0 > 0 ? vk::Binding(second.range(cs.col0, computed))
                                      : vk::Binding(second.binding()),
                  .x = whole(xb),
                  .bias = bias ? whole(bb) : gpu.no_buffer(),
                  .bias2 = bias && gated ? whole(second_bias) : gpu.no_buffer(),
                  .y = whole(y),
                  .norm_scale = norm != 0 ? whole(gb) : gpu.no_buffer(),
                  .norm_shift = norm_bias ? whole(nbb) : gpu.no_buffer(),
                  .route = gpu.no_buffer(),
                  .xq = cs.dot() ? whole(xqb) : gpu.no_buffer()},
              push::MatmulPush{.rows = cs.rows, .n = computed, .x_row0 = cs.x_row0, .gate_row0 = cs.gate_row0,
                               .up_row0 = cs.up_row0, .col0 = cs.col0, .y_stride = n},
              (computed + cs.tile().rows_per_group(lanes) - 1) / cs.tile().rows_per_group(lanes),
              (cs.rows + cs.tokens - 1) / cs.tokens, {cs.tile_rows, cs.tokens, cs.texels, cs.groups}, 1,
              cs.tile().threads(lanes), cs.variant == plan::Variant::CoopKhr);
      return read_back<float>(device, y, size_t{cs.rows} * n + kGuardWords);
    };

    Report report(m, k, worst, " (n = " + std::to_string(n) + " of " + std::to_string(full) + " rows)");
    // The normalized error of case cs's output against the product with x
    // (its rows [kRows][K]).
    auto error = [&](const Case& cs, const std::vector<float>& out, const std::vector<double>& x_rows) {
      const Weights& second = cs.fused ? w : w2;
      const std::vector<float>& b2 = cs.fused ? bias_values : bias2_values;
      NormalizedError e;
      for (uint32_t t = 0; t < cs.rows; ++t) {
        const double* xr = &x_rows[size_t{cs.x_row0 + t} * K];
        for (uint32_t r = 0; r < n; ++r) {
          if (r < cs.col0) {  // another range's columns: as they were
            const float before = residual ? y0[size_t{t} * n + r] : kGuard;
            if (std::memcmp(&out[size_t{t} * n + r], &before, sizeof(float)) != 0) FAIL("column " << r << " of row " << t << " written");
            continue;
          }
          const std::vector<double>& wr = w.row(cs.gate_row0 + r);
          double value = 0;
          for (uint32_t i = 0; i < K; ++i) value += wr[i] * xr[i];
          value *= out_scale;
          if (bias) value += bias_values[cs.gate_row0 + r];
          if (act != 0) value = activate(s.mlp.activation, value);
          if (gated) {
            const std::vector<double>& ur = second.row(cs.up_row0 + r);
            double up = 0;
            for (uint32_t i = 0; i < K; ++i) up += ur[i] * xr[i];
            if (bias) up += b2[cs.up_row0 + r];
            value *= up;
          }
          if (softcap > 0) value = softcap * std::tanh(value / softcap);
          if (residual) value += y0[size_t{t} * n + r];
          e.add(out[size_t{t} * n + r], value);
        }
      }
      return e.value();
    };
    std::vector<float> batched_out[2], grouped_out[2];  // by cs.dot()
    for (const Case& cs : cases) {
      CAPTURE(cs.what);
      const std::vector<float> out = run(cs, y0.data());
      if (cs.tokens == batched.tokens && cs.groups == 1) batched_out[cs.dot()] = out;
      if (cs.groups > 1 && cs.tokens > 1) grouped_out[cs.dot()] = out;
      check_guard(out, size_t{cs.rows} * n);
      if (!cs.dot()) {
        report.check(cs.what, error(cs, out, xn), cs.variant == plan::Variant::Plain ? kMatmulTolerance : kCoopTolerance);
        continue;
      }
      report.check(cs.what, error(cs, out, xqd), kMatmulTolerance);
      const double exact = error(cs, out, xn);
      CHECK_MESSAGE(exact < kDotTolerance, cs.what << " against the exact product: " << exact);
      dot_exact[dtype].add(exact, m.spec.name + " " + k.name + " (" + cs.what + ")");
    }
    // A batched decode step's rows hold the bits of each row decoded alone
    // (a sequence's output does not depend on what else runs), in one
    // subgroup a workgroup or several, in either layout.
    for (const plan::Variant variant : {plan::Variant::Plain, plan::Variant::Dot}) {
      if (variant == plan::Variant::Dot && !blocks) continue;
      for (uint32_t t : {0u, 5u, kRows - 1}) {
        CAPTURE(t);
        Case one{"decode alone", 16, 1, 1, t, false, 0, 0};
        one.variant = variant;
        const std::vector<float> alone = run(one, &y0[size_t{t} * n]);
        CHECK(std::memcmp(alone.data(), &batched_out[one.dot()][size_t{t} * n], n * sizeof(float)) == 0);
        CHECK(std::memcmp(alone.data(), &grouped_out[one.dot()][size_t{t} * n], n * sizeof(float)) == 0);
      }
    }
  });
  report_worst("matmul", worst);
  for (const auto& [dtype, w] : dot_exact) report_worst("matmul dot " + std::string(dtype_name(dtype)) + " against the exact product", w);
}

// RoPE as HF applies it (q·cos + rotate_half(q)·sin on the first ROT dims of
// each head for neox pairs (i, i + ROT/2); GPT-J's (2i, 2i + 1) for
// interleaved), q rotated in place, k rotated into the K cache and v copied
// into the V cache at each row's position; GPT-2's kv_append only copies.
TEST_CASE_FIXTURE(VulkanTest, "rope_kv: q rotated in place, k and v appended to the caches") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("rope_kv.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    check_head_constants(s, c);
    const bool rope = s.position.kind == spec::PositionKind::Rope;
    const uint32_t hq = c.u("HQ"), hkv = c.u("HKV"), dh = c.u("DH");
    const uint32_t rot = rope ? static_cast<uint32_t>(s.position.rotary_dim) : 0;
    const bool neox = s.position.pairing == spec::RopePairing::Neox;
    CHECK(c.flag("ROPE") == rope);
    CHECK(c.u("ROT") == rot);
    if (rope) CHECK(c.flag("NEOX") == neox);
    const QkvViews layout = qkv_layout(s);
    const DType cache = s.cache.dtype;
    const size_t cache_size = dtype_bytes(cache);
    // A row's heads over a column of workgroups, as the lowering plans it: a
    // workgroup a query head, one where a norm sums a whole projection.
    const uint32_t qk_norm = c.u("QK_NORM");
    const uint32_t parts = qk_norm == 2 || qk_norm == 3 ? 1 : hq;

    // The rotation as the CPU reference computes it from the spec (its own
    // implementation of the RoPE scalings): pair j turns by position ·
    // inv_freq[j], cos and sin scaled by rotation.scale.
    // A local instance (position.local_theta, the windowed layers') turns by
    // that base's default RoPE, without the spec's scaling.
    const bool local = k.name.find("_local") != std::string::npos;
    if (local) CHECK(s.position.local_theta.has_value());
    reference::Rope rotation = rope ? reference::rope_of(s) : reference::Rope{};
    if (local) {
      rotation = reference::Rope{};
      for (uint32_t j = 0; j < rot / 2; ++j)
        rotation.inv_freq.push_back(std::pow(*s.position.local_theta, -2.0 * j / static_cast<double>(rot)));
    }
    if (rope) CHECK(c.f("ROPE_SCALE") == doctest::Approx(rotation.scale).epsilon(1e-7));
    // Dynamic NTK: the base of a call's rows grows with its length past the
    // original context (the reference's rope_of of that length).
    const bool dynamic = rope && !local && s.position.scaling.kind == spec::RopeScaling::DynamicNtk;
    if (rope) {
      CHECK(c.flag("NTK_DYNAMIC") == dynamic);
      if (dynamic) CHECK(c.u("NTK_ORIGINAL") == s.position.scaling.original_max_context);
    }
    // Latent attention's append: the rotation on the dims after the latent,
    // k's latent alone normed, no V written (the values are read from K).
    const bool latent = k.name.find("_latent") != std::string::npos;
    CHECK(latent == s.mla.enabled);
    const uint32_t rot_off = c.u("ROT_OFF");
    CHECK(rot_off == (latent ? s.mla.kv_lora_rank : 0));
    CHECK(c.u("LATENT") == (latent ? s.mla.kv_lora_rank : 0));
    // Head `h` of one row (`in` at the head's first dim), rotated.
    auto rotate = [&](const float* in, uint32_t position) {
      std::vector<double> out(in, in + dh);
      for (uint32_t j = 0; j < rot / 2; ++j) {
        const uint32_t a = rot_off + (neox ? j : 2 * j), b = rot_off + (neox ? j + rot / 2 : 2 * j + 1);
        const double angle = position * rotation.inv_freq[j];
        const double cs = std::cos(angle) * rotation.scale, sn = std::sin(angle) * rotation.scale;
        out[a] = in[a] * cs - in[b] * sn;
        out[b] = in[b] * cs + in[a] * sn;
      }
      return out;
    };

    // A q/k norm: RMSNorm of each head (1) or each whole row (2) of q and k,
    // with random scales, applied before the rotation.
    // (3: the latent norm, k's first LATENT dims.)
    const uint32_t qk = c.u("QK_NORM");
    CHECK(qk == (latent ? 3u
                 : s.attention.qk_norm == spec::QKNorm::None ? 0u
                 : s.attention.qk_norm == spec::QKNorm::PerHead ? 1u : 2u));
    CHECK(c.f("QK_EPS") == doctest::Approx(s.norm.eps).epsilon(1e-7));
    CHECK(c.flag("QK_UNIT_OFFSET") == s.norm.unit_offset);
    const std::vector<float> q_scale = random_floats(qk == 1 ? dh : size_t{hq} * dh);
    const std::vector<float> k_scale = random_floats(qk == 1 ? dh : qk == 3 ? c.u("LATENT") : size_t{hkv} * dh);
    vk::Buffer q_scale_buffer = buffer_of(device, q_scale), k_scale_buffer = buffer_of(device, k_scale);
    // Head `h` of the row at `row` of `values` (`heads` heads), as the kernel reads it.
    auto read_head = [&](const std::vector<float>& values, size_t row, uint32_t h, uint32_t heads,
                         const std::vector<float>& scale) {
      std::vector<float> out(values.begin() + static_cast<long>(row + size_t{h} * dh),
                             values.begin() + static_cast<long>(row + size_t{h} * dh + dh));
      if (qk == 0 || (qk == 3 && &scale == &q_scale)) return out;  // the latent norm: k's only
      const size_t start = qk == 1 ? row + size_t{h} * dh : row;
      const size_t width = qk == 1 ? dh : qk == 3 ? c.u("LATENT") : size_t{heads} * dh;
      double sum = 0;
      for (size_t i = 0; i < width; ++i) sum += double{values[start + i]} * values[start + i];
      const double inv = 1.0 / std::sqrt(sum / static_cast<double>(width) + s.norm.eps);
      for (uint32_t i = 0; i < (qk == 3 ? width : dh); ++i) {
        const double w = scale[qk == 1 ? i : size_t{h} * dh + i];
        out[i] = static_cast<float>(out[i] * inv * (s.norm.unit_offset ? 1.0 + w : w));
      }
      return out;
    };

    Report report(m, k, worst);
    struct Case {
      uint32_t rows, position;
      uint32_t ring = 0;  // the cache as a ring of this many positions (a windowed layer's); 0: none
    };
    const uint32_t late = static_cast<uint32_t>(std::min<int64_t>(90, s.dims.max_context - 1));
    // The ring case: positions 37 … 41 wrap a ring of 8 at its end, to slots 5, 6, 7, 0, 1.
    for (const Case cs : {Case{5, 37}, Case{1, late}, Case{5, 37, 8}}) {
      const std::string what = std::to_string(cs.rows) + " rows at " + std::to_string(cs.position) +
                               (cs.ring ? " in a ring of " + std::to_string(cs.ring) : "");
      CAPTURE(what);
      if (dynamic) rotation = reference::rope_of(s, cs.position + cs.rows);  // the call's length: io_words' extent
      const push::AttentionPush push = layout.push(cs.rows);
      // q, k and v: one buffer [rows][q | k | v] when fused, else three.
      const std::vector<float> q = random_floats(size_t{cs.rows} * push.q_stride);
      const std::vector<float> kv = layout.fused ? q : random_floats(size_t{cs.rows} * push.k_stride);
      const std::vector<float> vv = layout.fused ? q : random_floats(size_t{cs.rows} * push.v_stride);
      vk::Buffer qb = buffer_of(device, q);
      std::optional<vk::Buffer> kb, vb;
      if (!layout.fused) kb.emplace(buffer_of(device, kv)), vb.emplace(buffer_of(device, vv));
      // Two cache positions past the chunk: nothing may be written there, nor before it
      // (in a ring: in the slots the chunk does not map to).
      const uint32_t positions = cs.ring ? cs.ring : cs.position + cs.rows + 2;
      const std::vector<std::byte> kc0 = random_cache(s, positions), vc0 = random_cache(s, positions);
      vk::Buffer kc = buffer_of(device, kc0), vc = buffer_of(device, vc0);
      vk::Buffer io = buffer_of(device, io_words(cs.position, std::vector<uint32_t>(cs.rows, 0)));
      gpu.run(m, k,
              kernels::RopeKvBindings<vk::Binding>{.io = whole(io),
                                                   .q = whole(qb),
                                                   .k = whole(layout.fused ? qb : *kb),
                                                   .v = whole(layout.fused ? qb : *vb),
                                                   .k_cache = whole(kc),
                                                   .v_cache = whole(vc),
                                                   .q_norm = qk ? whole(q_scale_buffer) : gpu.no_buffer(),
                                                   .k_norm = qk ? whole(k_scale_buffer) : gpu.no_buffer()},
              push, parts, cs.rows, {cs.ring});

      // q: rotated in place; every other element of its buffer (k and v of a fused row) unchanged.
      const std::vector<float> q_out = read_back<float>(device, qb, q.size());
      NormalizedError eq;
      std::vector<bool> is_q(q.size(), false);
      for (uint32_t t = 0; t < cs.rows; ++t) {
        for (uint32_t h = 0; h < hq; ++h) {
          const size_t row = push.q_offset + size_t{t} * push.q_stride, base = row + size_t{h} * dh;
          const std::vector<double> expected = rotate(read_head(q, row, h, hq, q_scale).data(), cs.position + t);
          for (uint32_t i = 0; i < dh; ++i) {
            eq.add(q_out[base + i], expected[i]);
            is_q[base + i] = true;
          }
        }
      }
      for (size_t i = 0; i < q.size(); ++i)
        if (!is_q[i] && q_out[i] != q[i]) {
          FAIL_CHECK("element " << i << " of the q buffer is not q but changed: " << q[i] << " -> " << q_out[i]);
          break;
        }
      report.check(what + ": q", eq.value(), kRopeTolerance);

      // The caches: positions position … position + rows − 1 written, the rest as they were.
      const std::vector<std::byte> kc_out = read_back<std::byte>(device, kc, kc0.size());
      const std::vector<std::byte> vc_out = read_back<std::byte>(device, vc, vc0.size());
      NormalizedError ek, ev;
      const size_t row_bytes = size_t{hkv} * dh * cache_size;
      for (uint32_t slot = 0; slot < positions; ++slot) {
        // The chunk's row that lands in this slot, if any: position p at slot p mod ring.
        std::optional<uint32_t> row;
        for (uint32_t t = 0; t < cs.rows; ++t)
          if ((cs.ring ? (cs.position + t) % cs.ring : cs.position + t) == slot) row = t;
        if (!row) {
          const size_t at = slot * row_bytes;
          if (std::memcmp(&kc_out[at], &kc0[at], row_bytes) != 0 || std::memcmp(&vc_out[at], &vc0[at], row_bytes) != 0)
            FAIL_CHECK("cache slot " << slot << " is outside the chunk but was written");
          continue;
        }
        const uint32_t t = *row, pos = cs.position + t;  // rotated by its position, stored at its slot
        for (uint32_t h = 0; h < hkv; ++h) {
          const size_t vbase = push.v_offset + size_t{t} * push.v_stride + size_t{h} * dh;
          const std::vector<double> expected =
              rotate(read_head(kv, push.k_offset + size_t{t} * push.k_stride, h, hkv, k_scale).data(), pos);
          for (uint32_t i = 0; i < dh; ++i) {
            const size_t at = ((size_t{slot} * hkv + h) * dh + i) * cache_size;
            ek.add(load(cache, &kc_out[at]), expected[i]);
            if (!latent) ev.add(load(cache, &vc_out[at]), vv[vbase + i]);
            else if (std::memcmp(&vc_out[at], &vc0[at], cache_size) != 0) FAIL_CHECK("latent attention wrote the V cache");
          }
        }
      }
      const double tolerance = cache == DType::F16 ? kF16CacheTolerance : kRopeTolerance;
      report.check(what + ": K cache", ek.value(), tolerance);
      report.check(what + ": V cache", ev.value(), cache == DType::F16 ? kF16CacheTolerance : kCopyTolerance);
    }
  }, false, has_attention);
  report_worst("rope_kv", worst);
}

// Latent attention's per-head maps through kv_b ([H·(NOPE + VD)][RANK] f32,
// each head's W_UK rows then its W_UV rows): the absorbed query
// [W_UK[h]ᵀ · q_nope | q_pe] of q [rows][H][NOPE + ROPE], and each head's
// values W_UV[h] · o[h][0 … RANK) of an attention output [rows][H][RANK +
// ROPE] (its rotary part unread). Guard values past the output must stay.
// A SPLIT instance reads llama.cpp's halves of the same kv_b instead: k_b
// [H][RANK][NOPE] (each W_UK transposed) for the query, v_b [H][VD][RANK].
// A ROPE_ONLY query (the expanded form's) writes q_pe alone: the latent
// part keeps its guards.
TEST_CASE_FIXTURE(VulkanTest, "mla: the absorbed query and the heads' values through kv_b") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("mla.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    REQUIRE(s.mla.enabled);
    const uint32_t H = c.u("H"), NOPE = c.u("NOPE"), ROPE = c.u("ROPE"), RANK = c.u("RANK"), VD = c.u("VD");
    CHECK(H == s.dims.heads);
    CHECK(NOPE == s.mla.qk_nope_head_dim);
    CHECK(ROPE == s.mla.qk_rope_head_dim);
    CHECK(RANK == s.mla.kv_lora_rank);
    CHECK(VD == s.mla.v_head_dim);
    const bool query = c.flag("QUERY"), split = c.flag("SPLIT"), rope_only = c.flag("ROPE_ONLY");
    CHECK(query == k.name.starts_with("mla_query"));
    CHECK(rope_only == k.name.starts_with("mla_query_rope"));
    CHECK(split == k.name.ends_with("_split"));
    CHECK(split == s.mla.split_kv_b);
    const std::vector<float> w = random_floats(size_t{H} * (NOPE + VD) * RANK);
    std::vector<float> bound = w;
    if (split) {
      bound.assign(size_t{H} * (query ? RANK * NOPE : VD * RANK), 0.0f);
      for (uint32_t h = 0; h < H; ++h) {
        const float* head = w.data() + size_t{h} * (NOPE + VD) * RANK;
        for (uint32_t j = 0; j < RANK; ++j)
          for (uint32_t i = 0; i < (query ? NOPE : VD); ++i) {
            if (query) bound[(size_t{h} * RANK + j) * NOPE + i] = head[size_t{i} * RANK + j];
            else bound[(size_t{h} * VD + i) * RANK + j] = head[size_t{NOPE + i} * RANK + j];
          }
      }
    }
    vk::Buffer wb = buffer_of(device, bound);
    Report report(m, k, worst);
    for (const uint32_t rows : {1u, 5u}) {
      CAPTURE(rows);
      const uint32_t in_width = H * (query ? NOPE + ROPE : RANK + ROPE), out_width = H * (query ? RANK + ROPE : VD);
      // x a column view of a wider buffer (a packed projection's output).
      const uint32_t x_offset = 5, x_stride = in_width + 9;
      const std::vector<float> x = random_floats(size_t{rows} * x_stride);
      vk::Buffer xb = buffer_of(device, x);
      vk::Buffer yb = buffer_of(device, std::vector<float>(size_t{rows} * out_width + 4, kGuard));
      gpu.run(m, k, kernels::MlaBindings<vk::Binding>{.x = whole(xb), .w = whole(wb), .y = whole(yb)},
              push::MlaPush{.rows = rows, .x_offset = x_offset, .x_stride = x_stride}, H, rows);
      const std::vector<float> y = read_back<float>(device, yb, size_t{rows} * out_width + 4);
      NormalizedError e;
      for (uint32_t t = 0; t < rows; ++t)
        for (uint32_t h = 0; h < H; ++h) {
          const float* in = x.data() + x_offset + size_t{t} * x_stride + size_t{h} * (in_width / H);
          const float* head = w.data() + size_t{h} * (NOPE + VD) * RANK;
          const float* out = y.data() + size_t{t} * out_width + size_t{h} * (out_width / H);
          if (query) {
            for (uint32_t j = 0; j < RANK; ++j) {
              double sum = 0;
              for (uint32_t i = 0; i < NOPE; ++i) sum += double{head[size_t{i} * RANK + j]} * in[i];
              if (rope_only) CHECK(out[j] == kGuard);
              else e.add(out[j], sum);
            }
            for (uint32_t j = 0; j < ROPE; ++j) e.add(out[RANK + j], in[NOPE + j]);
          } else {
            for (uint32_t r = 0; r < VD; ++r) {
              double sum = 0;
              for (uint32_t j = 0; j < RANK; ++j) sum += double{head[size_t{NOPE + r} * RANK + j]} * in[j];
              e.add(out[r], sum);
            }
          }
        }
      for (size_t i = size_t{rows} * out_width; i < y.size(); ++i) CHECK(y[i] == kGuard);
      report.check(std::to_string(rows) + " rows", e.value(), kMatmulTolerance);
    }
  }, false, [](const spec::Spec& s) { return s.mla.enabled; });
  report_worst("mla", worst);
}

// Latent attention's expanded form over a prompt chunk (mla_prefill.comp),
// each instance against the CPU in double:
//   the expansion: for every key j of the sequence (0 … position + rows −
//   1), each head's [W_UK[h] · c_j | W_UV[h] · c_j] of the cached latent
//   c_j (the cache's first RANK values; kv_b, or k_b and v_b with SPLIT);
//   the attention: row t (position p + t) of head h, softmax over j ≤ p + t
//   of SCALE · ([q_nope | q_pe] · [k_nope_j | k_pe_j]) weighing v_j, q_nope
//   read from q and q_pe from r (the absorbed query's rows, at RANK), k_pe
//   from the cache after the latent, k_nope and v from the expansion.
// q and r are column views of wider buffers; guards past each output stay.
TEST_CASE_FIXTURE(VulkanTest, "mla_prefill: the latent expanded per head, and attention at the heads' widths") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("mla_prefill.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    check_head_constants(s, c);
    const uint32_t H = c.u("H"), NOPE = c.u("NOPE"), ROPE = c.u("ROPE"), RANK = c.u("RANK"), VD = c.u("VD");
    CHECK(H == s.dims.heads);
    CHECK(RANK == s.mla.kv_lora_rank);
    CHECK(RANK + ROPE == s.dims.head_dim);
    const bool expand = c.flag("EXPAND"), split = c.flag("SPLIT");
    CHECK(expand == k.name.starts_with("mla_prefill_expand"));
    CHECK(split == (expand && s.mla.split_kv_b));
    const double scale = s.attention.effective_scale(s.dims.head_dim);
    CHECK(c.f("SCALE") == doctest::Approx(scale).epsilon(1e-8));
    const uint32_t EW = NOPE + VD, DH = RANK + ROPE, KB = c.u("KB");  // keys a workgroup expands
    CHECK(KB == kernels::kMlaExpandKeys);
    const DType cache = s.cache.dtype;
    const size_t cache_size = dtype_bytes(cache);
    // kv_b [H·(NOPE + VD)][RANK]; split: k_b [H][RANK][NOPE], v_b [H][VD][RANK].
    const std::vector<float> w = random_floats(size_t{H} * EW * RANK);
    std::vector<float> k_b(size_t{H} * RANK * NOPE), v_b(size_t{H} * VD * RANK);
    for (uint32_t h = 0; h < H; ++h)
      for (uint32_t j = 0; j < RANK; ++j) {
        for (uint32_t i = 0; i < NOPE; ++i) k_b[(size_t{h} * RANK + j) * NOPE + i] = w[(size_t{h} * EW + i) * RANK + j];
        for (uint32_t i = 0; i < VD; ++i) v_b[(size_t{h} * VD + i) * RANK + j] = w[(size_t{h} * EW + NOPE + i) * RANK + j];
      }
    vk::Buffer wb = buffer_of(device, split ? k_b : w), w2b = buffer_of(device, v_b);
    Report report(m, k, worst);
    struct Case {
      uint32_t rows, position;
    };
    for (const Case cs : {Case{4, 29}, Case{3, 0}, Case{1, 40}, Case{2, 200}}) {
      const uint32_t keys = cs.position + cs.rows;
      const std::string what = std::to_string(cs.rows) + " rows at " + std::to_string(cs.position);
      CAPTURE(what);
      const std::vector<std::byte> kc0 = random_cache(s, keys);
      const auto cached = [&](uint32_t j, uint32_t i) { return load(cache, &kc0[(size_t{j} * DH + i) * cache_size]); };
      vk::Buffer kc = buffer_of(device, kc0);
      vk::Buffer io = buffer_of(device, io_words(cs.position, std::vector<uint32_t>(cs.rows, 0)));
      NormalizedError e;
      if (expand) {
        vk::Buffer eb = buffer_of(device, guarded(std::vector<float>(size_t{keys} * H * EW, kGuard)));
        gpu.run(m, k,
                kernels::MlaPrefillBindings<vk::Binding>{.io = whole(io), .q = gpu.no_buffer(), .r = gpu.no_buffer(),
                                                         .k_cache = whole(kc), .w = whole(wb),
                                                         .w2 = split ? whole(w2b) : gpu.no_buffer(), .e = whole(eb),
                                                         .out = gpu.no_buffer()},
                push::MlaPrefillPush{.rows = cs.rows}, H, (keys + KB - 1) / KB, {0});
        const std::vector<float> out = read_back<float>(device, eb, size_t{keys} * H * EW + kGuardWords);
        for (uint32_t j = 0; j < keys; ++j)
          for (uint32_t h = 0; h < H; ++h)
            for (uint32_t i = 0; i < EW; ++i) {
              double sum = 0;
              for (uint32_t l = 0; l < RANK; ++l) sum += double{w[(size_t{h} * EW + i) * RANK + l]} * cached(j, l);
              e.add(out[(size_t{j} * H + h) * EW + i], sum);
            }
        check_guard(out, size_t{keys} * H * EW);
      } else {
        const uint32_t q_offset = 3, q_stride = H * (NOPE + ROPE) + 5, r_offset = 2, r_stride = H * DH + 7;
        const std::vector<float> q = random_floats(size_t{cs.rows} * q_stride, -2.0f, 2.0f);
        const std::vector<float> r = random_floats(size_t{cs.rows} * r_stride, -2.0f, 2.0f);
        const std::vector<float> ex = random_floats(size_t{keys} * H * EW);
        vk::Buffer qb = buffer_of(device, q), rb = buffer_of(device, r), eb = buffer_of(device, ex);
        vk::Buffer ob = buffer_of(device, guarded(std::vector<float>(size_t{cs.rows} * H * VD, kGuard)));
        gpu.run(m, k,
                kernels::MlaPrefillBindings<vk::Binding>{.io = whole(io), .q = whole(qb), .r = whole(rb),
                                                         .k_cache = whole(kc), .w = gpu.no_buffer(),
                                                         .w2 = gpu.no_buffer(), .e = whole(eb), .out = whole(ob)},
                push::MlaPrefillPush{.rows = cs.rows, .q_offset = q_offset, .q_stride = q_stride,
                                     .r_offset = r_offset, .r_stride = r_stride},
                H, cs.rows, {0});
        const std::vector<float> out = read_back<float>(device, ob, size_t{cs.rows} * H * VD + kGuardWords);
        for (uint32_t t = 0; t < cs.rows; ++t)
          for (uint32_t h = 0; h < H; ++h) {
            const float* qn = &q[q_offset + size_t{t} * q_stride + size_t{h} * (NOPE + ROPE)];
            const float* qr = &r[r_offset + size_t{t} * r_stride + size_t{h} * DH + RANK];
            std::vector<double> scores;
            for (uint32_t j = 0; j <= cs.position + t; ++j) {
              const float* kn = &ex[(size_t{j} * H + h) * EW];
              double dot = 0;
              for (uint32_t i = 0; i < NOPE; ++i) dot += double{qn[i]} * kn[i];
              for (uint32_t i = 0; i < ROPE; ++i) dot += double{qr[i]} * cached(j, RANK + i);
              scores.push_back(dot * scale);
            }
            const double top = *std::max_element(scores.begin(), scores.end());
            double sum = 0;
            for (double& x : scores) sum += (x = std::exp(x - top));
            for (uint32_t i = 0; i < VD; ++i) {
              double v = 0;
              for (size_t j = 0; j < scores.size(); ++j) v += scores[j] / sum * ex[(j * H + h) * EW + NOPE + i];
              e.add(out[(size_t{t} * H + h) * VD + i], v);
            }
          }
        check_guard(out, size_t{cs.rows} * H * VD);
      }
      report.check(what, e.value(), expand ? kMatmulTolerance : kAttentionTolerance);
    }
  }, false, [](const spec::Spec& s) { return s.mla.enabled; });
  report_worst("mla_prefill", worst);
}

// softmax(scale · q·Kᵀ) · V over positions 0 … io.position + t of the cache
// (causal; a windowed instance: the last W of them, read from a ring that
// wraps), query head h reading KV head h / (HQ / HKV) (HF's repeat_kv);
// caches filled on the host in the cache dtype.
TEST_CASE_FIXTURE(VulkanTest, "attention: causal softmax over the cache, GQA heads") {
  Gpu gpu(device);
  Worst worst;
  const plan::DeviceFeatures features = vk::device_features(device.info());
  std::vector<plan::Variant> flash_variants;  // flash on matrix units where the device has them
  if (features.coop_nv) flash_variants.push_back(plan::Variant::Coop);
  if (features.coop_khr) flash_variants.push_back(plan::Variant::CoopKhr);
  for_each_instance("attention.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    check_head_constants(s, c);
    const uint32_t hq = c.u("HQ"), hkv = c.u("HKV"), dh = c.u("DH");
    // GT query heads a workgroup: all G of a KV head, or a divisor of G up to 8.
    const uint32_t gt = c.u("GT"), g_all = hq / hkv;
    CHECK(g_all % gt == 0);
    CHECK(gt == (g_all <= 8 ? g_all : gt));
    CHECK(gt <= 8);
    const double scale = s.attention.effective_scale(dh);
    CHECK(c.f("SCALE") == doctest::Approx(scale).epsilon(1e-8));
    const double softcap = c.f("SOFTCAP");  // Gemma 2: c · tanh(s / c) of each scaled score
    CHECK(softcap == doctest::Approx(s.attention.softcap).epsilon(1e-8));
    // ALiBi (BLOOM, MPT): slope_h · (j − i) on head h's score of key j; the
    // slopes by the closed form: 2^(−8h/P) for the first P = 2^⌊log2 H⌋
    // heads, then 2^(−4h) … over the odd h for the rest.
    const bool alibi = c.flag("ALIBI");
    CHECK(alibi == (s.position.kind == spec::PositionKind::Alibi));
    std::vector<double> slopes;
    if (alibi) {
      uint32_t p = 1;
      while (p * 2 <= hq) p *= 2;
      for (uint32_t h = 1; h <= p; ++h) slopes.push_back(std::exp2(-8.0 * h / p));
      for (uint32_t h = 1; slopes.size() < hq; h += 2) slopes.push_back(std::exp2(-4.0 * h / p));
    }
    // A windowed instance (attention_w<W>) exists only for a spec with that window.
    const uint32_t window = c.u("WINDOW");
    // An encoder's rows see every key of their input: positions 0 … extent − 1.
    // An encoder-decoder's: its encoder's instance, and cross-attention's,
    // whose rows see the keys 0 … extent − 1 of the source whatever their
    // own position (extent here: 7 past the chunk's first row's position).
    const bool bidirectional = c.flag("BIDIRECTIONAL");
    const bool cross = c.flag("CROSS");
    CHECK(cross == (k.name.find("_cross") != std::string::npos));
    CHECK(bidirectional == (s.encoder() || k.name.find("_bidirectional") != std::string::npos || cross));
    if (cross) CHECK(s.encoder_decoder());
    // T5's relative bias: a scalar per (bucket of j − i, head), the buckets by
    // the reference's function (causal in a decoder); none in cross-attention.
    const bool relative = c.flag("RELATIVE");
    CHECK(relative == (s.position.kind == spec::PositionKind::Relative && !cross));
    const std::vector<float> rel = random_floats(relative ? size_t(s.position.buckets) * hq : 1, -1.0f, 1.0f);
    vk::Buffer rel_buffer = buffer_of(device, rel);
    const std::string suffix = "_w" + std::to_string(window);
    CHECK((k.name.size() > suffix.size() && k.name.ends_with(suffix)) == (window > 0));
    if (window > 0) CHECK(window == s.attention.sliding_window);
    const QkvViews layout = qkv_layout(s);
    const DType cache = s.cache.dtype;
    const size_t cache_size = dtype_bytes(cache);

    Report report(m, k, worst);
    struct Case {
      uint32_t rows, position;
      uint32_t qrows = 1;  // rows a workgroup (QROWS: the gpu class's prompts stage keys for 4)
      plan::Flash flash{};  // flash tiles (attention_flash.comp): rows × keys; rows 0: attention.comp
      plan::Variant variant = plan::Variant::Plain;  // flash on matrix units: Coop, CoopKhr (attention_flash_coop.comp)
    };
    const uint32_t late = static_cast<uint32_t>(std::min<int64_t>(90, s.dims.max_context - 1));
    std::vector<Case> cases = {Case{4, 29}, Case{1, late}, Case{3, 0}};
    // Past the window: several rows whose first keys leave it, and a decode step.
    if (window > 0) cases.insert(cases.end(), {Case{5, window + 3}, Case{1, 2 * window + 1}});
    // Staged: 4 rows a workgroup, a partial one (3 rows), and 6 rows (a
    // second workgroup of 2) past the window.
    cases.insert(cases.end(), {Case{4, 29, 4}, Case{3, 0, 4}});
    if (window > 0) cases.push_back(Case{6, window + 3, 4});
    // Flash tiles by multiply-adds: the gpu-flash class's tile as the
    // generator plans it, and 16 lines × 32 keys where GT divides 16, over
    // several workgroups (the last partial), a first chunk and, in a
    // window, rows whose first keys leave it over a ring. On matrix units
    // (the gpu-coop-flash classes' tile) where the device has them; else
    // spirv-val proves them, tests/unit/shader_test.cpp.
    const uint32_t extra = relative ? static_cast<uint32_t>(2 * s.position.max_distance + 1) * gt * 4 : 0;
    const bool f16_cache = cache == DType::F16;
    std::vector<std::pair<plan::Flash, plan::Variant>> flash_tiles = {
        {plan::flash_tile(false, gt, dh, f16_cache, 32768, extra), plan::Variant::Plain}};
    if (16 % gt == 0) flash_tiles.push_back({{16 / gt, 32}, plan::Variant::Plain});
    for (plan::Variant v : flash_variants)
      flash_tiles.push_back({plan::flash_tile(true, gt, dh, f16_cache, 49152, extra), v});
    for (const auto& [f, v] : flash_tiles) {
      if (f.rows == 0 || plan::flash_shared_bytes(v != plan::Variant::Plain, f.rows * gt, f.keys, dh, f16_cache, extra) >
                             device.info().max_compute_shared_memory)
        continue;
      const uint32_t many = static_cast<uint32_t>(std::clamp<int64_t>(s.dims.max_context - 29, 1, 2 * f.rows + 3));
      cases.insert(cases.end(), {Case{many, 29, 1, f, v}, Case{3, 0, 1, f, v}});
      if (window > 0) cases.push_back(Case{f.rows + 5, window + 3, 1, f, v});
    }
    for (const Case cs : cases) {
      // A windowed layer's cache is a ring of W + rows − 1 positions (the
      // fewest a chunk needs): position p at slot p mod ring, wrapped here.
      // (An encoder's cache holds its whole input: keys ahead are read too.)
      const uint32_t ring = window > 0 && !bidirectional ? window + cs.rows - 1 : 0;
      const std::string what = std::to_string(cs.rows) + " rows at " + std::to_string(cs.position) +
                               (ring ? " over a ring of " + std::to_string(ring) : "") +
                               (cs.qrows > 1 ? ", " + std::to_string(cs.qrows) + " a workgroup" : "") +
                               (cs.flash.rows > 0 ? ", flash tiles of " + std::to_string(cs.flash.rows) + " rows × " +
                                                        std::to_string(cs.flash.keys) + " keys" +
                                                        (cs.variant == plan::Variant::Coop      ? " on matrix units (NV)"
                                                         : cs.variant == plan::Variant::CoopKhr ? " on matrix units (KHR)"
                                                                                                : "")
                                                  : "");
      CAPTURE(what);
      const push::AttentionPush push = layout.push(cs.rows);
      const std::vector<float> q = random_floats(size_t{cs.rows} * push.q_stride, -2.0f, 2.0f);
      const uint32_t source = 7;  // cross-attention: a source of 7 keys
      const uint32_t positions = ring ? ring : std::max(cs.position + cs.rows, cross ? source : 0u);
      const std::vector<std::byte> kc0 = random_cache(s, positions), vc0 = random_cache(s, positions);
      vk::Buffer qb = buffer_of(device, q), kc = buffer_of(device, kc0), vc = buffer_of(device, vc0);
      std::vector<uint32_t> io_rows = io_words(cs.position, std::vector<uint32_t>(cs.rows, 0));
      if (cross)
        for (size_t w = 3; w < io_rows.size(); w += 4) io_rows[w] = source;
      vk::Buffer io = buffer_of(device, io_rows);
      const size_t width = size_t{hq} * dh;
      vk::Buffer o = buffer_of(device, guarded(std::vector<float>(cs.rows * width, kGuard)));
      // attention reads the caches through RGBA32UI texel views.
      const vk::TexelView kview(device, kc.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, kc.size());
      const vk::TexelView vview(device, vc.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, vc.size());
      emit::KernelInstance flash = k;
      flash.source.file =
          std::string(kernels::flash_file(cs.variant == plan::Variant::Plain ? kernels::Layout::Tiled : kernels::Layout::Coop));
      const bool tiles = cs.flash.rows > 0;
      const uint32_t per_group = tiles ? cs.flash.rows : cs.qrows;
      gpu.run(m, tiles ? flash : k,
              kernels::AttentionBindings<vk::Binding>{.io = whole(io),
                                                      .q = whole(qb),
                                                      .k_cache = vk::TexelBinding{kview.handle()},
                                                      .v_cache = vk::TexelBinding{vview.handle()},
                                                      .out = whole(o),
                                                      .partials = gpu.no_buffer(),
                                                      .rel_bias = relative ? whole(rel_buffer) : gpu.no_buffer()},
              push, hq / gt, (cs.rows + per_group - 1) / per_group,
              tiles ? std::vector<uint32_t>{1, ring, cs.flash.rows, cs.flash.keys} : std::vector<uint32_t>{1, ring, cs.qrows}, 1,
              tiles ? plan::kFlashThreads : device.info().subgroup_size * cs.qrows,  // a workgroup per GT heads; one key range (split ranges: the model tests)
              cs.variant == plan::Variant::CoopKhr);
      const std::vector<float> out = read_back<float>(device, o, cs.rows * width + kGuardWords);

      auto cached = [&](const std::vector<std::byte>& c_, uint32_t pos, uint32_t h, uint32_t i) {
        const uint32_t slot = ring ? pos % ring : pos;
        return load(cache, &c_[((size_t{slot} * hkv + h) * dh + i) * cache_size]);
      };
      NormalizedError e;
      for (uint32_t t = 0; t < cs.rows; ++t) {
        // The query at position i sees keys first … i: first = i − W + 1 in a
        // window; bidirectional, every key up to the chunk's end.
        // Bidirectional with a window W: |i − j| ≤ W.
        const uint32_t i_pos = cs.position + t;
        const uint32_t last = cross           ? source - 1
                              : !bidirectional ? i_pos
                              : window > 0     ? std::min(cs.position + cs.rows - 1, i_pos + window)
                                               : cs.position + cs.rows - 1;
        const uint32_t first = bidirectional ? (window > 0 && i_pos > window ? i_pos - window : 0)
                                             : (window > 0 && last + 1 > window ? last + 1 - window : 0);
        const uint32_t keys = last + 1 - first;
        for (uint32_t h = 0; h < hq; ++h) {
          const uint32_t g = h / (hq / hkv);
          const float* qh = &q[push.q_offset + size_t{t} * push.q_stride + size_t{h} * dh];
          std::vector<double> scores(keys);
          double top = -std::numeric_limits<double>::infinity();
          for (uint32_t p = 0; p < keys; ++p) {
            double dot = 0;
            for (uint32_t i = 0; i < dh; ++i) dot += qh[i] * cached(kc0, first + p, g, i);
            scores[p] = scale * dot;
            if (softcap > 0) scores[p] = softcap * std::tanh(scores[p] / softcap);
            if (alibi) scores[p] += slopes[h] * (static_cast<double>(first + p) - static_cast<double>(cs.position + t));
            if (relative) {
              const int64_t r = static_cast<int64_t>(first + p) - static_cast<int64_t>(cs.position + t);
              scores[p] += rel[static_cast<size_t>(reference::relative_bucket(r, bidirectional, s.position.buckets,
                                                                              s.position.max_distance)) * hq + h];
            }
            top = std::max(top, scores[p]);
          }
          double sum = 0;
          for (double& sc : scores) sum += (sc = std::exp(sc - top));
          for (uint32_t i = 0; i < dh; ++i) {
            double value = 0;
            for (uint32_t p = 0; p < keys; ++p) value += scores[p] * cached(vc0, first + p, g, i);
            e.add(out[t * width + size_t{h} * dh + i], value / sum);
          }
        }
      }
      check_guard(out, cs.rows * width);
      report.check(what, e.value(), cs.variant == plan::Variant::Plain ? kAttentionTolerance : kFlashCoopTolerance);
    }
  }, false, has_attention);
  report_worst("attention", worst);
}

// The index of the largest logit of the last row, the lowest among equals,
// written to io.tokens[0].
// A mixture of experts on the device, kernel by kernel: moe_route's top-k
// (a row of equal logits and a row with two equal top logits: the lowest
// experts win, as torch.topk), weights and per-expert slot lists; the gated
// expert matmul (x read at each slot's token) and the down one (at the slot
// itself), each over the experts' matrices stacked, grid z the expert;
// moe_combine's weighted sum into the stream, with a shared expert's output
// (scaled by sigmoid of its gate's logit, read beside the router's) where
// the model has one. 13 rows (prefill tiles) and 1 (decode). DeepSeek's
// routing: sigmoid scores, a correction bias that chooses but does not
// weigh, group-limited top-k (a group scored by its best two experts, and
// for each grouped model also DeepSeek-V2's rule: softmax, by its best
// one), routed scaling.
TEST_CASE_FIXTURE(VulkanTest, "moe: routing, expert matmuls and their weighted sum") {
  Gpu gpu(device);
  size_t models_with_experts = 0, grouped = 0;
  std::vector<Model> cases;
  for (const Model& m : models()) {
    if (!m.spec.moe.enabled()) continue;
    cases.push_back(m);
    if (m.spec.moe.groups > 1) {
      Model v2{m.spec, {}};
      v2.spec.name += "-v2-routing";
      v2.spec.moe.scoring = spec::MoeScoring::Softmax;
      v2.spec.moe.correction_bias = false;
      v2.spec.moe.group_score = spec::GroupScore::Max;
      v2.spec.moe.norm_topk_prob = false;
      v2.spec.moe.routed_scaling_factor = 16.0;
      v2.kernels = emit::kernel_instances(v2.spec);
      cases.push_back(std::move(v2));
    }
  }
  for (const Model& m : cases) {
    const spec::Spec& s = m.spec;
    ++models_with_experts;
    if (s.moe.groups > 1) ++grouped;
    CAPTURE(s.name);
    const emit::KernelInstance *route_k = nullptr, *gated_k = nullptr, *down_k = nullptr, *combine_k = nullptr;
    for (const emit::KernelInstance& k : m.kernels) {
      const Constants c(k);
      if (k.source.file == "moe_route.comp") route_k = &k;
      if (k.source.file == "moe_combine.comp") combine_k = &k;
      if (k.source.file == "matmul_rows.comp" && c.flag("EXPERT_MODE")) (c.flag("X_OF_SLOT") ? down_k : gated_k) = &k;
    }
    REQUIRE(route_k);
    REQUIRE(gated_k);
    REQUIRE(down_k);
    REQUIRE(combine_k);
    const uint32_t E = static_cast<uint32_t>(s.moe.experts), K = static_cast<uint32_t>(s.moe.top_k);
    const uint32_t D = static_cast<uint32_t>(s.dims.hidden), I = static_cast<uint32_t>(s.moe.expert_intermediate);
    // The kernels' input widths are the model's (D, I); the rows each expert
    // computes are MatmulPush::n, at most 45 here (not a multiple of a tile),
    // so that Mixtral-sized experts stay small on the host.
    const uint32_t NI = std::min(I, 45u), ND = std::min(D, 45u);
    CHECK(Constants(*route_k).u("E") == E);
    CHECK(Constants(*route_k).u("TOPK") == K);
    CHECK(Constants(*route_k).flag("NORM_TOPK") == s.moe.norm_topk_prob);
    const spec::Moe& moe = s.moe;
    const bool sigmoid = Constants(*route_k).flag("SIGMOID"), biased = Constants(*route_k).flag("CORRECTION_BIAS");
    const bool top2 = Constants(*route_k).flag("GROUP_TOP2");
    CHECK(sigmoid == (moe.scoring == spec::MoeScoring::Sigmoid));
    CHECK(biased == moe.correction_bias);
    CHECK(Constants(*route_k).flag("GROUPED") == (moe.groups > 1));
    CHECK(top2 == (moe.group_score == spec::GroupScore::Top2Sum));
    CHECK(Constants(*route_k).flag("SCALED") == (moe.routed_scaling_factor != 1.0));
    // The router's logits open rows of LS: a shared expert's gate logit may follow them.
    // (Beside it when they share a dtype; GGUF's vector gate, f32, is a matmul of its own.)
    const uint32_t LS = Constants(*route_k).u("LOGITS_STRIDE");
    const Constants combine(*combine_k);
    CHECK(combine.flag("SHARED") == (s.moe.shared_experts > 0));
    CHECK(combine.flag("SHARED_GATED") == s.moe.shared_expert_gate);
    const uint32_t GS = combine.u("GATE_STRIDE"), GO = combine.u("GATE_OFFSET");
    if (LS == E + 1) CHECK((combine.flag("SHARED_GATED") && GS == LS && GO == E));
    else CHECK(LS == E);
    if (combine.flag("SHARED_GATED")) CHECK(GO < GS);
    const DType dtype = weight_dtype(Constants(*gated_k).u("WDTYPE"));
    Weights gate(device, dtype, int64_t{E} * NI, D), up(device, dtype, int64_t{E} * NI, D), down(device, dtype, int64_t{E} * ND, I);
    gate.fill(0, int64_t{E} * NI);
    up.fill(0, int64_t{E} * NI);
    down.fill(0, int64_t{E} * ND);
    Worst worst;
    // Rows and the expert matmuls' tile: prefill, tiled prefill, decode.
    for (const auto& [R, tile] : {std::pair{13u, plan::Tile{8, 8, 2}}, {13u, plan::Tile{64, 32, 1}}, {1u, plan::Tile{16, 1, 2}},
                                    {1u, plan::Tile{1, 1, 2, 4}}}) {
      CAPTURE(R);
      CAPTURE(plan::tile_text(tile));
      // Router logits: row 0 all equal, row 1 two equal top ones (experts 1 and E − 1).
      std::vector<float> logits = random_floats(size_t{R} * LS, -2.0f, 2.0f);
      for (uint32_t e = 0; e < E; ++e) logits[e] = 0.5f;
      if (R > 1) logits[LS + 1] = logits[LS + E - 1] = 3.0f;
      const size_t route_words = size_t{R} * (K + 3 * E + 1);
      // The correction bias: large enough beside sigmoid scores to change the choice.
      const std::vector<float> bias = random_floats(E, -0.3f, 0.3f);
      vk::Buffer lb = buffer_of(device, logits);
      vk::Buffer bb = buffer_of(device, bias);
      vk::Buffer rb = buffer_of(device, std::vector<uint32_t>(route_words, 0xdeadbeefu));
      gpu.run(m, *route_k,
              kernels::MoeRouteBindings<vk::Binding>{.logits = whole(lb), .route = whole(rb),
                                                     .bias = biased ? whole(bb) : gpu.no_buffer()},
              push::RowsPush{.rows = R}, 1);
      const std::vector<uint32_t> route = read_back<uint32_t>(device, rb, route_words);

      // The CPU's routing: softmax or sigmoid scores; the values to choose by
      // (+ bias); the best groups' experts only; a stable sort (lowest index
      // first among equals), the top K, weighted by their scores.
      std::vector<uint32_t> ids(size_t{R} * K);
      std::vector<double> weights(size_t{R} * K);
      std::vector<std::vector<uint32_t>> lists(E);
      const uint32_t G = static_cast<uint32_t>(moe.groups), group_size = E / G;
      for (uint32_t t = 0; t < R; ++t) {
        const float* row = &logits[size_t{t} * LS];
        std::vector<double> p(E);
        if (sigmoid) {
          for (uint32_t e = 0; e < E; ++e) p[e] = 1 / (1 + std::exp(-double{row[e]}));
        } else {
          const double top = *std::max_element(row, row + E);
          double sum = 0;
          for (uint32_t e = 0; e < E; ++e) sum += (p[e] = std::exp(double{row[e]} - top));
          for (double& v : p) v /= sum;
        }
        std::vector<double> by = p;
        if (biased)
          for (uint32_t e = 0; e < E; ++e) by[e] += bias[e];
        if (G > 1) {
          std::vector<double> score(G);
          for (uint32_t g = 0; g < G; ++g) {
            std::vector<double> v(by.begin() + g * group_size, by.begin() + (g + 1) * group_size);
            std::sort(v.rbegin(), v.rend());
            score[g] = top2 ? v[0] + v[1] : v[0];
          }
          std::vector<uint32_t> rank(G);
          std::iota(rank.begin(), rank.end(), 0u);
          std::stable_sort(rank.begin(), rank.end(), [&](uint32_t a, uint32_t b) { return score[a] > score[b]; });
          for (uint32_t r = static_cast<uint32_t>(moe.topk_groups); r < G; ++r)
            for (uint32_t e = rank[r] * group_size; e < (rank[r] + 1) * group_size; ++e)
              by[e] = -std::numeric_limits<double>::infinity();
        }
        std::vector<uint32_t> order(E);
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return by[a] > by[b]; });
        double chosen = 0;
        for (uint32_t j = 0; j < K; ++j) chosen += p[order[j]];
        for (uint32_t j = 0; j < K; ++j) {
          ids[t * K + j] = order[j];
          weights[t * K + j] = p[order[j]] / (moe.norm_topk_prob ? chosen : 1.0) * moe.routed_scaling_factor;
          lists[order[j]].push_back(t * K + j);
        }
      }
      if (!biased) {
        CHECK(ids[0] == 0);  // equal logits: experts 0, 1, … in order
        if (K > 1) CHECK(ids[1] == 1);
      }
      if (R > 1 && !biased && !top2) CHECK((ids[K] == 1 && (K < 2 || ids[K + 1] == E - 1)));
      NormalizedError ew;
      for (uint32_t e = 0; e < E; ++e) {
        CAPTURE(e);
        CHECK(route[e] == lists[e].size());
        for (size_t n = 0; n < lists[e].size() && n < route[e]; ++n)
          CHECK(route[2 * E + 1 + size_t{R} * K + size_t{e} * R + n] == lists[e][n]);
      }
      // The experts with tokens, ascending: the expert matmuls' grid z.
      std::vector<uint32_t> active;
      for (uint32_t e = 0; e < E; ++e)
        if (!lists[e].empty()) active.push_back(e);
      REQUIRE(route[E] == active.size());
      CHECK(std::equal(active.begin(), active.end(), route.begin() + E + 1));
      for (size_t i = 0; i < weights.size(); ++i) ew.add(std::bit_cast<float>(route[2 * E + 1 + i]), weights[i]);
      CHECK(ew.value() < 1e-6);

      // The gated experts: slot t·K + j of h is expert ids[t·K + j] applied to
      // x[t], normalized first when the MLP's norm is folded in.
      const std::vector<float> x = random_floats(size_t{R} * D);
      vk::Buffer xb = buffer_of(device, x);
      const bool norm = Constants(*gated_k).u("NORM") != 0;
      const std::vector<float> norm_g = random_floats(D, 0.5f, 1.5f);
      vk::Buffer gb = buffer_of(device, norm_g);
      std::vector<double> xn(x.begin(), x.end());
      if (norm) {
        CHECK(s.norm.kind == spec::NormKind::RMSNorm);
        for (uint32_t t = 0; t < R; ++t) {
          double squares = 0;
          for (uint32_t i = 0; i < D; ++i) squares += xn[size_t{t} * D + i] * xn[size_t{t} * D + i];
          const double inv = 1 / std::sqrt(squares / D + s.norm.eps);
          for (uint32_t i = 0; i < D; ++i)
            xn[size_t{t} * D + i] *= inv * (s.norm.unit_offset ? 1.0 + norm_g[i] : double(norm_g[i]));
        }
      }
      vk::Buffer hb = buffer_of(device, guarded(std::vector<float>(size_t{R} * K * NI, kGuard)));
      // An expert matmul as the session dispatches it: decode, prefill or
      // tiled, grid z the experts with tokens (at most R · K); experts over
      // one binding's bytes (DeepSeek-V3 in bf16) a dispatch per part, its
      // PART_EXPERTS experts' rows bound alone from expert0 on.
      const auto run_experts = [&](const emit::KernelInstance& k, Weights& w, Weights* w2, const vk::Buffer& in,
                                   const vk::Buffer& out, vk::Binding norm_scale, uint32_t n) {
        const uint32_t lanes = device.info().subgroup_size, per_group = tile.rows_per_group(lanes);
        const uint32_t part = Constants(k).u("PART_EXPERTS");
        for (uint32_t e0 = 0; e0 < E; e0 += part) {
          const int64_t first = int64_t{e0} * n, rows = int64_t{std::min(part, E - e0)} * n;
          const bool whole_set = part >= E;
          gpu.run(m, matmul_in(k, tile, weight_dtype(Constants(k).u("WDTYPE"))),
                  kernels::MatmulBindings<vk::Binding>{
                      .w = whole_set ? vk::Binding(w.binding()) : vk::Binding(w.range(first, rows)),
                      .w2 = !w2 ? gpu.no_texels() : whole_set ? vk::Binding(w2->binding()) : vk::Binding(w2->range(first, rows)),
                      .x = whole(in), .bias = gpu.no_buffer(), .bias2 = gpu.no_buffer(), .y = whole(out),
                      .norm_scale = norm_scale, .norm_shift = gpu.no_buffer(), .route = whole(rb),
                      .xq = gpu.no_buffer()},
                  push::MatmulPush{.rows = R, .n = n, .x_row0 = 0, .gate_row0 = 0, .up_row0 = 0, .col0 = 0, .y_stride = n,
                                   .expert0 = e0},
                  (n + per_group - 1) / per_group, (R + tile.tokens - 1) / tile.tokens,
                  {tile.rows, tile.tokens, tile.texels, tile.groups}, std::min(E, R * K), tile.threads(lanes));
        }
      };
      run_experts(*gated_k, gate, &up, xb, hb, norm ? vk::Binding(whole(gb)) : gpu.no_buffer(), NI);
      const std::vector<float> h = read_back<float>(device, hb, size_t{R} * K * NI + kGuardWords);
      NormalizedError eh;
      for (uint32_t slot = 0; slot < R * K; ++slot) {
        const uint32_t e = ids[slot], t = slot / K;
        for (uint32_t r = 0; r < NI; ++r) {
          double g = 0, u = 0;
          for (uint32_t i = 0; i < D; ++i) {
            g += gate.row(int64_t{e} * NI + r)[i] * xn[size_t{t} * D + i];
            u += up.row(int64_t{e} * NI + r)[i] * xn[size_t{t} * D + i];
          }
          eh.add(h[size_t{slot} * NI + r], activate(s.mlp.activation, g) * u);
        }
      }
      check_guard(h, size_t{R} * K * NI);
      worst.add(eh.value(), s.name + " experts gated, " + std::to_string(R) + " rows");
      CHECK(eh.value() < kMatmulTolerance);

      // The down projections: slot s of y is expert ids[s] applied to slot s of its input.
      const std::vector<float> hin = random_floats(size_t{R} * K * I);
      vk::Buffer hinb = buffer_of(device, hin);
      vk::Buffer yb = buffer_of(device, guarded(std::vector<float>(size_t{R} * K * ND, kGuard)));
      run_experts(*down_k, down, nullptr, hinb, yb, gpu.no_buffer(), ND);
      const std::vector<float> y = read_back<float>(device, yb, size_t{R} * K * ND + kGuardWords);
      NormalizedError ey;
      for (uint32_t slot = 0; slot < R * K; ++slot) {
        const uint32_t e = ids[slot];
        for (uint32_t r = 0; r < ND; ++r) {
          double v = 0;
          for (uint32_t i = 0; i < I; ++i) v += down.row(int64_t{e} * ND + r)[i] * hin[size_t{slot} * I + i];
          ey.add(y[size_t{slot} * ND + r], v);
        }
      }
      check_guard(y, size_t{R} * K * ND);
      worst.add(ey.value(), s.name + " experts down, " + std::to_string(R) + " rows");
      CHECK(ey.value() < kMatmulTolerance);

      // The weighted sum into the stream (+ the shared expert's output).
      const std::vector<float> x0 = random_floats(size_t{R} * D), ys = random_floats(size_t{R} * K * D);
      const std::vector<float> shared = random_floats(size_t{R} * D);
      // The gate's logits where the combine reads them: the router's buffer, or one of their own.
      const std::vector<float> gates = GS == LS ? logits : random_floats(size_t{R} * std::max(GS, 1u), -2.0f, 2.0f);
      vk::Buffer x0b = buffer_of(device, x0), ysb = buffer_of(device, ys), sb = buffer_of(device, shared);
      vk::Buffer gtb = buffer_of(device, gates);
      const bool has_shared = combine.flag("SHARED"), gated = combine.flag("SHARED_GATED");
      gpu.run(m, *combine_k,
              kernels::MoeCombineBindings<vk::Binding>{.route = whole(rb), .y = whole(ysb), .x = whole(x0b),
                                                       .shared = has_shared ? vk::Binding(whole(sb)) : gpu.no_buffer(),
                                                       .gate = gated ? vk::Binding(whole(gtb)) : gpu.no_buffer()},
              push::RowsPush{.rows = R}, R);
      const std::vector<float> sum = read_back<float>(device, x0b, size_t{R} * D);
      NormalizedError es;
      for (uint32_t t = 0; t < R; ++t)
        for (uint32_t i = 0; i < D; ++i) {
          double v = x0[size_t{t} * D + i];
          for (uint32_t j = 0; j < K; ++j) v += weights[t * K + j] * ys[(size_t{t} * K + j) * D + i];
          const double g = gated ? 1 / (1 + std::exp(-double{gates[size_t{t} * GS + GO]})) : 1.0;
          if (has_shared) v += g * shared[size_t{t} * D + i];
          es.add(sum[size_t{t} * D + i], v);
        }
      CHECK(es.value() < 1e-6);
    }
    report_worst("moe " + s.name, worst);
  }
  if (whole_grid()) {
    CHECK(models_with_experts >= 2);
    CHECK(grouped >= 2);  // tiny-deepseek-moe, with V3's routing and with V2's
  }
}

TEST_CASE_FIXTURE(VulkanTest, "argmax: the last row's first largest logit") {
  Gpu gpu(device);
  for_each_instance("argmax.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const uint32_t vocab = c.u("V");
    CHECK(vocab == m.spec.dims.vocab);
    constexpr uint32_t rows = 3;
    const uint32_t lanes = device.info().subgroup_size;

    struct Case {
      std::string what;
      std::vector<uint32_t> peaks;  // indices of the last row set to the largest value
    };
    const uint32_t a = random_below(vocab / 2), b = vocab / 2 + random_below(vocab / 2);
    // A tie whose lowest index sits in a later lane than the higher one's;
    // and in a later subgroup of the workgroup of 128 (argmax.comp).
    const uint32_t late_lane = (vocab / 3) / lanes * lanes + lanes - 1, early_lane = late_lane + 1;
    constexpr uint32_t kWorkgroup = 128;
    std::vector<Case> cases = {{"one peak", {b}},
                                     {"the last index", {vocab - 1}},
                                     {"the first index", {0}},
                                     {"a tie", {b, a}},
                                     {"a tie across lanes", {early_lane, vocab - 1, late_lane}},
                                     {"a tie at both ends", {vocab - 1, 0}},
                                     {"all equal", {}}};
    if (vocab > kWorkgroup) {  // the last lane of one pass over 128 and the first of the next
      const uint32_t late_group = (vocab - 1) / kWorkgroup * kWorkgroup - 1;
      cases.push_back({"a tie across subgroups", {late_group + 1, late_group}});
    }
    std::string found;
    for (const Case& cs : cases) {
      CAPTURE(cs.what);
      std::vector<float> logits = cs.peaks.empty() ? std::vector<float>(size_t{rows} * vocab, 0.5f)
                                                   : random_floats(size_t{rows} * vocab, -10.0f, 10.0f);
      // Earlier rows hold larger values: only the last row counts.
      logits[random_below(vocab)] = 100.0f;
      logits[vocab + random_below(vocab)] = 100.0f;
      float* last = &logits[size_t{rows - 1} * vocab];
      for (uint32_t p : cs.peaks) last[p] = 20.0f;
      uint32_t expected = 0;  // the CPU: the first index of the largest value
      for (uint32_t i = 1; i < vocab; ++i)
        if (last[i] > last[expected]) expected = i;
      // Row 0 (token, sequence, position), then a guard word.
      vk::Buffer io = buffer_of(device, std::vector<uint32_t>{0xdeadbeefu, 5, 7, 0xdeadbeefu});
      vk::Buffer lb = buffer_of(device, logits);
      gpu.run(m, k, kernels::ArgmaxBindings<vk::Binding>{.io = whole(io), .logits = whole(lb)},
              push::RowsPush{.rows = rows}, 1);
      const std::vector<uint32_t> words = read_back<uint32_t>(device, io, 4);
      CHECK(words[0] == expected);
      CHECK(words[1] == 5);  // the sequence and the position stay
      CHECK(words[2] == 7);
      CHECK(words[3] == 0xdeadbeefu);
      found += " " + std::to_string(words[0]);
    }
    MESSAGE(m.spec.name << " " << k.name << " (V = " << vocab << "): picked" << found);
  }, /*decoders_only=*/true);
}

}  // TEST_SUITE("kernels")

// The passes the state-space kernel tests run, as a session makes them for
// two sequences (below).
struct SsmRow {
  uint32_t sequence, position;
};
std::vector<std::vector<SsmRow>> ssm_passes() {
  return {{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}}, {{1, 0}, {1, 1}, {1, 2}}, {{0, 5}, {1, 3}},
          {{0, 6}, {0, 7}, {0, 8}, {0, 9}}, {{0, 0}, {0, 1}}};
}

// A Mamba layer's kernels, ssm_conv and ssm_scan, over passes as a session
// makes them for two sequences: A's prompt chunk of 5, B's prompt of 3, a
// batched decode row of each, A's chunk of 4, then A again from position 0
// (a reset: its stale state must not be read). Each pass starts from the
// states the one before left; the expected values are the recurrence
// computed here in double, the CPU reference's step (runtime/reference's
// mamba()). Real widths: 16 states of 32 channels (one workgroup of
// CPW = 32); 5 states of 40 channels (two workgroups, the second's lanes
// mostly idle) with 3 taps and no conv bias. dt_proj runs inside ssm_scan on
// x_proj's first dt_rank columns.
TEST_CASE_FIXTURE(VulkanTest, "ssm: the causal conv and the selective scan carry each sequence's state across passes") {
  Gpu gpu(device);
  for (const auto& [hidden, extra] :
       {std::pair<int, std::string>{16, "d_state = 16\nd_conv = 4\ndt_rank = 3\n"},
        std::pair<int, std::string>{20, "d_state = 5\nd_conv = 3\ndt_rank = 2\nconv_bias = false\n"}}) {
    spec::Diagnostics diag("ssm.toml");
    const auto s = spec::parse_spec_string("[model]\nname = \"ssm\"\n[dims]\nhidden = " + std::to_string(hidden) +
                                               "\nlayers = 1\nvocab = 16\nmax_context = 64\n[ssm]\nkind = \"mamba\"\n" +
                                               extra + "[weights]\npreset = \"hf-mamba\"\n",
                                           "ssm.toml", diag);
    REQUIRE_MESSAGE(s, diag.format());
    CAPTURE(extra);
    const Model m{*s, {emit::kernel_instance(*s, lower::KernelKey{.family = kernels::Family::SsmConv}),
                       emit::kernel_instance(*s, lower::KernelKey{.family = kernels::Family::SsmScan})}};
    const Constants conv(m.kernels[0]), scan(m.kernels[1]);
    const uint32_t DI = conv.u("CH"), DC = conv.u("DC"), N = scan.u("N"), R = scan.u("R");
    CHECK(DI == s->ssm.d_inner);
    CHECK(conv.u("XOFF") == 0);  // x, the first half of in_proj's [x | z]
    CHECK(conv.u("XSTRIDE") == 2 * DI);
    CHECK(DC == s->ssm.d_conv);
    CHECK(conv.flag("CONV_BIAS") == s->ssm.conv_bias);
    CHECK(N == s->ssm.d_state);
    // CPW channels a workgroup, a lane a channel at a time.
    const uint32_t CPW = conv.u("CPW");
    CHECK(CPW == scan.u("CPW"));
    const uint32_t groups = (DI + CPW - 1) / CPW;
    constexpr uint32_t kSequences = 2;
    const uint32_t W = DC - 1, ROW = R + 2 * N;
    const std::vector<float> w = random_floats(size_t{DI} * DC), bias = random_floats(DI);
    const std::vector<float> a_log = random_floats(size_t{DI} * N), d = random_floats(DI);
    const std::vector<float> dt_w = random_floats(size_t{DI} * R), dt_bias = random_floats(DI, -3.0f, 1.0f);
    vk::Buffer wb = buffer_of(device, w), bb = buffer_of(device, bias), ab = buffer_of(device, a_log), db = buffer_of(device, d);
    vk::Buffer dtwb = buffer_of(device, dt_w), dtbb = buffer_of(device, dt_bias);
    // Garbage in the states: a sequence at position 0 must not read its own.
    vk::Buffer conv_state = buffer_of(device, random_floats(std::max<size_t>(size_t{kSequences} * DI * W, 1), 5.0f, 9.0f));
    vk::Buffer scan_state = buffer_of(device, random_floats(size_t{kSequences} * DI * N, 5.0f, 9.0f));
    std::vector<double> window(size_t{kSequences} * DI * W, 0.0), h(size_t{kSequences} * DI * N, 0.0);  // the host's
    const std::vector<std::vector<SsmRow>> passes = ssm_passes();
    NormalizedError eu, ey;
    for (const std::vector<SsmRow>& pass : passes) {
      const uint32_t rows = static_cast<uint32_t>(pass.size());
      CAPTURE(rows);
      std::vector<uint32_t> io;  // IoRow: token, sequence, position, extent
      for (const SsmRow& r : pass) io.insert(io.end(), {0u, r.sequence, r.position, 0u});
      const std::vector<float> xz = random_floats(size_t{rows} * 2 * DI), dbc = random_floats(size_t{rows} * ROW);
      vk::Buffer iob = buffer_of(device, io), xzb = buffer_of(device, xz), dbcb = buffer_of(device, dbc);
      vk::Buffer ub = buffer_of(device, std::vector<float>(size_t{rows} * DI, kGuard));
      vk::Buffer yb = buffer_of(device, std::vector<float>(size_t{rows} * DI, kGuard));
      gpu.run(m, m.kernels[0],
              kernels::SsmConvBindings<vk::Binding>{.io = whole(iob), .xz = whole(xzb), .w = whole(wb),
                                                    .bias = s->ssm.conv_bias ? vk::Binding(whole(bb)) : gpu.no_buffer(),
                                                    .state = whole(conv_state), .u = whole(ub)},
              push::RowsPush{.rows = rows}, groups);
      const std::vector<float> u = read_back<float>(device, ub, size_t{rows} * DI);
      gpu.run(m, m.kernels[1],
              kernels::SsmScanBindings<vk::Binding>{.io = whole(iob), .u = whole(ub), .dbc = whole(dbcb), .dt_w = whole(dtwb),
                                                    .dt_bias = whole(dtbb),                                                    .xz = whole(xzb), .a_log = whole(ab), .d = whole(db),
                                                    .state = whole(scan_state), .y = whole(yb)},
              push::RowsPush{.rows = rows}, groups);
      const std::vector<float> y = read_back<float>(device, yb, size_t{rows} * DI);
      for (uint32_t t = 0; t < rows; ++t) {
        double* win = window.data() + size_t{pass[t].sequence} * DI * W;
        double* hs = h.data() + size_t{pass[t].sequence} * DI * N;
        if (pass[t].position == 0) {  // a new sequence starts from zeros
          std::fill(win, win + size_t{DI} * W, 0.0);
          std::fill(hs, hs + size_t{DI} * N, 0.0);
        }
        for (uint32_t c = 0; c < DI; ++c) {
          const double x = xz[size_t{t} * 2 * DI + c];
          double sum = s->ssm.conv_bias ? bias[c] : 0.0;
          for (uint32_t k = 0; k < W; ++k) sum += w[size_t{c} * DC + k] * win[size_t{c} * W + k];
          sum += w[size_t{c} * DC + W] * x;
          for (uint32_t k = 0; k + 1 < W; ++k) win[size_t{c} * W + k] = win[size_t{c} * W + k + 1];
          if (W > 0) win[size_t{c} * W + W - 1] = x;
          const double uu = sum / (1 + std::exp(-sum));
          eu.add(u[size_t{t} * DI + c], uu);
          double raw = dt_bias[c];
          for (uint32_t r = 0; r < R; ++r) raw += double{dt_w[size_t{c} * R + r]} * dbc[size_t{t} * ROW + r];
          const double step = raw > 20 ? raw : std::log1p(std::exp(raw));
          double out = 0;
          for (uint32_t n = 0; n < N; ++n) {
            double& hn = hs[size_t{c} * N + n];
            hn = std::exp(-std::exp(double{a_log[size_t{c} * N + n]}) * step) * hn + step * dbc[size_t{t} * ROW + R + n] * uu;
            out += dbc[size_t{t} * ROW + R + N + n] * hn;
          }
          const double z = xz[size_t{t} * 2 * DI + DI + c];
          ey.add(y[size_t{t} * DI + c], (out + d[c] * uu) * z / (1 + std::exp(-z)));
        }
      }
    }
    // The states the kernels leave are each sequence's after its last row.
    NormalizedError ew, eh;
    const std::vector<float> gw = read_back<float>(device, conv_state, window.size());
    for (size_t i = 0; i < window.size(); ++i) ew.add(gw[i], window[i]);
    const std::vector<float> gh = read_back<float>(device, scan_state, h.size());
    for (size_t i = 0; i < h.size(); ++i) eh.add(gh[i], h[i]);
    CHECK(eu.value() < 1e-5);
    CHECK(ey.value() < 1e-5);
    CHECK(ew.value() < 1e-6);
    CHECK(eh.value() < 1e-5);
  }
}

// A Mamba-2 layer's kernels: ssm_conv over x, B and C of in_proj's [z | x |
// B | C | dt] (its channels from column d_inner of a row that wide),
// mamba2_scan (per head one dt and one decay, the B and C of its group, dt
// clamped), and the gated output's RMS norm per group (norm with GROUP),
// over the passes of the Mamba test above and a prompt chunk of 70 rows
// (three chunks of mamba2_chunk: 32, 32 and 6), against the recurrence
// computed here in double (runtime/reference's mamba2()). The scan runs in
// each of its forms (plan::Form): the recurrence in every pass, or the
// chunked form in the passes of one sequence (a prompt chunk's), as a class
// with chunked_scan runs it. Widths: 4 heads of 16 in 2 groups of 8 states,
// dt in [0.05, 1.5]; 3 heads of 12 in one group of 5 states (two workgroups
// of the recurrence), no conv bias, no upper limit; 2 heads of 64 with 64
// states (two workgroups a head in the chunked form).
TEST_CASE_FIXTURE(VulkanTest, "ssm: Mamba-2's conv, scan and per-group gated norm carry each sequence's state") {
  Gpu gpu(device);
  for (const bool chunked : {false, true})
  for (const std::string& extra :
       {std::string("hidden = 32\n[ssm]\nkind = \"mamba2\"\nd_state = 8\nhead_dim = 16\ngroups = 2\ndt_min = 0.05\n"
                    "dt_max = 1.5\n"),
        std::string("hidden = 18\n[ssm]\nkind = \"mamba2\"\nd_state = 5\nd_conv = 3\nhead_dim = 12\nconv_bias = false\n"),
        std::string("hidden = 64\n[ssm]\nkind = \"mamba2\"\nd_state = 64\nhead_dim = 64\n")}) {
    spec::Diagnostics diag("ssm.toml");
    const auto s = spec::parse_spec_string("[model]\nname = \"ssm2\"\n[dims]\nlayers = 1\nvocab = 16\nmax_context = 64\n" + extra +
                                               "[weights]\npreset = \"hf-mamba\"\n",
                                           "ssm.toml", diag);
    REQUIRE_MESSAGE(s, diag.format());
    CAPTURE(extra);
    CAPTURE(chunked);
    const spec::Ssm& ms = s->ssm;
    const Model m{*s, {emit::kernel_instance(*s, lower::KernelKey{.family = kernels::Family::SsmConv}),
                       emit::kernel_instance(*s, lower::KernelKey{.family = kernels::Family::Mamba2Scan}),
                       emit::kernel_instance(*s, lower::KernelKey{.family = kernels::Family::Norm, .width = ms.d_inner,
                                                                  .group = ms.d_inner / ms.groups}),
                       emit::kernel_instance(*s, lower::KernelKey{.family = kernels::Family::Mamba2Chunk})}};
    const Constants conv(m.kernels[0]), scan(m.kernels[1]), norm(m.kernels[2]), chunk(m.kernels[3]);
    const uint32_t CH = conv.u("CH"), DC = conv.u("DC"), XOFF = conv.u("XOFF"), XS = conv.u("XSTRIDE");
    const uint32_t DI = scan.u("DI"), N = scan.u("N"), H = scan.u("H"), G = scan.u("G");
    CHECK(DI == ms.d_inner);
    CHECK(CH == DI + 2 * G * N);
    CHECK(XOFF == DI);
    CHECK(XS == 2 * DI + 2 * G * N + H);
    CHECK(scan.u("XSTRIDE") == XS);
    CHECK(norm.u("GROUP") == DI / G);
    CHECK(chunk.u("Q") == kernels::kMamba2ChunkRows);
    const uint32_t PB = chunk.u("PB");
    CHECK(PB == (N == 64 ? 32 : DI / H));  // 64 channels of 64 states: a head in two workgroups
    const uint32_t chunk_groups = H * (DI / H / PB);
    CHECK_FALSE(norm.flag("UNIT_OFFSET"));
    const uint32_t CPW = conv.u("CPW");
    const uint32_t conv_groups = (CH + CPW - 1) / CPW, scan_groups = (DI + CPW - 1) / CPW;
    const uint32_t P = DI / H, W = DC - 1, GS = DI / G;
    constexpr uint32_t kSequences = 2;
    const std::vector<float> w = random_floats(size_t{CH} * DC), bias = random_floats(CH);
    const std::vector<float> a_log = random_floats(H), d = random_floats(H), dt_bias = random_floats(H, -3.0f, 1.0f);
    const std::vector<float> scale = random_floats(DI, 0.5f, 1.5f);
    vk::Buffer wb = buffer_of(device, w), bb = buffer_of(device, bias), ab = buffer_of(device, a_log);
    vk::Buffer db = buffer_of(device, d), dtbb = buffer_of(device, dt_bias), sb = buffer_of(device, scale);
    vk::Buffer conv_state = buffer_of(device, random_floats(size_t{kSequences} * CH * W, 5.0f, 9.0f));
    vk::Buffer scan_state = buffer_of(device, random_floats(size_t{kSequences} * DI * N, 5.0f, 9.0f));
    std::vector<double> window(size_t{kSequences} * CH * W, 0.0), h(size_t{kSequences} * DI * N, 0.0);
    std::vector<std::vector<SsmRow>> passes = ssm_passes();
    passes.emplace_back();
    for (uint32_t p = 4; p < 74; ++p) passes.back().push_back({1, p});  // B's next prompt chunk
    NormalizedError eu, ey, en;
    bool clamped = false;
    for (const std::vector<SsmRow>& pass : passes) {
      const uint32_t rows = static_cast<uint32_t>(pass.size());
      CAPTURE(rows);
      std::vector<uint32_t> io;
      for (const SsmRow& r : pass) io.insert(io.end(), {0u, r.sequence, r.position, 0u});
      const std::vector<float> xz = random_floats(size_t{rows} * XS, -2.0f, 2.0f);
      vk::Buffer iob = buffer_of(device, io), xzb = buffer_of(device, xz);
      vk::Buffer ub = buffer_of(device, std::vector<float>(size_t{rows} * CH, kGuard));
      vk::Buffer yb = buffer_of(device, std::vector<float>(size_t{rows} * DI, kGuard));
      vk::Buffer nb = buffer_of(device, std::vector<float>(size_t{rows} * DI, kGuard));
      gpu.run(m, m.kernels[0],
              kernels::SsmConvBindings<vk::Binding>{.io = whole(iob), .xz = whole(xzb), .w = whole(wb),
                                                    .bias = ms.conv_bias ? vk::Binding(whole(bb)) : gpu.no_buffer(),
                                                    .state = whole(conv_state), .u = whole(ub)},
              push::RowsPush{.rows = rows}, conv_groups);
      const bool one_sequence = std::all_of(pass.begin(), pass.end(), [&](const SsmRow& r) { return r.sequence == pass[0].sequence; });
      const bool chunk_form = chunked && one_sequence;
      gpu.run(m, m.kernels[chunk_form ? 3 : 1],
              kernels::Mamba2ScanBindings<vk::Binding>{.io = whole(iob), .u = whole(ub), .xz = whole(xzb),
                                                       .dt_bias = whole(dtbb), .a_log = whole(ab), .d = whole(db),
                                                       .state = whole(scan_state), .y = whole(yb)},
              push::RowsPush{.rows = rows}, chunk_form ? chunk_groups : scan_groups);
      gpu.run(m, m.kernels[2],
              kernels::NormBindings<vk::Binding>{.x = whole(yb), .scale = whole(sb), .shift = gpu.no_buffer(), .y = whole(nb)},
              push::RowsPush{.rows = rows}, rows);
      const std::vector<float> u = read_back<float>(device, ub, size_t{rows} * CH);
      const std::vector<float> y = read_back<float>(device, yb, size_t{rows} * DI);
      const std::vector<float> normed = read_back<float>(device, nb, size_t{rows} * DI);
      for (uint32_t t = 0; t < rows; ++t) {
        double* win = window.data() + size_t{pass[t].sequence} * CH * W;
        double* hs = h.data() + size_t{pass[t].sequence} * DI * N;
        if (pass[t].position == 0) {
          std::fill(win, win + size_t{CH} * W, 0.0);
          std::fill(hs, hs + size_t{DI} * N, 0.0);
        }
        const float* row = xz.data() + size_t{t} * XS;
        std::vector<double> uu(CH), yy(DI);
        for (uint32_t c = 0; c < CH; ++c) {
          const double x = row[XOFF + c];
          double sum = ms.conv_bias ? bias[c] : 0.0;
          for (uint32_t k = 0; k < W; ++k) sum += w[size_t{c} * DC + k] * win[size_t{c} * W + k];
          sum += w[size_t{c} * DC + W] * x;
          for (uint32_t k = 0; k + 1 < W; ++k) win[size_t{c} * W + k] = win[size_t{c} * W + k + 1];
          if (W > 0) win[size_t{c} * W + W - 1] = x;
          uu[c] = sum / (1 + std::exp(-sum));
          eu.add(u[size_t{t} * CH + c], uu[c]);
        }
        for (uint32_t hd = 0; hd < H; ++hd) {
          const double raw = row[XS - H + hd] + double{dt_bias[hd]};
          const double soft = raw > 20 ? raw : std::log1p(std::exp(raw));
          const double step = std::min(std::max(soft, ms.dt_min), ms.dt_max);
          clamped = clamped || step != soft;
          const double decay = std::exp(-std::exp(double{a_log[hd]}) * step);
          const uint32_t g = hd / (H / G);
          for (uint32_t i = 0; i < P; ++i) {
            const uint32_t c = hd * P + i;
            double out = 0;
            for (uint32_t n = 0; n < N; ++n) {
              double& hn = hs[size_t{c} * N + n];
              hn = decay * hn + step * uu[DI + g * N + n] * uu[c];
              out += uu[DI + G * N + g * N + n] * hn;
            }
            const double z = row[c];
            yy[c] = (out + d[hd] * uu[c]) * z / (1 + std::exp(-z));
            ey.add(y[size_t{t} * DI + c], yy[c]);
          }
        }
        for (uint32_t g = 0; g < G; ++g) {
          double squares = 0;
          for (uint32_t i = 0; i < GS; ++i) squares += yy[g * GS + i] * yy[g * GS + i];
          const double inv = 1 / std::sqrt(squares / GS + s->norm.eps);
          for (uint32_t i = 0; i < GS; ++i)
            en.add(normed[size_t{t} * DI + g * GS + i], yy[g * GS + i] * inv * scale[g * GS + i]);
        }
      }
    }
    NormalizedError ew, eh;
    const std::vector<float> gw = read_back<float>(device, conv_state, window.size());
    for (size_t i = 0; i < window.size(); ++i) ew.add(gw[i], window[i]);
    const std::vector<float> gh = read_back<float>(device, scan_state, h.size());
    for (size_t i = 0; i < h.size(); ++i) eh.add(gh[i], h[i]);
    MESSAGE("mamba2 " << std::string(chunked ? "chunked" : "recurrent") << " (" << H << " heads of " << P << ", " << G << " groups of " << N << " states): u " << eu.value()
                       << ", y " << ey.value() << ", normed " << en.value() << ", windows " << ew.value() << ", h "
                       << eh.value());
    CHECK(eu.value() < 1e-5);
    CHECK(ey.value() < 1e-5);
    CHECK(en.value() < 1e-5);
    CHECK(ew.value() < 1e-6);
    CHECK(eh.value() < 1e-5);
    if (ms.dt_max < 1e300) CHECK(clamped);  // the limits were reached: the clamp is tested
  }
}
