// The tiled tower's kernels (tiles.comp) against the CPU reference
// (harness.hpp says how): Llama 3.2 Vision's embeddings of a pass's rows by
// their tile and place, and its hidden states stacked for the projector.
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

namespace {

// The stack's form: one slot of [x | states interleaved], the other
// columns as they were.
void stack(vk::Device& device, Gpu& gpu, Worst& worst, const Model& m, const emit::KernelInstance& k,
           const Constants& c) {
  const uint32_t d = c.u("D"), states = c.u("STATES"), slot = c.u("STACK_SLOT");
  REQUIRE(m.tower_of);
  CHECK(states == m.tower_of->vision.extra_feature_layers.size());
  CHECK(d == m.spec.dims.hidden);
  CHECK(slot <= states);
  const uint32_t rows = 11, width = d * (1 + states);
  const std::vector<float> x = random_floats(size_t{rows} * d);
  vk::Buffer xb = buffer_of(device, x), io = buffer_of(device, io_words(0, std::vector<uint32_t>(rows, 0)));
  vk::Buffer y = buffer_of(device, guarded(std::vector<float>(size_t{rows} * width, kGuard)));
  gpu.run(m, k,
          kernels::TilesBindings<vk::Binding>{.io = whole(io),
                                              .x = whole(xb),
                                              .y = whole(y),
                                              .table = gpu.no_texels(),
                                              .gate = gpu.no_buffer(),
                                              .cls = gpu.no_buffer(),
                                              .positions = gpu.no_texels(),
                                              .tile_positions = gpu.no_texels(),
                                              .position_gate = gpu.no_buffer()},
          push::RowsPush{.rows = rows}, rows);
  const std::vector<float> out = read_back<float>(device, y, size_t{rows} * width + kGuardWords);
  NormalizedError e;
  for (uint32_t t = 0; t < rows; ++t)
    for (uint32_t col = 0; col < width; ++col) {
      const float got = out[size_t{t} * width + col];
      // Slot 0 is columns [0, D); slot k + 1 the columns D + e · STATES + k.
      const bool mine = slot == 0 ? col < d : col >= d && (col - d) % states == slot - 1;
      if (!mine) {
        if (std::memcmp(&got, &kGuard, sizeof(float)) != 0) FAIL("column " << col << " of row " << t << " written");
        continue;
      }
      const uint32_t e_index = slot == 0 ? col : (col - d) / states;
      e.add(got, x[size_t{t} * d + e_index]);
    }
  check_guard(out, size_t{rows} * width);
  Report(m, k, worst).check("slot " + std::to_string(slot) + " of " + std::to_string(states + 1), e.value(), kCopyTolerance);
}

}  // namespace

// Before the layers: the class embedding on each tile's row 0, the aspect
// ratio's gated tile embedding on its patches, the gated mix of the shared
// and the tile's own position tables; the padding rows zeros (and the rows
// past the layout, a chunk's padding, too). After the local layers: the
// gated tile embedding on every row, a padding row's its tile's.
TEST_CASE_FIXTURE(VulkanTest, "tiles: a tiled tower's embeddings by tile and place, and its stacked hidden states") {
  Gpu gpu(device);
  Worst worst;
  size_t instances = 0;
  for_each_instance(
      "tiles.comp",
      [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
        ++instances;
        const uint32_t form = c.u("FORM");
        if (form == 2) return stack(device, gpu, worst, m, k, c);
        REQUIRE(m.tower_of);
        const spec::Vision& v = m.tower_of->vision;
        const uint32_t d = c.u("D"), tiles = c.u("TILES"), tile_rows = c.u("TILE_ROWS"), pad = c.u("PAD");
        CHECK(d == v.dims.hidden);
        CHECK(tiles == v.tiles);
        CHECK(tile_rows == v.positions_count());
        CHECK(pad == spec::tile_padding(tile_rows));
        const bool pre = form == 0;
        CHECK(k.name == "tiles_" + std::to_string(d) + "_" + std::string(dtype_name(weight_dtype(c.u("WDTYPE")))) +
                            (pre ? "_embed" : "_post"));
        const DType dtype = weight_dtype(c.u("WDTYPE"));
        const int64_t ratios = v.aspect_ratios() + 1;
        Weights table(device, dtype, ratios, int64_t{tiles} * d);
        table.fill(0, ratios);
        Weights positions(device, dtype, tile_rows, d);
        positions.fill(0, tile_rows);
        Weights tile_positions(device, dtype, ratios, int64_t{tiles} * tile_rows * d);
        tile_positions.fill(0, ratios);
        const std::vector<float> cls = random_floats(d), gate = {0.4f}, position_gate = {-1.3f};
        vk::Buffer cls_b = buffer_of(device, cls), gate_b = buffer_of(device, gate),
                   position_gate_b = buffer_of(device, position_gate);
        // The pass's rows and two past its layout; an image of aspect ratio
        // id 2 ([1, 2]: two tiles), the last ratio's rows too.
        const uint32_t layout = tiles * (tile_rows + pad), rows = layout + 2;
        Report report(m, k, worst);
        for (const uint32_t ratio : {2u, static_cast<uint32_t>(ratios - 1)}) {
          CAPTURE(ratio);
          const std::vector<float> x = random_floats(size_t{rows} * d);
          vk::Buffer xb = buffer_of(device, x), io = buffer_of(device, io_words(0, std::vector<uint32_t>(rows, ratio)));
          vk::Buffer y = buffer_of(device, guarded(std::vector<float>(size_t{rows} * d, kGuard)));
          gpu.run(m, k,
                  kernels::TilesBindings<vk::Binding>{
                      .io = whole(io),
                      .x = whole(xb),
                      .y = whole(y),
                      .table = table.binding(),
                      .gate = whole(gate_b),
                      .cls = pre ? vk::Binding(whole(cls_b)) : gpu.no_buffer(),
                      .positions = pre ? vk::Binding(positions.binding()) : gpu.no_texels(),
                      .tile_positions = pre ? vk::Binding(tile_positions.binding()) : gpu.no_texels(),
                      .position_gate = pre ? vk::Binding(whole(position_gate_b)) : gpu.no_buffer()},
                  push::RowsPush{.rows = rows}, rows);
          const std::vector<float> out = read_back<float>(device, y, size_t{rows} * d + kGuardWords);
          const double g = std::tanh(double{gate[0]}), pg = std::tanh(double{position_gate[0]});
          NormalizedError e;
          for (uint32_t t = 0; t < rows; ++t) {
            const bool padding = t >= tiles * tile_rows;
            const uint32_t tile = padding ? std::min((t - tiles * tile_rows) / std::max(pad, 1u), tiles - 1) : t / tile_rows;
            const uint32_t i = t % tile_rows;
            const std::vector<double>& tile_row = table.row(ratio);
            for (uint32_t col = 0; col < d; ++col) {
              double expected = x[size_t{t} * d + col] + g * tile_row[size_t{tile} * d + col];
              if (pre && padding) expected = 0.0;
              if (pre && !padding) {
                expected = x[size_t{t} * d + col] + (i == 0 ? cls[col] : g * tile_row[size_t{tile} * d + col]);
                expected += (1.0 - pg) * positions.row(i)[col] +
                            pg * tile_positions.row(ratio)[(size_t{tile} * tile_rows + i) * d + col];
              }
              e.add(out[size_t{t} * d + col], expected);
            }
          }
          check_guard(out, size_t{rows} * d);
          report.check(std::to_string(rows) + " rows of aspect ratio " + std::to_string(ratio), e.value(), kEmbedTolerance);
        }
      },
      // (A tower's build has a spec of its own, which names no tiles: the
      // count is checked below.)
      false, [](const spec::Spec&) { return false; });
  report_worst("tiles", worst);
  if (whole_grid()) CHECK(instances == 4);  // tiny-mllama's: embed, post and the stack's two slots
}

}  // TEST_SUITE("kernels")
