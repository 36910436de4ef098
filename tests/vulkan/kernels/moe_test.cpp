// The moe kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

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
                      .xq = gpu.no_buffer(), .gate = gpu.no_buffer()},
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

}  // TEST_SUITE("kernels")
