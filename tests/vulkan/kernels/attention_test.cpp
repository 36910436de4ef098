// The attention kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

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
    // An image cross-attention decoder's (Llama 3.2 Vision): each row's
    // extent names its images' keys, [first, end) (plan::image_extent).
    const bool image_cross = c.flag("CROSS_IMAGES");
    CHECK(image_cross == (k.name == "attention_image_cross"));
    if (cross) CHECK((s.encoder_decoder() || (image_cross && s.vision.connection == spec::VisionConnection::CrossAttention)));
    const auto image_keys = [&](uint32_t t, uint32_t source) -> std::pair<uint32_t, uint32_t> {
      return t % 3 == 0 ? std::pair{0u, source} : t % 3 == 1 ? std::pair{2u, 5u} : std::pair{0u, 3u};
    };
    // T5's relative bias: a scalar per (bucket of j − i, head), the buckets by
    // the reference's function (causal in a decoder); none in cross-attention.
    const bool relative = c.flag("RELATIVE");
    CHECK(relative == (s.position.kind == spec::PositionKind::Relative && !cross));
    const std::vector<float> rel = random_floats(relative ? size_t(s.position.buckets) * hq : 1, -1.0f, 1.0f);
    vk::Buffer rel_buffer = buffer_of(device, rel);
    const std::string suffix = "_w" + std::to_string(window);
    CHECK((k.name.size() > suffix.size() && k.name.ends_with(suffix)) == (window > 0));
    if (window > 0) CHECK(window == s.attention.sliding_window);
    // A decoder whose image rows see each other both ways (Gemma 3): a
    // spliced row's token holds its image's last position.
    const bool spans = c.flag("IMAGE_SPANS");
    CHECK(spans == (k.name.find("_images") != std::string::npos));
    CHECK(spans == (s.vision.enabled && s.vision.image_bidirectional && !cross));
    const uint32_t image_rows = c.u("IMAGE_ROWS");
    CHECK(image_rows == (spans ? s.vision.image_features() : 0));
    const QkvViews layout = qkv_layout(s);
    const DType cache = s.cache.dtype;
    const size_t cache_size = dtype_bytes(cache);

    Report report(m, k, worst);
    struct Case {
      uint32_t rows, position;
      uint32_t qrows = 1;  // rows a workgroup (QROWS: the gpu class's prompts stage keys for 4)
      plan::Flash flash{};  // flash tiles (attention_flash.comp): rows × keys; rows 0: attention.comp
      plan::Variant variant = plan::Variant::Plain;  // flash on matrix units: Coop, CoopKhr (attention_flash_coop.comp)
      // A tiled tower's pass (bidirectional): rows from `real` on are not the
      // image's own and see its own rows alone, the keys before it (0: none).
      uint32_t real = 0;
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
    const uint32_t extra = plan::flash_relative_bytes(relative ? s.position.max_distance : 0, gt);
    const bool f16_cache = cache == DType::F16;
    std::vector<std::pair<plan::Flash, plan::Variant>> flash_tiles = {
        {plan::flash_tile(false, gt, dh, f16_cache, plan::kFlashBudget, extra), plan::Variant::Plain}};
    if (16 % gt == 0) flash_tiles.push_back({{16 / gt, 32}, plan::Variant::Plain});
    for (plan::Variant v : flash_variants)
      flash_tiles.push_back({plan::flash_tile(true, gt, dh, f16_cache, plan::kFlashCoopBudget, extra), v});
    for (const auto& [f, v] : flash_tiles) {
      if (f.rows == 0 || plan::flash_shared_bytes(v != plan::Variant::Plain, f.rows * gt, f.keys, dh, f16_cache, extra) >
                             device.info().max_compute_shared_memory)
        continue;
      const uint32_t many = static_cast<uint32_t>(std::clamp<int64_t>(s.dims.max_context - 29, 1, 2 * f.rows + 3));
      cases.insert(cases.end(), {Case{many, 29, 1, f, v}, Case{3, 0, 1, f, v}});
      if (window > 0) cases.push_back(Case{f.rows + 5, window + 3, 1, f, v});
    }
    // An image's rows among text rows, in one workgroup a row, staged, and
    // in flash tiles; in a window, reaching past it.
    if (spans) {
      cases.insert(cases.end(), {Case{image_rows + 4, 29}, Case{image_rows + 4, 29, 4}});
      if (window > 0) cases.push_back(Case{image_rows + 4, window + 3});
      for (const auto& [f, v] : flash_tiles)
        if (f.rows > 0 && plan::flash_shared_bytes(v != plan::Variant::Plain, f.rows * gt, f.keys, dh, f16_cache, extra) <=
                              device.info().max_compute_shared_memory)
          cases.push_back(Case{image_rows + 4, 29, 1, f, v});
    }
    // A tiled tower's rows that see fewer keys than the rows before them:
    // one workgroup a row, staged (a workgroup across the change), in flash tiles.
    if (m.tower_of && m.tower_of->vision.tiles > 0) {
      cases.insert(cases.end(), {Case{9, 0, 1, {}, plan::Variant::Plain, 5}, Case{9, 0, 4, {}, plan::Variant::Plain, 5}});
      for (const auto& [f, v] : flash_tiles)
        if (f.rows > 0 && plan::flash_shared_bytes(v != plan::Variant::Plain, f.rows * gt, f.keys, dh, f16_cache, extra) <=
                              device.info().max_compute_shared_memory)
          cases.push_back(Case{2 * f.rows + 3, 0, 1, f, v, f.rows + 1});
    }
    for (const Case cs : cases) {
      // A windowed layer's cache is a ring of W + rows − 1 positions (the
      // fewest a chunk needs): position p at slot p mod ring, wrapped here.
      // (An encoder's cache holds its whole input: keys ahead are read too.)
      const uint32_t ring = window > 0 && !bidirectional ? window + cs.rows - 1 : 0;
      const std::string what = std::to_string(cs.rows) + " rows at " + std::to_string(cs.position) +
                               (ring ? " over a ring of " + std::to_string(ring) : "") +
                               (cs.qrows > 1 ? ", " + std::to_string(cs.qrows) + " a workgroup" : "") +
                               (cs.real > 0 ? ", rows from " + std::to_string(cs.real) + " seeing the first alone" : "") +
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
      // IMAGE_SPANS: rows 1 … image_rows an image's, where the chunk holds one.
      std::vector<uint32_t> tokens(cs.rows, 0);
      const uint32_t image_last = cs.position + image_rows;
      if (spans && cs.rows >= image_rows + 2)
        for (uint32_t t = 1; t <= image_rows; ++t) tokens[t] = plan::kSplicedToken | image_last;
      std::vector<uint32_t> io_rows = io_words(cs.position, tokens);
      if (cross)
        for (size_t w = 3; w < io_rows.size(); w += 4) io_rows[w] = source;
      if (image_cross)  // a third of the rows see no image (every key), the others keys 2 … 4 or 0 … 2
        for (uint32_t t = 0; t < cs.rows; ++t) {
          const auto [first, end] = image_keys(t, source);
          io_rows[size_t{t} * 4 + 3] = plan::image_extent(first, end, t % 3 != 0);
        }
      if (cs.real > 0)
        for (uint32_t t = cs.real; t < cs.rows; ++t) io_rows[size_t{t} * 4 + 3] = cs.position + cs.real;
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
        // An image's row sees up to the image's last row too.
        const uint32_t i_pos = cs.position + t;
        const bool spliced = (tokens[t] & plan::kSplicedToken) != 0;
        const uint32_t last = image_cross     ? image_keys(t, source).second - 1
                              : cross         ? source - 1
                              : !bidirectional ? (spliced ? std::max(i_pos, image_last) : i_pos)
                              : window > 0     ? std::min(cs.position + cs.rows - 1, i_pos + window)
                              : cs.real > 0 && t >= cs.real ? cs.position + cs.real - 1
                                               : cs.position + cs.rows - 1;
        const uint32_t first = image_cross     ? image_keys(t, source).first
                               : bidirectional ? (window > 0 && i_pos > window ? i_pos - window : 0)
                               : spliced     ? std::min(window > 0 && i_pos + 1 > window ? i_pos + 1 - window : 0,
                                                        image_last + 1 - image_rows)
                                             : (window > 0 && i_pos + 1 > window ? i_pos + 1 - window : 0);
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

// attention_combine: the key ranges' partial softmaxes (m, l, acc) of each
// (row, head) merged into o = Σ acc_s·e^(m_s − M) / Σ l_s·e^(m_s − M).
// Ranges fewer than a subgroup's lanes, more (each lane several), and
// empty ones (m = −∞, l = 0, acc = 0: a range past a row's last key).
TEST_CASE_FIXTURE(VulkanTest, "attention_combine: the key ranges' partial softmaxes merged") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("attention_combine.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const uint32_t hq = c.u("HQ"), dh = c.u("DH");
    CHECK(hq == m.spec.dims.heads);
    Report report(m, k, worst);
    const uint32_t lanes = device.info().subgroup_size;
    for (const uint32_t splits : {3u, 16u, 64u, 2 * lanes + 5}) {
      const uint32_t rows = 3;
      const size_t stride = size_t{dh} + 2, width = size_t{hq} * dh;
      std::vector<float> part = random_floats(size_t{rows} * hq * splits * stride, -1.0f, 1.0f);
      for (size_t at = 0; at < part.size(); at += stride) {
        const size_t s = at / stride % splits;
        if (s % 5 == 4) {  // an empty range
          std::fill(part.begin() + static_cast<ptrdiff_t>(at), part.begin() + static_cast<ptrdiff_t>(at + stride), 0.0f);
          part[at] = -std::numeric_limits<float>::infinity();
        } else {
          part[at] *= 8.0f;                       // m: scores' maxima apart by up to 16
          part[at + 1] = 1.0f + 3.0f * std::abs(part[at + 1]);  // l ≥ 1 (its max's own term)
        }
      }
      vk::Buffer pb = buffer_of(device, part), o = buffer_of(device, guarded(std::vector<float>(rows * width, kGuard)));
      gpu.run(m, k, kernels::AttentionCombineBindings<vk::Binding>{.partials = whole(pb), .out = whole(o)},
              push::RowsPush{.rows = rows}, hq, rows, {splits});
      const std::vector<float> out = read_back<float>(device, o, rows * width + kGuardWords);
      NormalizedError e;
      for (uint32_t t = 0; t < rows; ++t)
        for (uint32_t h = 0; h < hq; ++h) {
          const float* r = &part[(size_t{t} * hq + h) * splits * stride];
          double top = -std::numeric_limits<double>::infinity(), total = 0;
          for (uint32_t s = 0; s < splits; ++s) top = std::max(top, double{r[s * stride]});
          for (uint32_t s = 0; s < splits; ++s) total += r[s * stride + 1] * std::exp(r[s * stride] - top);
          for (uint32_t d = 0; d < dh; ++d) {
            double sum = 0;
            for (uint32_t s = 0; s < splits; ++s) sum += r[s * stride + 2 + d] * std::exp(r[s * stride] - top);
            e.add(out[t * width + size_t{h} * dh + d], sum / total);
          }
        }
      check_guard(out, rows * width);
      report.check(std::to_string(splits) + " ranges", e.value(), kAttentionTolerance);
    }
  }, false, has_attention);
  report_worst("attention_combine", worst);
}

}  // TEST_SUITE("kernels")
