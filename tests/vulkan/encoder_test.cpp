// End to end on a tiny random-weight encoder (one binary per model of
// tests/specs/encoder/): the device's final hidden states against the CPU
// reference's, one input and a padded batch of inputs of different lengths
// in one pass, every device class the device meets, pooling, and the calls
// an encoder refuses. Validation on.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/model/pooling.hpp"
#include "runtime/vk/device_features.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

// Against the double-precision reference: test_model.hpp's tolerance(session),
// f32 sums (and an f16 cache where the spec asks), the class's rounding.
std::vector<float> reference_states(const std::vector<int32_t>& tokens) {
  reference::Reference ref(test_spec(), test_weights());
  return ref.encode(tokens);
}

}  // namespace

TEST_SUITE("encoder") {

TEST_CASE_FIXTURE(test::VulkanTest, "the hidden states of one input match the CPU reference at every length") {
  REQUIRE(model_info().encoder);
  REQUIRE(model_info().output_width == model_info().hidden);
  Session session(device, model_info());
  upload_all(session);
  const size_t H = static_cast<size_t>(model_info().hidden);
  // 1 row (the decode layout), 7 and 13 (padded to whole attention workgroups), the whole context.
  for (size_t n : {size_t{1}, size_t{7}, size_t{13}, static_cast<size_t>(model_info().max_context)}) {
    CAPTURE(n);
    const std::vector<int32_t> tokens = random_tokens(n, static_cast<uint32_t>(n));
    const std::vector<float> states = session.prefill(tokens);
    const std::vector<float> expected = reference_states(tokens);
    REQUIRE(states.size() == n * H);
    const double worst = worst_row_error(states, expected, H);
    MESSAGE(n << " tokens: worst row normalized error " << worst);
    CHECK(worst < tolerance(session));
    CHECK(session.position() == 0);  // nothing stays cached
  }
}

TEST_CASE_FIXTURE(test::VulkanTest, "a batch of inputs of different lengths in one pass gives each its own states") {
  SessionOptions options;
  options.sequences = 4;
  Session session(device, model_info(), options);
  upload_all(session);
  const size_t H = static_cast<size_t>(model_info().hidden);
  const std::vector<std::vector<int32_t>> inputs = {random_tokens(9, 1), random_tokens(3, 2), random_tokens(17, 3),
                                                    random_tokens(1, 4)};
  const std::vector<std::vector<float>> states = session.encode(inputs);
  REQUIRE(states.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    CAPTURE(i);
    REQUIRE(states[i].size() == inputs[i].size() * H);
    // Each against its reference alone: no row sees another input's keys.
    const double worst = worst_row_error(states[i], reference_states(inputs[i]), H);
    MESSAGE("input " << i << " (" << inputs[i].size() << " tokens): worst row normalized error " << worst);
    CHECK(worst < tolerance(session));
  }
  // Inputs run alone in the same layout give the same rows, to rounding.
  const std::vector<float> alone = session.encode(std::span(inputs).subspan(2, 1)).front();
  CHECK(worst_row_error(states[2], alone, H) < 1e-6);
}

TEST_CASE_FIXTURE(test::VulkanTest, "each device class the device meets, forced, gives the reference's states") {
  const plan::DeviceFeatures features = vk::device_features(device.info());
  const std::vector<int32_t> a = random_tokens(model_info().max_context, 21), b = random_tokens(6, 22);
  const std::vector<float> expected_a = reference_states(a), expected_b = reference_states(b);
  const size_t H = static_cast<size_t>(model_info().hidden);
  int ran = 0;
  for (const plan::DeviceClass& c : model_info().plan.classes) {
    if (!plan::meets(c, features)) continue;
    CAPTURE(c.name);
    SessionOptions options;
    options.sequences = 2;
    options.device_class = std::string(c.name);
    Session session(device, model_info(), options);
    upload_all(session);
    const std::vector<std::vector<float>> states = session.encode(std::vector{a, b});
    const double worst = std::max(worst_row_error(states[0], expected_a, H), worst_row_error(states[1], expected_b, H));
    MESSAGE("class " << c.name << ": worst normalized error " << worst);
    CHECK(worst < tolerance(session));
    ++ran;
  }
  CHECK(ran >= 1);
}

TEST_CASE_FIXTURE(test::VulkanTest, "pooling makes the spec's sentence embedding of the states") {
  Session session(device, model_info());
  upload_all(session);
  const std::vector<int32_t> tokens = random_tokens(11, 5);
  const std::vector<float> states = session.prefill(tokens);
  const std::vector<float> expected = reference_states(tokens);
  const size_t H = static_cast<size_t>(model_info().hidden);
  // The pooled reference, by hand: mean or first or last row, then the L2 norm.
  std::vector<double> want(H, 0.0);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (size_t i = 0; i < H; ++i) {
      const double v = expected[t * H + i];
      switch (model_info().pooling) {
        case Pooling::Mean: want[i] += v / static_cast<double>(tokens.size()); break;
        case Pooling::Cls: if (t == 0) want[i] = v; break;
        case Pooling::Last: case Pooling::None: if (t + 1 == tokens.size()) want[i] = v; break;
      }
    }
  if (model_info().pool_normalize) {
    double norm = 0;
    for (double v : want) norm += v * v;
    for (double& v : want) v /= std::sqrt(norm);
  }
  const std::vector<float> pooled = pool(model_info(), states);
  REQUIRE(pooled.size() == H);
  const std::vector<float> want_f(want.begin(), want.end());
  // A seeded checkpoint's embedding within 1e-4 of the reference's (an f16 cache: its rounding).
  const double error = normalized_error(pooled.data(), want_f.data(), H);
  MESSAGE("pooled embedding: normalized error " << error);
  CHECK(error < (model_info().cache_dtype == DType::F16 ? 5e-3 : 1e-4));
}

TEST_CASE_FIXTURE(test::VulkanTest, "an encoder refuses decoding and inputs it cannot hold, with the numbers") {
  SessionOptions options;
  options.sequences = 2;
  Session session(device, model_info(), options);
  upload_all(session);
  CHECK_THROWS_WITH_AS(session.decode(1), doctest::Contains("is an encoder: it has no decode step"), Error);
  CHECK_THROWS_WITH_AS(session.generate_greedy(1, 3), doctest::Contains("is an encoder"), Error);
  const size_t too_long = static_cast<size_t>(model_info().max_context) + 1;
  const std::string too_long_message = std::to_string(too_long) + " tokens exceed the context of";
  CHECK_THROWS_WITH_AS(session.prefill(random_tokens(too_long, 1)),
                       doctest::Contains(too_long_message.c_str()), Error);
  CHECK_THROWS_WITH_AS(session.encode(std::vector<std::vector<int32_t>>{{1}, {}}),
                       doctest::Contains("input 1: an empty input"), Error);
  CHECK_THROWS_WITH_AS(session.encode(std::vector<std::vector<int32_t>>{{1}, {2}, {3}}),
                       doctest::Contains("3 inputs in one pass, but the session holds 2 sequences"), Error);
  CHECK_THROWS_WITH_AS(session.prefill(std::vector<int32_t>{static_cast<int32_t>(model_info().vocab)}),
                       doctest::Contains("outside the vocabulary"), Error);
}

}  // TEST_SUITE
