// The quantize kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

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

}  // TEST_SUITE("kernels")
