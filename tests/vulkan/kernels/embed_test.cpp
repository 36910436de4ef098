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

    const uint32_t vocab = static_cast<uint32_t>(s.dims.vocab);
    const std::vector<uint32_t> tokens = {0, vocab - 1, random_below(vocab), random_below(vocab), 0, random_below(vocab)};
    const uint32_t rows = static_cast<uint32_t>(tokens.size());
    Weights table(device, dtype, vocab, d);
    for (uint32_t t : std::set<uint32_t>(tokens.begin(), tokens.end())) table.fill(t, 1);
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
                    .y = whole(y)},
                push::EmbedPush{.rows = rows, .token0 = token0, .tokens = vocab - token0}, rows);
        const std::vector<float> out = read_back<float>(device, y, size_t{rows} * d + kGuardWords);
        NormalizedError e;
        for (uint32_t t = 0; t < rows; ++t) {
          if (tokens[t] < token0) {  // another range's row: untouched
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

}  // TEST_SUITE("kernels")
