// The norm kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

namespace {

// A pooled projector's norm (Gemma 3's): a grid of rows averaged in square
// blocks, each mean normed as the projector says; the rows past the blocks
// zeros.
void pooled(vk::Device& device, Gpu& gpu, Worst& worst, const Model& m, const emit::KernelInstance& k, const Constants& c) {
  const spec::Projector& j = m.spec.vision.projector;
  const uint32_t n = c.u("N"), pool = c.u("POOL"), grid = c.u("POOL_GRID"), side = grid / pool;
  CHECK(j.kind == spec::ProjectorKind::Pooled);
  CHECK(side * side == j.tokens);
  CHECK(n == m.spec.dims.hidden);
  CHECK(k.name == "norm_" + std::to_string(n) + "_pool" + std::to_string(pool));
  const bool layer_norm = j.norm == spec::NormKind::LayerNorm;
  CHECK(c.flag("LAYER_NORM") == layer_norm);
  CHECK(c.flag("UNIT_OFFSET") == j.norm_unit_offset);
  CHECK(c.f("EPS") == doctest::Approx(j.eps).epsilon(1e-8));
  const uint32_t rows = grid * grid;
  std::vector<float> x = random_floats(size_t{rows} * n);
  for (uint32_t t = 0; t < rows; ++t)  // rows of different means and scales
    for (uint32_t i = 0; i < n; ++i)
      x[size_t{t} * n + i] = static_cast<float>(t % 7) - 3.0f + (1.0f + static_cast<float>(t % 5)) * x[size_t{t} * n + i];
  const std::vector<float> g = random_floats(n, 0.5f, 1.5f), b = random_floats(n);
  vk::Buffer xb = buffer_of(device, x), gb = buffer_of(device, g), bb = buffer_of(device, b);
  vk::Buffer y = buffer_of(device, guarded(std::vector<float>(size_t{rows} * n, kGuard)));
  gpu.run(m, k,
          kernels::NormBindings<vk::Binding>{.x = whole(xb),
                                             .scale = whole(gb),
                                             .shift = layer_norm ? whole(bb) : gpu.no_buffer(),
                                             .y = whole(y),
                                             .io = gpu.no_buffer()},
          push::RowsPush{.rows = rows}, rows);
  const std::vector<float> out = read_back<float>(device, y, size_t{rows} * n + kGuardWords);
  NormalizedError e;
  bool zeros = true;
  for (uint32_t r = 0; r < rows; ++r) {
    if (r >= side * side) {
      for (uint32_t i = 0; i < n; ++i) zeros = zeros && out[size_t{r} * n + i] == 0.0f;
      continue;
    }
    std::vector<double> mean(n, 0.0);
    for (uint32_t a = 0; a < pool; ++a)
      for (uint32_t col = 0; col < pool; ++col) {
        const uint32_t patch = ((r / side) * pool + a) * grid + (r % side) * pool + col;
        for (uint32_t i = 0; i < n; ++i) mean[i] += x[size_t{patch} * n + i];
      }
    for (double& v : mean) v /= pool * pool;
    const std::vector<double> expected =
        reference::norm_values(j.norm, j.eps, j.norm_unit_offset, g.data(), layer_norm ? b.data() : nullptr, mean);
    for (uint32_t i = 0; i < n; ++i) e.add(out[size_t{r} * n + i], expected[i]);
  }
  CHECK_MESSAGE(zeros, "the rows past the pooled blocks are zeros");
  check_guard(out, size_t{rows} * n);
  Report(m, k, worst).check(std::to_string(grid) + "² rows pooled in " + std::to_string(pool) + "² blocks", e.value(),
                            kNormTolerance);
}

// Mistral 3's patch merger: each block of MERGE consecutive rows normed,
// side by side channel-major (unfold's order); the rows past the pass's
// whole blocks zeros. 11 rows: two whole blocks of 4 and 3 rows left over
// (the merged rows 2 … 10 zeros).
void merged(vk::Device& device, Gpu& gpu, Worst& worst, const Model& m, const emit::KernelInstance& k, const Constants& c) {
  const spec::Projector& j = m.spec.vision.projector;
  const uint32_t n = c.u("N"), merge = c.u("MERGE");
  CHECK(j.kind == spec::ProjectorKind::MergeMlp);
  CHECK(merge == j.merge * j.merge);
  CHECK(n == m.spec.dims.hidden);
  CHECK(k.name == "norm_" + std::to_string(n) + "_merge" + std::to_string(merge));
  CHECK_FALSE(c.flag("LAYER_NORM"));
  CHECK(c.f("EPS") == doctest::Approx(j.eps).epsilon(1e-8));
  const uint32_t rows = 2 * merge + 3, width = n * merge;
  std::vector<float> x = random_floats(size_t{rows} * n);
  for (uint32_t t = 0; t < rows; ++t)  // rows of different scales
    for (uint32_t i = 0; i < n; ++i) x[size_t{t} * n + i] *= 1.0f + static_cast<float>(t % 5);
  const std::vector<float> g = random_floats(n, 0.5f, 1.5f);
  vk::Buffer xb = buffer_of(device, x), gb = buffer_of(device, g);
  vk::Buffer y = buffer_of(device, guarded(std::vector<float>(size_t{rows} * width, kGuard)));
  gpu.run(m, k,
          kernels::NormBindings<vk::Binding>{
              .x = whole(xb), .scale = whole(gb), .shift = gpu.no_buffer(), .y = whole(y), .io = gpu.no_buffer()},
          push::RowsPush{.rows = rows}, rows);
  const std::vector<float> out = read_back<float>(device, y, size_t{rows} * width + kGuardWords);
  NormalizedError e;
  bool zeros = true;
  for (uint32_t r = 0; r < rows; ++r) {
    if ((r + 1) * merge > rows) {
      for (uint32_t i = 0; i < width; ++i) zeros = zeros && out[size_t{r} * width + i] == 0.0f;
      continue;
    }
    for (uint32_t b = 0; b < merge; ++b) {
      const float* row = x.data() + size_t{r * merge + b} * n;
      const std::vector<double> expected =
          reference::norm_values(j.norm, j.eps, false, g.data(), nullptr, std::vector<double>(row, row + n));
      for (uint32_t i = 0; i < n; ++i) e.add(out[size_t{r} * width + size_t{i} * merge + b], expected[i]);
    }
  }
  CHECK_MESSAGE(zeros, "the rows past the merged blocks are zeros");
  check_guard(out, size_t{rows} * width);
  Report(m, k, worst).check(std::to_string(rows) + " rows merged in blocks of " + std::to_string(merge), e.value(),
                            kNormTolerance);
}

}  // namespace

// RMSNorm (Llama: x / sqrt(mean(x²) + eps) · g) and LayerNorm with a bias
// (GPT-2: (x − mean) / sqrt(var + eps) · g + b), over rows with different
// means and scales.
TEST_CASE_FIXTURE(VulkanTest, "norm: RMSNorm and LayerNorm rows") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("norm.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    const uint32_t n = c.u("N"), group = c.u("GROUP");
    if (c.flag("POOLED")) return pooled(device, gpu, worst, m, k, c);
    if (c.flag("MERGED")) return merged(device, gpu, worst, m, k, c);
    // Mamba-2's gated norm: a plain RMSNorm of each group of d_inner / groups.
    const bool grouped = group != n;
    const bool layer_norm = !grouped && s.norm.kind == spec::NormKind::LayerNorm;
    const bool bias = !grouped && s.norm.bias, unit_offset = !grouped && s.norm.unit_offset;
    // A cross-attention query's per-head norm (Llama 3.2 Vision): one
    // scale, a head wide, for every head; a norm whose rows that see no
    // image are zeros (its cross-attention layers' MLP input).
    const bool head_scale = c.flag("HEAD_SCALE"), row_mask = c.flag("ROW_MASK");
    if (head_scale || row_mask) CHECK(s.vision.connection == spec::VisionConnection::CrossAttention);
    if (head_scale) CHECK((n == s.dims.heads * s.dims.head_dim && group == s.dims.head_dim));
    else if (grouped) CHECK((n == s.ssm.d_inner && group == s.ssm.d_inner / s.ssm.groups));
    else CHECK(n == s.dims.hidden);
    CHECK(k.name.ends_with("_image_rows") == row_mask);
    CHECK(c.flag("LAYER_NORM") == layer_norm);
    CHECK(c.flag("HAS_BIAS") == bias);
    CHECK(c.flag("UNIT_OFFSET") == unit_offset);
    CHECK(c.f("EPS") == doctest::Approx(s.norm.eps).epsilon(1e-8));
    // y += N(x): the norm of a branch's output, added to the residual stream y.
    const bool residual = c.flag("RESIDUAL");
    CHECK((k.name == "norm_" + std::to_string(n) + "_residual") == residual);
    // A tiled tower's pre-norm: the rows from ZERO_FROM on (its padding) zeros.
    const uint32_t zero_from = c.flag("ZEROED") ? c.u("ZERO_FROM") : 0;
    CHECK((k.name == "norm_" + std::to_string(n) + "_zero" + std::to_string(zero_from)) == (zero_from > 0));
    if (zero_from > 0) {  // a tiled tower's build: its tiles' rows
      REQUIRE(m.tower_of);
      CHECK(zero_from == m.tower_of->vision.tiles * m.tower_of->vision.positions_count());
    }
    if (grouped)
      CHECK(k.name == "norm_" + std::to_string(n) + "_group" + std::to_string(group) + (head_scale ? "_heads" : ""));
    if (residual)
      CHECK((s.norm.placement == spec::NormPlacement::Sandwich || s.norm.placement == spec::NormPlacement::BranchOutput));

    // Five rows (past ZERO_FROM, three more).
    const uint32_t rows = zero_from > 0 ? zero_from + 3 : 5;
    const float means[5] = {0.0f, 3.0f, -1.5f, 0.25f, 10.0f};
    const float scales[5] = {1.0f, 0.5f, 4.0f, 0.01f, 2.0f};
    std::vector<float> x = random_floats(size_t{rows} * n);
    for (uint32_t t = 0; t < rows; ++t)
      for (uint32_t i = 0; i < n; ++i) x[size_t{t} * n + i] = means[t % 5] + scales[t % 5] * x[size_t{t} * n + i];
    const std::vector<float> g = random_floats(n, 0.5f, 1.5f), b = random_floats(n);
    vk::Buffer xb = buffer_of(device, x), gb = buffer_of(device, g), bb = buffer_of(device, b);
    const std::vector<float> y0 = residual ? random_floats(size_t{rows} * n) : std::vector<float>(size_t{rows} * n, kGuard);
    vk::Buffer y = buffer_of(device, guarded(y0));
    // Rows 0, 2, 4 see an image, 1 and 3 none (ROW_MASK).
    std::vector<uint32_t> io_rows = io_words(0, std::vector<uint32_t>(rows, 0));
    const auto sees_image = [](uint32_t t) { return t % 2 == 0; };
    for (uint32_t t = 0; t < rows; ++t) io_rows[size_t{t} * 4 + 3] = plan::image_extent(0, 7, sees_image(t));
    vk::Buffer io = buffer_of(device, io_rows);
    gpu.run(m, k,
            kernels::NormBindings<vk::Binding>{.x = whole(xb),
                                               .scale = whole(gb),
                                               .shift = bias ? whole(bb) : gpu.no_buffer(),
                                               .y = whole(y),
                                               .io = row_mask ? vk::Binding(whole(io)) : gpu.no_buffer()},
            push::RowsPush{.rows = rows}, rows);
    const std::vector<float> out = read_back<float>(device, y, size_t{rows} * n + kGuardWords);

    NormalizedError e;
    for (uint32_t t = 0; t < rows; ++t)
      for (uint32_t first = 0; first < n; first += group) {  // each group on its own (one: the row)
        if ((zero_from > 0 && t >= zero_from) || (row_mask && !sees_image(t))) {
          for (uint32_t i = 0; i < group; ++i) e.add(out[size_t{t} * n + first + i], 0.0);
          continue;
        }
        const float* row = &x[size_t{t} * n + first];
        const std::vector<double> normed =
            reference::norm_values(layer_norm ? spec::NormKind::LayerNorm : spec::NormKind::RMSNorm, s.norm.eps,
                                   unit_offset, head_scale ? g.data() : &g[first], bias ? &b[first] : nullptr,
                                   std::vector<double>(row, row + group));
        for (uint32_t i = 0; i < group; ++i) {
          const double expected = normed[i] + (residual ? y0[size_t{t} * n + first + i] : 0.0);
          e.add(out[size_t{t} * n + first + i], expected);
        }
      }
    check_guard(out, size_t{rows} * n);
    Report(m, k, worst).check(std::to_string(rows) + " rows" + (residual ? ", added to y" : ""), e.value(), kNormTolerance);
  });
  report_worst("norm", worst);
}

}  // TEST_SUITE("kernels")
