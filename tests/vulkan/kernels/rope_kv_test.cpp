// The rope_kv kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

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
    // An image's cross-attention keys (Llama 3.2 Vision's image pass): the
    // KV append with k's heads normed alone (QK_NORM 4), no rotation.
    const bool image_keys = k.name == "kv_append_k_norm";
    if (image_keys) CHECK(s.vision.connection == spec::VisionConnection::CrossAttention);
    const bool rope = !image_keys && s.position.kind == spec::PositionKind::Rope;
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
    // 2D RoPE (a Pixtral tower's): a row's token is its patch, row · grid +
    // column, and the reference's apply_rope_2d turns it.
    const uint32_t grid = rope ? static_cast<uint32_t>(s.position.rope_grid) : 0;
    CHECK(c.u("ROPE_GRID") == grid);
    const auto patch_of = [&](uint32_t t) { return grid ? (7 * t + 3) % (grid * grid) : 0; };
    // Head `h` of one row (`in` at the head's first dim), rotated.
    auto rotate = [&](const float* in, uint32_t position, uint32_t patch) {
      std::vector<double> out(in, in + dh);
      if (grid) {
        reference::apply_rope_2d(out.data(), rotation, patch / grid, patch % grid);
        return out;
      }
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
    CHECK(qk == (image_keys ? 4u
                 : latent ? 3u
                 : s.attention.qk_norm == spec::QKNorm::None ? 0u
                 : s.attention.qk_norm == spec::QKNorm::PerHead ? 1u : 2u));
    CHECK(c.f("QK_EPS") == doctest::Approx(s.norm.eps).epsilon(1e-7));
    CHECK(c.flag("QK_UNIT_OFFSET") == s.norm.unit_offset);
    const bool per_head = qk == 1 || qk == 4;
    const std::vector<float> q_scale = random_floats(per_head ? dh : size_t{hq} * dh);
    const std::vector<float> k_scale = random_floats(per_head ? dh : qk == 3 ? c.u("LATENT") : size_t{hkv} * dh);
    vk::Buffer q_scale_buffer = buffer_of(device, q_scale), k_scale_buffer = buffer_of(device, k_scale);
    // Head `h` of the row at `row` of `values` (`heads` heads), as the kernel reads it.
    auto read_head = [&](const std::vector<float>& values, size_t row, uint32_t h, uint32_t heads,
                         const std::vector<float>& scale) {
      std::vector<float> out(values.begin() + static_cast<long>(row + size_t{h} * dh),
                             values.begin() + static_cast<long>(row + size_t{h} * dh + dh));
      if (qk == 0 || ((qk == 3 || qk == 4) && &scale == &q_scale)) return out;  // the latent norm, k's heads: k's only
      const size_t start = per_head ? row + size_t{h} * dh : row;
      const size_t width = per_head ? dh : qk == 3 ? c.u("LATENT") : size_t{heads} * dh;
      double sum = 0;
      for (size_t i = 0; i < width; ++i) sum += double{values[start + i]} * values[start + i];
      const double inv = 1.0 / std::sqrt(sum / static_cast<double>(width) + s.norm.eps);
      for (uint32_t i = 0; i < (qk == 3 ? width : dh); ++i) {
        const double w = scale[per_head ? i : size_t{h} * dh + i];
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
      std::vector<uint32_t> patches(cs.rows);
      for (uint32_t t = 0; t < cs.rows; ++t) patches[t] = patch_of(t);
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
      vk::Buffer io = buffer_of(device, io_words(cs.position, patches));
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
          const std::vector<double> expected = rotate(read_head(q, row, h, hq, q_scale).data(), cs.position + t, patches[t]);
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
              rotate(read_head(kv, push.k_offset + size_t{t} * push.k_stride, h, hkv, k_scale).data(), pos, patches[t]);
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

}  // TEST_SUITE("kernels")
