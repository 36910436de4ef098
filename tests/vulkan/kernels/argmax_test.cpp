// The argmax kernels against the CPU reference (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

TEST_CASE_FIXTURE(VulkanTest, "argmax: the last row's first largest logit") {
  Gpu gpu(device);
  for_each_instance("argmax.comp", [&](const Model& m, const emit::KernelInstance& k, const Constants& c) {
    const uint32_t vocab = c.u("V");
    CHECK(vocab == m.spec.dims.vocab);
    constexpr uint32_t rows = 3;
    const uint32_t lanes = device.info().subgroup_size;

    struct Case {
      std::string what;
      std::vector<uint32_t> peaks;  // indices of the last row set to the largest value
    };
    const uint32_t a = random_below(vocab / 2), b = vocab / 2 + random_below(vocab / 2);
    // A tie whose lowest index sits in a later lane than the higher one's;
    // and in a later subgroup of the workgroup of 128 (argmax.comp).
    const uint32_t late_lane = (vocab / 3) / lanes * lanes + lanes - 1, early_lane = late_lane + 1;
    constexpr uint32_t kWorkgroup = 128;
    std::vector<Case> cases = {{"one peak", {b}},
                                     {"the last index", {vocab - 1}},
                                     {"the first index", {0}},
                                     {"a tie", {b, a}},
                                     {"a tie across lanes", {early_lane, vocab - 1, late_lane}},
                                     {"a tie at both ends", {vocab - 1, 0}},
                                     {"all equal", {}}};
    if (vocab > kWorkgroup) {  // the last lane of one pass over 128 and the first of the next
      const uint32_t late_group = (vocab - 1) / kWorkgroup * kWorkgroup - 1;
      cases.push_back({"a tie across subgroups", {late_group + 1, late_group}});
    }
    std::string found;
    for (const Case& cs : cases) {
      CAPTURE(cs.what);
      std::vector<float> logits = cs.peaks.empty() ? std::vector<float>(size_t{rows} * vocab, 0.5f)
                                                   : random_floats(size_t{rows} * vocab, -10.0f, 10.0f);
      // Earlier rows hold larger values: only the last row counts.
      logits[random_below(vocab)] = 100.0f;
      logits[vocab + random_below(vocab)] = 100.0f;
      float* last = &logits[size_t{rows - 1} * vocab];
      for (uint32_t p : cs.peaks) last[p] = 20.0f;
      uint32_t expected = 0;  // the CPU: the first index of the largest value
      for (uint32_t i = 1; i < vocab; ++i)
        if (last[i] > last[expected]) expected = i;
      // Row 0 (token, sequence, position), then a guard word.
      vk::Buffer io = buffer_of(device, std::vector<uint32_t>{0xdeadbeefu, 5, 7, 0xdeadbeefu});
      vk::Buffer lb = buffer_of(device, logits);
      gpu.run(m, k, kernels::ArgmaxBindings<vk::Binding>{.io = whole(io), .logits = whole(lb)},
              push::RowsPush{.rows = rows}, 1);
      const std::vector<uint32_t> words = read_back<uint32_t>(device, io, 4);
      CHECK(words[0] == expected);
      CHECK(words[1] == 5);  // the sequence and the position stay
      CHECK(words[2] == 7);
      CHECK(words[3] == 0xdeadbeefu);
      found += " " + std::to_string(words[0]);
    }
    MESSAGE(m.spec.name << " " << k.name << " (V = " << vocab << "): picked" << found);
  }, /*decoders_only=*/true);
}

}  // TEST_SUITE("kernels")
