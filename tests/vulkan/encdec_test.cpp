// End to end on a tiny random-weight encoder–decoder (one binary per model
// of tests/specs/encdec/): a source encoded into a sequence's
// cross-attention caches, then the decoder's prompt and decode steps, the
// logits against the CPU reference's; several sequences with sources of
// their own in one batched step; every device class the device meets; and
// the calls it refuses. Validation on.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/vk/device_features.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

// The reference's logits of the decoder's `target` rows after `source`, one call.
std::vector<float> reference_logits(const std::vector<int32_t>& source, const std::vector<int32_t>& target) {
  reference::Reference ref(test_spec(), test_weights());
  ref.source(source);
  return ref.forward(target);
}

}  // namespace

TEST_SUITE("encoder-decoder") {

TEST_CASE_FIXTURE(test::VulkanTest, "a source and a decoder prompt give the reference's logits at every length") {
  REQUIRE(model_info().encoder_decoder);
  REQUIRE(model_info().output_width == model_info().vocab);
  SessionOptions options;
  options.all_logits = true;
  Session session(device, model_info(), options);
  upload_all(session);
  const size_t V = static_cast<size_t>(model_info().vocab);
  const size_t context = static_cast<size_t>(model_info().max_context);
  // Sources of 1 row, 7, 13 and the whole context; decoder prompts of 1, 5 and 9 rows.
  for (size_t n : {size_t{1}, size_t{7}, size_t{13}, context}) {
    for (size_t t : {size_t{1}, size_t{5}, size_t{9}}) {
      CAPTURE(n);
      CAPTURE(t);
      const std::vector<int32_t> source = random_tokens(n, static_cast<uint32_t>(n));
      std::vector<int32_t> target = random_tokens(t, static_cast<uint32_t>(100 + t));
      target[0] = model_info().decoder_start;
      session.source(0, source);
      CHECK(session.position() == 0);
      const std::vector<float> logits = session.prefill(target);
      REQUIRE(logits.size() == t * V);
      const double worst = worst_row_error(logits, reference_logits(source, target), V);
      MESSAGE(n << " source tokens, " << t << " target rows: worst row normalized error " << worst);
      CHECK(worst < tolerance(session));
    }
  }
}

TEST_CASE_FIXTURE(test::VulkanTest, "decode steps after a prompt follow the reference, and a new source starts over") {
  Session session(device, model_info());
  upload_all(session);
  const size_t V = static_cast<size_t>(model_info().vocab);
  for (uint32_t seed : {1u, 2u}) {
    CAPTURE(seed);
    const std::vector<int32_t> source = random_tokens(6 + 5 * seed, seed);
    std::vector<int32_t> target = random_tokens(12, 50 + seed);
    target[0] = model_info().decoder_start;
    const std::vector<float> expected = reference_logits(source, target);
    session.source(0, source);
    std::vector<float> got = session.prefill(std::span(target).first(3));
    double worst = normalized_error(got.data(), &expected[2 * V], V);
    for (size_t i = 3; i < target.size(); ++i) {
      got = session.decode(target[i]);
      worst = std::max(worst, normalized_error(got.data(), &expected[i * V], V));
    }
    MESSAGE("source " << source.size() << ", prompt 3 + 9 decode steps: worst normalized error " << worst);
    CHECK(worst < tolerance(session));
    CHECK(session.position() == static_cast<int64_t>(target.size()));
  }
}

TEST_CASE_FIXTURE(test::VulkanTest, "sequences with sources of their own decode in one batched step as they do alone") {
  SessionOptions options;
  options.sequences = 3;
  Session session(device, model_info(), options);
  upload_all(session);
  const size_t V = static_cast<size_t>(model_info().vocab);
  const std::vector<std::vector<int32_t>> sources = {random_tokens(4, 7), random_tokens(19, 8), random_tokens(1, 9)};
  std::vector<std::vector<int32_t>> targets;
  for (size_t s = 0; s < sources.size(); ++s) {
    targets.push_back(random_tokens(4 + s, static_cast<uint32_t>(70 + s)));
    targets.back()[0] = model_info().decoder_start;
    session.source(static_cast<int64_t>(s), sources[s]);
    const std::vector<int32_t>& t = targets.back();
    session.prefill(static_cast<int64_t>(s), std::span(t).first(t.size() - 1));
  }
  std::vector<Session::Step> steps;
  for (size_t s = 0; s < sources.size(); ++s) steps.push_back({static_cast<int64_t>(s), targets[s].back()});
  const std::vector<float> batched = session.decode(steps);
  REQUIRE(batched.size() == sources.size() * V);
  for (size_t s = 0; s < sources.size(); ++s) {
    CAPTURE(s);
    const std::vector<float> expected = reference_logits(sources[s], targets[s]);
    const double error = normalized_error(&batched[s * V], &expected[(targets[s].size() - 1) * V], V);
    MESSAGE("sequence " << s << " (source " << sources[s].size() << "): normalized error " << error);
    CHECK(error < tolerance(session));
  }
}

TEST_CASE_FIXTURE(test::VulkanTest, "each device class the device meets, forced, gives the reference's logits") {
  const plan::DeviceFeatures features = vk::device_features(device.info());
  const std::vector<int32_t> source = random_tokens(model_info().max_context, 31);
  std::vector<int32_t> target = random_tokens(10, 32);
  target[0] = model_info().decoder_start;
  const std::vector<float> expected = reference_logits(source, target);
  const size_t V = static_cast<size_t>(model_info().vocab);
  int ran = 0;
  for (const plan::DeviceClass& c : model_info().plan.classes) {
    if (!plan::meets(c, features)) continue;
    CAPTURE(c.name);
    SessionOptions options;
    options.all_logits = true;
    options.device_class = std::string(c.name);
    Session session(device, model_info(), options);
    upload_all(session);
    session.source(0, source);
    const double worst = worst_row_error(session.prefill(target), expected, V);
    MESSAGE("class " << c.name << ": worst normalized error " << worst);
    CHECK(worst < tolerance(session));
    ++ran;
  }
  CHECK(ran >= 1);
}

TEST_CASE_FIXTURE(test::VulkanTest, "an encoder-decoder refuses a decoder without a source and sources it cannot hold") {
  SessionOptions options;
  options.sequences = 2;
  Session session(device, model_info(), options);
  upload_all(session);
  CHECK_THROWS_WITH_AS(session.prefill(std::vector<int32_t>{1, 2}), doctest::Contains("encode a source first"), Error);
  CHECK_THROWS_WITH_AS(session.decode(1), doctest::Contains("encode a source first"), Error);
  CHECK_THROWS_WITH_AS(session.generate_greedy(1, 2), doctest::Contains("encode a source first"), Error);
  CHECK_THROWS_WITH_AS(session.encode(std::vector<std::vector<int32_t>>{{1}}),
                       doctest::Contains("is an encoder-decoder: source() encodes its sources"), Error);
  CHECK_THROWS_WITH_AS(session.source(0, std::vector<int32_t>{}), doctest::Contains("an empty source"), Error);
  const size_t too_long = static_cast<size_t>(model_info().max_context) + 1;
  CHECK_THROWS_WITH_AS(session.source(1, random_tokens(too_long, 3)),
                       doctest::Contains("exceeds the context of"), Error);
  CHECK_THROWS_WITH_AS(session.source(2, std::vector<int32_t>{1}), doctest::Contains("outside [0, 2)"), Error);
  // A source for sequence 0 leaves sequence 1 without one; reset() forgets it.
  session.source(0, std::vector<int32_t>{3, 4, 5});
  CHECK_NOTHROW(session.prefill(0, std::vector<int32_t>{model_info().decoder_start}));
  CHECK_THROWS_WITH_AS(session.prefill(1, std::vector<int32_t>{1}), doctest::Contains("for sequence 1"), Error);
  session.reset(0);
  CHECK_THROWS_WITH_AS(session.decode(1), doctest::Contains("encode a source first"), Error);
}

TEST_CASE_FIXTURE(test::VulkanTest, "greedy decoding on the device picks the reference's argmax at each step") {
  Session session(device, model_info());
  upload_all(session);
  const std::vector<int32_t> source = random_tokens(9, 41);
  session.source(0, source);
  const std::vector<int32_t> picks = session.generate_greedy(model_info().decoder_start, 6);
  REQUIRE(picks.size() == 6);
  std::vector<int32_t> target = {model_info().decoder_start};
  target.insert(target.end(), picks.begin(), picks.end() - 1);
  const std::vector<float> expected = reference_logits(source, target);
  const size_t V = static_cast<size_t>(model_info().vocab);
  for (size_t i = 0; i < picks.size(); ++i) {
    const auto row = expected.begin() + static_cast<std::ptrdiff_t>(i * V);
    CHECK(picks[i] == static_cast<int32_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(V)) - row));
  }
}

}  // TEST_SUITE
