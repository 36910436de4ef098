// The latent attention (mla, mla_prefill) kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

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

}  // TEST_SUITE("kernels")
