// The embed kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

// y[t] = SCALE · E[token[t]] (+ P[position + t + offset]): the rows of
// HF's wte (and wpe) for the ids, incl. 0 and vocab − 1.
TEST_CASE_FIXTURE(VulkanTest, "embed: the table rows of the tokens, plus learned positions") {
  Gpu gpu(device);
  Worst worst;
  for_each_instance("embed.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const spec::Spec& s = m.spec;
    if (c.flag("ROWS")) return;  // a vision tower's rows gather: the case below
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

    const bool splice = c.flag("SPLICE");  // a decoder of a splice [vision]: flagged rows take x's
    CHECK(splice == (s.vision.enabled && s.vision.connection == spec::VisionConnection::Splice));
    const uint32_t vocab = static_cast<uint32_t>(s.dims.vocab);
    std::vector<uint32_t> tokens = {0, vocab - 1, random_below(vocab), random_below(vocab), 0, random_below(vocab)};
    if (splice) tokens.insert(tokens.begin() + 2, {plan::kSplicedToken, plan::kSplicedToken});  // an image's rows
    const auto spliced = [&](uint32_t t) { return (tokens[t] & plan::kSplicedToken) != 0; };
    const uint32_t rows = static_cast<uint32_t>(tokens.size());
    const std::vector<float> features = random_floats(size_t{rows} * d);
    vk::Buffer x = buffer_of(device, features);
    Weights table(device, dtype, vocab, d);
    for (uint32_t t : std::set<uint32_t>(tokens.begin(), tokens.end()))
      if ((t & plan::kSplicedToken) == 0) table.fill(t, 1);
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
                    .y = whole(y),
                    .x = splice ? vk::Binding(whole(x)) : gpu.no_buffer(),
                    .cls = gpu.no_buffer()},
                push::EmbedPush{.rows = rows, .token0 = token0, .tokens = vocab - token0}, rows);
        const std::vector<float> out = read_back<float>(device, y, size_t{rows} * d + kGuardWords);
        NormalizedError e;
        for (uint32_t t = 0; t < rows; ++t) {
          if (spliced(t) && token0 == 0) {  // the host's row as it is, by the first range's dispatch
            for (uint32_t i = 0; i < d; ++i) e.add(out[size_t{t} * d + i], features[size_t{t} * d + i]);
            continue;
          }
          if (spliced(t) || tokens[t] < token0) {  // another range's row: untouched
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

// A vision tower's rows gather: y[t] = x[t] (+ P[position[t]]) (+ the class
// embedding on the row of position 0): the host's patch rows copied in, and
// the positions added to the patch embeddings.
TEST_CASE_FIXTURE(VulkanTest, "embed: a vision tower's input rows, plus positions and the class token") {
  Gpu gpu(device);
  Worst worst;
  size_t instances = 0;
  for_each_instance("embed.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    if (!c.flag("ROWS")) return;
    ++instances;
    const spec::Spec& s = m.spec;  // the tower's own (spec::vision_tower)
    const uint32_t d = c.u("D");
    const bool positions = c.flag("POSITIONS"), cls = c.flag("CLASS");
    // (An image cross-attention decoder's image pass copies its rows too.)
    CHECK((s.encoder() || s.vision.connection == spec::VisionConnection::CrossAttention));
    CHECK(!c.flag("SPLICE"));
    CHECK((positions ? d == s.dims.hidden : !cls));  // the input's copy adds nothing
    const DType dtype = positions ? weight_dtype(c.u("WDTYPE")) : DType::F32;
    const int64_t table_rows = positions ? s.position.table_size : 0;
    std::optional<Weights> table;
    if (positions) {
      table.emplace(device, dtype, table_rows, d);
      table->fill(0, table_rows);
    }
    const std::vector<float> class_embedding = random_floats(d);
    vk::Buffer class_buffer = buffer_of(device, class_embedding);
    Report report(m, k, worst);
    // From position 0 (the class row's) and the rows ending at the table's last.
    const uint32_t rows = 5;
    std::vector<uint32_t> starts = {0};
    if (positions) starts.push_back(static_cast<uint32_t>(table_rows) - rows);
    for (uint32_t position : starts) {
      CAPTURE(position);
      const std::vector<float> values = random_floats(size_t{rows} * d);
      vk::Buffer x = buffer_of(device, values);
      vk::Buffer io = buffer_of(device, io_words(position, std::vector<uint32_t>(rows, 0)));
      vk::Buffer y = buffer_of(device, guarded(std::vector<float>(size_t{rows} * d, kGuard)));
      gpu.run(m, k,
              kernels::EmbedBindings<vk::Binding>{.io = whole(io),
                                                  .table = gpu.no_texels(),
                                                  .positions = positions ? vk::Binding(table->binding()) : gpu.no_texels(),
                                                  .types = gpu.no_texels(),
                                                  .y = whole(y),
                                                  .x = whole(x),
                                                  .cls = cls ? vk::Binding(whole(class_buffer)) : gpu.no_buffer()},
              push::EmbedPush{.rows = rows, .token0 = 0, .tokens = 0}, rows);
      const std::vector<float> out = read_back<float>(device, y, size_t{rows} * d + kGuardWords);
      NormalizedError e;
      for (uint32_t t = 0; t < rows; ++t)
        for (uint32_t i = 0; i < d; ++i) {
          double expected = values[size_t{t} * d + i];
          if (positions) expected += table->row(position + t)[i];
          if (cls && position + t == 0) expected += class_embedding[i];
          e.add(out[size_t{t} * d + i], expected);
        }
      check_guard(out, size_t{rows} * d);
      report.check("position " + std::to_string(position), e.value(), kEmbedTolerance);
    }
  });
  if (whole_grid()) CHECK(instances >= 2);  // tiny-llava's tower: its input's copy, its positions and class token
  report_worst("embed rows", worst);
}

}  // TEST_SUITE("kernels")
