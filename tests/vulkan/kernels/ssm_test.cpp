// The state-space kernels (ssm_conv, ssm_scan, Mamba-2's) against the CPU reference, over passes as a
// session makes them (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

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
              kernels::NormBindings<vk::Binding>{
                  .x = whole(yb), .scale = whole(sb), .shift = gpu.no_buffer(), .y = whole(nb), .io = gpu.no_buffer()},
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
