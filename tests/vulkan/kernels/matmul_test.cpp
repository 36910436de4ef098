// The matmul kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

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
    // y += tanh(g) · …: a tiled tower's global layers' gated residuals.
    const bool residual_gated = c.flag("RESIDUAL_GATED");
    CHECK((!residual_gated || residual));
    CHECK(k.name.ends_with("_residual_gated") == residual_gated);
    const std::vector<float> gate_value = {0.75f};
    vk::Buffer gate_buffer = buffer_of(device, gate_value);
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
    // A vision tower's: the patch embedding reads an unfolded patch (whole
    // texels of its weight's rows), the patch merger's linear a block of
    // merge² rows side by side, the projector's second linear its
    // intermediate, and its first ends in its own φ, ungated.
    const spec::Vision* vision = m.tower_of ? &m.tower_of->vision : nullptr;
    const int64_t projected = vision && vision->projector.intermediate > 0 ? vision->projector.intermediate
                              : vision                                     ? m.tower_of->dims.hidden
                                                                           : 0;
    const int64_t merged = vision && vision->projector.kind == spec::ProjectorKind::MergeMlp
                               ? d.hidden * vision->projector.merge * vision->projector.merge
                               : 0;
    const bool tower_input = vision && (K == device_cols(dtype, vision->channels * vision->patch * vision->patch) ||
                                        K == projected || K == merged);
    CHECK((K == d.hidden || K == d.heads * d.head_dim || K == d.intermediate ||
           K == s.moe.shared_experts * s.moe.shared_intermediate || (s.ssm.enabled() && K == s.ssm.d_inner) ||
           (s.mla.enabled && (K == s.mla.q_lora_rank || K == d.heads * s.mla.v_head_dim)) || tower_input));
    CHECK(c.u("ACT_NONE") == 0);
    const spec::Activation phi = vision && act != 0 && act == act_constant(c, vision->projector.activation)
                                     ? vision->projector.activation
                                     : s.mlp.activation;
    if (gated || act != 0) CHECK(act == act_constant(c, phi));
    const bool projector_in =
        vision && !gated && K == d.hidden && act != 0 && act == act_constant(c, vision->projector.activation);
    CHECK((gated == (s.mlp.gated && K == d.hidden && act != 0) || projector_in));
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
                  .xq = cs.dot() ? whole(xqb) : gpu.no_buffer(),
                  .gate = residual_gated ? whole(gate_buffer) : gpu.no_buffer()},
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
          if (act != 0) value = activate(phi, value);
          if (gated) {
            const std::vector<double>& ur = second.row(cs.up_row0 + r);
            double up = 0;
            for (uint32_t i = 0; i < K; ++i) up += ur[i] * xr[i];
            if (bias) up += b2[cs.up_row0 + r];
            value *= up;
          }
          if (softcap > 0) value = softcap * std::tanh(value / softcap);
          if (residual_gated) value *= std::tanh(static_cast<double>(gate_value[0]));
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

}  // TEST_SUITE("kernels")
